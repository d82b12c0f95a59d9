import Foundation
import ShrinkCore
import ShrinkKernels
import ShrinkModels

/// Whether larger values of a metric are better (Spearman, accuracy) or worse (perplexity).
public enum MetricDirection: String, Sendable, Codable {
    case higherIsBetter = "higher"
    case lowerIsBetter = "lower"

    /// How much worse `value` is than `baseline` (positive: worse), the "drop" gates bound.
    public func drop(from baseline: Double, to value: Double) -> Double {
        self == .higherIsBetter ? baseline - value : value - baseline
    }

    /// Whether `a` is at least as good as `b`.
    public func atLeastAsGood(_ a: Double, as b: Double) -> Bool { self == .higherIsBetter ? a >= b : a <= b }
}

/// A timed workload of a task: items run one at a time, each timed (`latency`: median and 90th
/// percentile milliseconds per item), or all items run in a row (`throughput`: units per second,
/// e.g. sentences or tokens). Report keys: `<name>_median_ms`, `<name>_p90_ms`,
/// `<name>_<unit>_per_second`, and `<name>_speedup` against the baseline (> 1: faster).
public struct LatencyWorkload: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case latency
        /// `unit` names what an item's `units` count (`sentences`, `tokens`).
        case throughput(unit: String)
    }

    public let name: String
    public let kind: Kind
    /// The short column title of the terminal table (`b1 ms`, `b32 /s`).
    public let column: String

    public init(name: String, kind: Kind, column: String) {
        self.name = name
        self.kind = kind
        self.column = column
    }

    /// The report key of the workload's main figure.
    public var key: String {
        switch kind {
        case .latency: name + "_median_ms"
        case .throughput(let unit): name + "_\(unit)_per_second"
        }
    }
}

/// A task the harness measures configurations on: a dataset, a way to run a model on it, the
/// metrics it reports with their direction, its timed workloads, and drift against the baseline
/// computed as outputs stream by. The harness (`Comparison`, `AccuracyGate`) only sees this
/// protocol, so a decoder task (perplexity with KL-divergence) plugs in next to STS-B.
public protocol EvaluationTask: Sendable {
    /// The name on the command line (`--task stsb`).
    var name: String { get }
    /// The accuracy metric (`spearman`, `perplexity`); drops are measured on it.
    var accuracyMetric: String { get }
    var accuracyDirection: MetricDirection { get }
    /// The drift metrics its accumulators report, in report order.
    var driftMetrics: [String] { get }
    /// The timed workloads, in report order.
    var latencyWorkloads: [LatencyWorkload] { get }
    /// Loads the model stored in `weights` (a plain or compressed file), with the tensors of
    /// `replacing` in place of the stored ones, for this task; its compressed layers compute with
    /// `activations`.
    func load(weights: String, replacing: [EncodedTensor], threads: Int, activations: ActivationPrecision) throws -> any TaskModel
    /// A fresh accumulator of how far a model's outputs move from `reference` (the baseline's).
    func makeDrift(reference: TaskOutputs) -> any DriftAccumulator
}

extension EvaluationTask {
    /// Loads the model as stored.
    public func load(weights: String, threads: Int, activations: ActivationPrecision) throws -> any TaskModel {
        try load(weights: weights, replacing: [], threads: threads, activations: activations)
    }

    /// Loads the model as stored, as the runtime runs it by default (int8 activations).
    public func load(weights: String, threads: Int) throws -> any TaskModel {
        try load(weights: weights, threads: threads, activations: .int8)
    }
}

/// A model loaded for a task: it evaluates, streaming its outputs, and runs the timed workloads.
public protocol TaskModel: AnyObject {
    /// Runs the evaluation set, handing its outputs to `sink` chunk by chunk in a fixed order
    /// (the same chunks for every configuration), and returns the task's metrics.
    func evaluate(streamingTo sink: any OutputSink) throws -> [String: Double]
    /// Items of workload `workload` (an index into the task's `latencyWorkloads`).
    func itemCount(workload: Int) -> Int
    /// The units (sentences, tokens) item `item` of `workload` processes.
    func units(workload: Int, item: Int) -> Int
    /// Runs item `item` of workload `workload` once (what latency measurements time).
    /// - Throws: the runtime's error for an input it cannot run.
    func run(workload: Int, item: Int) throws
}

/// Receives a model's outputs chunk by chunk: `rows` rows of `width` floats.
public protocol OutputSink: AnyObject {
    func consume(_ outputs: UnsafeBufferPointer<Float>, rows: Int, width: Int) throws
}

/// Accumulates drift metrics over a model's streamed outputs against a reference.
public protocol DriftAccumulator: OutputSink {
    /// The metrics over everything consumed so far.
    var metrics: [String: Double] { get }
}

/// A baseline's outputs kept as a reference for drift: appended chunk by chunk to a temporary
/// file (deleted with the object) and read back one chunk at a time, so memory holds one chunk,
/// not the whole evaluation (a decoder's logits are vocabulary × tokens floats).
public final class TaskOutputs: OutputSink {
    public private(set) var chunks: [(offset: Int, rows: Int, width: Int)] = []
    let path: String
    private let handle: FileHandle
    private var end = 0

