import Foundation
import Shrink
import ShrinkCompression
import ShrinkEvaluation
import ShrinkIO
import ShrinkKernels

/// `shrink sensitivity`: per linear layer and candidate recipe, the task's metrics with that layer
/// alone compressed; a table and a JSON report.
enum SensitivityCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "sensitivity",
        summary: "Measure, per layer and candidate recipe, the task's accuracy and drift with that layer alone compressed.",
        arguments: [],
        options: [
            OptionSpec(name: "--candidates", valueName: "file", help: "Candidate recipes (JSON); each layer is tried with the config each gives it. Required.", isList: true),
            OptionSpec(name: "--output", valueName: "file", help: "Where to write the JSON report that shrink search reads. Required."),
            OptionSpec(name: "--threads", valueName: "n", help: "Threads (default: all cores)."),
            OptionSpec(name: "--activations", valueName: "f32|int8",
                       help: "Precision of every evaluation (default f32: with int8, one layer's drift carries the re-drawn rounding of every later layer's activations)."),
            OptionSpec(name: "--group-blocks", valueName: "n",
                       help: "Scan each kind of tensor over n consecutive blocks as one unit (default 1: every tensor alone)."),
            StatisticsOption.option,
        ] + TaskOptions.options)

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        let candidates = arguments.list("--candidates")
        guard !candidates.isEmpty else { throw UsageError(command: spec.name, message: "missing option --candidates <file>...") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <file>") }
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let (location, task) = try TaskOptions.resolve(arguments, command: spec.name)
        let limit = arguments.value("--limit").flatMap { Int($0) }
        let base = arguments.value("--base") ?? location.configPath.map { ($0 as NSString).deletingLastPathComponent }
        let activations = try RuntimeArguments.activations(arguments, command: spec.name, default: .float32)
        let scan = SensitivityScan(model: location, candidates: candidates, task: task, taskSettings: (arguments.value("--data"), limit, base),
                                   threads: threads, statistics: try arguments.value("--stats").map { try CalibrationStatisticsFile(path: $0) },
                                   activations: activations, blocksPerUnit: try arguments.positiveInteger("--group-blocks", default: 1, command: spec.name))
        let report = try scan.run(progress: console.progress(total: try scan.stepCount()))
        let file = try AtomicFile(path: output)
        try report.json().withUnsafeBytes { try file.write($0) }
        try file.commit()
        let names = report.candidates.map(\.name)
        let rows = report.uniqueLayers.map { layer in
            [layer] + names.map { name in
                report.layers.first { $0.layer == layer && $0.candidate == name }.map { String(format: "%.5f  %.2f", $0.loss, $0.bitsPerWeight) } ?? "—"
            }
        }
        console.print("Per layer, \(report.lossMetric) and bits per weight with that layer alone compressed:")
        console.print(TextTable.render(header: ["layer"] + names, rows: rows))
        console.print("Report: \(output)")
        return 0
    }
}

/// `shrink search`: per-layer candidates under a size budget that minimise the summed loss of a
/// sensitivity report, written as a recipe and verified by compressing and evaluating with it.
enum SearchCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "search",
        summary: "Choose per-layer configs under a size budget from a sensitivity report, write them as a recipe and verify it.",
        arguments: [],
        options: [
            OptionSpec(name: "--sensitivity", valueName: "file", help: "A report of shrink sensitivity. Required."),
            OptionSpec(name: "--budget-bpw", valueName: "x", help: "Average bits per weight over the report's layers (or give --budget-mb)."),
            OptionSpec(name: "--budget-mb", valueName: "x", help: "Megabytes (10^6 bytes) for the report's layers."),
            OptionSpec(name: "--output", valueName: "file", help: "Where to write the recipe. Required."),
            OptionSpec(name: "--no-verify", valueName: nil, help: "Do not compress and evaluate with the recipe."),
            OptionSpec(name: "--threads", valueName: "n", help: "Threads for the verification (default: all cores)."),
            StatisticsOption.option,
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        guard let path = arguments.value("--sensitivity") else { throw UsageError(command: spec.name, message: "missing option --sensitivity <file>") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <file>") }
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let report = try SensitivityReport.read(path: path)
        let elements = BitBudgetSearch.elements(report)
        let budget: Int
        switch (arguments.value("--budget-bpw").map { Double($0) }, arguments.value("--budget-mb").map { Double($0) }) {
        case (let bits??, nil) where bits > 0 && bits.isFinite: budget = Int(bits * Double(elements) / 8)
        case (nil, let megabytes??) where megabytes > 0 && megabytes.isFinite: budget = Int(megabytes * 1e6)
        default: throw UsageError(command: spec.name, message: "give one of --budget-bpw <bits> or --budget-mb <MB>, a positive number")
        }
        let chosen = try BitBudgetSearch.choose(report, budgetBytes: budget)
        let file = try AtomicFile(path: output)
        try file.write(try BitBudgetSearch.recipe(chosen, report: report))
        try file.commit()
        let bytes = chosen.reduce(0) { $0 + $1.bytes }
        let predicted = chosen.reduce(0) { $0 + $1.loss }
        let rows = chosen.map { [$0.layer, $0.candidate, String(format: "%.2f", $0.bitsPerWeight), String(format: "%.5f", $0.loss)] }
        console.print(TextTable.render(header: ["layer", "candidate", "bits/w", report.lossMetric], rows: rows))
        console.print(String(format: "%d layers, %.3f bits per weight (%d bytes of a %d budget); summed %@ %.5f",
                             chosen.count, Double(bytes * 8) / Double(max(elements, 1)), bytes, budget, report.lossMetric as NSString, predicted))
        console.print("Recipe: \(output)")
        guard !arguments.flag("--no-verify") else { return 0 }
        let location = try ModelLocation.resolve(report.model)
        let task = try EvaluationTasks.make(name: report.task, data: report.data, base: report.base ?? ModelRegistry.directory(of: ModelRegistry.defaultEntry),
                                            limit: report.limit)
        let precisions = [report.activationPrecision] + (report.activationPrecision == .int8 ? [] : [ActivationPrecision.int8])
        let verified = try TaskOptions.withScratchFolder("search") { scratch in
            let compressed = (scratch as NSString).appendingPathComponent("searched.safetensors")
            _ = try ModelCompressor.compress(model: location, recipe: try Recipe.load(path: output), output: compressed, threads: threads,
                                             calibrationCache: try StatisticsOption.cache(arguments))
            return try precisions.map { activations in
                let baseline = try task.evaluateBaseline(try task.load(weights: location.weightsPath, threads: threads, activations: activations))
                return (activations, baseline, try task.evaluate(try task.load(weights: compressed, threads: threads, activations: activations), against: baseline))
            }
        }
        for (activations, baseline, metrics) in verified {
            let loss = SensitivityReport.loss(metrics, accuracyMetric: task.accuracyMetric)
            let prediction = activations == report.activationPrecision ? String(format: " (predicted as the sum of the layers' alone: %.5f)", predicted) : ""
            console.print(String(format: "Verified, %@ activations: %@ %.4f (baseline %.4f, drop %.4f), %@ %.5f%@", activations.rawValue as NSString,
                                 task.accuracyMetric as NSString, metrics[task.accuracyMetric] ?? Double.nan, baseline.metrics[task.accuracyMetric] ?? Double.nan,
                                 metrics[task.accuracyMetric + "_drop"] ?? Double.nan, loss.name as NSString, loss.value, prediction as NSString))
        }
        return 0
    }
}
