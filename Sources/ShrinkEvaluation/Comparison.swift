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
    /// The task's accuracy metric, its drop against the baseline (positive: worse), and the drift metrics.
    public var metrics: [String: Double]
    /// Per timed workload of the task (`LatencyWorkload`): its figures and its speedup against the
    /// baseline (for STS-B `batch1_median_ms`, `batch1_p90_ms`, `batch1_speedup`,
    /// `batch32_sentences_per_second`, `batch32_speedup`).
    public var latency: [String: Double]
    /// Seconds to compress (0 for the baseline).
    public var compressSeconds: Double
    /// The compressed tensors with the lowest weight SNR, worst first.
    public var worstLayers: [LayerError]

    public init(name: String, recipe: String?, bytes: Int, bitsPerWeight: Double, compressedBitsPerWeight: Double?, metrics: [String: Double],
                latency: [String: Double], compressSeconds: Double, worstLayers: [LayerError]) {
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
            let index: Int
            let position: Int
            let weights: String
            let summary: CompressionSummary?
            let model: any TaskModel
            /// Metrics with drop and drift against the baseline (empty for the baseline itself).
            let metrics: [String: Double]
        }
        var prepared: [Prepared] = []
        var baselineEvaluation: TaskEvaluation?
        let calibrationCache = CalibrationCache()
        for position in running {
            var weights = model.weightsPath
            var summary: CompressionSummary?
            if position > 0 {
                progress?.begin("compressing with \(names[position])")
                weights = (scratch as NSString).appendingPathComponent(names[position] + ".safetensors")
                summary = try ModelCompressor.compress(model: model, recipe: parsed[position - 1], output: weights, threads: threads,
                                                       calibrationCache: calibrationCache)
                progress?.end()
            }
            progress?.begin("evaluating \(names[position]) on \(task.name)")
            let loaded = try task.load(weights: weights, threads: threads)
            var metrics: [String: Double] = [:]
            if let baselineEvaluation {
                metrics = try task.evaluate(loaded, against: baselineEvaluation)
            } else {
                baselineEvaluation = try task.evaluateBaseline(loaded)
            }
            progress?.end()
            prepared.append(Prepared(index: prepared.count, position: position, weights: weights, summary: summary, model: loaded, metrics: metrics))
        }
        // The baseline against itself: its metrics, no drop, no drift.
        var baselineMetrics = baselineEvaluation!.metrics
        baselineMetrics[task.accuracyMetric + "_drop"] = 0
        let selfDrift = task.makeDrift(reference: baselineEvaluation!.outputs!)
        for index in baselineEvaluation!.outputs!.chunks.indices {
            let chunk = baselineEvaluation!.outputs!.chunks[index]
            try baselineEvaluation!.outputs!.chunk(index).withUnsafeBufferPointer { try selfDrift.consume($0, rows: chunk.rows, width: chunk.width) }
        }
        baselineMetrics.merge(selfDrift.metrics) { $1 }
        // Latency, interleaved: per configuration, every workload in turn; `samples[configuration][workload]`.
        let workloads = task.latencyWorkloads
        var samples = [[[Double]]](repeating: [[Double]](repeating: [], count: workloads.count), count: prepared.count)
        for item in prepared {
            for workload in workloads.indices where item.model.itemCount(workload: workload) > 0 { try item.model.run(workload: workload, item: 0) }
        }
        for round in 0..<rounds {
            for (index, item) in prepared.enumerated() {
                progress?.begin("latency round \(round + 1)/\(rounds): \(names[item.position])")
                for (workload, kind) in workloads.map(\.kind).enumerated() {
                    let items = item.model.itemCount(workload: workload)
                    switch kind {
                    case .latency:
                        for element in 0..<items {
                            let start = DispatchTime.now().uptimeNanoseconds
                            try item.model.run(workload: workload, item: element)
                            samples[index][workload].append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
                        }
                    case .throughput:
                        let start = DispatchTime.now().uptimeNanoseconds
                        for element in 0..<items { try item.model.run(workload: workload, item: element) }
                        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                        let units = (0..<items).reduce(0) { $0 + item.model.units(workload: workload, item: $1) }
                        samples[index][workload].append(Double(units) / max(seconds, 1e-9))
                    }
                }
                progress?.end()
            }
        }
        progress?.finish()
        let totalElements = try TensorStores.open(path: model.weightsPath).descriptors.reduce(0) { $0 + $1.shape.reduce(1, *) }
        return prepared.enumerated().filter { positions.contains($0.element.position) }.map { index, item in
            let bytes = (try? FileManager.default.attributesOfItem(atPath: item.weights)[.size] as? Int) ?? 0
            var latency: [String: Double] = [:]
            for (workload, description) in workloads.enumerated() {
                let median = Self.percentile(samples[index][workload], 0.5), base = Self.percentile(samples[0][workload], 0.5)
                latency[description.key] = median
                switch description.kind {
                case .latency:
                    latency[description.name + "_p90_ms"] = Self.percentile(samples[index][workload], 0.9)
                    latency[description.name + "_speedup"] = base / median
                case .throughput:
                    latency[description.name + "_speedup"] = median / base
                }
            }
            let worst = (item.summary?.tensors ?? []).compactMap { tensor in
                tensor.snrDecibels.map { ConfigurationReport.LayerError(name: tensor.name, encoding: tensor.encoding, snrDecibels: $0) }
            }.sorted { $0.snrDecibels < $1.snrDecibels }
            return ConfigurationReport(
                name: names[item.position], recipe: item.position == 0 ? nil : recipes[item.position - 1], bytes: bytes,
                bitsPerWeight: item.summary?.overallBitsPerWeight ?? Double(bytes * 8) / Double(max(totalElements, 1)),
                compressedBitsPerWeight: item.summary?.compressedBitsPerWeight, metrics: item.index == 0 ? baselineMetrics : item.metrics,
                latency: latency, compressSeconds: item.summary?.seconds ?? 0, worstLayers: Array(worst.prefix(5)))
        }
    }

    /// The `fraction` quantile (nearest rank) of `values`.
    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let rank = max(1, Int((fraction * Double(values.count)).rounded(.up)))
        return values.sorted()[min(rank, values.count) - 1]
    }
}
