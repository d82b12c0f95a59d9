/// A weight tensor in a `WeightEncoding`: its logical shape and dtype, and its parts.
///
/// Part shapes: `values` the logical shape (dense); `codes`/`indices` `[bytes]` U8 packed
/// (`PackedBits`); `scales`, `zero_points`, `lut_scales` `[groups]`; `lut`
/// `[groups, 2^bits, vectorSize]`; `channel_scales` `[channels]`; `mask` `[bytes]` U8 packed 1-bit,
/// one bit per logical element. The initializer checks every part against the encoding, so a
/// decoded tensor never reads out of bounds.
public struct EncodedTensor: Sendable {
    /// The tensor's name in the model.
    public let name: String
    /// The dense shape the encoding represents.
    public let shape: [Int]
    /// The dtype the tensor had before compression.
    public let sourceDType: DType
    public let encoding: WeightEncoding
    public let parts: [String: DenseTensor]

    /// Checks the parts against the encoding and shape.
    /// - Throws: `ShrinkCoreError.invalidEncodedTensor` naming the tensor and the part.
    public init(name: String, shape: [Int], sourceDType: DType, encoding: WeightEncoding,
                parts: [String: DenseTensor]) throws(ShrinkCoreError) {
        self.name = name
        self.shape = shape
        self.sourceDType = sourceDType
        self.encoding = encoding
        self.parts = parts
        guard let count = Shape.elementCount(shape) else { throw .invalidShape(shape) }
        try EncodingLayout.validate(encoding, shape: shape, elements: count, parts: parts, name: name)
    }

    /// A tensor whose parts were validated as a part of another's.
    private init(validated name: String, shape: [Int], sourceDType: DType, encoding: WeightEncoding, parts: [String: DenseTensor]) {
        self.name = name
        self.shape = shape
        self.sourceDType = sourceDType
        self.encoding = encoding
        self.parts = parts
    }

    /// For a `.rotated` tensor, the stored `W'` (the base encoding with its parts) and the rotation
    /// `R` of its input axis (`W = W' · R`); nil for other encodings.
    public var inputRotation: (rotated: EncodedTensor, rotation: HadamardRotation)? {
        guard case .rotated(let block, let base) = encoding, let signs = parts["rotation_signs"], let columns = shape.last,
              let rotation = HadamardRotation(size: columns, blockSize: block, packedSigns: signs.bytes) else { return nil }
        var baseParts = parts
        baseParts["rotation_signs"] = nil
        return (EncodedTensor(validated: name, shape: shape, sourceDType: sourceDType, encoding: base, parts: baseParts), rotation)
    }

    /// The number of logical elements.
    public var elementCount: Int { shape.reduce(1, *) }

    /// Bytes of all parts.
    public var byteCount: Int { parts.values.reduce(0) { $0 + $1.byteCount } }

    /// Stored bits per logical element (all parts included).
    public var bitsPerWeight: Double { elementCount == 0 ? 0 : Double(byteCount * 8) / Double(elementCount) }

    /// The affine layout of the encoding (of its base, if sparse).
    var affineLayout: AffineEncoding? {
        switch encoding {
        case .affine(let layout), .sparse(_, .affine(let layout)): layout
        default: nil
        }
    }

    /// The float scale of each group of an affine encoding (of its base, if sparse): stored
    /// scales, or with integer block scales the multiplier times its row's (or super-block's) scale.
    public func affineScales() -> [Float] {
        guard let stored = parts["scales"] else { return [] }
        guard stored.dtype == .u8 || stored.dtype == .i8, let layout = affineLayout, case .perBlock(let block) = layout.granularity,
              let second = parts[layout.superBlockSize == nil ? "channel_scales" : "super_scales"] else { return stored.floats() }
        return Self.twoLevel(stored.floats(), second.floats(), blockSize: block, superBlockSize: layout.superBlockSize, columns: shape.last ?? 1)
    }

    /// The float offset of each group of an affine encoding with offsets (`w = scale · q − offset`),
    /// or nil: stored offsets, or integer multipliers times their super-block's offset scale.
    public func affineOffsets() -> [Float]? {
        guard let stored = parts["offsets"], let layout = affineLayout else { return nil }
        guard stored.dtype == .u8, case .perBlock(let block) = layout.granularity, let second = parts["super_offsets"] else { return stored.floats() }
        return Self.twoLevel(stored.floats(), second.floats(), blockSize: block, superBlockSize: layout.superBlockSize, columns: shape.last ?? 1)
    }

