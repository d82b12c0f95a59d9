import Foundation
import ShrinkCore
import ShrinkKernels
import ShrinkModels

/// STS Benchmark with a BERT sentence encoder: Spearman ×100 between the cosine of the two
/// sentences' embeddings and the gold score; drift is the cosine between a configuration's
/// embedding of each sentence and the baseline's.
public struct STSTask: EvaluationTask {
    static let accuracy = "spearman"
    static let drift = ["mean_cosine", "min_cosine"]
    /// Sentences one at a time, and batches of 32 sentences sorted by length.
    static let workloads = [LatencyWorkload(name: "batch1", kind: .latency, column: "b1 ms"),
                            LatencyWorkload(name: "batch32", kind: .throughput(unit: "sentences"), column: "b32 /s")]
    public let name = "stsb"
    public let accuracyMetric = STSTask.accuracy
    public let accuracyDirection = MetricDirection.higherIsBetter
    public let driftMetrics = STSTask.drift
    public let latencyWorkloads = STSTask.workloads
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

    public func load(weights: String, replacing: [EncodedTensor], threads: Int, activations: ActivationPrecision) throws -> any TaskModel {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: weights, configPath: base + "/config.json", folder: base)
        let runtime = try architecture.makeRuntime(files: try files.replacing(replacing), options: RuntimeOptions(threads: threads, activations: activations))
        guard let encoder = runtime as? any SentenceEmbeddingRuntime else {
            throw ModelError.wrongCapability(architecture: type(of: architecture).name, needed: "sentence embeddings (task stsb)")
        }
        return STSModel(task: self, encoder: encoder)
    }

    public func makeDrift(reference: TaskOutputs) -> any DriftAccumulator { CosineDrift(reference: reference) }

    static func cosine(_ a: some Collection<Float>, _ b: some Collection<Float>) -> Double {
        var dot = 0.0, normA = 0.0, normB = 0.0
        for (x, y) in zip(a, b) {
            dot += Double(x) * Double(y)
            normA += Double(x) * Double(x)
            normB += Double(y) * Double(y)
        }
        return dot / max((normA * normB).squareRoot(), 1e-30)
    }
}

/// Drift of sentence embeddings: the cosine between each embedding and the reference's embedding
/// of the same sentence, as mean and minimum over the sentences.
final class CosineDrift: DriftAccumulator {
    let reference: TaskOutputs
    var chunk = 0
    var sum = 0.0, minimum = 1.0, count = 0

    init(reference: TaskOutputs) { self.reference = reference }

    func consume(_ outputs: UnsafeBufferPointer<Float>, rows: Int, width: Int) throws {
        let expected = try reference.chunk(chunk, rows: rows, width: width)
        chunk += 1
        for row in 0..<rows {
            let cosine = STSTask.cosine(outputs[(row * width)..<((row + 1) * width)], expected[(row * width)..<((row + 1) * width)])
            sum += cosine
            minimum = min(minimum, cosine)
            count += 1
        }
    }

    var metrics: [String: Double] { ["mean_cosine": sum / Double(max(count, 1)), "min_cosine": count == 0 ? 1 : minimum] }
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

    /// Rows of a streamed chunk.
    static let chunkRows = 256

    /// Embeds in batches of 32 in length order (less work per batch), then streams the embeddings
    /// in pair order (both sentences of each pair), `chunkRows` at a time.
    func evaluate(streamingTo sink: any OutputSink) throws -> [String: Double] {
        let order = sentences.indices.sorted { sentences[$0].count < sentences[$1].count }
        var embeddings = [[Float]](repeating: [], count: sentences.count)
        for start in stride(from: 0, to: order.count, by: 32) {
            let batch = Array(order[start..<min(start + 32, order.count)])
            for (index, embedding) in zip(batch, try encoder.embed(batch.map { sentences[$0] })) { embeddings[index] = embedding }
        }
        let width = encoder.dimension
        for start in stride(from: 0, to: embeddings.count, by: Self.chunkRows) {
            let rows = min(Self.chunkRows, embeddings.count - start)
            try embeddings[start..<(start + rows)].flatMap { $0 }.withUnsafeBufferPointer { try sink.consume($0, rows: rows, width: width) }
        }
        let similarities = task.pairs.indices.map { STSTask.cosine(embeddings[2 * $0], embeddings[2 * $0 + 1]) }
        return ["spearman": 100 * RankCorrelation.spearman(similarities, task.pairs.map(\.score))]
    }

    func itemCount(workload: Int) -> Int { workload == 0 ? latencyInputs.count : throughputBatches.count }
    func units(workload: Int, item: Int) -> Int { workload == 0 ? 1 : throughputBatches[item].count }

    func run(workload: Int, item: Int) throws {
        _ = try encoder.embed(workload == 0 ? [latencyInputs[item]] : throughputBatches[item])
    }
}
