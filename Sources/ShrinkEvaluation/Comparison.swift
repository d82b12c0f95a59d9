import Dispatch
import Foundation
import Shrink
import ShrinkCompression
import ShrinkIO

/// One configuration's measurements, as `report.json` holds them.
public struct ConfigurationReport: Codable, Sendable, Equatable {
    /// The recipe's file name without `.json`, or `baseline`.
    public var name: String
    /// The recipe's path (nil for the baseline).
    public var recipe: String?
    /// Bytes of the weights file on disk.
    public var bytes: Int
    /// Bits per weight over the whole model (every tensor, compressed or not).
    public var bitsPerWeight: Double
    /// Bits per weight over the compressed tensors only (nil for the baseline).
    public var compressedBitsPerWeight: Double?
    /// The task's accuracy metric, its drop against the baseline, and the drift metrics.
    public var metrics: [String: Double]
    public var latency: Latency
    /// Seconds to compress (0 for the baseline).
    public var compressSeconds: Double
    /// The compressed tensors with the lowest weight SNR, worst first.
    public var worstLayers: [LayerError]

    public init(name: String, recipe: String?, bytes: Int, bitsPerWeight: Double, compressedBitsPerWeight: Double?, metrics: [String: Double],
                latency: Latency, compressSeconds: Double, worstLayers: [LayerError]) {
        self.name = name
        self.recipe = recipe
        self.bytes = bytes
        self.bitsPerWeight = bitsPerWeight
        self.compressedBitsPerWeight = compressedBitsPerWeight
        self.metrics = metrics
        self.latency = latency
        self.compressSeconds = compressSeconds
        self.worstLayers = worstLayers
    }

    public struct Latency: Codable, Sendable, Equatable {
        public var batch1MedianMs: Double
        public var batch1P90Ms: Double
        public var batch32SentencesPerSecond: Double
        /// Baseline batch-1 median over this one (> 1: faster than the baseline).
        public var batch1Speedup: Double
        /// This batch-32 throughput over the baseline's.
        public var batch32Speedup: Double

        public init(batch1MedianMs: Double, batch1P90Ms: Double, batch32SentencesPerSecond: Double, batch1Speedup: Double, batch32Speedup: Double) {
            self.batch1MedianMs = batch1MedianMs
            self.batch1P90Ms = batch1P90Ms
            self.batch32SentencesPerSecond = batch32SentencesPerSecond
            self.batch1Speedup = batch1Speedup
            self.batch32Speedup = batch32Speedup
        }

        enum CodingKeys: String, CodingKey {
            case batch1MedianMs = "batch1_median_ms", batch1P90Ms = "batch1_p90_ms"
            case batch32SentencesPerSecond = "batch32_sentences_per_second"
            case batch1Speedup = "batch1_speedup", batch32Speedup = "batch32_speedup"
        }
    }

    public struct LayerError: Codable, Sendable, Equatable {
        public var name: String
        public var encoding: String
        public var snrDecibels: Double

        public init(name: String, encoding: String, snrDecibels: Double) {
            self.name = name
            self.encoding = encoding
            self.snrDecibels = snrDecibels
        }

        enum CodingKeys: String, CodingKey { case name, encoding, snrDecibels = "snr_db" }
    }

    enum CodingKeys: String, CodingKey {
        case name, recipe, bytes, metrics, latency
        case bitsPerWeight = "bits_per_weight", compressedBitsPerWeight = "compressed_bits_per_weight"
        case compressSeconds = "compress_seconds", worstLayers = "worst_layers"
    }

    /// Every key always present (`null` for the baseline's recipe and compressed bits per weight).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(recipe, forKey: .recipe)
        try container.encode(bytes, forKey: .bytes)
        try container.encode(bitsPerWeight, forKey: .bitsPerWeight)
        try container.encode(compressedBitsPerWeight, forKey: .compressedBitsPerWeight)
        try container.encode(metrics, forKey: .metrics)
        try container.encode(latency, forKey: .latency)
        try container.encode(compressSeconds, forKey: .compressSeconds)
        try container.encode(worstLayers, forKey: .worstLayers)
    }
}

/// The harness behind `shrink compare`: compresses a model with each recipe in one process,
/// evaluates every configuration (and the uncompressed baseline) on a task, and measures latency
/// interleaved across configurations (A B C A B C …, after a warm-up) so machine drift hits all
/// alike.
public struct Comparison {
    public var model: ModelLocation
    public var recipes: [String]
    public var task: any EvaluationTask
    public var threads: Int
    /// Interleaved latency rounds.
    public var rounds: Int
    /// `(index, count)`: run configurations whose position (baseline 0, recipes 1…) is
    /// `index − 1` modulo `count`. The baseline runs in every shard (drops and ratios need it) but
    /// is reported by the first only.
    public var shard: (index: Int, count: Int)

    public init(model: ModelLocation, recipes: [String], task: any EvaluationTask, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
                rounds: Int = 3, shard: (index: Int, count: Int) = (1, 1)) {
        self.model = model
        self.recipes = recipes
        self.task = task
        self.threads = threads
        self.rounds = rounds
        self.shard = shard
    }

