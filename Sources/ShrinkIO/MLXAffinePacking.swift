import ShrinkCore

/// An affine-encoded weight in MLX's quantized layout (`mlx.core.quantize`, mode `affine`): per
/// group of `groupSize` consecutive inputs of a row, `w = scale · c + bias` with `c` the unsigned
/// code, `c ∈ [0, 2^bits)`.
///
/// `words` are the codes as MLX stores them: row by row, `columns · bits / 32` little-endian
/// `UInt32` per row, code `i` of a row at bits `[i·bits, (i+1)·bits)` of the row's bit stream,
/// least significant bit first (3-, 5- and 6-bit codes straddle words). `scales` and `biases` are
/// `Float`, `columns / groupSize` per row.
public struct MLXAffineTensor: Sendable, Equatable {
    public var rows: Int
    public var columns: Int
    public var bits: Int
    public var groupSize: Int
    public var words: [UInt32]
    public var scales: [Float]
    public var biases: [Float]

    /// Words per row.
    public var wordsPerRow: Int { columns * bits / 32 }

    /// The same tensor with its rows reordered: row `i` of the result is row `order[i]`.
    public func permutingRows(_ order: [Int]) -> MLXAffineTensor {
        var result = self
        result.words = MLXAffinePacking.reorderRows(words, width: wordsPerRow, order: order)
        result.scales = MLXAffinePacking.reorderRows(scales, width: columns / groupSize, order: order)
        result.biases = MLXAffinePacking.reorderRows(biases, width: columns / groupSize, order: order)
        return result
    }
}

/// Lays an affine-encoded tensor out as MLX's quantized weight (`MLXAffineTensor`).
///
/// Shrink's `w = s · (q − z)` (`q = c − codeOffset`, `z` the zero point) is `s · c + b` with
/// `b = −s · (codeOffset + z)`, and `w = s · q − o` (float offsets) is `s · c + b` with
/// `b = −(o + s · codeOffset)`. The group size is the largest MLX supports (128, 64, 32) that
/// divides both the rows and Shrink's scale groups (a per-row scale repeats over its groups).
///
/// Exactness is checked, not assumed: every weight computed as MLX does, `s · c + b` in `Float`
/// both with one rounding (a fused multiply-add) and with two, must equal Shrink's reference
/// decoding bit for bit, so the scales and biases are kept in `Float` (with `F16` the sums would
/// round again). Cost: O(n) in the tensor's weights.
public enum MLXAffinePacking {
    /// Rows of `width` values of `values` in `order`: row `i` of the result is row `order[i]`.
    public static func reorderRows<T>(_ values: [T], width: Int, order: [Int]) -> [T] {
        order.flatMap { values[($0 * width)..<(($0 + 1) * width)] }
    }

    /// The group sizes MLX's affine quantization accepts, largest first.
    public static let groupSizes = [128, 64, 32]
    /// The code widths MLX's affine quantization accepts.
    public static let bitWidths: Set<Int> = [2, 3, 4, 5, 6, 8]

    /// Why a tensor cannot be laid out for MLX.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The encoding is not a plain affine one (a palette, pruned or rotated weight).
        case notAffine(encoding: String)
        /// MLX has no `bits`-bit codes.
        case bits(Int)
        /// No MLX group size fits rows of `columns` with scale groups of `run` inputs.
        case groups(columns: Int, run: Int)
        /// Weight `index` decodes to `shrink` in Shrink and to `mlx` in MLX's arithmetic.
        case notExact(index: Int, shrink: Float, mlx: Float)

