import ShrinkCore

/// How a pass picks each weight's code once its grid (scales or LUT) is set (recipe keys
/// `method`, `damping`, `act_order` of `quantize` and `palettize`).
public enum RoundingMethod: Equatable, Sendable {
    /// Round each weight to its nearest code.
    case roundToNearest
    /// GPTQ (Frantar et al., 2022): quantize the input columns in order and spread each
    /// column's rounding error over the columns not yet quantized, weighted by the inverse of
    /// the layer's input correlation measured on calibration data (`InputCorrelation`), with
    /// `damping` × the mean diagonal added to the diagonal first. With `actOrder` the columns
    /// go in order of decreasing input energy (the diagonal of the correlation), and scale
    /// groups are fixed from the original weights first.
    case gptq(damping: Double, actOrder: Bool)

    /// Whether the method needs calibration data.
    public var isCalibrated: Bool { self != .roundToNearest }
}

/// Linear quantization settings (recipe key `quantize`).
///
/// JSON: `{"bits": 2…8, "mode": "symmetric"|"affine", "signed": true, "granularity":
/// "per_tensor"|"per_channel"|"per_block", "axis": 0, "block_size": 32, "scale_dtype": "f16"|"f32"|"u8",
/// "clip_search": false, "method": "rtn"|"gptq", "damping": 0.01, "act_order": false}`.
public struct QuantizationConfig: Equatable, Sendable {
    public var bits = 8
    public var symmetric = true
    public var signed = true
    public var granularity: QuantizationGranularity = .perChannel(axis: 0)
    /// `.f16`, `.f32`, or `.u8`: integer block multipliers of an f16 scale per row, so every
    /// decoded 4-bit code times its multiplier fits in int8 and the integer kernels need no
    /// per-block scaling (see `LinearQuantizer`).
    public var scaleDType: DType = .f16
    /// Search per group for the clip ratio (1.0 down to 0.5) that minimises squared error.
    public var clipSearch = false
    public var method: RoundingMethod = .roundToNearest

    public init() {}
}

/// Palettization settings (recipe key `palettize`).
///
/// JSON: `{"bits": 1|2|3|4|6|8, "mode": "kmeans"|"uniform"|"unique"|"custom", "lut": [...],
/// "granularity": "per_tensor"|"per_grouped_channel", "group_size": 16, "channel_axis": 0,
/// "cluster_dim": 1|2|4, "per_channel_scale": false, "lut_dtype": "f16"|"f32"|"int8", "method":
/// "rtn"|"gptq", "damping": 0.01, "act_order": false}`.
public struct PalettizationConfig: Equatable, Sendable {
    public enum Mode: Equatable, Sendable {
        /// Optimal (1-D) or Lloyd (vectors) k-means.
        case kmeans
        /// Evenly spaced entries from the minimum to the maximum.
        case uniform
        /// The distinct values; lossless, an error when there are more than `2^bits`.
        case unique
        /// A given LUT (`2^bits × cluster_dim` values at most).
        case custom([Float])
    }

    public var bits = 4
    public var mode: Mode = .kmeans
    public var granularity: PaletteGranularity = .perTensor
    public var clusterDim = 1
    public var perChannelScale = false
    public var lutDType: DType = .f16
    /// How indices are chosen: the nearest entry, or GPTQ against the LUT (which is then built
    /// with each weight weighted by its input's energy on the calibration data).
    public var method: RoundingMethod = .roundToNearest

    public init() {}
}

/// Pruning settings (recipe key `prune`).
///
/// JSON: `{"mode": "magnitude", "target_sparsity": 0.5}`, `{"mode": "n_m", "n": 2, "m": 4}` or
/// `{"mode": "block", "block_size": 4, "target_sparsity": 0.5}`; blocks and n:m groups run along
/// the last (input) axis.
public enum PruningConfig: Equatable, Sendable {
    case magnitude(sparsity: Double)
    case nOfM(n: Int, m: Int)
    case block(blockSize: Int, sparsity: Double)

