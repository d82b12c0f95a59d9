import ShrinkCore

/// ggml's block types in the one `WeightEncoding` vocabulary, losslessly: the same codes, scales
/// and offsets, re-laid as parts (codes packed with `PackedBits`, one scale per group), so that
/// the reference decoder and every kernel execute a GGUF tensor as stored.
///
/// | type | encoding |
/// | --- | --- |
/// | `Q4_0`, `Q5_0` | unsigned symmetric 4/5-bit per block of 32, F16 scales (`w = d · (q − 8 or 16)`) |
/// | `Q8_0` | signed symmetric 8-bit per block of 32, F16 scales |
/// | `Q4_1`, `Q5_1` | unsigned 4/5-bit per block of 32, F16 scales, F16 offsets `−m` (`w = d · q − (−m)`) |
/// | `Q2_K` | unsigned 2-bit per block of 16, U8 scale and offset multipliers of `d`, `dmin` per 256 |
/// | `Q3_K` | signed symmetric 3-bit per block of 16, I8 multipliers `sc − 32` of `d` per 256 |
/// | `Q4_K`, `Q5_K` | unsigned 4/5-bit per block of 32, U8 scale and offset multipliers of `d`, `dmin` per 256 |
/// | `Q6_K` | signed symmetric 6-bit per block of 16, I8 multipliers of `d` per 256 |
/// | `IQ4_NL` | 4-bit palette, the fixed I8 grid as LUT, F16 scales per block of 32 |
/// | `IQ4_XS` | the same with I8 block multipliers `ls − 32` of `d` per 256 |
public enum GGMLEncoding {
    /// The encoding of `type` (nil for the float types, which are dense).
    public static func encoding(of type: GGMLType) -> WeightEncoding? {
        func affine(_ bits: Int, signed: Bool = false, symmetric: Bool = true, block: Int = 32, scales: DType = .f16,
                    superBlock: Int? = nil, offsets: DType? = nil) -> WeightEncoding {
            .affine(AffineEncoding(bits: bits, signed: signed, symmetric: symmetric, granularity: .perBlock(blockSize: block), scaleDType: scales,
                                   superBlockSize: superBlock, offsetDType: offsets))
        }
        func palette(_ scales: BlockScales) -> WeightEncoding {
            .palette(PaletteEncoding(bits: 4, granularity: .perTensor, vectorSize: 1, lutDType: .i8, perChannelScale: false, blockScales: scales))
        }
        switch type {
        case .f32, .f16, .bf16: return nil
        case .q4_0: return affine(4)
        case .q5_0: return affine(5)
        case .q8_0: return affine(8, signed: true)
        case .q4_1: return affine(4, symmetric: false, offsets: .f16)
        case .q5_1: return affine(5, symmetric: false, offsets: .f16)
        case .q2_K: return affine(2, symmetric: false, block: 16, scales: .u8, superBlock: 256, offsets: .u8)
        case .q3_K: return affine(3, signed: true, block: 16, scales: .i8, superBlock: 256)
        case .q4_K: return affine(4, symmetric: false, scales: .u8, superBlock: 256, offsets: .u8)
        case .q5_K: return affine(5, symmetric: false, scales: .u8, superBlock: 256, offsets: .u8)
        case .q6_K: return affine(6, signed: true, block: 16, scales: .i8, superBlock: 256)
        case .iq4_NL: return palette(BlockScales(blockSize: 32, dtype: .f16))
        case .iq4_XS: return palette(BlockScales(blockSize: 32, dtype: .i8, superBlockSize: 256))
        }
    }

    /// The parts of one tensor being unpacked block by block.
    struct Parts {
        var codes: [UInt8] = []
        var scales: [UInt8] = []
        var offsets: [UInt8] = []
        /// Raw F16 bits.
        var halfScales: [UInt16] = []
        var halfOffsets: [UInt16] = []
        var superScales: [UInt16] = []
        var superOffsets: [UInt16] = []
    }