    /// The configurations this shard reports, by position (0 = baseline).
    public var positions: [Int] { (0...recipes.count).filter { $0 % shard.count == shard.index - 1 } }

    /// Configurations this shard runs (its own and the baseline).
    var running: [Int] { Set([0] + positions).sorted() }

    /// Progress steps of `run`: compress and evaluate each configuration, then the latency rounds.
    public var stepCount: Int { (running.count - 1) + running.count + rounds * running.count }

    /// Runs the comparison; compressed files go to `scratch` (removed by the caller).
    public func run(scratch: String, progress: ProgressReporter? = nil) throws -> [ConfigurationReport] {
        let parsed = try recipes.map { try Recipe.load(path: $0) }
        let names = ["baseline"] + parsed.map(\.name)
        if let duplicate = Dictionary(grouping: names, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw CompressionError.unreadableRecipe(file: duplicate, reason: "two configurations are named '\(duplicate)'; recipe file names must differ")
        }
        struct Prepared {
            let position: Int
            let weights: String
            let summary: CompressionSummary?
            let model: any TaskModel
            let evaluation: TaskEvaluation
        }
        var prepared: [Prepared] = []
        for position in running {
            var weights = model.weightsPath
            var summary: CompressionSummary?
            if position > 0 {
                progress?.begin("compressing with \(names[position])")
                weights = (scratch as NSString).appendingPathComponent(names[position] + ".safetensors")
                summary = try ModelCompressor.compress(model: model, recipe: parsed[position - 1], output: weights, threads: threads)
                progress?.end()
            }
            progress?.begin("evaluating \(names[position]) on \(task.name)")
            let loaded = try task.load(weights: weights, threads: threads)
            let evaluation = loaded.evaluate()
            progress?.end()
            prepared.append(Prepared(position: position, weights: weights, summary: summary, model: loaded, evaluation: evaluation))
        }
        // Latency, interleaved.
        var batch1 = [[Double]](repeating: [], count: prepared.count)
        var throughput = [[Double]](repeating: [], count: prepared.count)
        for item in prepared {
            item.model.runLatencyItem(0)
            if !item.model.throughputBatchSizes.isEmpty { item.model.runThroughputBatch(0) }
        }
        for round in 0..<rounds {
            for (index, item) in prepared.enumerated() {
                progress?.begin("latency round \(round + 1)/\(rounds): \(names[item.position])")
                for sentence in 0..<item.model.latencyItemCount {
                    let start = DispatchTime.now().uptimeNanoseconds
                    item.model.runLatencyItem(sentence)
                    batch1[index].append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
                }
                let start = DispatchTime.now().uptimeNanoseconds
                for batch in item.model.throughputBatchSizes.indices { item.model.runThroughputBatch(batch) }
                let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                throughput[index].append(Double(item.model.throughputBatchSizes.reduce(0, +)) / max(seconds, 1e-9))
                progress?.end()
            }
        }
        progress?.finish()
        let baseline = prepared[0]
        let baselineBatch1 = Self.percentile(batch1[0], 0.5), baselineThroughput = Self.percentile(throughput[0], 0.5)
        let totalElements = try SafetensorsFile(path: model.weightsPath).entries.reduce(0) { $0 + $1.shape.reduce(1, *) }
        return prepared.enumerated().filter { positions.contains($0.element.position) }.map { index, item in
            var metrics = item.evaluation.metrics
            let accuracy = metrics[task.accuracyMetric] ?? .nan
            metrics[task.accuracyMetric + "_drop"] = (baseline.evaluation.metrics[task.accuracyMetric] ?? .nan) - accuracy
            metrics.merge(task.drift(item.evaluation, baseline: baseline.evaluation)) { $1 }
            let bytes = (try? FileManager.default.attributesOfItem(atPath: item.weights)[.size] as? Int) ?? 0
            let median = Self.percentile(batch1[index], 0.5), rate = Self.percentile(throughput[index], 0.5)
            let worst = (item.summary?.tensors ?? []).compactMap { tensor in
                tensor.snrDecibels.map { ConfigurationReport.LayerError(name: tensor.name, encoding: tensor.encoding, snrDecibels: $0) }
            }.sorted { $0.snrDecibels < $1.snrDecibels }
            return ConfigurationReport(
                name: names[item.position], recipe: item.position == 0 ? nil : recipes[item.position - 1], bytes: bytes,
                bitsPerWeight: item.summary?.overallBitsPerWeight ?? Double(bytes * 8) / Double(max(totalElements, 1)),
                compressedBitsPerWeight: item.summary?.compressedBitsPerWeight, metrics: metrics,
                latency: .init(batch1MedianMs: median, batch1P90Ms: Self.percentile(batch1[index], 0.9), batch32SentencesPerSecond: rate,
                               batch1Speedup: baselineBatch1 / median, batch32Speedup: rate / baselineThroughput),
                compressSeconds: item.summary?.seconds ?? 0, worstLayers: Array(worst.prefix(5)))
        }
    }

    /// The `fraction` quantile (nearest rank) of `values`.
    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let rank = max(1, Int((fraction * Double(values.count)).rounded(.up)))
        return values.sorted()[min(rank, values.count) - 1]
    }
}
