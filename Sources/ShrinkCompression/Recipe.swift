import Foundation
import ShrinkCore

/// A compression recipe: per layer, how weights are compressed.
///
/// JSON (documented in `recipes/README.md`):
/// ```json
/// {
///   "global": { "palettize": { "bits": 4 } },
///   "op_type": { "embedding": null, "linear": { "quantize": { "bits": 8 } }, "mlp.down": { "quantize": { "bits": 6 } } },
///   "op_name": { "encoder\\.layer\\.0\\..*": { "quantize": { "bits": 8 } }, "pooler.dense": null },
///   "weight_threshold": 2048,
///   "fold_rotations": false
/// }
/// ```
/// `op_type` keys are coarse op types (`linear`, `embedding`, `conv`) or the op types a model's
/// architecture names its tensors by (`attention.q`, `mlp.down`, `output`…, see `shrink inspect`).
/// Precedence: the first `op_name` entry (in file order) whose key equals the tensor's name or op
/// name, or matches either as a whole regular expression, then the `op_type` entry of the tensor's
/// architecture op type, then that of its coarse op type, then `global`. `null` leaves the tensor
/// alone. Tensors with fewer elements than `weight_threshold` are left alone. `fold_rotations`
/// folds the rotation every reader of a residual stream is given into the weights around the
/// stream instead of rotating activations at run time (Llama-family models; see
/// `FoldedResidualRotation`).
public struct Recipe: Sendable {
    /// The file the recipe was read from (for error messages).
    public let file: String
    public let global: OpCompressionConfig?
    /// `op_type` entries by key: a coarse `OpType` raw value or an architecture op type.
    public let opType: [(key: String, config: OpCompressionConfig?)]
    public let opName: [(pattern: String, config: OpCompressionConfig?)]
    public let weightThreshold: Int
    /// Whether rotations of the residual stream's readers are folded into the weights.
    public let foldRotations: Bool
    /// The calibration data for calibrated methods (`"method": "gptq"`), if the recipe names any.
    public let calibration: CalibrationData?
    /// End-to-end tuning after encoding (recipe key `tune`), if the recipe asks for it.
    public let tuning: TuningConfig?
    /// The recipe as compact JSON, recorded in compressed files.
    public let canonicalJSON: String

    /// The file name without folder and `.json`, e.g. `minilm-int8-channel`.
    public var name: String { ((file as NSString).lastPathComponent as NSString).deletingPathExtension }

    /// Reads and validates the recipe at `path`.
    public static func load(path: String) throws(CompressionError) -> Recipe {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .unreadableRecipe(file: path, reason: FileManager.default.fileExists(atPath: path) ? "cannot read the file" : "no such file")
        }
        return try parse(data, file: path)
    }

    /// Parses and validates recipe JSON; `file` names it in errors.
    public static func parse(_ data: Data, file: String) throws(CompressionError) -> Recipe {
        let root: JSONValue
        do {
            root = try data.withUnsafeBytes { bytes in Result { () throws(JSONParseError) in try JSONValue.parse(bytes) } }.get()
        } catch {
            throw .unreadableRecipe(file: file, reason: "invalid JSON: \(error)")
        }
        var reader = try ConfigReader(root, file: file, keyPath: "")
        var global: OpCompressionConfig?
        if let value = reader.value("global"), value != .null {
            global = try OpCompressionConfig.decode(value, file: file, keyPath: "global")
        }
        var opTypes: [(key: String, config: OpCompressionConfig?)] = []
        if let value = reader.value("op_type") {
            let types = try ConfigReader(value, file: file, keyPath: "op_type")
            for (key, entry) in types.pairs {
                let coarse = OpType(rawValue: key).map { [.linear, .embedding, .conv].contains($0) } ?? false
                guard coarse || Self.isArchitectureOpType(key) else {
                    throw .invalidRecipe(file: file, keyPath: "op_type.\(key)",
                                         reason: "unknown op type (expected linear, embedding, conv, or an architecture's op type such as attention.q or mlp.down)")
                }
                opTypes.append((key, entry == .null ? nil : try OpCompressionConfig.decode(entry, file: file, keyPath: "op_type.\(key)")))
            }
        }
        var opNames: [(pattern: String, config: OpCompressionConfig?)] = []
        if let value = reader.value("op_name") {
            let names = try ConfigReader(value, file: file, keyPath: "op_name")
            for (pattern, entry) in names.pairs {
                let path = "op_name[\"\(pattern)\"]"
                do { _ = try Regex(pattern) } catch {
                    throw .invalidRecipe(file: file, keyPath: path, reason: "not a valid regular expression: \(error)")
                }
                opNames.append((pattern, entry == .null ? nil : try OpCompressionConfig.decode(entry, file: file, keyPath: path)))
            }
        }
        let threshold = try reader.integer("weight_threshold", default: 0, range: 0...Int.max)
        let foldRotations = try reader.boolean("fold_rotations", default: false)
        var calibration: CalibrationData?
        if let value = reader.value("calibration") {
            calibration = try CalibrationData.decode(value, file: file, keyPath: "calibration")
        }
        var tuning: TuningConfig?
        if let value = reader.value("tune") {
            tuning = try TuningConfig.decode(value, file: file, keyPath: "tune")
        }
        try reader.finish()
        let configs = [global] + opTypes.map(\.config) + opNames.map(\.config)
        if calibration == nil, configs.contains(where: { $0?.isCalibrated == true }) {
            throw .invalidRecipe(file: file, keyPath: "calibration",
                                 reason: "\"method\": \"gptq\" needs calibration data: add \"calibration\": {\"data\": \"<text file>\"}")
        }
        return Recipe(file: file, global: global, opType: opTypes, opName: opNames, weightThreshold: threshold, foldRotations: foldRotations,
                      calibration: calibration, tuning: tuning, canonicalJSON: root.serialized())
    }
}