    /// `tensor`'s bytes (`blocks` blocks of `type`) as an `EncodedTensor` named `name` of `shape`.
    /// - Precondition: `type` is block-quantized and `bytes` holds whole blocks for `shape`.
    public static func encode(_ bytes: UnsafeRawBufferPointer, type: GGMLType, name: String, shape: [Int]) throws(ShrinkCoreError) -> EncodedTensor {
        let blocks = bytes.count / type.blockBytes
        var parts = Parts()
        parts.codes.reserveCapacity(blocks * type.blockLength)
        for block in 0..<blocks {
            unpack(bytes.baseAddress! + block * type.blockBytes, type: type, into: &parts)
        }
        guard let encoding = encoding(of: type) else { preconditionFailure("\(type.name) is a float type") }
        func tensor(_ dtype: DType, _ values: [UInt8]) throws(ShrinkCoreError) -> DenseTensor {
            try DenseTensor(dtype: dtype, shape: [values.count / dtype.byteSize], bytes: values)
        }
        func halves(_ values: [UInt16]) throws(ShrinkCoreError) -> DenseTensor {
            try tensor(.f16, values.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] })
        }
        var stored: [String: DenseTensor] = [:]
        switch encoding {
        case .affine(let layout):
            stored["codes"] = try tensor(.u8, PackedBits.pack(parts.codes, bits: layout.bits))
            stored["scales"] = layout.hasIntegerScales ? try tensor(layout.scaleDType, parts.scales) : try halves(parts.halfScales)
            if layout.superBlockSize != nil { stored["super_scales"] = try halves(parts.superScales) }
            switch layout.offsetDType {
            case .u8?:
                stored["offsets"] = try tensor(.u8, parts.offsets)
                stored["super_offsets"] = try halves(parts.superOffsets)
            case .f16?:
                stored["offsets"] = try halves(parts.halfOffsets)
            default:
                break
            }
        case .palette(let layout):
            stored["indices"] = try tensor(.u8, PackedBits.pack(parts.codes, bits: 4))
            stored["lut"] = try tensor(.i8, GGMLType.iq4nlGrid.map { UInt8(bitPattern: $0) })
            stored["lut_scales"] = try DenseTensor(converting: [1], shape: [1])
            stored["block_scales"] = layout.blockScales?.dtype == .i8 ? try tensor(.i8, parts.scales) : try halves(parts.halfScales)
            if layout.blockScales?.superBlockSize != nil { stored["super_scales"] = try halves(parts.superScales) }
        default:
            preconditionFailure("GGML types are affine or palettes")
        }
        return try EncodedTensor(name: name, shape: shape, sourceDType: .f32, encoding: encoding, parts: stored)
    }

    /// Appends one block's codes (in weight order), scales and offsets to `parts`.
    static func unpack(_ b: UnsafeRawPointer, type: GGMLType, into parts: inout Parts) {
        @inline(__always) func byte(_ offset: Int) -> UInt8 { b.load(fromByteOffset: offset, as: UInt8.self) }
        @inline(__always) func half(_ offset: Int) -> UInt16 { b.loadUnaligned(fromByteOffset: offset, as: UInt16.self) }
        /// Nibbles of 16 bytes at `offset`: the low nibbles are weights 0–15, the high ones 16–31.
        func nibbles(_ offset: Int) -> [UInt8] { (0..<16).map { byte(offset + $0) & 15 } + (0..<16).map { byte(offset + $0) >> 4 } }
        switch type {
        case .f32, .f16, .bf16:
            preconditionFailure("float types are not block-quantized")
        case .q4_0, .iq4_NL:
            parts.halfScales.append(half(0))
            parts.codes += nibbles(2)
        case .q4_1:
            parts.halfScales.append(half(0))
            parts.halfOffsets.append(half(2) ^ 0x8000)  // −m: the sign bit flipped, exactly.
            parts.codes += nibbles(4)
        case .q5_0, .q5_1:
            let affine = type == .q5_1
            parts.halfScales.append(half(0))
            if affine { parts.halfOffsets.append(half(2) ^ 0x8000) }
            let high = b.loadUnaligned(fromByteOffset: affine ? 4 : 2, as: UInt32.self)
            let low = nibbles(affine ? 8 : 6)
            parts.codes += (0..<32).map { low[$0] | UInt8((high >> UInt32($0)) & 1) << 4 }
        case .q8_0:
            parts.halfScales.append(half(0))
            parts.codes += (0..<32).map { byte(2 + $0) ^ 0x80 }  // q + 128
        case .q2_K:
            parts.superScales.append(half(80))
            parts.superOffsets.append(half(82))
            for group in 0..<16 {
                parts.scales.append(byte(group) & 15)
                parts.offsets.append(byte(group) >> 4)
                let base = 16 + 32 * (group / 8) + 16 * (group % 2), shift = UInt8(2 * ((group % 8) / 2))
                parts.codes += (0..<16).map { (byte(base + $0) >> shift) & 3 }
            }
        case .q3_K:
            parts.superScales.append(half(108))
            for group in 0..<16 {
                let low = group < 8 ? byte(96 + group) & 15 : byte(96 + group - 8) >> 4
                let high = (byte(104 + group % 4) >> UInt8(2 * (group / 4))) & 3
                parts.scales.append(UInt8(bitPattern: Int8(Int(low | high << 4) - 32)))
                let base = 32 + 32 * (group / 8) + 16 * (group % 2), shift = UInt8(2 * ((group % 8) / 2))
                let maskBit = UInt8(4 * (group / 8) + (group % 8) / 2), maskBase = 16 * (group % 2)
                // q = low 2 bits − 4 unless the high bit is set; the code is q + 4.
                parts.codes += (0..<16).map { ((byte(base + $0) >> shift) & 3) | ((byte(maskBase + $0) >> maskBit) & 1) << 2 }
            }
        case .q4_K, .q5_K:
            let fifth = type == .q5_K
            parts.superScales.append(half(0))
            parts.superOffsets.append(half(2))
            let qs = fifth ? 48 : 16
            for sub in 0..<8 {
                let (scale, minimum) = GGMLType.scaleAndMin(sub, b + 4)
                parts.scales.append(scale)
                parts.offsets.append(minimum)
                let chunk = sub / 2
                parts.codes += (0..<32).map { l in
                    let packed = byte(qs + 32 * chunk + l)
                    let q = sub % 2 == 0 ? packed & 15 : packed >> 4
                    return fifth ? q | ((byte(16 + l) >> UInt8(sub)) & 1) << 4 : q
                }
            }
        case .q6_K:
            parts.superScales.append(half(208))
            parts.scales += (0..<16).map { byte(192 + $0) }
            var codes = [UInt8](repeating: 0, count: 256)
            for n in 0..<2 {
                let ql = 64 * n, qh = 128 + 32 * n
                for l in 0..<32 {
                    let h = byte(qh + l)
                    codes[128 * n + l] = byte(ql + l) & 15 | (h & 3) << 4
                    codes[128 * n + l + 32] = byte(ql + l + 32) & 15 | ((h >> 2) & 3) << 4
                    codes[128 * n + l + 64] = byte(ql + l) >> 4 | ((h >> 4) & 3) << 4
                    codes[128 * n + l + 96] = byte(ql + l + 32) >> 4 | ((h >> 6) & 3) << 4
                }
            }
            parts.codes += codes
        case .iq4_XS:
            parts.superScales.append(half(0))
            let scalesHigh = half(2)
            for sub in 0..<8 {
                let low = (byte(4 + sub / 2) >> UInt8(4 * (sub % 2))) & 15
                let high = UInt8((scalesHigh >> UInt16(2 * sub)) & 3)
                parts.scales.append(UInt8(bitPattern: Int8(Int(low | high << 4) - 32)))
                parts.codes += nibbles(8 + 16 * sub)
            }
        }
    }
}
