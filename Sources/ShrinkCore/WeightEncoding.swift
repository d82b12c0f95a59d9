/// How a weight tensor is stored: the one vocabulary shared by the compression passes, the
/// compressed container and the kernels.
///
/// An encoded tensor keeps its logical shape (row-major, the last axis is the input axis of a
/// linear layer) and stores named parts (see `EncodedTensor`). Decoding to dense is one reference
/// function per case (`EncodedTensor.decode()`).
public indirect enum WeightEncoding: Equatable, Sendable {
    /// Plain values in a float dtype. Part `values`.
    case dense(DType)
    /// Linear quantization. Parts `codes`, `scales`, and `zero_points` unless symmetric.
    case affine(AffineEncoding)
    /// Look-up table. Parts `indices`, `lut`, `lut_scales` and optional `lut_zero_points` (int8
    /// LUTs), `channel_scales` (optional).
    case palette(PaletteEncoding)
    /// Pruned: part `mask` marks the kept elements; `base` encodes only the kept elements, in
    /// row-major order, with its groups (channels, blocks) taken from their original positions.
    case sparse(SparseEncoding, base: WeightEncoding)
    /// Incoherence processing: `base` encodes `W' = W · Rᵀ`, the weight with its input (last) axis
    /// rotated by the randomized Hadamard rotation `R` (`HadamardRotation`) in blocks of
    /// `blockSize` inputs, whose signs are part `rotation_signs` (U8, one bit per input, set for
    /// `−1`). The weight is `W = W' · R`, and a layer computes `y = W' · (R · x)`. The base is any
    /// encoding but another rotation.
    case rotated(blockSize: Int, base: WeightEncoding)

    /// A short description such as `affine int4 per-block 32` or `sparse 2:4 + palette 4-bit`.
    public var summary: String {
        switch self {
        case .dense(let dtype): dtype.rawValue
        case .affine(let layout): layout.summary
        case .palette(let layout): layout.summary
        case .sparse(let layout, let base): "sparse \(layout.pattern.summary) + \(base.summary)"
        case .rotated(let block, let base): "hadamard-rotated \(block) + \(base.summary)"
        }
    }
}

/// How scales (and zero points) are shared.
public enum QuantizationGranularity: Equatable, Sendable {
    /// One scale for the whole tensor.
    case perTensor
    /// One scale per index along `axis`.
    case perChannel(axis: Int)
    /// One scale per `blockSize` consecutive elements along the last (input) axis; the last block
    /// of a row may be shorter.
    case perBlock(blockSize: Int)
}

/// Linear quantization: `w = scale · (q − zeroPoint)`, or with float offsets `w = scale · q − offset`.
///
/// Codes are stored unsigned, `c ∈ [0, 2^bits − 1]`, packed (see `PackedBits`). For signed
/// quantization `q = c − 2^(bits−1)`, otherwise `q = c`. Symmetric quantization has no stored
/// zero point: it is 0 for signed and `2^(bits−1)` for unsigned codes, so both decode alike.
/// Affine zero points are integers in the range of `q`, stored `I8` (signed) or `U8` (unsigned).
///
/// Integer block scales (`U8` or `I8`, per-block only): `scales` holds an integer multiplier `m`
/// per block, and the block's scale is `m · S` with `S` a float per row (`channel_scales`) or,
/// with `superBlockSize`, per super-block of that many elements of a row (`super_scales`): the
/// two-level scales of ggml's K-quants.
///
/// Float offsets (`offsetDType`, not symmetric, no zero points): part `offsets` holds one offset
/// per scale group, `F16`/`F32` values (ggml's `Q4_1`, `Q5_1`: `w = d · q + m` stores `−m`), or
/// `U8` integer multipliers `k` of a float per super-block (`super_offsets`, `offset = k · S_o`:
/// the K-quants' `w = d·sc·q − dmin·m`).
public struct AffineEncoding: Equatable, Sendable {
    public var bits: Int
    public var signed: Bool
    public var symmetric: Bool
    public var granularity: QuantizationGranularity
    /// `F16`, `F32`, or `U8`/`I8` for integer block scales.
    public var scaleDType: DType
    /// Elements of a row that share a second-level scale (and offset), for integer multipliers.
    public var superBlockSize: Int?
    /// `F16`/`F32` offsets, `U8` offset multipliers, or nil (zero points as `symmetric` says).
    public var offsetDType: DType?

    public init(bits: Int, signed: Bool, symmetric: Bool, granularity: QuantizationGranularity, scaleDType: DType,
                superBlockSize: Int? = nil, offsetDType: DType? = nil) {
        self.bits = bits
        self.signed = signed
        self.symmetric = symmetric
        self.granularity = granularity
        self.scaleDType = scaleDType
        self.superBlockSize = superBlockSize
        self.offsetDType = offsetDType
    }

    /// Whether block scales are integer multipliers of a float per row or per super-block.
    public var hasIntegerScales: Bool { scaleDType == .u8 || scaleDType == .i8 }

    /// The offset between stored codes and `q`.
    public var codeOffset: Int { signed ? 1 << (bits - 1) : 0 }