    /// The pattern the pass guarantees.
    public var pattern: SparsityPattern {
        switch self {
        case .magnitude: .unstructured
        case .nOfM(let n, let m): .nOfM(n: n, m: m)
        case .block(let size, _): .blocks(blockSize: size)
        }
    }
}

/// Incoherence processing (recipe key `rotate`, JSON `{"seed": 0, "block": "power_of_two"}`): the
/// weight's input axis is rotated by the randomized Hadamard rotation
/// `HadamardRotation(size:seed:block:)` before the other steps, which then see `W · Rᵀ` (and
/// calibrated ones the rotated correlation `R·H·Rᵀ`); the layer rotates its inputs at run time.
/// Weights with the same input width, seed and block share `R`.
public struct RotationConfig: Equatable, Sendable {
    public var seed: UInt64 = 0
    public var block: HadamardRotation.Block = .powerOfTwo

    public init(seed: UInt64 = 0, block: HadamardRotation.Block = .powerOfTwo) {
        self.seed = seed
        self.block = block
    }

    /// The smallest Hadamard block worth rotating with: smaller ones barely spread an outlier.
    public static let minimumBlock = 16
}

/// What to do to one weight: rotate, prune, then quantize or palettize (each step optional, not
/// both of the last two). JSON: an object with keys `rotate`, `prune`, `quantize`, `palettize`.
public struct OpCompressionConfig: Equatable, Sendable {
    public var rotate: RotationConfig?
    public var prune: PruningConfig?
    public var quantize: QuantizationConfig?
    public var palettize: PalettizationConfig?

    public init(rotate: RotationConfig? = nil, prune: PruningConfig? = nil, quantize: QuantizationConfig? = nil,
                palettize: PalettizationConfig? = nil) {
        self.rotate = rotate
        self.prune = prune
        self.quantize = quantize
        self.palettize = palettize
    }
}

extension OpCompressionConfig {
    /// Whether compressing with this config needs calibration data.
    public var isCalibrated: Bool { quantize?.method.isCalibrated == true || palettize?.method.isCalibrated == true }

    /// The first setting that does not fit a weight of `shape` (its key path inside the config and
    /// why), or `nil` when everything fits. Blocks, n:m groups and vectors run along the last axis.
    public func mismatch(shape: [Int]) -> (key: String, reason: String)? {
        guard shape.count >= 1 else { return ("", "a weight needs at least one dimension") }
        let last = shape[shape.count - 1]
        if let rotate, rotate.block.order(for: last) < RotationConfig.minimumBlock {
            let form = rotate.block == .powerOfTwo ? "a power of two" : "12^t · 2^k"
            return ("rotate.block", "the input dimension \(last) has no Hadamard block of \(RotationConfig.minimumBlock) or more (\(form) dividing it)")
        }
        switch prune {
        case .nOfM(_, let m)? where last % m != 0:
            return ("prune.m", "m = \(m) does not divide the input dimension \(last)")
        case .block(let size, _)? where last % size != 0:
            return ("prune.block_size", "\(size) does not divide the input dimension \(last)")
        default: break
        }
        if let quantize, case .perChannel(let axis) = quantize.granularity, axis >= shape.count {
            return ("quantize.axis", "axis \(axis) does not exist")
        }
        if isCalibrated, shape.count != 2 {
            return (quantize == nil ? "palettize.method" : "quantize.method", "gptq needs a 2-D [out, in] weight")
        }
        if let quantize, quantize.method.isCalibrated {
            if case .perChannel(let axis) = quantize.granularity, axis != 0 {
                return ("quantize.axis", "gptq quantizes per output channel (axis 0), not axis \(axis)")
            }
        }
        if let palettize {
            if case .perGroupedChannel(let axis, let size) = palettize.granularity {
                guard axis < shape.count else { return ("palettize.channel_axis", "axis \(axis) does not exist") }
                guard shape[axis] % size == 0 else {
                    return ("palettize.group_size", "\(size) does not divide the \(shape[axis]) channels of axis \(axis)")
                }
            }
            if palettize.clusterDim > 1, last % palettize.clusterDim != 0 {
                return ("palettize.cluster_dim", "\(palettize.clusterDim) does not divide the input dimension \(last)")
            }
        }
        return nil
    }
}