    public init() throws {
        path = NSTemporaryDirectory() + "shrink-reference-" + UUID().uuidString
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw DatasetError.cannotRead(path: path, reason: "cannot create the reference outputs file")
        }
        handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    }

    deinit {
        try? handle.close()
        try? FileManager.default.removeItem(atPath: path)
    }

    public func consume(_ outputs: UnsafeBufferPointer<Float>, rows: Int, width: Int) throws {
        precondition(outputs.count >= rows * width)
        try handle.seek(toOffset: UInt64(end))
        try handle.write(contentsOf: Data(buffer: UnsafeBufferPointer(rebasing: outputs[0..<(rows * width)])))
        chunks.append((end, rows, width))
        end += rows * width * MemoryLayout<Float>.size
    }

    /// Chunk `index`, checked to have `rows` rows of `width` (a drift accumulator reading the
    /// reference chunk that matches what it was given).
    /// - Throws: `DatasetError.cannotRead` when there is no such chunk or its size differs.
    public func chunk(_ index: Int, rows: Int, width: Int) throws -> [Float] {
        guard index < chunks.count, chunks[index].rows == rows, chunks[index].width == width else {
            throw DatasetError.cannotRead(path: path, reason: "chunk \(index) does not match the reference's")
        }
        return try chunk(index)
    }

    /// Chunk `index` as it was consumed.
    public func chunk(_ index: Int) throws -> [Float] {
        let chunk = chunks[index]
        try handle.seek(toOffset: UInt64(chunk.offset))
        let data = try handle.read(upToCount: chunk.rows * chunk.width * MemoryLayout<Float>.size) ?? Data()
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }
}

/// What one evaluation produced: the task's metrics and, for a baseline, its outputs.
public struct TaskEvaluation {
    public var metrics: [String: Double]
    public var outputs: TaskOutputs?

    public init(metrics: [String: Double], outputs: TaskOutputs?) {
        self.metrics = metrics
        self.outputs = outputs
    }
}

extension EvaluationTask {
    /// Evaluates `model` as the baseline: metrics and its outputs kept as the drift reference.
    public func evaluateBaseline(_ model: any TaskModel) throws -> TaskEvaluation {
        let outputs = try TaskOutputs()
        return TaskEvaluation(metrics: try model.evaluate(streamingTo: outputs), outputs: outputs)
    }

    /// Evaluates `model` against `baseline`: its metrics, the accuracy drop (positive: worse, by
    /// the metric's direction) and the drift metrics.
    /// - Throws: `ModelError.invalidArgument` when `baseline` kept no outputs (it did not come
    ///   from `evaluateBaseline`).
    public func evaluate(_ model: any TaskModel, against baseline: TaskEvaluation) throws -> [String: Double] {
        guard let reference = baseline.outputs else {
            throw ModelError.invalidArgument(name: "baseline", reason: "keeps no outputs to measure drift against; evaluate it with evaluateBaseline")
        }
        let drift = makeDrift(reference: reference)
        var metrics = try model.evaluate(streamingTo: drift)
        metrics[accuracyMetric + "_drop"] = accuracyDirection.drop(from: baseline.metrics[accuracyMetric] ?? .nan,
                                                                   to: metrics[accuracyMetric] ?? .nan)
        metrics.merge(drift.metrics) { $1 }
        return metrics
    }
}

/// Looks tasks up by name.
public enum EvaluationTasks {
    public static let names = ["stsb", "perplexity"]

    /// The registry alias of the model a task runs on when none is named.
    public static func defaultModel(of name: String) -> String { name == "perplexity" ? "smollm2" : "minilm" }

    /// What task `name` reports (what merged reports are labelled with), or nil for an unknown task.
    public static func description(of name: String) -> (accuracy: String, direction: MetricDirection, drift: [String], workloads: [LatencyWorkload])? {
        switch name {
        case "stsb": (STSTask.accuracy, .higherIsBetter, STSTask.drift, STSTask.workloads)
        case "perplexity": (PerplexityTask.accuracy, .lowerIsBetter, PerplexityTask.drift, PerplexityTask.workloads)
        default: nil
        }
    }

    /// The task `name` on `data` (its default dataset when nil), over its first `limit` items when
    /// given (STS-B: sentence pairs; perplexity: windows of 512 tokens, default 40).
    public static func make(name: String, data: String?, base: String, limit: Int? = nil) throws -> any EvaluationTask {
        switch name {
        case "stsb": return try STSTask(data: data ?? STSBenchmark.defaultTestSplit, base: base, limit: limit)
        case "perplexity": return try PerplexityTask(text: data ?? Perplexity.defaultText, chunks: limit ?? PerplexityTask.defaultChunks)
        default: throw DatasetError.cannotRead(path: name, reason: "unknown task; expected one of \(names.joined(separator: ", "))")
        }
    }
}