    /// The zero point implied by a symmetric encoding, in `q` units.
    public var implicitZeroPoint: Int { symmetric && !signed ? 1 << (bits - 1) : 0 }

    public var summary: String {
        let type = (signed ? "int" : "uint") + String(bits)
        let scheme = symmetric ? "symmetric" : "affine"
        var text = "\(type) \(scheme) \(granularity.summary)"
        if hasIntegerScales { text += superBlockSize.map { " two-level \($0)" } ?? " integer-scaled" }
        if let offsetDType { text += offsetDType == .u8 ? " integer offsets" : " float offsets" }
        return text
    }
}

/// Palettization: each element (or vector of `vectorSize` consecutive elements along the last
/// axis) is an index into a look-up table of `2^bits` entries.
///
/// `lut` has shape `[groups, 2^bits, vectorSize]`. With `perChannelScale`, decoded values are
/// multiplied by `channel_scales[c]`, `c` the index along the grouping axis (axis 0 for a per-tensor
/// LUT). An `I8` LUT decodes as `(lut − lut_zero_points[group]) · lut_scales[group]` (zero points
/// I8, optional, 0 when absent). With `blockScales`, decoded values are
/// also multiplied by a scale per block of the last axis (`block_scales`; integer multipliers of a
/// float per super-block, `super_scales`, when `I8`/`U8`): a non-uniform grid with block scales,
/// ggml's `IQ4_NL` (`w = d · grid[q]`) and `IQ4_XS` (`w = d · (ls − 32) · grid[q]`).
public struct PaletteEncoding: Equatable, Sendable {
    public var bits: Int
    public var granularity: PaletteGranularity
    public var vectorSize: Int
    /// `F16`, `F32` or `I8`.
    public var lutDType: DType
    public var perChannelScale: Bool
    public var blockScales: BlockScales?

    public init(bits: Int, granularity: PaletteGranularity, vectorSize: Int, lutDType: DType, perChannelScale: Bool,
                blockScales: BlockScales? = nil) {
        self.bits = bits
        self.granularity = granularity
        self.vectorSize = vectorSize
        self.lutDType = lutDType
        self.perChannelScale = perChannelScale
        self.blockScales = blockScales
    }

    /// Entries per LUT.
    public var entries: Int { 1 << bits }

    /// The axis channel scales and grouped LUTs run along.
    public var channelAxis: Int {
        if case .perGroupedChannel(let axis, _) = granularity { return axis }
        return 0
    }

    public var summary: String {
        var text = "palette \(bits)-bit \(granularity.summary)"
        if vectorSize > 1 { text += " vector \(vectorSize)" }
        if lutDType == .i8 { text += " int8-lut" }
        if perChannelScale { text += " channel-scaled" }
        if let blockScales { text += " block-scaled \(blockScales.blockSize)" + (blockScales.superBlockSize.map { " two-level \($0)" } ?? "") }
        return text
    }
}

/// A scale per block of `blockSize` elements along the last axis (the last block of a row may be
/// shorter): `F16`/`F32` values, or `I8`/`U8` integer multipliers of a float scale per super-block
/// of `superBlockSize` elements of a row (part `super_scales`).
public struct BlockScales: Equatable, Sendable {
    public var blockSize: Int
    public var dtype: DType
    public var superBlockSize: Int?

    public init(blockSize: Int, dtype: DType, superBlockSize: Int? = nil) {
        self.blockSize = blockSize
        self.dtype = dtype
        self.superBlockSize = superBlockSize
    }
}

/// Which elements share a look-up table.
public enum PaletteGranularity: Equatable, Sendable {
    case perTensor
    /// One LUT per `groupSize` consecutive indices along `axis`.
    case perGroupedChannel(axis: Int, groupSize: Int)

    public var summary: String {
        switch self {
        case .perTensor: "per-tensor"
        case .perGroupedChannel(let axis, let size): "grouped \(size) (axis \(axis))"
        }
    }
}

/// Which elements were pruned; the kept ones are always marked in a bit mask.
public struct SparseEncoding: Equatable, Sendable {
    public var pattern: SparsityPattern

    public init(pattern: SparsityPattern) { self.pattern = pattern }
}

/// The structure a pruning pass guaranteed.
public enum SparsityPattern: Equatable, Sendable {
    /// Any elements (magnitude pruning).
    case unstructured
    /// At most `n` kept in every `m` consecutive elements along the last axis.
    case nOfM(n: Int, m: Int)
    /// Whole runs of `blockSize` consecutive elements along the last axis are kept or pruned.
    case blocks(blockSize: Int)

    public var summary: String {
        switch self {
        case .unstructured: "unstructured"
        case .nOfM(let n, let m): "\(n):\(m)"
        case .blocks(let size): "blocks of \(size)"
        }
    }
}

extension QuantizationGranularity {
    public var summary: String {
        switch self {
        case .perTensor: "per-tensor"
        case .perChannel(let axis): "per-channel (axis \(axis))"
        case .perBlock(let size): "per-block \(size)"
        }
    }
}
