import ShrinkCore

/// Writes GGUF version 3 files, little-endian, as `GGUFFile` reads them and ggml's `gguf.c` does:
/// the magic `GGUF`, the version, the tensor and key-value counts (u64), each key-value pair
/// (a string key, its value type u32, the value; strings as a u64 length and UTF-8 bytes, arrays as
/// element type u32, count u64 and the elements), each tensor's info (name, dimension count u32,
/// dimensions u64 innermost first, ggml type u32, data offset u64 from the start of the data
/// section), zero padding to the alignment, then each tensor's bytes, each padded to the alignment.
public enum GGUFWriter {
    /// One tensor to write: its name, row-major shape (the last axis innermost, as `GGUFFile` reports
    /// it), ggml type and bytes (whole blocks).
    public struct Tensor {
        public let name: String
        public let shape: [Int]
        public let type: GGMLType
        public let bytes: [UInt8]

        public init(name: String, shape: [Int], type: GGMLType, bytes: [UInt8]) {
            self.name = name
            self.shape = shape
            self.type = type
            self.bytes = bytes
        }
    }

    /// Writes `metadata` and `tensors` atomically to `path` (nothing is left at `path` on failure).
    /// The alignment is `general.alignment` when the metadata has it (a power-of-two uint32), else 32.
    /// - Throws: `ShrinkIOError.invalidShape` for a tensor whose bytes do not match its shape and type,
    ///   `.invalidMetadata` for a bad `general.alignment`, `.writeFailed` when the file cannot be written.
    public static func write(metadata: [(key: String, value: GGUFValue)], tensors: [Tensor], to path: String) throws(ShrinkIOError) {
        var alignment = 32
        if let value = metadata.first(where: { $0.key == "general.alignment" })?.value {
            guard case .uint32(let raw) = value, raw > 0, raw & (raw - 1) == 0 else {
                throw .invalidMetadata(path: path, key: "general.alignment", reason: "must be a uint32 power of two, found \(value.summary)")
            }
            alignment = Int(raw)
        }
        var header = ByteWriter()
        header.bytes += Array("GGUF".utf8)
        header.u32(3)
        header.u64(UInt64(tensors.count))
        header.u64(UInt64(metadata.count))
        for (key, value) in metadata {
            header.string(key)
            header.u32(value.typeNumber)
            header.value(value)
        }
        var offset = 0
        for tensor in tensors {
            let elements = tensor.shape.reduce(1, *)
            guard let innermost = tensor.shape.last, elements % tensor.type.blockLength == 0, innermost % tensor.type.blockLength == 0,
                  elements / tensor.type.blockLength * tensor.type.blockBytes == tensor.bytes.count else {
                throw .invalidShape(path: path, tensor: tensor.name,
                                    reason: "\(tensor.bytes.count) bytes are not whole \(tensor.type.name) blocks of shape \(tensor.shape)")
            }
            header.string(tensor.name)
            header.u32(UInt32(tensor.shape.count))
            for dimension in tensor.shape.reversed() { header.u64(UInt64(dimension)) }
            header.u32(tensor.type.rawValue)
            header.u64(UInt64(offset))
            offset += padded(tensor.bytes.count, to: alignment)
        }
        header.bytes += [UInt8](repeating: 0, count: padded(header.bytes.count, to: alignment) - header.bytes.count)
        let file = try AtomicFile(path: path)
        func append(_ bytes: [UInt8]) throws(ShrinkIOError) {
            try bytes.withUnsafeBytes { raw in Result { () throws(ShrinkIOError) in try file.write(raw) } }.get()
        }
        try append(header.bytes)
        for tensor in tensors {
            try append(tensor.bytes)
            let padding = padded(tensor.bytes.count, to: alignment) - tensor.bytes.count
            if padding > 0 { try append([UInt8](repeating: 0, count: padding)) }
        }
        try file.commit()
    }

    static func padded(_ count: Int, to alignment: Int) -> Int { (count + alignment - 1) / alignment * alignment }

    /// Little-endian fields appended to a byte array.
    struct ByteWriter {
        var bytes: [UInt8] = []

        mutating func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        mutating func u64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }

        mutating func string(_ text: String) {
            let utf8 = Array(text.utf8)
            u64(UInt64(utf8.count))
            bytes += utf8
        }

        mutating func value(_ value: GGUFValue) {
            switch value {
            case .uint8(let v): bytes.append(v)
            case .int8(let v): bytes.append(UInt8(bitPattern: v))
            case .uint16(let v): withUnsafeBytes(of: v.littleEndian) { bytes += $0 }
            case .int16(let v): withUnsafeBytes(of: v.littleEndian) { bytes += $0 }
            case .uint32(let v): u32(v)
            case .int32(let v): u32(UInt32(bitPattern: v))
            case .float32(let v): u32(v.bitPattern)
            case .bool(let v): bytes.append(v ? 1 : 0)
            case .string(let v): string(v)
            case .array(let elementType, let elements):
                u32(elementType)
                u64(UInt64(elements.count))
                for element in elements { self.value(element) }
            case .uint64(let v): u64(v)
            case .int64(let v): u64(UInt64(bitPattern: v))
            case .float64(let v): u64(v.bitPattern)
            }
        }
    }
}

extension GGUFValue {
    /// GGUF's value type number (0 uint8 … 12 float64).
    public var typeNumber: UInt32 {
        switch self {
        case .uint8: 0
        case .int8: 1
        case .uint16: 2
        case .int16: 3
        case .uint32: 4
        case .int32: 5
        case .float32: 6
        case .bool: 7
        case .string: 8
        case .array: 9
        case .uint64: 10
        case .int64: 11
        case .float64: 12
        }
    }
}
