import Foundation
import Shrink
import ShrinkEvaluation

/// `shrink compare`: compress a model with several recipes and compare them with the baseline on
/// a task: size, accuracy, drift, latency, compression time.
enum CompareCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "compare",
        summary: "Compress a model with each recipe, measure every configuration and the baseline on a task, and write reports.",
        arguments: [],
        options: [
            OptionSpec(name: "--recipes", valueName: "file", help: "Recipes to compare (JSON). Required.", isList: true),
            OptionSpec(name: "--output", valueName: "folder", help: "Where to write report.json, report.csv, report.md and pareto.svg. Required."),
        ] + TaskOptions.options + [
            OptionSpec(name: "--threads", valueName: "n", help: "Threads (default: all cores)."),
            OptionSpec(name: "--rounds", valueName: "n", help: "Interleaved latency rounds (default 3)."),
            OptionSpec(name: "--shard", valueName: "i/n", help: "Run only configurations i, i+n, … (1-based; the baseline is configuration 1)."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        let recipes = arguments.list("--recipes")
        guard !recipes.isEmpty else { throw UsageError(command: spec.name, message: "missing option --recipes <file>...") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <folder>") }
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let rounds = try arguments.positiveInteger("--rounds", default: 3, command: spec.name)
        let shard = try parseShard(arguments.value("--shard"))
        let (location, task) = try TaskOptions.resolve(arguments, command: spec.name)
        let comparison = Comparison(model: location, recipes: recipes, task: task, threads: threads, rounds: rounds, shard: shard)
        let configurations = try TaskOptions.withScratchFolder("compare") { scratch in
            try comparison.run(scratch: scratch, progress: console.progress(total: comparison.stepCount))
        }
        let report = ComparisonReport(task: task, configurations: configurations)
        try report.write(to: output)
        console.print(report.table())
        console.print("Reports: \((output as NSString).appendingPathComponent("report.json")), report.csv, report.md, pareto.svg")
        return 0
    }

    static func parseShard(_ text: String?) throws(UsageError) -> (index: Int, count: Int) {
        guard let text else { return (1, 1) }
        let parts = text.split(separator: "/").compactMap { Int($0) }
        guard parts.count == 2, parts[1] >= 1, (1...parts[1]).contains(parts[0]) else {
            throw UsageError(command: spec.name, message: "--shard expects i/n with 1 ≤ i ≤ n, got '\(text)'")
        }
        return (parts[0], parts[1])
    }
}

/// `shrink merge`: join the reports of `shrink compare --shard` runs.
enum MergeCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "merge",
        summary: "Join report.json files of sharded compare runs into one set of reports.",
        arguments: [],
        options: [
            OptionSpec(name: "--reports", valueName: "report.json", help: "The shard reports. Required.", isList: true),
            OptionSpec(name: "--task", valueName: "name", help: "The task the reports measured: stsb (default) or perplexity."),
            OptionSpec(name: "--output", valueName: "folder", help: "Where to write the merged reports. Required."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        let inputs = arguments.list("--reports")
        guard !inputs.isEmpty else { throw UsageError(command: spec.name, message: "missing option --reports <report.json>...") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <folder>") }
        let taskName = arguments.value("--task") ?? "stsb"
        guard let metrics = EvaluationTasks.description(of: taskName) else {
            throw UsageError(command: spec.name, message: "unknown task '\(taskName)'; expected one of \(EvaluationTasks.names.joined(separator: ", "))")
        }
        var merged: [ConfigurationReport] = []
        for input in inputs {
            for configuration in try ComparisonReport.configurations(fromJSON: input) {
                if let existing = merged.first(where: { $0.name == configuration.name }) {
                    guard existing == configuration else {
                        throw UsageError(command: spec.name, message: "configuration '\(configuration.name)' appears in two reports with different results")
                    }
                    continue
                }
                merged.append(configuration)
            }
        }
        merged.sort { ($0.name == "baseline" ? 0 : 1, $0.name) < ($1.name == "baseline" ? 0 : 1, $1.name) }
        let report = ComparisonReport(task: taskName, accuracyMetric: metrics.accuracy, accuracyDirection: metrics.direction, driftMetrics: metrics.drift,
                                      workloads: metrics.workloads, configurations: merged)
        try report.write(to: output)
        console.print(report.table())
        return 0
    }
}

/// `--model`, `--task`, `--data`, `--limit` and `--base`, shared by compare and gate.
enum TaskOptions {
    /// The options that pick a model and a task: `--model`, `--task`, `--data`, `--limit`, `--base`.
    static let options = [
        OptionSpec(name: "--model", valueName: "path", help: "Model folder, .safetensors or GGUF file, or known name (default: minilm for stsb, smollm2 for perplexity)."),
        OptionSpec(name: "--task", valueName: "name", help: "The task: stsb (default) or perplexity (decoders: PPL, KL-divergence, prompt and decode tokens/s)."),
        OptionSpec(name: "--data", valueName: "file", help: "The task's dataset (stsb: an STS-B csv, default the shipped test split; perplexity: a text, default wikitext-2 test)."),
        OptionSpec(name: "--limit", valueName: "n", help: "Evaluate on the first n items only (stsb: pairs; perplexity: windows of 512 tokens, default 40)."),
        OptionSpec(name: "--base", valueName: "folder", help: "Folder with config.json, vocab.txt and the pooling config (default: the model's folder)."),
    ]

    /// Runs `body` with a new temporary folder (`shrink-<label>-<uuid>`), removed afterwards.
    static func withScratchFolder<T>(_ label: String, _ body: (String) throws -> T) throws -> T {
        let scratch = NSTemporaryDirectory() + "shrink-\(label)-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        return try body(scratch)
    }

    static func resolve(_ arguments: ParsedArguments, command: String) throws -> (ModelLocation, any EvaluationTask) {
        let taskName = arguments.value("--task") ?? "stsb"
        guard EvaluationTasks.names.contains(taskName) else {
            throw UsageError(command: command, message: "unknown task '\(taskName)'; expected one of \(EvaluationTasks.names.joined(separator: ", "))")
        }
        let location = try ModelLocation.resolve(arguments.value("--model") ?? EvaluationTasks.defaultModel(of: taskName))
        let limit = arguments.value("--limit") == nil ? nil : try arguments.positiveInteger("--limit", default: 1, command: command)
        let base = arguments.value("--base") ?? (location.configPath.map { ($0 as NSString).deletingLastPathComponent }
            ?? ModelRegistry.directory(of: ModelRegistry.defaultEntry))
        return (location, try EvaluationTasks.make(name: taskName, data: arguments.value("--data"), base: base, limit: limit))
    }
}

/// `shrink gate`: exit 0 when a recipe (or compressed file) keeps a model's accuracy within
/// thresholds on a task, 1 when it does not, 2 on bad input.
enum GateCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "gate",
        summary: "Check that a recipe (or compressed file) keeps accuracy within thresholds: exit 0 if so, 1 if not.",
        arguments: [],
        options: [
            OptionSpec(name: "--model", valueName: "path", help: "The uncompressed model: folder, .safetensors or GGUF file, or known name (default: minilm for stsb, smollm2 for perplexity)."),
            OptionSpec(name: "--recipe", valueName: "file", help: "The recipe to apply (or give --compressed)."),
            OptionSpec(name: "--compressed", valueName: "file", help: "An already compressed model to check instead of a recipe."),
            OptionSpec(name: "--task", valueName: "name", help: "The task: stsb (default) or perplexity."),
            OptionSpec(name: "--data", valueName: "file", help: "The task's dataset (default: STS-B's test split; wikitext-2 test for perplexity)."),
            OptionSpec(name: "--limit", valueName: "n", help: "Evaluate on the first n items only (stsb: pairs; perplexity: windows of 512 tokens, default 40)."),
            OptionSpec(name: "--base", valueName: "folder", help: "Folder with config.json, vocab.txt and the pooling config (default: the model's folder)."),
            OptionSpec(name: "--max-drop", valueName: "x", help: "Largest allowed drop of the task's accuracy (STS-B: Spearman ×100; perplexity: its rise)."),
            OptionSpec(name: "--min-mean-cosine", valueName: "x", help: "Smallest allowed mean cosine to the baseline's outputs (stsb)."),
            OptionSpec(name: "--min-cosine", valueName: "x", help: "Smallest allowed minimum cosine to the baseline's outputs (stsb)."),
            OptionSpec(name: "--min", valueName: "metric=x", help: "Smallest allowed value of a drift metric (perplexity: same_top=0.8).", isList: true),
            OptionSpec(name: "--max", valueName: "metric=x", help: "Largest allowed value of a drift metric (perplexity: mean_kld=0.1, p99_kld=1.5).", isList: true),
            OptionSpec(name: "--threads", valueName: "n", help: "Threads (default: all cores)."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        let candidate: AccuracyGate.Candidate
        switch (arguments.value("--recipe"), arguments.value("--compressed")) {
        case (let recipe?, nil): candidate = .recipe(recipe)
        case (nil, let file?): candidate = .compressed(file)
        default: throw UsageError(command: spec.name, message: "give exactly one of --recipe <file> and --compressed <file>")
        }
        func number(_ name: String) throws(UsageError) -> Double? {
            guard let text = arguments.value(name) else { return nil }
            guard let value = Double(text), value.isFinite else { throw UsageError(command: spec.name, message: "\(name) expects a number, got '\(text)'") }
            return value
        }
        func bounds(_ name: String) throws(UsageError) -> [String: Double] {
            var bounds: [String: Double] = [:]
            for text in arguments.list(name) {
                let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, !parts[0].isEmpty, let value = Double(parts[1]), value.isFinite else {
                    throw UsageError(command: spec.name, message: "\(name) expects metric=number, got '\(text)'")
                }
                bounds[parts[0]] = value
            }
            return bounds
        }
        var thresholds = AccuracyThresholds(maxSpearmanDrop: try number("--max-drop"), minMeanCosine: try number("--min-mean-cosine"),
                                            minMinCosine: try number("--min-cosine"))
        thresholds.minimums.merge(try bounds("--min")) { $1 }
        thresholds.maximums = try bounds("--max")
        guard thresholds.maxDrop != nil || !thresholds.minimums.isEmpty || !thresholds.maximums.isEmpty else {
            throw UsageError(command: spec.name, message: "give at least one threshold: --max-drop, --min-mean-cosine, --min-cosine, --min or --max")
        }
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let (location, task) = try TaskOptions.resolve(arguments, command: spec.name)
        let outcome = try AccuracyGate.check(model: location, candidate: candidate, task: task, thresholds: thresholds, threads: threads)
        if outcome.passed {
            console.print(outcome.message)
            return 0
        }
        console.printError(outcome.message)
        return 1
    }
}
