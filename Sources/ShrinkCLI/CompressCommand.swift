import Foundation
import Shrink
import ShrinkCompression

/// `shrink compress`: compress a model's weights by recipe into a compressed container.
enum CompressCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "compress",
        summary: "Compress a model's weights as a recipe says and write the compressed model.",
        arguments: [],
        options: [
            OptionSpec(name: "--model", valueName: "path", help: "Model folder, .safetensors file or known model name (default: minilm)."),
            OptionSpec(name: "--recipe", valueName: "file", help: "The recipe (JSON; see recipes/README.md). Required."),
            OptionSpec(name: "--output", valueName: "file", help: "Where to write the compressed model (.safetensors). Required."),
            OptionSpec(name: "--threads", valueName: "n", help: "Tensors compressed at once (default: all cores)."),
            StatisticsOption.option,
            OptionSpec(name: "--checkpoint", valueName: "folder",
                       help: "Keep a decoder's calibration progress in this folder after each layer; run again with it to continue (removed when done)."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        guard let recipePath = arguments.value("--recipe") else { throw UsageError(command: spec.name, message: "missing option --recipe <file>") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <file>") }
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let location = try ModelLocation.resolve(arguments.value("--model") ?? ModelRegistry.defaultEntry.alias)
        let recipe = try Recipe.load(path: recipePath)
        let statistics = try StatisticsOption.cache(arguments)
        let estimate = try ModelCompressor.estimatePeakMemory(model: location, recipe: recipe, threads: threads,
                                                              fromStatisticsFile: statistics?.statistics != nil)
        console.printError("Compressing \(location.weightsPath) with \(recipePath); estimated peak memory \(estimate.bytes / 1_000_000) MB "
                           + "(\(estimate.largestTensors.joined(separator: ", ")) at once"
                           + (estimate.calibrationBytes > 0 ? ", calibration statistics \(estimate.calibrationBytes / 1_000_000) MB)" : ")"))
        let checkpoint = arguments.value("--checkpoint")
        if let checkpoint, let blocks = ModelCalibration.finishedBlocks(checkpoint: checkpoint) {
            console.printError("Continuing the calibration from \(checkpoint): \(blocks) blocks finished")
        }
        let summary = try ModelCompressor.compress(model: location, recipe: recipe, output: output, threads: threads,
                                                   calibrationCache: statistics, checkpoint: checkpoint) { report in
            let snr = report.snrDecibels.map { TextTable.fixed($0, digits: 1) + " dB" } ?? "exact"
            console.printError("  \(report.name)  \(report.encoding)  \(TextTable.fixed(report.bitsPerWeight, digits: 2)) bits/weight  SNR \(snr)  \(TextTable.fixed(report.seconds, digits: 2)) s")
        }
        console.print(render(summary))
        return 0
    }

    static func render(_ summary: CompressionSummary) -> String {
        var lines = [
            "Wrote \(summary.output)",
            "  tensors compressed: \(summary.tensors.count), kept as they were: \(summary.kept.count)",
        ]
        if let rotation = summary.residualRotation { lines.append("  " + rotation) }
        if let tuning = summary.tuning {
            let tables = tuning.tunedEmbeddingTables > 0 ? ", \(tuning.tunedEmbeddingTables) embedding tables" : ""
            lines.append("  tuned end to end: \(tuning.tunedPalettes) palettes' LUTs, biases and norms\(tables), \(tuning.steps) steps over \(tuning.lines) inputs "
                         + "in \(TextTable.fixed(tuning.seconds, digits: 1)) s; mean cosine to the uncompressed model over \(tuning.evaluatedLines) of them "
                         + "\(TextTable.fixed(tuning.cosineBefore, digits: 4)) → \(TextTable.fixed(tuning.cosineAfter, digits: 4))")
        }
        return (lines + [
            "  bytes: \(TextTable.grouped(summary.bytesBefore)) → \(TextTable.grouped(summary.bytesAfter)) (ratio \(TextTable.fixed(summary.ratio, digits: 2))×)",
            "  bits per weight: \(TextTable.fixed(summary.compressedBitsPerWeight, digits: 2)) over compressed tensors, \(TextTable.fixed(summary.overallBitsPerWeight, digits: 2)) overall",
            "  mean weight SNR: " + (summary.meanSNRDecibels.map { TextTable.fixed($0, digits: 1) + " dB" } ?? "exact"),
            "  time: \(TextTable.fixed(summary.seconds, digits: 2)) s, peak memory \(Int(PeakMemory.megabytes.rounded())) MB",
        ]).joined(separator: "\n")
    }
}

/// `shrink decompress`: write the dense model a compressed, GGUF or safetensors file represents.
enum DecompressCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "decompress",
        summary: "Decode every compressed tensor of a model (compressed container, GGUF or safetensors) and write the dense model.",
        arguments: [],
        options: [
            OptionSpec(name: "--input", valueName: "file", help: "The model: a compressed file, a GGUF file or a safetensors file. Required."),
            OptionSpec(name: "--output", valueName: "file", help: "Where to write the dense model (.safetensors). Required."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        guard let input = arguments.value("--input") else { throw UsageError(command: spec.name, message: "missing option --input <file>") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <file>") }
        try ModelCompressor.decompress(input: input, output: output)
        console.print("Wrote \(output)")
        return 0
    }
}
