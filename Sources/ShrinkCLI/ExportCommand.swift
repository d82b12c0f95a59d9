import Foundation
import Shrink

/// `shrink export`: write a model in a format another runtime loads.
enum ExportCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "export",
        summary: "Write a compressed model in a format another runtime loads (GGUF for llama.cpp, an MLX folder), each tensor in a type that holds it exactly.",
        arguments: [],
        options: [
            OptionSpec(name: "--format", valueName: "gguf|mlx", help: "The format to write: a GGUF file, or an MLX folder (model.safetensors in MLX's quantized layout, config.json). Required."),
            OptionSpec(name: "--input", valueName: "file", help: "The model: a compressed file, a GGUF file (gguf: made from a GGUF model), or a safetensors file. Required."),
            OptionSpec(name: "--output", valueName: "file|folder", help: "Where to write: the GGUF file, or the MLX folder (absent or empty). Required."),
            OptionSpec(name: "--base", valueName: "folder", help: "mlx: folder with the model's config.json and tokenizer files (default: the input's folder)."),
            OptionSpec(name: "--requantize", valueName: "nearest", help: "gguf: quantize a tensor no ggml type holds again, to its nearest of Q8_0, Q5_0, Q4_0 (F16 for rows that are not whole blocks), and report its SNR; without it such a tensor is an error."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        guard let format = arguments.value("--format") else { throw UsageError(command: spec.name, message: "missing option --format <gguf>") }
        guard format == "gguf" || format == "mlx" else { throw UsageError(command: spec.name, message: "unknown format '\(format)' (expected gguf or mlx)") }
        guard let input = arguments.value("--input") else { throw UsageError(command: spec.name, message: "missing option --input <file>") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <file>") }
        if format == "mlx" {
            guard arguments.value("--requantize") == nil else { throw UsageError(command: spec.name, message: "--requantize is for --format gguf") }
            let base = arguments.value("--base") ?? (input as NSString).deletingLastPathComponent
            let config = (base.isEmpty ? "." : base) + "/config.json"
            let summary = try ModelExport.mlx(input: input, configPath: FileManager.default.fileExists(atPath: config) ? config : nil, output: output)
            let quantized = summary.quantized.map { "\($0.count) \($0.bits)-bit group \($0.groupSize)" }.joined(separator: ", ")
            console.print("Wrote \(output)")
            console.print("  quantized ops: \(quantized.isEmpty ? "none" : quantized); float tensors: \(summary.dense); model.safetensors bytes: \(TextTable.grouped(summary.weightBytes))")
            if !summary.copiedFiles.isEmpty { console.print("  tokenizer: \(summary.copiedFiles.joined(separator: ", "))") }
            return 0
        }
        guard arguments.value("--base") == nil else { throw UsageError(command: spec.name, message: "--base is for --format mlx") }
        let requantize = arguments.value("--requantize")
        guard requantize == nil || requantize == "nearest" else {
            throw UsageError(command: spec.name, message: "--requantize must be nearest, not '\(requantize!)'")
        }
        let summary = try ModelExport.gguf(input: input, output: output, requantizeNearest: requantize != nil)
        for entry in summary.requantized {
            console.print("  requantized \(entry.tensor): \(entry.encoding) -> \(entry.type), SNR \(String(format: "%.1f", entry.snrDecibels)) dB against the model's weights")
        }
        let types = summary.tensorsPerType.map { "\($0.count) \($0.type)" }.joined(separator: ", ")
        console.print("Wrote \(output)")
        console.print("  tensors: \(types); metadata entries: \(summary.metadataCount); bytes: \(TextTable.grouped(summary.fileBytes))")
        return 0
    }
}
