import Foundation
import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkModels

/// Limits a compressed model must stay within on a task.
public struct AccuracyThresholds: Codable, Sendable, Equatable {
    /// Largest allowed drop of the task's accuracy metric against the uncompressed model.
    public var maxDrop: Double?
    /// Smallest allowed value per metric (e.g. `mean_cosine`, `min_cosine`, `same_top`).
    public var minimums: [String: Double]
    /// Largest allowed value per metric (e.g. `mean_kld`, `p99_kld`).
    public var maximums: [String: Double]

    public init(maxDrop: Double? = nil, minimums: [String: Double] = [:], maximums: [String: Double] = [:]) {
        self.maxDrop = maxDrop
        self.minimums = minimums
        self.maximums = maximums
    }

    /// STS-B's thresholds by name.
    public init(maxSpearmanDrop: Double? = nil, minMeanCosine: Double? = nil, minMinCosine: Double? = nil) {
        maxDrop = maxSpearmanDrop
        minimums = [:]
        maximums = [:]
        if let minMeanCosine { minimums["mean_cosine"] = minMeanCosine }
        if let minMinCosine { minimums["min_cosine"] = minMinCosine }
    }

    enum CodingKeys: String, CodingKey { case maxDrop = "max_drop", minimums, maximums }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        maxDrop = try container.decodeIfPresent(Double.self, forKey: .maxDrop)
        minimums = try container.decodeIfPresent([String: Double].self, forKey: .minimums) ?? [:]
        maximums = try container.decodeIfPresent([String: Double].self, forKey: .maximums) ?? [:]
    }
}

/// What a gate measured and whether it held.
public struct GateOutcome: Sendable {
    public let task: String
    public let accuracyMetric: String
    /// The task's drift metrics, in report order (named in the message).
    public let driftMetrics: [String]
    /// The compressed model's metrics, its drop and drift against the baseline.
    public let metrics: [String: Double]
    public let baselineAccuracy: Double
    /// One line per threshold that failed, giving the measured value and the threshold.
    public let failures: [String]
    /// The compressed tensors with the lowest weight SNR, worst first.
    public let worstLayers: [ConfigurationReport.LayerError]

    public var passed: Bool { failures.isEmpty }

    /// One line: the verdict, what failed (or the key numbers) and the layers that hurt most.
    public var message: String {
        let accuracy = metrics[accuracyMetric] ?? .nan
        let layers = worstLayers.prefix(3).map { "\($0.name) \(String(format: "%.1f", $0.snrDecibels)) dB" }.joined(separator: ", ")
        let drift = driftMetrics.compactMap { name in metrics[name].map { String(format: ", %@ %.5f", name, $0) } }.joined()
        let numbers = String(format: "%@ %.2f (baseline %.2f, drop %.2f)", accuracyMetric, accuracy, baselineAccuracy, metrics[accuracyMetric + "_drop"] ?? .nan) + drift
        if passed { return "\(task) gate holds: \(numbers)" }
        return "\(task) gate fails: \(failures.joined(separator: "; ")); \(numbers); lowest-SNR layers: \(layers.isEmpty ? "none" : layers)"
    }
}

/// Accuracy gates: evaluate a compressed model (a recipe applied to a model, or a compressed
/// file) against the uncompressed model on a task and check thresholds.
public enum AccuracyGate {
    /// What to check: a recipe to apply to the model, or an already compressed file.
    public enum Candidate: Sendable {
        case recipe(String)
        case compressed(String)
    }

    /// Checks `candidate` against `model` on `task`. `baseline` is the uncompressed model's
    /// evaluation on the same task when the caller already has it, and `calibrationCache` the
    /// calibration runs of earlier recipes (several gates, one baseline, one calibration).
    public static func check(model: ModelLocation, candidate: Candidate, task: any EvaluationTask, thresholds: AccuracyThresholds,
                             baseline known: TaskEvaluation? = nil, calibrationCache: CalibrationCache? = nil,
                             threads: Int = ProcessInfo.processInfo.activeProcessorCount) throws -> GateOutcome {
        let scratch = NSTemporaryDirectory() + "shrink-gate-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let weights: String
        switch candidate {
        case .recipe(let path):
            weights = scratch + "/candidate.safetensors"
            _ = try ModelCompressor.compress(model: model, recipe: try Recipe.load(path: path), output: weights, threads: threads,
                                             calibrationCache: calibrationCache)
        case .compressed(let path):
            weights = path
        }
        let baseline = try known ?? task.evaluateBaseline(try task.load(weights: model.weightsPath, threads: threads))
        let metrics = try task.evaluate(try task.load(weights: weights, threads: threads), against: baseline)
        let baselineAccuracy = baseline.metrics[task.accuracyMetric] ?? .nan
        let drop = metrics[task.accuracyMetric + "_drop"] ?? .nan
        var failures: [String] = []
        if let maxDrop = thresholds.maxDrop, !(drop <= maxDrop) {
            failures.append(String(format: "%@ drop %.3f exceeds %.3f", task.accuracyMetric, drop, maxDrop))
        }
        let bounds = thresholds.minimums.map { ($0.key, $0.value, true) } + thresholds.maximums.map { ($0.key, $0.value, false) }
        for (name, bound, isMinimum) in bounds.sorted(by: { ($0.0, $0.2 ? 0 : 1) < ($1.0, $1.2 ? 0 : 1) }) {
            guard let value = metrics[name] else {
                failures.append("\(name) is not a metric of \(task.name) (it has \(metrics.keys.sorted().joined(separator: ", ")))")
                continue
            }
            if isMinimum, !(value >= bound) { failures.append(String(format: "%@ %.5f is below %.5f", name, value, bound)) }
            if !isMinimum, !(value <= bound) { failures.append(String(format: "%@ %.5f exceeds %.5f", name, value, bound)) }
        }
        return GateOutcome(task: task.name, accuracyMetric: task.accuracyMetric, driftMetrics: task.driftMetrics, metrics: metrics, baselineAccuracy: baselineAccuracy,
                           failures: failures, worstLayers: try LayerErrors.lowestSNR(original: model.weightsPath, compressed: weights))
    }
}