/// Reads one JSON object of a recipe, tracking which keys were used so that unknown keys are
/// reported with their key path.
struct ConfigReader {
    let file: String
    let keyPath: String
    let pairs: [(key: String, value: JSONValue)]
    private(set) var used: Set<String> = []

    init(_ value: JSONValue, file: String, keyPath: String) throws(CompressionError) {
        guard let pairs = value.objectValue else {
            throw .invalidRecipe(file: file, keyPath: keyPath, reason: "expected an object, found \(value.kindName)")
        }
        self.file = file
        self.keyPath = keyPath
        self.pairs = pairs
    }

    func path(_ key: String) -> String { keyPath.isEmpty ? key : keyPath + "." + key }

    func fail(_ key: String, _ reason: String) -> CompressionError { .invalidRecipe(file: file, keyPath: path(key), reason: reason) }

    mutating func value(_ key: String) -> JSONValue? {
        used.insert(key)
        return pairs.first { $0.key == key }?.value
    }

    mutating func integer(_ key: String, default fallback: Int, allowed: [Int]? = nil, range: ClosedRange<Int>? = nil) throws(CompressionError) -> Int {
        guard let value = value(key) else { return fallback }
        guard let integer = value.integerValue else { throw fail(key, "expected an integer, found \(value.serialized())") }
        if let allowed, !allowed.contains(integer) {
            throw fail(key, "\(integer) is not one of \(allowed.map(String.init).joined(separator: ", "))")
        }
        if let range, !range.contains(integer) { throw fail(key, "\(integer) is outside \(range.lowerBound)…\(range.upperBound)") }
        return integer
    }

    mutating func number(_ key: String, range: ClosedRange<Double>, excludingUpper: Bool = false) throws(CompressionError) -> Double? {
        guard let value = value(key) else { return nil }
        guard let number = value.doubleValue else { throw fail(key, "expected a number, found \(value.serialized())") }
        guard range.contains(number), !(excludingUpper && number == range.upperBound) else {
            throw fail(key, "\(number) is outside \(range.lowerBound)…\(range.upperBound)\(excludingUpper ? " (exclusive)" : "")")
        }
        return number
    }

    mutating func boolean(_ key: String, default fallback: Bool) throws(CompressionError) -> Bool {
        guard let value = value(key) else { return fallback }
        guard case .bool(let flag) = value else { throw fail(key, "expected true or false, found \(value.serialized())") }
        return flag
    }

    mutating func choice(_ key: String, default fallback: String, allowed: [String]) throws(CompressionError) -> String {
        guard let value = value(key) else { return fallback }
        guard let text = value.stringValue else { throw fail(key, "expected a string, found \(value.serialized())") }
        guard allowed.contains(text) else { throw fail(key, "\"\(text)\" is not one of \(allowed.joined(separator: ", "))") }
        return text
    }

    /// `method` (`rtn` or `gptq`) with its `damping` and `act_order`.
    mutating func roundingMethod() throws(CompressionError) -> RoundingMethod {
        guard try choice("method", default: "rtn", allowed: ["rtn", "gptq"]) == "gptq" else { return .roundToNearest }
        return .gptq(damping: try number("damping", range: 0...1) ?? 0.01, actOrder: try boolean("act_order", default: false))
    }

    /// Throws for the first key that no reader asked for.
    func finish() throws(CompressionError) {
        if let unknown = pairs.first(where: { !used.contains($0.key) }) {
            throw fail(unknown.key, "unknown key (expected \(used.sorted().joined(separator: ", ")))")
        }
    }
}

