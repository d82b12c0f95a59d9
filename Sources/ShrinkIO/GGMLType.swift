import ShrinkCore

/// The tensor element types of GGUF files (ggml's `ggml_type`), with their traits: how many
/// weights a block holds, how many bytes it takes, and the `WeightEncoding` that holds it exactly
/// (`GGMLEncoding`), whose reference decoder is the type's.
///
/// Block layouts (all little-endian; `f16` is IEEE half; QK = 32, QK_K = 256):
/// - `Q4_0` (18 B / 32): `d f16`, `qs[16]`; `w[j] = d · ((qs[j] & 15) − 8)`, `w[j+16] = d · ((qs[j] >> 4) − 8)`.
/// - `Q4_1` (20 B / 32): `d, m f16`, `qs[16]`; `w = d · q + m`, nibbles as `Q4_0`.
/// - `Q5_0` (22 B / 32): `d f16`, `qh u32`, `qs[16]`; the 5th bit of weight `j` is bit `j` of `qh`; `w = d · (q − 16)`.
/// - `Q5_1` (24 B / 32): `d, m f16`, `qh u32`, `qs[16]`; `w = d · q + m`.
/// - `Q8_0` (34 B / 32): `d f16`, `qs[32] i8`; `w = d · q`.
/// - `Q2_K` (84 B / 256): `scales[16]` (low nibble scale, high nibble min per 16 weights), `qs[64]`
///   (2-bit, 4 planes of 32 bytes per 128 weights), `d, dmin f16`; `w = d·sc·q − dmin·m`.
/// - `Q3_K` (110 B / 256): `hmask[32]`, `qs[64]`, 16 6-bit signed scales in 12 bytes, `d f16`;
///   `w = d · (sc − 32) · (q − 4)` with `q` = 2 low bits + 4 × (high bit).
/// - `Q4_K` (144 B / 256): `d, dmin f16`, 8 6-bit scales and mins in 12 bytes, `qs[128]`;
///   per 32 weights `w = d·sc·q − dmin·m`.
/// - `Q5_K` (176 B / 256): as `Q4_K` plus `qh[32]` (the 5th bits).
/// - `Q6_K` (210 B / 256): `ql[128]`, `qh[64]`, `scales[16] i8`, `d f16`; `w = d · sc · (q − 32)`.
/// - `IQ4_NL` (18 B / 32): `d f16`, `qs[16]`; `w = d · grid[q]`, the fixed non-uniform grid `iq4nlGrid`.
/// - `IQ4_XS` (136 B / 256): `d f16`, `scales_h u16`, `scales_l[4]`, `qs[128]`; per 32 weights a
///   6-bit scale `ls`, `w = d · (ls − 32) · grid[q]`.
///
/// Layouts follow ggml's `ggml-common.h`. Decoded through their `WeightEncoding`, every type gives
/// the floats of ggml's reference `dequantize_row_*` (and the `gguf` Python package) bit for bit.
public enum GGMLType: UInt32, CaseIterable, Sendable {
    case f32 = 0
    case f16 = 1
    case q4_0 = 2
    case q4_1 = 3
    case q5_0 = 6
    case q5_1 = 7
    case q8_0 = 8
    case q2_K = 10
    case q3_K = 11
    case q4_K = 12
    case q5_K = 13
    case q6_K = 14
    case iq4_NL = 20
    case iq4_XS = 23
    case bf16 = 30

    /// ggml's name (`Q4_K`, `IQ4_NL`, `F16`…).
    public var name: String {
        switch self {
        case .f32: "F32"
        case .f16: "F16"
        case .bf16: "BF16"
        case .q4_0: "Q4_0"
        case .q4_1: "Q4_1"
        case .q5_0: "Q5_0"
        case .q5_1: "Q5_1"
        case .q8_0: "Q8_0"
        case .q2_K: "Q2_K"
        case .q3_K: "Q3_K"
        case .q4_K: "Q4_K"
        case .q5_K: "Q5_K"
        case .q6_K: "Q6_K"
        case .iq4_NL: "IQ4_NL"
        case .iq4_XS: "IQ4_XS"
        }
    }

    /// Weights per block (1 for the float types).
    public var blockLength: Int {
        switch self {
        case .f32, .f16, .bf16: 1
        case .q4_0, .q4_1, .q5_0, .q5_1, .q8_0, .iq4_NL: 32
        case .q2_K, .q3_K, .q4_K, .q5_K, .q6_K, .iq4_XS: 256
        }
    }

    /// Bytes per block.
    public var blockBytes: Int {
        switch self {
        case .f32: 4
        case .f16, .bf16: 2
        case .q4_0, .iq4_NL: 18
        case .q4_1: 20
        case .q5_0: 22
        case .q5_1: 24
        case .q8_0: 34
        case .q2_K: 84
        case .q3_K: 110
        case .q4_K: 144
        case .q5_K: 176
        case .q6_K: 210
        case .iq4_XS: 136
        }
    }

    /// Stored bits per weight.
    public var bitsPerWeight: Double { Double(blockBytes * 8) / Double(blockLength) }

    /// The dense dtype of a float type, nil for block-quantized types.
    public var denseDType: DType? {
        switch self {
        case .f32: .f32
        case .f16: .f16
        case .bf16: .bf16
        default: nil
        }
    }

    /// The type whose ggml number is `raw`, or nil for types Shrink does not read.
    public init?(ggmlNumber raw: UInt32) { self.init(rawValue: raw) }

    /// ggml's non-uniform 4-bit grid of `IQ4_NL` and `IQ4_XS`.
    public static let iq4nlGrid: [Int8] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]

    /// The 6-bit scale and min of sub-block `j` (0…7) of a `Q4_K`/`Q5_K` block, packed in 12 bytes
    /// at `packed`: sub-blocks 0–3 in the low 6 bits of bytes 0–3 (scales) and 4–7 (mins); 4–7 in
    /// the nibbles of bytes 8–11 with their top 2 bits in the top bits of bytes 0–7.
    static func scaleAndMin(_ j: Int, _ packed: UnsafeRawPointer) -> (UInt8, UInt8) {
        @inline(__always) func byte(_ offset: Int) -> UInt8 { packed.load(fromByteOffset: offset, as: UInt8.self) }
        if j < 4 { return (byte(j) & 63, byte(j + 4) & 63) }
        return ((byte(j + 4) & 15) | (byte(j - 4) >> 6) << 4, (byte(j + 4) >> 4) | (byte(j) >> 6) << 4)
    }
}