extension Recipe {
    /// A recipe that compresses exactly the tensors of `configs` (by name), each with its config,
    /// and leaves every other tensor alone, folding no rotation and tuning nothing; calibration as in this recipe. `canonicalJSON` records
    /// this recipe's JSON and the tensors it was restricted to.
    public func restricted(to configs: [(tensor: String, config: OpCompressionConfig)]) -> Recipe {
        let names = JSONValue.array(configs.map { .string($0.tensor) }).serialized()
        return Recipe(file: file, global: nil, opType: [], opName: configs.map { ($0.tensor, $0.config) }, weightThreshold: 0,
                      foldRotations: false, calibration: calibration, tuning: nil, canonicalJSON: "{\"restricted_to\":\(names),\"recipe\":\(canonicalJSON)}")
    }

    /// The JSON of the op config a plan rule names (`global`, `op_type.linear`,
    /// `op_name["…"]`), as this recipe's file spells it; nil for an unknown rule.
    public func configJSON(rule: String) -> JSONValue? {
        guard let root = try? Array(canonicalJSON.utf8).withUnsafeBytes({ try JSONValue.parse($0) }) else { return nil }
        if rule == "global" { return root.objectValue?.first { $0.key == "global" }?.value }
        if rule.hasPrefix("op_type.") {
            let key = String(rule.dropFirst("op_type.".count))
            return root.objectValue?.first { $0.key == "op_type" }?.value.objectValue?.first { $0.key == key }?.value
        }
        if rule.hasPrefix("op_name[\""), rule.hasSuffix("\"]") {
            let pattern = String(rule.dropFirst("op_name[\"".count).dropLast(2))
            return root.objectValue?.first { $0.key == "op_name" }?.value.objectValue?.first { $0.key == pattern }?.value
        }
        return nil
    }

    /// Whether `key` has the form of an architecture op type: dotted lowercase words, more than
    /// one (`attention.q`), or one of the single-word types `output` and `pooler`. Whether the
    /// model has it is checked when the recipe is resolved against the model.
    static func isArchitectureOpType(_ key: String) -> Bool {
        let words = key.split(separator: ".", omittingEmptySubsequences: false)
        guard words.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isLowercase || $0 == "_" } }) else { return false }
        return words.count > 1 || ["output", "pooler"].contains(key)
    }
}

/// Calibration inputs for calibrated passes (recipe key `calibration`): a UTF-8 text file with one
/// input (a sentence) per line, and how many of its lines to use.
///
/// JSON: `{"data": "<file>", "limit": 512}`; a relative `data` path is relative to the recipe's folder.
public struct CalibrationData: Sendable, Equatable {
    /// The text file, resolved against the recipe's folder.
    public let path: String
    /// The most lines to use (the first ones).
    public let limit: Int