extension OpCompressionConfig {
    /// Decodes and validates an op config at `keyPath` of recipe `file`.
    static func decode(_ value: JSONValue, file: String, keyPath: String) throws(CompressionError) -> OpCompressionConfig {
        var reader = try ConfigReader(value, file: file, keyPath: keyPath)
        var config = OpCompressionConfig()
        if let rotate = reader.value("rotate") {
            var rotation = try ConfigReader(rotate, file: file, keyPath: reader.path("rotate"))
            config.rotate = RotationConfig(seed: UInt64(try rotation.integer("seed", default: 0, range: 0...Int.max)),
                                           block: HadamardRotation.Block(rawValue: try rotation.choice("block", default: "power_of_two",
                                                                                                     allowed: HadamardRotation.Block.allCases.map(\.rawValue)))!)
            try rotation.finish()
        }
        if let prune = reader.value("prune") {
            config.prune = try PruningConfig.decode(prune, file: file, keyPath: reader.path("prune"))
        }
        if let quantize = reader.value("quantize") {
            config.quantize = try QuantizationConfig.decode(quantize, file: file, keyPath: reader.path("quantize"))
        }
        if let palettize = reader.value("palettize") {
            config.palettize = try PalettizationConfig.decode(palettize, file: file, keyPath: reader.path("palettize"))
        }
        try reader.finish()
        if config.quantize != nil && config.palettize != nil {
            throw .invalidRecipe(file: file, keyPath: keyPath, reason: "use either quantize or palettize, not both")
        }
        if config.prune == nil && config.quantize == nil && config.palettize == nil {
            throw .invalidRecipe(file: file, keyPath: keyPath, reason: "expected at least one of prune, quantize, palettize (or null to leave tensors alone)")
        }
        if config.prune != nil, config.rotate != nil {
            throw .invalidRecipe(file: file, keyPath: keyPath + ".rotate",
                                 reason: "rotation cannot be combined with pruning (a rotated row has no small weights to prune)")
        }
        if config.prune != nil, config.isCalibrated {
            throw .invalidRecipe(file: file, keyPath: keyPath + (config.quantize == nil ? ".palettize" : ".quantize") + ".method",
                                 reason: "gptq cannot be combined with pruning")
        }
        if config.prune != nil, let palettize = config.palettize, palettize.clusterDim > 1 {
            throw .invalidRecipe(file: file, keyPath: keyPath + ".palettize.cluster_dim", reason: "vector palettes cannot be combined with pruning")
        }
        return config
    }
}

extension QuantizationConfig {
    static func decode(_ value: JSONValue, file: String, keyPath: String) throws(CompressionError) -> QuantizationConfig {
        var reader = try ConfigReader(value, file: file, keyPath: keyPath)
        var config = QuantizationConfig()
        config.bits = try reader.integer("bits", default: 8, range: 2...8)
        config.symmetric = try reader.choice("mode", default: "symmetric", allowed: ["symmetric", "affine"]) == "symmetric"
        config.signed = try reader.boolean("signed", default: true)
        switch try reader.choice("granularity", default: "per_channel", allowed: ["per_tensor", "per_channel", "per_block"]) {
        case "per_tensor": config.granularity = .perTensor
        case "per_channel": config.granularity = .perChannel(axis: try reader.integer("axis", default: 0, range: 0...7))
        default: config.granularity = .perBlock(blockSize: try reader.integer("block_size", default: 32, range: 1...65536))
        }
        switch try reader.choice("scale_dtype", default: "f16", allowed: ["f16", "f32", "u8"]) {
        case "f16": config.scaleDType = .f16
        case "f32": config.scaleDType = .f32
        default:
            guard case .perBlock = config.granularity else {
                throw reader.fail("scale_dtype", "integer block scales (\"u8\") need \"granularity\": \"per_block\"")
            }
            config.scaleDType = .u8
            guard config.bits <= (config.symmetric ? 6 : 4) else {
                throw reader.fail("scale_dtype", "integer block scales (\"u8\") need bits ≤ 4 (affine) or ≤ 6 (symmetric)")
            }
        }
        config.clipSearch = try reader.boolean("clip_search", default: false)
        config.method = try reader.roundingMethod()
        try reader.finish()
        return config
    }
}