/// The accuracy gate recorded next to a shipped recipe (`recipes/gates/<recipe>.json`): the
/// task, how many of its items to evaluate, and the thresholds.
public struct RecipeGate: Codable, Sendable, Equatable {
    public var task: String
    /// Evaluate on the first `limit` items of the task's default dataset (nil: all of it).
    public var limit: Int?
    public var thresholds: AccuracyThresholds

    enum CodingKeys: String, CodingKey { case task, limit }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        task = try container.decode(String.self, forKey: .task)
        limit = try container.decodeIfPresent(Int.self, forKey: .limit)
        thresholds = try AccuracyThresholds(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(task, forKey: .task)
        try container.encodeIfPresent(limit, forKey: .limit)
        try thresholds.encode(to: encoder)
    }

    /// The gate file of the recipe at `recipe`: `gates/<name>.json` in the recipe's folder.
    public static func path(forRecipe recipe: String) -> String {
        let folder = (recipe as NSString).deletingLastPathComponent, name = ((recipe as NSString).lastPathComponent as NSString).deletingPathExtension
        return (folder as NSString).appendingPathComponent("gates/\(name).json")
    }

    public static func load(path: String) throws -> RecipeGate {
        guard let data = FileManager.default.contents(atPath: path) else { throw DatasetError.cannotRead(path: path, reason: "cannot read the file") }
        do {
            return try JSONDecoder().decode(RecipeGate.self, from: data)
        } catch {
            throw DatasetError.cannotRead(path: path, reason: "not a gate file: \(error)")
        }
    }
}

/// Per-layer weight error of a compressed file against its source.
public enum LayerErrors {
    /// The SNR reported for a tensor decoded exactly.
    public static let exactSNR = 200.0

    /// The `count` encoded tensors with the lowest SNR (dB) against the same tensor in `original`
    /// (capped at `exactSNR`), lowest first. Tensors of a folded residual rotation are compared
    /// unfolded (`FoldedResidualRotation.unfold`), a reader against its weight times its norm's scale.
    public static func lowestSNR(original: String, compressed: String, count: Int = 5) throws -> [ConfigurationReport.LayerError] {
        let source = try TensorStores.open(path: original)
        let file = try SafetensorsFile(path: compressed)
        let model = try CompressedModel(file: file)
        let fold = try FoldedResidualRotation(metadata: file.metadata, path: compressed)
        var errors: [ConfigurationReport.LayerError] = []
        for tensor in model.encodedTensors {
            guard let stored = source.tensor(named: tensor.name), stored.shape == tensor.shape else { continue }
            var reference = stored.decodedFloats(), decoded = tensor.decode()
            if let fold {
                try fold.unfold(tensor.name, values: &decoded, shape: tensor.shape)
                if let norm = fold.readers[tensor.name], let scale = source.tensor(named: norm)?.decodedFloats(), scale.count == tensor.shape.last {
                    for index in reference.indices { reference[index] *= scale[index % scale.count] }
                }
            }
            var signal = 0.0, noise = 0.0
            for (a, b) in zip(reference, decoded) {
                signal += Double(a) * Double(a)
                noise += (Double(a) - Double(b)) * (Double(a) - Double(b))
            }
            let snr = noise == 0 ? exactSNR : min(exactSNR, 10 * log10(signal / noise))
            errors.append(.init(name: tensor.name, encoding: tensor.encoding.summary, snrDecibels: snr))
        }
        return Array(errors.sorted { $0.snrDecibels < $1.snrDecibels }.prefix(count))
    }
}
