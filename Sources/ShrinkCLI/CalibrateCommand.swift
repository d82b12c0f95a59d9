import Foundation
import Shrink
import ShrinkIO

/// `shrink calibrate`: run calibration text through a model once and write the input statistics
/// of every linear op (`Σ xᵀx`, mean and max |x|) that compress, sensitivity and search read with
/// `--stats`.
enum CalibrateCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "calibrate",
        summary: "Record every linear op's input statistics over calibration text, for --stats of compress, sensitivity and search.",
        arguments: [],
        options: [
            OptionSpec(name: "--model", valueName: "path", help: "Model folder, .safetensors or GGUF file, or known name (default: minilm)."),
            OptionSpec(name: "--data", valueName: "file", help: "UTF-8 text, one calibration input per line. Required."),
            OptionSpec(name: "--limit", valueName: "n", help: "Use the first n non-blank lines (default: all)."),
            OptionSpec(name: "--output", valueName: "file", help: "Where to write the statistics (safetensors; docs/FORMAT.md). Required."),
            OptionSpec(name: "--checkpoint", valueName: "folder",
                       help: "Keep a decoder's progress in this folder after each layer; run again with it to continue an interrupted run (removed when done)."),
            OptionSpec(name: "--threads", valueName: "n", help: "Threads (default: all cores)."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        guard let data = arguments.value("--data") else { throw UsageError(command: spec.name, message: "missing option --data <file>") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <file>") }
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let limit = try arguments.positiveInteger("--limit", default: Int.max, command: spec.name)
        let location = try ModelLocation.resolve(arguments.value("--model") ?? ModelRegistry.defaultEntry.alias)
        console.printError("Calibrating \(location.weightsPath) on \(data)")
        let checkpoint = arguments.value("--checkpoint")
        if let checkpoint, let blocks = ModelCalibration.finishedBlocks(checkpoint: checkpoint) {
            console.printError("Continuing from \(checkpoint): \(blocks) blocks finished")
        }
        let summary = try ModelCalibration.record(model: location, data: data, limit: limit, output: output, checkpoint: checkpoint, threads: threads)
        console.print("""
            Wrote \(summary.output)
              linear ops: \(summary.layers) (\(summary.distinctInputs) distinct inputs), \(summary.lines) lines, \(summary.rows.lowerBound)–\(summary.rows.upperBound) input rows per op
              bytes: \(TextTable.grouped(summary.bytes))
              time: \(TextTable.fixed(summary.seconds, digits: 2)) s, peak memory \(Int(PeakMemory.megabytes.rounded())) MB
            """)
        return 0
    }
}

/// `--stats <file>` of the commands that run calibrated passes.
enum StatisticsOption {
    static let option = OptionSpec(name: "--stats", valueName: "file",
                                   help: "Calibration statistics from shrink calibrate, used instead of running the recipes' calibration data.")

    /// The calibration cache `--stats` asks for: one reading that file, else nil.
    static func cache(_ arguments: ParsedArguments) throws -> CalibrationCache? {
        try arguments.value("--stats").map { CalibrationCache(statistics: try CalibrationStatisticsFile(path: $0)) }
    }
}

/// The process's peak resident memory.
enum PeakMemory {
    /// `getrusage`'s maximum resident set size, in megabytes (10^6 bytes).
    static var megabytes: Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_maxrss) * 1024 / 1e6
    }
}