extension PalettizationConfig {
    static func decode(_ value: JSONValue, file: String, keyPath: String) throws(CompressionError) -> PalettizationConfig {
        var reader = try ConfigReader(value, file: file, keyPath: keyPath)
        var config = PalettizationConfig()
        config.bits = try reader.integer("bits", default: 4, allowed: [1, 2, 3, 4, 6, 8])
        config.clusterDim = try reader.integer("cluster_dim", default: 1, allowed: [1, 2, 4])
        switch try reader.choice("mode", default: "kmeans", allowed: ["kmeans", "uniform", "unique", "custom"]) {
        case "kmeans": config.mode = .kmeans
        case "uniform": config.mode = .uniform
        case "unique": config.mode = .unique
        default:
            guard let lut = reader.value("lut")?.arrayValue else { throw reader.fail("lut", "mode \"custom\" needs a lut array of numbers") }
            let entries = lut.compactMap { $0.doubleValue.map(Float.init) }
            let limit = (1 << config.bits) * config.clusterDim
            guard entries.count == lut.count, !entries.isEmpty, entries.allSatisfy(\.isFinite) else {
                throw reader.fail("lut", "expected finite numbers")
            }
            guard entries.count <= limit, entries.count % config.clusterDim == 0 else {
                throw reader.fail("lut", "\(entries.count) values do not fit \(1 << config.bits) entries of \(config.clusterDim)")
            }
            config.mode = .custom(entries)
        }
        if config.clusterDim > 1, config.mode == .uniform || config.mode == .unique {
            throw reader.fail("mode", "vector palettes (cluster_dim > 1) support kmeans and custom")
        }
        switch try reader.choice("granularity", default: "per_tensor", allowed: ["per_tensor", "per_grouped_channel"]) {
        case "per_tensor": config.granularity = .perTensor
        default:
            config.granularity = .perGroupedChannel(axis: try reader.integer("channel_axis", default: 0, range: 0...7),
                                                    groupSize: try reader.integer("group_size", default: 16, range: 1...1 << 30))
        }
        config.perChannelScale = try reader.boolean("per_channel_scale", default: false)
        config.method = try reader.roundingMethod()
        if config.method.isCalibrated {
            if config.clusterDim > 1, case .perGroupedChannel(let axis, _) = config.granularity, axis != 0 {
                throw reader.fail("method", "gptq on vector palettes needs LUTs per tensor or grouped along the output channels (channel_axis 0)")
            }
            if config.mode == .unique { throw reader.fail("method", "gptq would make unique (lossless) palettization lossy") }
        }
        switch try reader.choice("lut_dtype", default: "f16", allowed: ["f16", "f32", "int8"]) {
        case "f16": config.lutDType = .f16
        case "f32": config.lutDType = .f32
        default: config.lutDType = .i8
        }
        try reader.finish()
        return config
    }
}

extension PruningConfig {
    static func decode(_ value: JSONValue, file: String, keyPath: String) throws(CompressionError) -> PruningConfig {
        var reader = try ConfigReader(value, file: file, keyPath: keyPath)
        let config: PruningConfig
        switch try reader.choice("mode", default: "magnitude", allowed: ["magnitude", "n_m", "block"]) {
        case "magnitude":
            guard let sparsity = try reader.number("target_sparsity", range: 0...1, excludingUpper: true) else {
                throw reader.fail("target_sparsity", "required for magnitude pruning")
            }
            config = .magnitude(sparsity: sparsity)
        case "n_m":
            let m = try reader.integer("m", default: 4, range: 2...64)
            let n = try reader.integer("n", default: 2, range: 1...64)
            guard n < m else { throw reader.fail("n", "n (\(n)) must be smaller than m (\(m))") }
            config = .nOfM(n: n, m: m)
        default:
            let size = try reader.integer("block_size", default: 4, range: 1...65536)
            guard let sparsity = try reader.number("target_sparsity", range: 0...1, excludingUpper: true) else {
                throw reader.fail("target_sparsity", "required for block pruning")
            }
            config = .block(blockSize: size, sparsity: sparsity)
        }
        try reader.finish()
        return config
    }
}
