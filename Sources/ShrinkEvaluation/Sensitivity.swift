import Foundation
import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkModels

/// One layer compressed alone, as one candidate recipe compresses it: its size and the task's
/// metrics with every other tensor left as it was.
public struct LayerSensitivity: Codable, Sendable, Equatable {
    /// The weight tensor (`encoder.layer.0.attention.self.query.weight`).
    public var layer: String
    /// The candidate recipe's name.
    public var candidate: String
    public var elements: Int
    /// Bytes of the compressed tensor (every part).
    public var bytes: Int
    /// The task's accuracy metric, its drop and its drift metrics with only this layer compressed.
    public var metrics: [String: Double]
    /// What the search adds up and minimises (`SensitivityReport.lossMetric`).
    public var loss: Double
    /// The candidate's op config for this layer, as its recipe spells it (compact JSON).
    public var config: String

    public var bitsPerWeight: Double { Double(bytes * 8) / Double(max(elements, 1)) }

    public init(layer: String, candidate: String, elements: Int, bytes: Int, metrics: [String: Double], loss: Double, config: String) {
        self.layer = layer
        self.candidate = candidate
        self.elements = elements
        self.bytes = bytes
        self.metrics = metrics
        self.loss = loss
        self.config = config
    }
}

/// What `shrink sensitivity` measured: the task and its baseline, the candidates, and one
/// `LayerSensitivity` per layer and candidate. The file `shrink search` reads.
public struct SensitivityReport: Codable, Sendable {
    /// A candidate recipe and the calibration data it names, if any.
    public struct Candidate: Codable, Sendable, Equatable {
        public var name: String
        public var recipe: String
        /// The calibration text (resolved path) and the lines used, when the recipe calibrates.
        public var calibrationData: String?
        public var calibrationLimit: Int?

        public init(name: String, recipe: String, calibrationData: String?, calibrationLimit: Int?) {
            self.name = name
            self.recipe = recipe
            self.calibrationData = calibrationData
            self.calibrationLimit = calibrationLimit
        }
    }

    public var model: String
    public var task: String
    /// The task's dataset (nil: its default) and item limit, so a search can verify on the same data.
    public var data: String?
    public var limit: Int?
    /// The folder with the model's config and tokenizer files (encoders).
    public var base: String?
    public var accuracyMetric: String
    /// `1 - mean_cosine` (sentence embeddings) or `mean_kld` (decoders), else `<accuracy>_drop`.
    public var lossMetric: String
    public var baseline: [String: Double]
    public var candidates: [Candidate]
    public var layers: [LayerSensitivity]

    public init(model: String, task: String, data: String?, limit: Int?, base: String?, accuracyMetric: String, lossMetric: String,
                baseline: [String: Double], candidates: [Candidate], layers: [LayerSensitivity]) {
        self.model = model
        self.task = task
        self.data = data
        self.limit = limit
        self.base = base
        self.accuracyMetric = accuracyMetric
        self.lossMetric = lossMetric
        self.baseline = baseline
        self.candidates = candidates
        self.layers = layers
    }

    enum CodingKeys: String, CodingKey {
        case model, task, data, limit, base, baseline, candidates, layers
        case accuracyMetric = "accuracy_metric", lossMetric = "loss_metric"
    }

    /// The loss of a configuration's metrics on a task, and its name: the drift that measures how
    /// far the outputs moved, which adds up across layers better than a rank correlation does.
    public static func loss(_ metrics: [String: Double], accuracyMetric: String) -> (name: String, value: Double) {
        if let cosine = metrics["mean_cosine"] { return ("1 - mean_cosine", 1 - cosine) }
        if let divergence = metrics["mean_kld"] { return ("mean_kld", divergence) }
        return (accuracyMetric + "_drop", metrics[accuracyMetric + "_drop"] ?? .nan)
    }

    /// Reads a report written by `json()`.
    public static func read(path: String) throws -> SensitivityReport {
        guard let data = FileManager.default.contents(atPath: path) else { throw DatasetError.cannotRead(path: path, reason: "no such file") }
        do {
            return try JSONDecoder().decode(SensitivityReport.self, from: data)
        } catch {
            throw DatasetError.cannotRead(path: path, reason: "not a shrink sensitivity report (\(error))")
        }
    }

    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(self)
    }

    /// The layers measured, in model order.
    public var uniqueLayers: [String] {
        var seen = Set<String>()
        return layers.map(\.layer).filter { seen.insert($0).inserted }
    }
}