    /// The scale of each block of a palette with block scales (row-major, blocks of a row
    /// consecutive), or nil.
    /// A palette's LUTs as floats, group after group (`[groups, entries, vector size]`): an `I8`
    /// LUT decodes as `(lut − lut_zero_points[g]) · lut_scales[g]` (zero points 0 when absent);
    /// empty for other encodings.
    public func paletteLUTs() -> [Float] { Self.paletteLUTs(parts) }

    /// `paletteLUTs()` of a palette's parts.
    public static func paletteLUTs(_ parts: [String: DenseTensor]) -> [Float] {
        guard var lut = parts["lut"]?.floats() else { return [] }
        guard let scales = parts["lut_scales"]?.floats(), !scales.isEmpty else { return lut }
        let zeroPoints = parts["lut_zero_points"]?.floats()
        let width = lut.count / scales.count
        for group in scales.indices {
            for entry in 0..<width { lut[group * width + entry] = (lut[group * width + entry] - (zeroPoints?[group] ?? 0)) * scales[group] }
        }
        return lut
    }

    public func paletteBlockScales() -> [Float]? {
        guard case .palette(let layout) = encoding, let scaling = layout.blockScales, let stored = parts["block_scales"] else { return nil }
        guard let superBlock = scaling.superBlockSize, let second = parts["super_scales"] else { return stored.floats() }
        return Self.twoLevel(stored.floats(), second.floats(), blockSize: scaling.blockSize, superBlockSize: superBlock, columns: shape.last ?? 1)
    }

    /// `multipliers[i] · second[j]` with `j` the row of block `i` (no super-blocks) or its
    /// super-block within the row (`superBlockSize` elements; blocks never straddle one).
    static func twoLevel(_ multipliers: [Float], _ second: [Float], blockSize: Int, superBlockSize: Int?, columns: Int) -> [Float] {
        let blocksPerRow = (columns + blockSize - 1) / blockSize
        let secondPerRow = superBlockSize.map { (columns + $0 - 1) / $0 } ?? 1
        return multipliers.indices.map { index in
            let (row, block) = index.quotientAndRemainder(dividingBy: blocksPerRow)
            return multipliers[index] * second[row * secondPerRow + (superBlockSize.map { block * blockSize / $0 } ?? 0)]
        }
    }

    /// The reference decoding to dense `Float` values in row-major order.
    public func decode() -> [Float] {
        let reader = EncodedTensorReader(self)
        var output = [Float](repeating: 0, count: elementCount)
        output.withUnsafeMutableBufferPointer { reader.decode(flatRange: 0..<elementCount, into: $0.baseAddress!) }
        return output
    }
}

/// Group arithmetic shared by the passes, the reference decoder and the kernels.
public enum EncodingLayout {
    /// Rows of `shape`: the elements over the last (input) axis's length.
    public static func rowCount(_ shape: [Int]) -> Int { shape.dropLast().reduce(1, *) }

    /// The coordinate of row-major flat index `position` along `axis` of `shape`.
    @inlinable
    public static func coordinate(_ position: Int, axis: Int, shape: [Int]) -> Int {
        var stride = 1
        for dimension in shape[(axis + 1)...] { stride *= dimension }
        return (position / stride) % shape[axis]
    }

    /// Number of scale groups of an affine granularity over `shape`.
    public static func groupCount(_ granularity: QuantizationGranularity, shape: [Int]) -> Int {
        switch granularity {
        case .perTensor: return 1
        case .perChannel(let axis): return shape[axis]
        case .perBlock(let blockSize):
            let last = shape.last ?? 1
            return (shape.dropLast().reduce(1, *)) * ((last + blockSize - 1) / blockSize)
        }
    }

    /// The scale group of flat index `position`.
    public static func group(of position: Int, _ granularity: QuantizationGranularity, shape: [Int]) -> Int {
        switch granularity {
        case .perTensor: return 0
        case .perChannel(let axis): return coordinate(position, axis: axis, shape: shape)
        case .perBlock(let blockSize):
            let last = shape.last ?? 1
            let blocksPerRow = (last + blockSize - 1) / blockSize
            return (position / last) * blocksPerRow + (position % last) / blockSize
        }
    }

    /// Number of LUTs of a palette granularity over `shape`.
    public static func groupCount(_ granularity: PaletteGranularity, shape: [Int]) -> Int {
        switch granularity {
        case .perTensor: return 1
        case .perGroupedChannel(let axis, let groupSize): return shape[axis] / groupSize
        }
    }

