import ShrinkCore
import ShrinkIO

/// Random but valid ggml blocks: random code bytes with finite F16 scale fields (about ±0.05).
public enum GGMLBlocks {
    /// Byte offsets of the F16 scale fields (`d`, `m`, `dmin`) within a block of each type.
    public static func scaleFields(_ type: GGMLType) -> [Int] {
        switch type {
        case .f32, .f16, .bf16: []
        case .q4_0, .q5_0, .q8_0, .iq4_NL, .iq4_XS: [0]
        case .q4_1, .q5_1, .q4_K, .q5_K: [0, 2]
        case .q2_K: [80, 82]
        case .q3_K: [108]
        case .q6_K: [208]
        }
    }

    /// `blocks` random blocks of a block-quantized `type`.
    public static func random(_ type: GGMLType, blocks: Int, generator: inout SplitMix64) -> [UInt8] {
        var bytes = (0..<(blocks * type.blockBytes)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let scales = generator.floats(blocks * 2, in: -0.05...0.05)
        for block in 0..<blocks {
            for (index, offset) in scaleFields(type).enumerated() {
                let bits = FloatingPointConversion.halfBits(from: scales[2 * block + index])
                bytes[block * type.blockBytes + offset] = UInt8(truncatingIfNeeded: bits)
                bytes[block * type.blockBytes + offset + 1] = UInt8(truncatingIfNeeded: bits >> 8)
            }
        }
        return bytes
    }

    /// A `[rows, columns]` tensor of random blocks of `type`, in its `WeightEncoding`.
    public static func tensor(_ type: GGMLType, rows: Int, columns: Int, generator: inout SplitMix64) throws -> EncodedTensor {
        let bytes = random(type, blocks: rows * columns / type.blockLength, generator: &generator)
        return try bytes.withUnsafeBytes { try GGMLEncoding.encode($0, type: type, name: type.name, shape: [rows, columns]) }
    }

    /// The block-quantized types.
    public static var quantizedTypes: [GGMLType] { GGMLType.allCases.filter { $0.denseDType == nil } }
}
