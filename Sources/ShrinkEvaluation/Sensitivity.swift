import Foundation
import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkKernels
import ShrinkModels

/// One layer (or one unit of layers, `tensors`) compressed alone, as one candidate recipe
/// compresses it: its size and the task's metrics with every other tensor left as it was.
public struct LayerSensitivity: Codable, Sendable, Equatable {
    /// The weight tensor (`encoder.layer.0.attention.self.query.weight`), or the unit's name
    /// (`blk.0-2.ffn_down.weight`: one kind of tensor over consecutive blocks).
    public var layer: String
    /// The unit's tensors when it has more than one (nil: `layer` alone).
    public var tensors: [String]?
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
    /// The tensors the measurement compressed.
    public var compressedTensors: [String] { tensors ?? [layer] }

    public init(layer: String, tensors: [String]? = nil, candidate: String, elements: Int, bytes: Int, metrics: [String: Double], loss: Double,
                config: String) {
        self.layer = layer
        self.tensors = tensors
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
    /// The activation precision of every evaluation (`f32`, `int8`; nil in reports that predate
    /// the field: `int8`).
    public var activations: String?
    public var baseline: [String: Double]
    public var candidates: [Candidate]
    public var layers: [LayerSensitivity]

    public init(model: String, task: String, data: String?, limit: Int?, base: String?, accuracyMetric: String, lossMetric: String,
                activations: String? = nil, baseline: [String: Double], candidates: [Candidate], layers: [LayerSensitivity]) {
        self.activations = activations
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
        case model, task, data, limit, base, baseline, candidates, layers, activations
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

    /// The precision the scan evaluated in, which its verification uses too.
    public var activationPrecision: ActivationPrecision { activations.flatMap(ActivationPrecision.init(rawValue:)) ?? .int8 }

    /// The layers measured, in model order.
    public var uniqueLayers: [String] {
        var seen = Set<String>()
        return layers.map(\.layer).filter { seen.insert($0).inserted }
    }
}

/// The sensitivity scan behind `shrink sensitivity`: for every candidate recipe and every unit
/// of tensors it compresses (one tensor, or with `blocksPerUnit` > 1 one kind of tensor over that
/// many consecutive blocks), compress that unit alone (the rest as stored), evaluate the task
/// against the uncompressed baseline, and record size, metrics and loss. Cost: one compression and
/// one evaluation per (unit, candidate); calibration runs once per calibration file, or not at all
/// with a statistics file.
///
/// Evaluations run with `activations` (default fp32): with int8 activations, compressing any one
/// layer re-draws the activation rounding of every later layer, so a single layer's drift carries a
/// floor that does not add up across layers (SmolLM2, 4 windows: one int8 layer alone 0.0022 mean
/// KLD, all 210 int8 0.0064; with fp32 activations 0.00004 and, for 30 of them, 0.0010).
public struct SensitivityScan {
    public var model: ModelLocation
    public var candidates: [String]
    public var task: any EvaluationTask
    public var taskSettings: (data: String?, limit: Int?, base: String?)
    public var threads: Int
    /// Calibration statistics the calibrated candidates read instead of their calibration data.
    public var statistics: CalibrationStatisticsFile?
    public var activations: ActivationPrecision
    /// Consecutive blocks whose tensors of one kind form a unit (1: every tensor its own unit).
    public var blocksPerUnit: Int

    public init(model: ModelLocation, candidates: [String], task: any EvaluationTask, taskSettings: (data: String?, limit: Int?, base: String?),
                threads: Int = ProcessInfo.processInfo.activeProcessorCount, statistics: CalibrationStatisticsFile? = nil,
                activations: ActivationPrecision = .float32, blocksPerUnit: Int = 1) {
        self.statistics = statistics
        self.model = model
        self.candidates = candidates
        self.task = task
        self.taskSettings = taskSettings
        self.threads = threads
        self.activations = activations
        self.blocksPerUnit = max(1, blocksPerUnit)
    }

    /// Tensors a candidate compresses together, with the one config they share.
    struct Unit {
        var name: String
        var tensors: [String]
        var config: OpCompressionConfig
        var json: String
    }

    /// Each candidate's units, in model order.
    /// - Throws: `DatasetError.cannotRead` naming the candidate when it gives the tensors of one
    ///   unit different configs.
    func plans(_ recipes: [Recipe]) throws -> [[Unit]] {
        let store = try TensorStores.open(path: model.weightsPath)
        let roles = ModelArchitectures.roles(of: store, configuration: try ModelArchitectures.configuration(of: store, configPath: model.configPath))
        let layerOf = Dictionary(roles.map { ($0.name, $0.layer) }, uniquingKeysWith: { first, _ in first })
        return try recipes.map { recipe in
            var units: [Unit] = []
            var byKey: [String: (unit: Int, lastBlock: Int)] = [:]
            for entry in try CompressionPlan.resolve(recipe, tensors: store.descriptors, roles: roles).entries {
                guard case .compress(let config, let rule) = entry.decision else { continue }
                let json = recipe.configJSON(rule: rule)?.serialized() ?? "null"
                let name = entry.tensor.name
                guard blocksPerUnit > 1, let layer = layerOf[name], name.hasPrefix(layer), let (prefix, block) = Self.block(of: layer) else {
                    units.append(Unit(name: name, tensors: [name], config: config, json: json))
                    continue
                }
                let first = block - block % blocksPerUnit
                let suffix = String(name.dropFirst(layer.count))
                let key = "\(prefix)\(first)\u{0}\(suffix)"
                guard let (index, lastBlock) = byKey[key] else {
                    byKey[key] = (units.count, block)
                    units.append(Unit(name: name, tensors: [name], config: config, json: json))
                    continue
                }
                guard units[index].json == json else {
                    throw DatasetError.cannotRead(path: recipe.file, reason: "gives \(units[index].tensors[0]) and \(name) different configs, "
                                                  + "so they cannot be scanned as one unit; scan with one block per unit")
                }
                units[index].tensors.append(name)
                byKey[key] = (index, max(lastBlock, block))
                units[index].name = "\(prefix)\(first)-\(max(lastBlock, block))\(suffix)"
            }
            return units
        }
    }

    /// A numbered block's prefix and index (`blk.12` → `blk.`, 12).
    static func block(of layer: String) -> (prefix: String, index: Int)? {
        let digits = layer.reversed().prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, digits.count < layer.count, let index = Int(String(digits.reversed())) else { return nil }
        return (String(layer.dropLast(digits.count)), index)
    }

    /// Steps `run` reports: the baseline, then one per (unit, candidate).
    public func stepCount() throws -> Int { try 1 + plans(candidates.map { try Recipe.load(path: $0) }).reduce(0) { $0 + $1.count } }

    /// Runs the scan; each unit's compressed tensors replace the stored ones in memory.
    public func run(progress: ProgressReporter? = nil) throws -> SensitivityReport {
        let recipes = try candidates.map { try Recipe.load(path: $0) }
        let plans = try plans(recipes)
        progress?.begin("evaluating the baseline on \(task.name)")
        let baseline = try task.evaluateBaseline(try task.load(weights: model.weightsPath, threads: threads, activations: activations))
        progress?.end()
        let cache = statistics.map(CalibrationCache.init(statistics:)) ?? CalibrationCache()
        var layers: [LayerSensitivity] = []
        var lossName = ""
        for (recipe, plan) in zip(recipes, plans) {
            for unit in plan {
                progress?.begin("\(recipe.name): \(unit.name)")
                let encoded = try ModelCompressor.encode(model: model, recipe: recipe.restricted(to: unit.tensors.map { ($0, unit.config) }),
                                                         threads: threads, calibrationCache: cache)
                let metrics = try task.evaluate(try task.load(weights: model.weightsPath, replacing: encoded.tensors, threads: threads,
                                                              activations: activations), against: baseline)
                let loss = SensitivityReport.loss(metrics, accuracyMetric: task.accuracyMetric)
                lossName = loss.name
                let compressed = encoded.reports.filter { unit.tensors.contains($0.name) }
                layers.append(LayerSensitivity(layer: unit.name, tensors: unit.tensors.count > 1 ? unit.tensors : nil, candidate: recipe.name,
                                               elements: compressed.reduce(0) { $0 + $1.elements }, bytes: compressed.reduce(0) { $0 + $1.bytesAfter },
                                               metrics: metrics, loss: loss.value, config: unit.json))
                progress?.end()
            }
        }
        progress?.finish()
        let candidates = recipes.map { recipe in
            SensitivityReport.Candidate(name: recipe.name, recipe: recipe.file, calibrationData: recipe.calibration?.path,
                                        calibrationLimit: recipe.calibration?.limit)
        }
        return SensitivityReport(model: model.weightsPath, task: task.name, data: taskSettings.data, limit: taskSettings.limit, base: taskSettings.base,
                                 accuracyMetric: task.accuracyMetric, lossMetric: lossName, activations: activations.rawValue, baseline: baseline.metrics,
                                 candidates: candidates, layers: layers)
    }
}