    /// The LUT group of flat index `position`.
    public static func group(of position: Int, _ granularity: PaletteGranularity, shape: [Int]) -> Int {
        switch granularity {
        case .perTensor: return 0
        case .perGroupedChannel(let axis, let groupSize): return coordinate(position, axis: axis, shape: shape) / groupSize
        }
    }

    /// Checks that `parts` hold exactly what `encoding` needs for `elements` encoded values.
    static func validate(_ encoding: WeightEncoding, shape: [Int], elements: Int, parts: [String: DenseTensor],
                         name: String) throws(ShrinkCoreError) {
        func fail(_ reason: String) -> ShrinkCoreError { .invalidEncodedTensor(name: name, reason: reason) }
        func part(_ key: String, _ dtypes: [DType], count: Int) throws(ShrinkCoreError) -> DenseTensor {
            guard let tensor = parts[key] else { throw fail("missing part '\(key)'") }
            guard dtypes.contains(tensor.dtype) else {
                throw fail("part '\(key)' is \(tensor.dtype.rawValue), expected \(dtypes.map(\.rawValue).joined(separator: " or "))")
            }
            guard tensor.elementCount == count else { throw fail("part '\(key)' has \(tensor.elementCount) elements, expected \(count)") }
            return tensor
        }
        func axisValid(_ axis: Int) throws(ShrinkCoreError) {
            guard axis >= 0 && axis < shape.count else { throw fail("axis \(axis) out of range for shape \(Shape.describe(shape))") }
        }
        switch encoding {
        case .dense(let dtype):
            guard dtype.isFloatingPoint else { throw fail("dense encoding must be a float dtype, got \(dtype.rawValue)") }
            let values = try part("values", [dtype], count: elements)
            guard values.shape == shape || elements != shape.reduce(1, *) else {
                throw fail("part 'values' has shape \(Shape.describe(values.shape)), expected \(Shape.describe(shape))")
            }
        case .affine(let layout):
            guard (2...8).contains(layout.bits) else { throw fail("affine bits \(layout.bits) outside 2…8") }
            guard [.f16, .f32, .u8, .i8].contains(layout.scaleDType) else { throw fail("scale dtype must be F16, F32, U8 or I8") }
            guard !shape.isEmpty else { throw fail("quantized tensors need at least one dimension") }
            switch layout.granularity {
            case .perTensor: break
            case .perChannel(let axis): try axisValid(axis)
            case .perBlock(let size): guard size > 0 else { throw fail("block size must be positive") }
            }
            let groups = groupCount(layout.granularity, shape: shape)
            _ = try part("codes", [.u8], count: PackedBits.byteCount(count: elements, bits: layout.bits))
            _ = try part("scales", [layout.scaleDType], count: groups)
            if let superBlock = layout.superBlockSize {
                guard case .perBlock(let size) = layout.granularity, layout.hasIntegerScales, superBlock > 0, superBlock % size == 0 else {
                    throw fail("super-blocks need integer per-block scales and a multiple of the block size")
                }
            }
            if layout.hasIntegerScales {
                guard case .perBlock = layout.granularity else { throw fail("integer (U8, I8) scales need per-block granularity") }
                if let superBlock = layout.superBlockSize {
                    _ = try part("super_scales", [.f16, .f32], count: rowCount(shape) * (((shape.last ?? 1) + superBlock - 1) / superBlock))
                } else {
                    _ = try part("channel_scales", [.f16, .f32], count: rowCount(shape))
                }
            }
            if let offsetDType = layout.offsetDType {
                guard !layout.symmetric else { throw fail("offsets replace the zero points of an affine (not symmetric) encoding") }
                guard [.f16, .f32, .u8].contains(offsetDType) else { throw fail("offset dtype must be F16, F32 or U8") }
                _ = try part("offsets", [offsetDType], count: groups)
                if offsetDType == .u8 {
                    guard let superBlock = layout.superBlockSize else { throw fail("integer (U8) offsets need super-blocks") }
                    _ = try part("super_offsets", [.f16, .f32], count: rowCount(shape) * (((shape.last ?? 1) + superBlock - 1) / superBlock))
                }
            } else if !layout.symmetric {
                _ = try part("zero_points", [layout.signed ? .i8 : .u8], count: groups)
            }
        case .palette(let layout):
            guard [1, 2, 3, 4, 6, 8].contains(layout.bits) else { throw fail("palette bits \(layout.bits) not in 1, 2, 3, 4, 6, 8") }
            guard [1, 2, 4].contains(layout.vectorSize) else { throw fail("vector size \(layout.vectorSize) not in 1, 2, 4") }
            guard [.f16, .f32, .i8].contains(layout.lutDType) else { throw fail("LUT dtype must be F16, F32 or I8") }
            guard !shape.isEmpty else { throw fail("palettized tensors need at least one dimension") }
            try axisValid(layout.channelAxis)
            if case .perGroupedChannel(let axis, let size) = layout.granularity {
                guard size > 0, shape[axis] % size == 0 else { throw fail("group size \(size) does not divide dimension \(shape[axis])") }
            }
            guard elements % layout.vectorSize == 0, (shape.last ?? 1) % layout.vectorSize == 0 else {
                throw fail("vector size \(layout.vectorSize) does not divide the last dimension \(shape.last ?? 1)")
            }
            let groups = groupCount(layout.granularity, shape: shape)
            _ = try part("indices", [.u8], count: PackedBits.byteCount(count: elements / layout.vectorSize, bits: layout.bits))
            _ = try part("lut", [layout.lutDType], count: groups * layout.entries * layout.vectorSize)
            if layout.lutDType == .i8 {
                _ = try part("lut_scales", [.f32], count: groups)
                if parts["lut_zero_points"] != nil { _ = try part("lut_zero_points", [.i8], count: groups) }
            } else if parts["lut_zero_points"] != nil {
                throw fail("lut_zero_points belong to I8 LUTs")
            }
            if layout.perChannelScale { _ = try part("channel_scales", [.f16, .f32], count: shape[layout.channelAxis]) }
            if let scaling = layout.blockScales {
                let columns = shape.last ?? 1, rows = rowCount(shape)
                guard elements == shape.reduce(1, *) else { throw fail("pruned palettes cannot have block scales") }
                guard scaling.blockSize > 0, scaling.blockSize % layout.vectorSize == 0 else { throw fail("block size must be a positive multiple of the vector size") }
                guard [.f16, .f32, .i8, .u8].contains(scaling.dtype) else { throw fail("block scale dtype must be F16, F32, I8 or U8") }
                _ = try part("block_scales", [scaling.dtype], count: rows * ((columns + scaling.blockSize - 1) / scaling.blockSize))
                if scaling.dtype == .i8 || scaling.dtype == .u8 {
                    guard let superBlock = scaling.superBlockSize, superBlock > 0, superBlock % scaling.blockSize == 0 else {
                        throw fail("integer block scales need super-blocks, a multiple of the block size")
                    }
                    _ = try part("super_scales", [.f16, .f32], count: rows * ((columns + superBlock - 1) / superBlock))
                }
            }
        case .rotated(let block, let base):
            if case .rotated = base { throw fail("rotations do not nest") }
            guard let columns = shape.last, columns > 0, elements == shape.reduce(1, *) else { throw fail("a rotation needs a non-empty input axis") }
            guard block > 0, columns % block == 0, HadamardRotation.factors(of: block) != nil else {
                throw fail("rotation block \(block) is not 12^t · 2^k dividing the input dimension \(columns)")
            }
            let signs = try part("rotation_signs", [.u8], count: PackedBits.byteCount(count: columns, bits: 1))
            let padding = signs.byteCount * 8 - columns
            if padding > 0, signs.bytes[signs.byteCount - 1] >> (8 - padding) != 0 { throw fail("rotation_signs has bits set past the last input") }
            try validate(base, shape: shape, elements: elements, parts: parts, name: name)
        case .sparse(_, let base):
            if case .sparse = base { throw fail("sparse encodings do not nest") }
            if case .rotated = base { throw fail("a rotation wraps the sparse encoding, not the reverse") }
            if case .palette(let layout) = base, layout.vectorSize > 1 { throw fail("vector palettes cannot be sparse") }
            let total = shape.reduce(1, *)
            let mask = try part("mask", [.u8], count: PackedBits.byteCount(count: total, bits: 1))
            var kept = 0
            for byte in mask.bytes { kept += byte.nonzeroBitCount }
            let padding = mask.byteCount * 8 - total
            if padding > 0, mask.bytes[mask.byteCount - 1] >> (8 - padding) != 0 { throw fail("mask has bits set past the last element") }
            try validate(base, shape: shape, elements: kept, parts: parts, name: name)
        }
    }
}