    public init(path: String, limit: Int) {
        self.path = path
        self.limit = limit
    }

    static func decode(_ value: JSONValue, file: String, keyPath: String) throws(CompressionError) -> CalibrationData {
        var reader = try ConfigReader(value, file: file, keyPath: keyPath)
        let data = try read(&reader, defaultLimit: 512, purpose: "calibration")
        try reader.finish()
        return data
    }

    /// `data` (resolved against the recipe's folder) and `limit` from `reader`.
    static func read(_ reader: inout ConfigReader, defaultLimit: Int, purpose: String) throws(CompressionError) -> CalibrationData {
        guard let data = reader.value("data")?.stringValue, !data.isEmpty else {
            throw reader.fail("data", "expected the path of a text file with one \(purpose) input per line")
        }
        let limit = try reader.integer("limit", default: defaultLimit, range: 1...1 << 24)
        let folder = (reader.file as NSString).deletingLastPathComponent
        return CalibrationData(path: data.hasPrefix("/") || folder.isEmpty ? data : folder + "/" + data, limit: limit)
    }
}

/// End-to-end tuning (recipe key `tune`): after every tensor is encoded, the entries of palette
/// LUTs (palettes without per-channel or block scales), every linear bias and every LayerNorm
/// (and with `embeddings` the embedding tables the recipe leaves dense) are trained together, indices and other encodings fixed, so that the compressed model's
/// pooled sentence embeddings point where the uncompressed model's do (loss `1 − cos`), then the
/// LUTs are put back on their stored grid. Adam (β 0.9, 0.999) with steps relative to each
/// tensor's mean magnitude and a cosine-decayed learning rate, over shuffled batches.
///
/// JSON: `{"data": "<text file>", "limit": 4096, "epochs": 2, "learning_rate": 0.003,
/// "batch_size": 32, "embeddings": false, "seed": 0}`; a relative `data` path is relative to the recipe's folder.
public struct TuningConfig: Sendable, Equatable {
    /// The text file (one input per line), resolved against the recipe's folder, and the most lines to use.
    public let data: CalibrationData
    public let epochs: Int
    /// The step size relative to each tensor's mean magnitude, at the start of the cosine decay.
    public let learningRate: Double
    public let batchSize: Int
    /// Whether the embedding tables the recipe leaves dense are trained too.
    public let embeddings: Bool
    /// Seeds the order of the batches.
    public let seed: UInt64

    public init(data: CalibrationData, epochs: Int, learningRate: Double, batchSize: Int, embeddings: Bool = false, seed: UInt64) {
        self.data = data
        self.epochs = epochs
        self.learningRate = learningRate
        self.batchSize = batchSize
        self.embeddings = embeddings
        self.seed = seed
    }

    static func decode(_ value: JSONValue, file: String, keyPath: String) throws(CompressionError) -> TuningConfig {
        var reader = try ConfigReader(value, file: file, keyPath: keyPath)
        let data = try CalibrationData.read(&reader, defaultLimit: 4096, purpose: "training")
        let epochs = try reader.integer("epochs", default: 2, range: 1...1000)
        let learningRate = try reader.number("learning_rate", range: 0...1, excludingUpper: true) ?? 0.003
        let batchSize = try reader.integer("batch_size", default: 32, range: 1...4096)
        let embeddings = try reader.boolean("embeddings", default: false)
        let seed = try reader.integer("seed", default: 0, range: 0...Int.max)
        try reader.finish()
        return TuningConfig(data: data, epochs: epochs, learningRate: learningRate,
                            batchSize: batchSize, embeddings: embeddings, seed: UInt64(seed))
    }
}

/// What the plan does with one tensor.
public enum PlanDecision: Sendable {
    /// Compress with `config`; `rule` is the recipe key path that chose it.
    case compress(OpCompressionConfig, rule: String)
    /// Leave the tensor as it is, for `reason`.
    case keep(reason: String)
}

/// A recipe resolved against a model: one decision per tensor, checked to fit every shape.
public struct CompressionPlan: Sendable {
    public let entries: [(tensor: TensorDescriptor, role: TensorRole, decision: PlanDecision)]

