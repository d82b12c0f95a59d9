import ShrinkCore

/// The tensor element types of GGUF files (ggml's `ggml_type`), with their traits: how many
/// weights a block holds, how many bytes it takes, and the reference decoder of a block.
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
/// Layouts follow ggml's `ggml-common.h`; the decoders do the float operations in the order of
/// ggml's reference `dequantize_row_*` (and the `gguf` Python package), so results match bit for bit.
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

    /// Decodes `blocks` consecutive blocks at `source` into `blocks × blockLength` floats at `output`.
    /// - Precondition: `source` holds `blocks × blockBytes` bytes.
    public func decode(_ source: UnsafeRawPointer, blocks: Int, into output: UnsafeMutablePointer<Float>) {
        for block in 0..<blocks {
            decodeBlock(source + block * blockBytes, into: output + block * blockLength)
        }
    }

    /// Decodes one block.
    func decodeBlock(_ b: UnsafeRawPointer, into y: UnsafeMutablePointer<Float>) {
        @inline(__always) func byte(_ offset: Int) -> UInt8 { b.load(fromByteOffset: offset, as: UInt8.self) }
        @inline(__always) func half(_ offset: Int) -> Float {
            FloatingPointConversion.float(fromHalfBits: b.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
        }
        switch self {
        case .f32:
            y[0] = Float(bitPattern: b.loadUnaligned(as: UInt32.self))
        case .f16:
            y[0] = half(0)
        case .bf16:
            y[0] = FloatingPointConversion.float(fromBFloat16Bits: b.loadUnaligned(as: UInt16.self))
        case .q4_0:
            let d = half(0)
            for j in 0..<16 {
                y[j] = d * Float(Int(byte(2 + j) & 15) - 8)
                y[j + 16] = d * Float(Int(byte(2 + j) >> 4) - 8)
            }
        case .q4_1:
            let d = half(0), m = half(2)
            for j in 0..<16 {
                y[j] = d * Float(byte(4 + j) & 15) + m
                y[j + 16] = d * Float(byte(4 + j) >> 4) + m
            }
        case .q5_0, .q5_1:
            let affine = self == .q5_1
            let d = half(0), m: Float = affine ? half(2) : 0
            let high = b.loadUnaligned(fromByteOffset: affine ? 4 : 2, as: UInt32.self)
            let qs = affine ? 8 : 6
            for j in 0..<16 {
                let low = Int(byte(qs + j) & 15) | Int((high >> UInt32(j)) & 1) << 4
                let upper = Int(byte(qs + j) >> 4) | Int((high >> UInt32(j + 16)) & 1) << 4
                if affine {
                    y[j] = d * Float(low) + m
                    y[j + 16] = d * Float(upper) + m
                } else {
                    y[j] = d * Float(low - 16)
                    y[j + 16] = d * Float(upper - 16)
                }
            }
        case .q8_0:
            let d = half(0)
            for j in 0..<32 { y[j] = Float(Int8(bitPattern: byte(2 + j))) * d }
        case .q2_K:
            let d = half(80), dmin = half(82)
            for group in 0..<16 {
                let scale = byte(group)
                let dl = d * Float(scale & 15), ml = dmin * Float(scale >> 4)
                // 16 weights per scale: half `group / 8`, plane `(group % 8) / 2`, bytes 16·(group % 2)…
                let base = 16 + 32 * (group / 8) + 16 * (group % 2)
                let shift = UInt8(2 * ((group % 8) / 2))
                for l in 0..<16 { y[16 * group + l] = dl * Float((byte(base + l) >> shift) & 3) - ml }
            }
        case .q3_K:
            let d = half(108)
            for group in 0..<16 {
                let low = group < 8 ? byte(96 + group) & 15 : byte(96 + group - 8) >> 4
                let high = (byte(104 + group % 4) >> UInt8(2 * (group / 4))) & 3
                let dl = d * Float(Int(low | high << 4) - 32)
                let base = 32 + 32 * (group / 8) + 16 * (group % 2)
                let shift = UInt8(2 * ((group % 8) / 2))
                let maskBit = UInt8(4 * (group / 8) + (group % 8) / 2)
                let maskBase = 16 * (group % 2)
                for l in 0..<16 {
                    let q = Int((byte(base + l) >> shift) & 3) - ((byte(maskBase + l) >> maskBit) & 1 == 1 ? 0 : 4)
                    y[16 * group + l] = dl * Float(q)
                }
            }
        case .q4_K, .q5_K:
            let d = half(0), dmin = half(2)
            let fifth = self == .q5_K
            let qs = fifth ? 48 : 16
            for chunk in 0..<4 {
                for nibble in 0..<2 {
                    let sub = 2 * chunk + nibble
                    let (sc, mn) = Self.scaleAndMin(sub, b + 4)
                    let dl = d * Float(sc), ml = dmin * Float(mn)
                    for l in 0..<32 {
                        var q = Int(nibble == 0 ? byte(qs + 32 * chunk + l) & 15 : byte(qs + 32 * chunk + l) >> 4)
                        if fifth { q |= Int((byte(16 + l) >> UInt8(sub)) & 1) << 4 }
                        y[32 * sub + l] = dl * Float(q) - ml
                    }
                }
            }
        case .q6_K:
            let d = half(208)
            for n in 0..<2 {
                let ql = 64 * n, qh = 128 + 32 * n, sc = 192 + 8 * n
                for l in 0..<32 {
                    let scaleIndex = l / 16
                    let h = byte(qh + l)
                    let q1 = Int(byte(ql + l) & 15 | (h & 3) << 4) - 32
                    let q2 = Int(byte(ql + l + 32) & 15 | ((h >> 2) & 3) << 4) - 32
                    let q3 = Int(byte(ql + l) >> 4 | ((h >> 4) & 3) << 4) - 32
                    let q4 = Int(byte(ql + l + 32) >> 4 | ((h >> 6) & 3) << 4) - 32
                    func scale(_ k: Int) -> Float { d * Float(Int8(bitPattern: byte(sc + scaleIndex + k))) }
                    y[128 * n + l] = scale(0) * Float(q1)
                    y[128 * n + l + 32] = scale(2) * Float(q2)
                    y[128 * n + l + 64] = scale(4) * Float(q3)
                    y[128 * n + l + 96] = scale(6) * Float(q4)
                }
            }
        case .iq4_NL:
            let d = half(0)
            for j in 0..<16 {
                y[j] = d * Float(Self.iq4nlGrid[Int(byte(2 + j) & 15)])
                y[j + 16] = d * Float(Self.iq4nlGrid[Int(byte(2 + j) >> 4)])
            }
        case .iq4_XS:
            let d = half(0)
            let scalesHigh = b.loadUnaligned(fromByteOffset: 2, as: UInt16.self)
            for sub in 0..<8 {
                let low = (byte(4 + sub / 2) >> UInt8(4 * (sub % 2))) & 15
                let high = UInt8((scalesHigh >> UInt16(2 * sub)) & 3)
                let dl = d * Float(Int(low | high << 4) - 32)
                for j in 0..<16 {
                    let packed = byte(8 + 16 * sub + j)
                    y[32 * sub + j] = dl * Float(Self.iq4nlGrid[Int(packed & 15)])
                    y[32 * sub + j + 16] = dl * Float(Self.iq4nlGrid[Int(packed >> 4)])
                }
            }
        }
    }

    /// The 6-bit scale and min of sub-block `j` (0…7) of a `Q4_K`/`Q5_K` block, packed in 12 bytes
    /// at `packed`: sub-blocks 0–3 in the low 6 bits of bytes 0–3 (scales) and 4–7 (mins); 4–7 in
    /// the nibbles of bytes 8–11 with their top 2 bits in the top bits of bytes 0–7.
    static func scaleAndMin(_ j: Int, _ packed: UnsafeRawPointer) -> (UInt8, UInt8) {
        @inline(__always) func byte(_ offset: Int) -> UInt8 { packed.load(fromByteOffset: offset, as: UInt8.self) }
        if j < 4 { return (byte(j) & 63, byte(j + 4) & 63) }
        return ((byte(j + 4) & 15) | (byte(j - 4) >> 6) << 4, (byte(j + 4) >> 4) | (byte(j) >> 6) << 4)
    }
}
