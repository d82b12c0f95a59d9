import Foundation
import ShrinkKernels
import ShrinkModels

/// STS Benchmark with a BERT sentence encoder: Spearman ×100 between the cosine of the two
/// sentences' embeddings and the gold score; drift is the cosine between a configuration's
/// embedding of each sentence and the baseline's.
public struct STSTask: EvaluationTask {
    static let accuracy = "spearman"
    static let drift = ["mean_cosine", "min_cosine"]
    public let name = "stsb"
    public let accuracyMetric = STSTask.accuracy
    public let driftMetrics = STSTask.drift
    public let pairs: [STSPair]
    /// Folder with `config.json`, `vocab.txt` and the pooling config.
    public let base: String
    public let dataPath: String
    /// Sentences run one at a time for batch-1 latency.
    public let latencySentences: Int
    /// Sentences run in batches of 32, sorted by length, for throughput.
    public let throughputSentences: Int

    public init(data: String, base: String, limit: Int? = nil, latencySentences: Int = 100, throughputSentences: Int = 1024) throws {
        var pairs = try STSBenchmark.load(path: data)
        if let limit { pairs = Array(pairs.prefix(limit)) }
        self.pairs = pairs
        self.base = base
        dataPath = data
        self.latencySentences = latencySentences
        self.throughputSentences = throughputSentences
    }

    public func load(weights: String, threads: Int) throws -> any TaskModel {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: weights, configPath: base + "/config.json", folder: base)
        let runtime = try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: threads))
        guard let encoder = runtime as? any SentenceEmbeddingRuntime else {
            throw ModelError.wrongCapability(architecture: type(of: architecture).name, needed: "sentence embeddings (task stsb)")
        }
        return STSModel(task: self, encoder: encoder)
    }

    public func drift(_ outputs: TaskEvaluation, baseline: TaskEvaluation) -> [String: Double] {
        let cosines = zip(outputs.outputs, baseline.outputs).map { Self.cosine($0, $1) }
        return ["mean_cosine": cosines.reduce(0, +) / Double(max(cosines.count, 1)), "min_cosine": cosines.min() ?? 1]
    }

    static func cosine(_ a: [Float], _ b: [Float]) -> Double {
        var dot = 0.0, normA = 0.0, normB = 0.0
        for (x, y) in zip(a, b) {
            dot += Double(x) * Double(y)
            normA += Double(x) * Double(x)
            normB += Double(y) * Double(y)
        }
        return dot / max((normA * normB).squareRoot(), 1e-30)
    }
}

/// An encoder loaded for STS-B, with the task's inputs tokenized once.
final class STSModel: TaskModel {
    let task: STSTask
    let encoder: any SentenceEmbeddingRuntime
    /// Both sides of every pair, in pair order.
    let sentences: [[Int32]]
    let latencyInputs: [[Int32]]
    let throughputBatches: [[[Int32]]]

    init(task: STSTask, encoder: any SentenceEmbeddingRuntime) {
        self.task = task
        self.encoder = encoder
        sentences = task.pairs.flatMap { [encoder.tokenize($0.first), encoder.tokenize($0.second)] }
        latencyInputs = Array(sentences.prefix(task.latencySentences))
        let sorted = Array(sentences.prefix(task.throughputSentences)).sorted { $0.count < $1.count }
        throughputBatches = stride(from: 0, to: sorted.count, by: 32).map { Array(sorted[$0..<min($0 + 32, sorted.count)]) }
    }

    func evaluate() -> TaskEvaluation {
        // Batches of 32 in length order (less work per batch), results put back in pair order.
        let order = sentences.indices.sorted { sentences[$0].count < sentences[$1].count }
        var embeddings = [[Float]](repeating: [], count: sentences.count)
        for start in stride(from: 0, to: order.count, by: 32) {
            let batch = Array(order[start..<min(start + 32, order.count)])
            for (index, embedding) in zip(batch, encoder.embed(batch.map { sentences[$0] })) { embeddings[index] = embedding }
        }
        let similarities = task.pairs.indices.map { STSTask.cosine(embeddings[2 * $0], embeddings[2 * $0 + 1]) }
        let spearman = 100 * RankCorrelation.spearman(similarities, task.pairs.map(\.score))
        return TaskEvaluation(metrics: ["spearman": spearman], outputs: embeddings)
    }

    var latencyItemCount: Int { latencyInputs.count }
    func runLatencyItem(_ index: Int) { _ = encoder.embed([latencyInputs[index]]) }
    var throughputBatchSizes: [Int] { throughputBatches.map(\.count) }
    func runThroughputBatch(_ index: Int) { _ = encoder.embed(throughputBatches[index]) }
}
