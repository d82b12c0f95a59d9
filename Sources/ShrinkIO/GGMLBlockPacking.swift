import ShrinkCore

/// The inverse of `GGMLEncoding.encode`: an encoded tensor whose encoding is a ggml type's, laid
/// back into that type's blocks (layouts in `GGMLType`).
///
/// Packing is checked, not assumed: the blocks are decoded again with `GGMLEncoding.encode` and
/// every part must equal the tensor's own byte for byte, so a tensor is written only when the ggml
/// type holds it exactly (an `IQ4_NL` palette whose LUT is not ggml's grid, a `Q4_1` offset that is
/// not the negated `m`, a K-quant multiplier out of its 6 bits: each fails that check). Cost: O(n)
/// in the tensor's weights, twice.
public enum GGMLBlockPacking {
    /// Why a tensor cannot be packed as a ggml type.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The encoding is no ggml type's.
        case noType(encoding: String)
        /// The rows are not whole blocks of the type.
        case rowsNotWholeBlocks(rowLength: Int, blockLength: Int)
        /// The encoding is the type's, but part `part` holds values the type's blocks cannot.
        case notExact(type: GGMLType, part: String)

        public var description: String {
            switch self {
            case .noType(let encoding): "\(encoding) is no ggml type"
            case .rowsNotWholeBlocks(let rowLength, let blockLength): "rows of \(rowLength) are not whole blocks of \(blockLength)"
            case .notExact(let type, let part): "the encoding is \(type.name)'s but part '\(part)' holds values \(type.name) cannot"
            }
        }
    }

    /// The ggml type whose encoding (`GGMLEncoding.encoding(of:)`) is `encoding`, if any.
    public static func type(of encoding: WeightEncoding) -> GGMLType? {
        GGMLType.allCases.first { GGMLEncoding.encoding(of: $0) == encoding }
    }

    /// `tensor`'s blocks as ggml type `type(of: tensor.encoding)`, row by row.
    /// - Throws: `Failure` when no ggml type holds the tensor exactly.
    public static func blocks(of tensor: EncodedTensor) throws(Failure) -> (type: GGMLType, bytes: [UInt8]) {
        guard let type = type(of: tensor.encoding) else { throw .noType(encoding: tensor.encoding.summary) }
        let rowLength = tensor.shape.last ?? 1
        guard rowLength % type.blockLength == 0 else { throw .rowsNotWholeBlocks(rowLength: rowLength, blockLength: type.blockLength) }
        let count = tensor.shape.reduce(1, *)
        let blocks = count / type.blockLength
        let source = Source(tensor: tensor, type: type, count: count)
        var bytes = [UInt8](repeating: 0, count: blocks * type.blockBytes)
        bytes.withUnsafeMutableBytes { output in
            for block in 0..<blocks { source.pack(block: block, into: output.baseAddress! + block * type.blockBytes) }
        }
        let decoded: EncodedTensor
        do {
            decoded = try bytes.withUnsafeBytes { raw throws(ShrinkCoreError) in
                try GGMLEncoding.encode(raw, type: type, name: tensor.name, shape: tensor.shape)
            }
        } catch {
            throw .notExact(type: type, part: "(all)")
        }
        for (name, part) in tensor.parts.sorted(by: { $0.key < $1.key }) {
            guard let other = decoded.parts[name], other.dtype == part.dtype, other.bytes.elementsEqual(part.bytes) else {
                throw .notExact(type: type, part: name)
            }
        }
        guard decoded.parts.count == tensor.parts.count else { throw .notExact(type: type, part: "(set of parts)") }
        return (type, bytes)
    }

    /// A tensor's parts, read per block of its ggml type.
    struct Source {
        let type: GGMLType
        let codes: [UInt8]
        let scales: UnsafeRawBufferPointer
        let offsets: UnsafeRawBufferPointer?
        let superScales: UnsafeRawBufferPointer?
        let superOffsets: UnsafeRawBufferPointer?

        init(tensor: EncodedTensor, type: GGMLType, count: Int) {
            self.type = type
            let empty = UnsafeRawBufferPointer(start: nil, count: 0)
            switch tensor.encoding {
            case .palette:
                codes = Self.unpacked(tensor.parts["indices"], bits: 4, count: count)
                scales = tensor.parts["block_scales"]?.bytes ?? empty
                offsets = nil
            case .affine(let layout):
                codes = Self.unpacked(tensor.parts["codes"], bits: layout.bits, count: count)
                scales = tensor.parts["scales"]?.bytes ?? empty
                offsets = tensor.parts["offsets"]?.bytes
            default:
                preconditionFailure("ggml types are affine or palettes")
            }
            superScales = tensor.parts["super_scales"]?.bytes
            superOffsets = tensor.parts["super_offsets"]?.bytes
        }

        static func unpacked(_ part: DenseTensor?, bits: Int, count: Int) -> [UInt8] {
            guard let part, PackedBits.byteCount(count: count, bits: bits) <= part.bytes.count else { return [UInt8](repeating: 0, count: count) }
            return (0..<count).map { PackedBits.value(at: $0, bits: bits, in: part.bytes) }
        }

        /// Byte `index` of `buffer`, or 0 past its end (the check after packing rejects such a tensor).
        @inline(__always) func byte(_ buffer: UnsafeRawBufferPointer?, _ index: Int) -> UInt8 {
            guard let buffer, index < buffer.count else { return 0 }
            return buffer[index]
        }

        @inline(__always) func half(_ buffer: UnsafeRawBufferPointer?, _ index: Int) -> UInt16 {
            UInt16(byte(buffer, 2 * index)) | UInt16(byte(buffer, 2 * index + 1)) << 8
        }

        /// Writes block `block` at `out` (zeroed).
        func pack(block: Int, into out: UnsafeMutableRawPointer) {
            let c = codes.withUnsafeBufferPointer { UnsafeBufferPointer(rebasing: $0[(block * type.blockLength)..<((block + 1) * type.blockLength)]) }
            @inline(__always) func put(_ offset: Int, _ value: UInt8) { out.storeBytes(of: value, toByteOffset: offset, as: UInt8.self) }
            @inline(__always) func or(_ offset: Int, _ value: UInt8) { put(offset, out.load(fromByteOffset: offset, as: UInt8.self) | value) }
            @inline(__always) func putHalf(_ offset: Int, _ value: UInt16) { put(offset, UInt8(truncatingIfNeeded: value)); put(offset + 1, UInt8(value >> 8)) }
            /// 32 codes' low nibbles as ggml's 16 bytes: weight j in the low nibble of byte j, j + 16 in its high one.
            func nibbles(_ offset: Int, _ first: Int) { for j in 0..<16 { put(offset + j, (c[first + j] & 15) | (c[first + j + 16] & 15) << 4) } }
            switch type {
            case .f32, .f16, .bf16:
                preconditionFailure("float types are not block-quantized")
            case .q4_0, .iq4_NL:
                putHalf(0, half(scales, block))
                nibbles(2, 0)
            case .q4_1:
                putHalf(0, half(scales, block))
                putHalf(2, half(offsets, block) ^ 0x8000)
                nibbles(4, 0)
            case .q5_0, .q5_1:
                let affine = type == .q5_1
                putHalf(0, half(scales, block))
                if affine { putHalf(2, half(offsets, block) ^ 0x8000) }
                var high: UInt32 = 0
                for j in 0..<32 { high |= UInt32((c[j] >> 4) & 1) << UInt32(j) }
                out.storeBytes(of: high.littleEndian, toByteOffset: affine ? 4 : 2, as: UInt32.self)
                nibbles(affine ? 8 : 6, 0)
            case .q8_0:
                putHalf(0, half(scales, block))
                for j in 0..<32 { put(2 + j, c[j] ^ 0x80) }
            case .q2_K:
                putHalf(80, half(superScales, block))
                putHalf(82, half(superOffsets, block))
                for group in 0..<16 {
                    put(group, (byte(scales, 16 * block + group) & 15) | byte(offsets, 16 * block + group) << 4)
                    let base = 16 + 32 * (group / 8) + 16 * (group % 2), shift = UInt8(2 * ((group % 8) / 2))
                    for l in 0..<16 { or(base + l, (c[16 * group + l] & 3) << shift) }
                }
            case .q3_K:
                putHalf(108, half(superScales, block))
                for group in 0..<16 {
                    let value = UInt8(truncatingIfNeeded: Int(Int8(bitPattern: byte(scales, 16 * block + group))) + 32)
                    if group < 8 { or(96 + group, value & 15) } else { or(96 + group - 8, (value & 15) << 4) }
                    or(104 + group % 4, ((value >> 4) & 3) << UInt8(2 * (group / 4)))
                    let base = 32 + 32 * (group / 8) + 16 * (group % 2), shift = UInt8(2 * ((group % 8) / 2))
                    let maskBit = UInt8(4 * (group / 8) + (group % 8) / 2), maskBase = 16 * (group % 2)
                    for l in 0..<16 {
                        let code = c[16 * group + l]
                        or(base + l, (code & 3) << shift)
                        or(maskBase + l, ((code >> 2) & 1) << maskBit)
                    }
                }
            case .q4_K, .q5_K:
                let fifth = type == .q5_K
                putHalf(0, half(superScales, block))
                putHalf(2, half(superOffsets, block))
                let scale = (0..<8).map { byte(scales, 8 * block + $0) }, minimum = (0..<8).map { byte(offsets, 8 * block + $0) }
                for j in 0..<4 {
                    put(4 + j, (scale[j] & 63) | (scale[j + 4] >> 4) << 6)
                    put(8 + j, (minimum[j] & 63) | (minimum[j + 4] >> 4) << 6)
                    put(12 + j, (scale[j + 4] & 15) | (minimum[j + 4] & 15) << 4)
                }
                let qs = fifth ? 48 : 16
                for sub in 0..<8 {
                    for l in 0..<32 {
                        let code = c[32 * sub + l]
                        or(qs + 32 * (sub / 2) + l, sub % 2 == 0 ? code & 15 : (code & 15) << 4)
                        if fifth { or(16 + l, ((code >> 4) & 1) << UInt8(sub)) }
                    }
                }
            case .q6_K:
                putHalf(208, half(superScales, block))
                for j in 0..<16 { put(192 + j, byte(scales, 16 * block + j)) }
                for n in 0..<2 {
                    let ql = 64 * n, qh = 128 + 32 * n
                    for l in 0..<32 {
                        let q0 = c[128 * n + l], q1 = c[128 * n + l + 32], q2 = c[128 * n + l + 64], q3 = c[128 * n + l + 96]
                        put(ql + l, (q0 & 15) | (q2 & 15) << 4)
                        put(ql + l + 32, (q1 & 15) | (q3 & 15) << 4)
                        put(qh + l, (q0 >> 4) & 3 | ((q1 >> 4) & 3) << 2 | ((q2 >> 4) & 3) << 4 | ((q3 >> 4) & 3) << 6)
                    }
                }
            case .iq4_XS:
                putHalf(0, half(superScales, block))
                var high: UInt16 = 0
                for sub in 0..<8 {
                    let value = UInt8(truncatingIfNeeded: Int(Int8(bitPattern: byte(scales, 8 * block + sub))) + 32)
                    or(4 + sub / 2, (value & 15) << UInt8(4 * (sub % 2)))
                    high |= UInt16((value >> 4) & 3) << UInt16(2 * sub)
                    nibbles(8 + 16 * sub, 32 * sub)
                }
                putHalf(2, high)
            }
        }
    }
}