        public var description: String {
            switch self {
            case .notAffine(let encoding): "\(encoding) is not MLX's affine quantization"
            case .bits(let bits): "MLX has no \(bits)-bit codes (it has \(MLXAffinePacking.bitWidths.sorted().map(String.init).joined(separator: ", ")))"
            case .groups(let columns, let run):
                "no MLX group size (\(MLXAffinePacking.groupSizes.map(String.init).joined(separator: ", "))) divides rows of \(columns) and scale groups of \(run)"
            case .notExact(let index, let shrink, let mlx): "weight \(index) decodes to \(shrink) but to \(mlx) as MLX computes it"
            }
        }
    }

    /// `tensor` in MLX's layout.
    /// - Throws: `Failure` when MLX's affine layout cannot hold the tensor exactly.
    public static func pack(_ tensor: EncodedTensor) throws(Failure) -> MLXAffineTensor {
        guard case .affine(let layout) = tensor.encoding else { throw .notAffine(encoding: tensor.encoding.summary) }
        guard bitWidths.contains(layout.bits) else { throw .bits(layout.bits) }
        let columns = tensor.shape.last ?? 1
        let rows = EncodingLayout.rowCount(tensor.shape)
        let run: Int
        switch layout.granularity {
        case .perTensor: run = columns
        case .perChannel(let axis): run = axis == tensor.shape.count - 1 ? 1 : columns
        case .perBlock(let blockSize): run = blockSize
        }
        guard let groupSize = groupSizes.first(where: { columns % $0 == 0 && run % $0 == 0 }) else {
            throw .groups(columns: columns, run: run)
        }
        let stored = tensor.affineScales()
        let offsets = tensor.affineOffsets()
        let zeroPoints = tensor.parts["zero_points"]?.floats()
        let groupsPerRow = columns / groupSize
        var scales = [Float](repeating: 0, count: rows * groupsPerRow)
        var biases = scales
        for row in 0..<rows {
            for group in 0..<groupsPerRow {
                let index = row * groupsPerRow + group
                let shrinkGroup = EncodingLayout.group(of: row * columns + group * groupSize, layout.granularity, shape: tensor.shape)
                let scale = stored[shrinkGroup]
                scales[index] = scale
                if let offsets {
                    biases[index] = -(offsets[shrinkGroup] + scale * Float(layout.codeOffset))
                } else {
                    let zeroPoint = zeroPoints.map { Int($0[shrinkGroup]) } ?? layout.implicitZeroPoint
                    biases[index] = -(scale * Float(layout.codeOffset + zeroPoint))
                }
            }
        }
        let codes = tensor.parts["codes"]!.bytes
        var words = [UInt32](repeating: 0, count: rows * columns * layout.bits / 32)
        words.withUnsafeMutableBytes { output in
            for index in 0..<min(output.count, codes.count) { output[index] = codes[codes.startIndex + index] }
        }
        for index in words.indices { words[index] = UInt32(littleEndian: words[index]) }
        let packed = MLXAffineTensor(rows: rows, columns: columns, bits: layout.bits, groupSize: groupSize, words: words,
                                     scales: scales, biases: biases)
        try verify(packed, against: tensor.decode())
        return packed
    }

    /// The weights `packed` holds as MLX computes them, `s · c + b` with two roundings.
    public static func decode(_ packed: MLXAffineTensor) -> [Float] {
        var output = [Float](repeating: 0, count: packed.rows * packed.columns)
        forEachWeight(packed) { index, code, scale, bias in output[index] = scale * code + bias }
        return output
    }

    static func verify(_ packed: MLXAffineTensor, against reference: [Float]) throws(Failure) {
        var mismatch: Failure?
        forEachWeight(packed) { index, code, scale, bias in
            guard mismatch == nil else { return }
            let twoRoundings = scale * code + bias
            let fused = bias.addingProduct(scale, code)
            if twoRoundings != reference[index] || fused != reference[index] {
                mismatch = .notExact(index: index, shrink: reference[index], mlx: twoRoundings != reference[index] ? twoRoundings : fused)
            }
        }
        if let mismatch { throw mismatch }
    }

    /// Calls `body(flat index, code, scale, bias)` for every weight of `packed`.
    static func forEachWeight(_ packed: MLXAffineTensor, _ body: (Int, Float, Float, Float) -> Void) {
        let mask = UInt64((1 << packed.bits) - 1)
        let groupsPerRow = packed.columns / packed.groupSize
        packed.words.withUnsafeBufferPointer { words in
            for row in 0..<packed.rows {
                let base = row * packed.wordsPerRow
                for column in 0..<packed.columns {
                    let bit = column * packed.bits
                    let word = base + bit / 32, shift = bit % 32
                    var wide = UInt64(words[word]) >> shift
                    if shift + packed.bits > 32 { wide |= UInt64(words[word + 1]) << (32 - shift) }
                    let group = row * groupsPerRow + column / packed.groupSize
                    body(row * packed.columns + column, Float(wide & mask), packed.scales[group], packed.biases[group])
                }
            }
        }
    }
}