    /// Resolves `recipe` for `tensors` (with their roles, same order).
    /// - Throws: `CompressionError.recipeMismatch` for an `op_name` key that matches no tensor, an
    ///   architecture op type the model does not have, or a config that does not fit a tensor's
    ///   shape (naming the key path and the tensor).
    public static func resolve(_ recipe: Recipe, tensors: [TensorDescriptor], roles: [TensorRole]) throws(CompressionError) -> CompressionPlan {
        var regexes: [Regex<AnyRegexOutput>] = []
        for (pattern, _) in recipe.opName {
            do { regexes.append(try Regex(pattern)) } catch {
                throw .invalidRecipe(file: recipe.file, keyPath: "op_name[\"\(pattern)\"]", reason: "not a valid regular expression: \(error)")
            }
        }
        var matched = Set<Int>()
        var entries: [(tensor: TensorDescriptor, role: TensorRole, decision: PlanDecision)] = []
        for (tensor, role) in zip(tensors, roles) {
            var decision: PlanDecision
            let nameRule = recipe.opName.indices.first { index in
                let pattern = recipe.opName[index].pattern
                return pattern == tensor.name || pattern == role.op
                    || (try? regexes[index].wholeMatch(in: tensor.name)) != nil || (try? regexes[index].wholeMatch(in: role.op)) != nil
            }
            if let nameRule { matched.insert(nameRule) }
            let compressible = tensor.dtype.isFloatingPoint && tensor.shape.count >= 2
                && [.linear, .embedding, .conv].contains(role.opType)
            if !compressible {
                decision = .keep(reason: tensor.shape.count < 2 ? "\(tensor.shape.count)-D tensor" : "\(role.opType.rawValue) tensor")
            } else if let nameRule {
                let rule = "op_name[\"\(recipe.opName[nameRule].pattern)\"]"
                decision = recipe.opName[nameRule].config.map { .compress($0, rule: rule) } ?? .keep(reason: "\(rule) is null")
            } else if let typeRule = recipe.opType.first(where: { $0.key == role.kind }) ?? recipe.opType.first(where: { $0.key == role.opType.rawValue }) {
                let rule = "op_type.\(typeRule.key)"
                decision = typeRule.config.map { .compress($0, rule: rule) } ?? .keep(reason: "\(rule) is null")
            } else if let global = recipe.global {
                decision = .compress(global, rule: "global")
            } else {
                decision = .keep(reason: "no recipe entry")
            }
            let elements = tensor.shape.reduce(1, *)
            if case .compress(let config, let rule) = decision {
                if elements < recipe.weightThreshold {
                    decision = .keep(reason: "\(elements) elements < weight_threshold \(recipe.weightThreshold)")
                } else {
                    try check(config, fits: tensor, file: recipe.file, rule: rule)
                }
            }
            entries.append((tensor, role, decision))
        }
        let kinds = Set(roles.compactMap(\.kind))
        if let missing = recipe.opType.first(where: { OpType(rawValue: $0.key) == nil && !kinds.contains($0.key) }) {
            let known = kinds.isEmpty ? "its op types are not known (no architecture)" : "its op types: \(kinds.sorted().joined(separator: ", "))"
            throw .recipeMismatch(file: recipe.file, keyPath: "op_type.\(missing.key)", reason: "no tensor of the model has this op type; \(known)")
        }
        if let unmatched = recipe.opName.indices.first(where: { !matched.contains($0) }) {
            throw .recipeMismatch(file: recipe.file, keyPath: "op_name[\"\(recipe.opName[unmatched].pattern)\"]",
                                  reason: "matches no tensor or op of the model")
        }
        return CompressionPlan(entries: entries)
    }

    /// Checks that axes, group sizes, blocks and n:m groups fit the tensor's shape.
    static func check(_ config: OpCompressionConfig, fits tensor: TensorDescriptor, file: String, rule: String) throws(CompressionError) {
        if let mismatch = config.mismatch(shape: tensor.shape) {
            throw .recipeMismatch(file: file, keyPath: rule + "." + mismatch.key,
                                  reason: "tensor '\(tensor.name)' of shape \(Shape.describe(tensor.shape)): \(mismatch.reason)")
        }
    }
}