/// The sensitivity scan behind `shrink sensitivity`: for every candidate recipe and every tensor
/// it compresses, compress that tensor alone (the rest as stored), evaluate the task against the
/// uncompressed baseline, and record size, metrics and loss. Cost: one compression and one
/// evaluation per (layer, candidate); calibration runs once per calibration file, or not at all
/// with a statistics file.
public struct SensitivityScan {
    public var model: ModelLocation
    public var candidates: [String]
    public var task: any EvaluationTask
    public var taskSettings: (data: String?, limit: Int?, base: String?)
    public var threads: Int
    /// Calibration statistics the calibrated candidates read instead of their calibration data.
    public var statistics: CalibrationStatisticsFile?

    public init(model: ModelLocation, candidates: [String], task: any EvaluationTask, taskSettings: (data: String?, limit: Int?, base: String?),
                threads: Int = ProcessInfo.processInfo.activeProcessorCount, statistics: CalibrationStatisticsFile? = nil) {
        self.statistics = statistics
        self.model = model
        self.candidates = candidates
        self.task = task
        self.taskSettings = taskSettings
        self.threads = threads
    }

    /// Each candidate's planned tensors: (tensor, config, the config's JSON).
    func plans(_ recipes: [Recipe]) throws -> [[(tensor: String, config: OpCompressionConfig, json: String)]] {
        let store = try TensorStores.open(path: model.weightsPath)
        let roles = ModelArchitectures.roles(of: store, configuration: try ModelArchitectures.configuration(of: store, configPath: model.configPath))
        return try recipes.map { recipe in
            try CompressionPlan.resolve(recipe, tensors: store.descriptors, roles: roles).entries.compactMap { entry in
                guard case .compress(let config, let rule) = entry.decision else { return nil }
                return (entry.tensor.name, config, recipe.configJSON(rule: rule)?.serialized() ?? "null")
            }
        }
    }

    /// Steps `run` reports: the baseline, then one per (layer, candidate).
    public func stepCount() throws -> Int { try 1 + plans(candidates.map { try Recipe.load(path: $0) }).reduce(0) { $0 + $1.count } }

    /// Runs the scan; per-layer compressed files go to `scratch` (removed by the caller).
    public func run(scratch: String, progress: ProgressReporter? = nil) throws -> SensitivityReport {
        let recipes = try candidates.map { try Recipe.load(path: $0) }
        let plans = try plans(recipes)
        progress?.begin("evaluating the baseline on \(task.name)")
        let baseline = try task.evaluateBaseline(try task.load(weights: model.weightsPath, threads: threads))
        progress?.end()
        let cache = statistics.map(CalibrationCache.init(statistics:)) ?? CalibrationCache()
        let output = (scratch as NSString).appendingPathComponent("layer.safetensors")
        var layers: [LayerSensitivity] = []
        var lossName = ""
        for (recipe, plan) in zip(recipes, plans) {
            for entry in plan {
                progress?.begin("\(recipe.name): \(entry.tensor)")
                let summary = try ModelCompressor.compress(model: model, recipe: recipe.restricted(to: [(entry.tensor, entry.config)]), output: output,
                                                           threads: threads, calibrationCache: cache)
                let metrics = try task.evaluate(try task.load(weights: output, threads: threads), against: baseline)
                let loss = SensitivityReport.loss(metrics, accuracyMetric: task.accuracyMetric)
                lossName = loss.name
                let compressed = summary.tensors.first { $0.name == entry.tensor }
                layers.append(LayerSensitivity(layer: entry.tensor, candidate: recipe.name, elements: compressed?.elements ?? 0,
                                               bytes: compressed?.bytesAfter ?? 0, metrics: metrics, loss: loss.value, config: entry.json))
                progress?.end()
            }
        }
        progress?.finish()
        let candidates = recipes.map { recipe in
            SensitivityReport.Candidate(name: recipe.name, recipe: recipe.file, calibrationData: recipe.calibration?.path,
                                        calibrationLimit: recipe.calibration?.limit)
        }
        return SensitivityReport(model: model.weightsPath, task: task.name, data: taskSettings.data, limit: taskSettings.limit, base: taskSettings.base,
                                 accuracyMetric: task.accuracyMetric, lossMetric: lossName, baseline: baseline.metrics, candidates: candidates,
                                 layers: layers)
    }
}
