import Foundation

/// A task the harness measures configurations on: a dataset, a way to run a model on it, and
/// the metrics it reports. The harness (`Comparison`, `AccuracyGate`) only sees this protocol, so
/// a decoder task (perplexity on WikiText-2) plugs in next to STS-B.
public protocol EvaluationTask: Sendable {
    /// The name on the command line (`--task stsb`).
    var name: String { get }
    /// The accuracy metric, higher is better (`spearman`); drops are measured on it.
    var accuracyMetric: String { get }
    /// The drift metrics `drift(_:baseline:)` returns, in report order.
    var driftMetrics: [String] { get }
    /// Loads the model stored in `weights` (a plain or compressed file) for this task.
    func load(weights: String, threads: Int) throws -> any TaskModel
    /// How far `outputs` moved from the baseline's outputs on the same inputs.
    func drift(_ outputs: TaskEvaluation, baseline: TaskEvaluation) -> [String: Double]
}

/// A model loaded for a task: it evaluates and it runs the latency workloads.
public protocol TaskModel: AnyObject {
    /// Runs the evaluation set: the task's metrics and the raw outputs (for drift).
    func evaluate() -> TaskEvaluation
    /// Batch-1 work items (one sentence each for STS-B).
    var latencyItemCount: Int { get }
    func runLatencyItem(_ index: Int)
    /// Throughput batches: how many items each holds.
    var throughputBatchSizes: [Int] { get }
    func runThroughputBatch(_ index: Int)
}

/// What one evaluation produced.
public struct TaskEvaluation: Sendable {
    public var metrics: [String: Double]
    /// One output vector per evaluation input, in a fixed order.
    public var outputs: [[Float]]

    public init(metrics: [String: Double], outputs: [[Float]]) {
        self.metrics = metrics
        self.outputs = outputs
    }
}

/// Looks tasks up by name.
public enum EvaluationTasks {
    public static let names = ["stsb"]

    /// The accuracy and drift metrics task `name` reports (what merged reports are labelled with),
    /// or nil for an unknown task.
    public static func metrics(of name: String) -> (accuracy: String, drift: [String])? {
        switch name {
        case "stsb": (STSTask.accuracy, STSTask.drift)
        default: nil
        }
    }

    /// The task `name` on `data` (its default dataset when nil), over its first `limit` items when given.
    public static func make(name: String, data: String?, base: String, limit: Int? = nil) throws -> any EvaluationTask {
        switch name {
        case "stsb": return try STSTask(data: data ?? STSBenchmark.defaultTestSplit, base: base, limit: limit)
        default: throw DatasetError.cannotRead(path: name, reason: "unknown task; expected one of \(names.joined(separator: ", "))")
        }
    }
}
