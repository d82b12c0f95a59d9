import ShrinkCore

/// A GGUF metadata value (GGUF value types 0–12). Values are stored inline (24 bytes each, no
/// allocation per element), so reading a file's metadata takes at most 24 bytes per array element
/// plus the strings' bytes: at most 24 times the metadata's bytes in the file.
public enum GGUFValue: Sendable, Equatable {
    case uint8(UInt8), int8(Int8), uint16(UInt16), int16(Int16), uint32(UInt32), int32(Int32)
    case float32(Float), bool(Bool), string(String)
    /// An array: its element type number and its elements.
    case array(elementType: UInt32, [GGUFValue])
    case uint64(UInt64), int64(Int64), float64(Double)

    /// GGUF's name of a value type number.
    public static func typeName(_ type: UInt32) -> String {
        let names = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"]
        return Int(type) < names.count ? names[Int(type)] : "type \(type)"
    }

    /// The value as an integer, for any integer type whose value fits `Int`.
    public var integerValue: Int? {
        switch self {
        case .uint8(let v): Int(v)
        case .int8(let v): Int(v)
        case .uint16(let v): Int(v)
        case .int16(let v): Int(v)
        case .uint32(let v): Int(v)
        case .int32(let v): Int(v)
        case .uint64(let v): Int(exactly: v)
        case .int64(let v): Int(v)
        default: nil
        }
    }

    /// The value as a float, for the float types and integers.
    public var doubleValue: Double? {
        switch self {
        case .float32(let v): Double(v)
        case .float64(let v): v
        default: integerValue.map(Double.init)
        }
    }

    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    public var arrayValue: [GGUFValue]? {
        if case .array(_, let elements) = self { return elements }
        return nil
    }

    /// One line of text: scalars as written, arrays of up to 16 elements in brackets, longer ones
    /// as their element type and count.
    public var summary: String {
        switch self {
        case .uint8(let v): "\(v)"
        case .int8(let v): "\(v)"
        case .uint16(let v): "\(v)"
        case .int16(let v): "\(v)"
        case .uint32(let v): "\(v)"
        case .int32(let v): "\(v)"
        case .uint64(let v): "\(v)"
        case .int64(let v): "\(v)"
        case .float32(let v): "\(v)"
        case .float64(let v): "\(v)"
        case .bool(let v): "\(v)"
        case .string(let v): v
        case .array(let type, let elements):
            elements.count <= 16 ? "[" + elements.map(\.summary).joined(separator: ", ") + "]"
                                 : "[\(elements.count) × \(Self.typeName(type))]"
        }
    }
}

/// One tensor's entry in a GGUF file.
public struct GGUFTensorInfo: Sendable, Equatable {
    public let name: String
    /// Row-major shape, outermost first: GGUF's `ne` reversed (the last axis is `ne[0]`, the
    /// contiguous one, which is a linear layer's input axis).
    public let shape: [Int]
    public let type: GGMLType
    /// The tensor's bytes, relative to the start of the file.
    public let byteRange: Range<Int>

    public var elementCount: Int { shape.reduce(1, *) }
}

/// A GGUF file (versions 2 and 3, little-endian) opened by memory mapping: header, metadata and
/// tensor infos are parsed and validated up front; tensor data is read only when touched.
///
/// Layout (ggml's `docs/gguf.md`): magic `GGUF`, `u32` version, `u64` tensor count, `u64`
/// metadata count; metadata as (string key, `u32` value type, value); tensor infos as (string
/// name, `u32` dimension count ≤ 4, `u64` dimensions innermost first, `u32` ggml type, `u64`
/// offset); then padding to `general.alignment` (default 32) and the data section, where every
/// tensor's offset is a multiple of the alignment. Strings are a `u64` byte length and UTF-8 bytes.
///
/// Validation: every count and length is checked against the bytes left before anything is
/// allocated, dimensions and byte sizes against overflow, the first dimension against the type's
/// block length, offsets against the alignment and the file's end, and tensors against overlap.
public struct GGUFFile: Sendable {
    /// The deepest nesting of arrays accepted in metadata.
    public static let maximumArrayDepth = 4
    /// The most dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
    public static let maximumDimensions = 4

    public let path: String
    public let version: UInt32
    /// Metadata in file order.
    public let metadata: [(key: String, value: GGUFValue)]
    /// Tensors in file order.
    public let tensors: [GGUFTensorInfo]
    /// `general.alignment`, or 32.
    public let alignment: Int
    /// Where the data section starts in the file.
    public let dataOffset: Int
    public var fileSize: Int { mappedFile.bytes.count }

    let mappedFile: MemoryMappedFile
    private let metadataIndex: [String: Int]
    private let tensorIndex: [String: Int]

    /// Opens and validates the GGUF file at `path`.
    /// - Throws: `ShrinkIOError` naming the file and the metadata key or tensor at fault.
    public init(path: String) throws(ShrinkIOError) {
        let mappedFile = try mapForReading(path)
        var reader = GGUFReader(bytes: mappedFile.bytes, path: path)
        let magic = try reader.bytes(4, what: "the magic")
        guard Array(magic) == Array("GGUF".utf8) else {
            throw .invalidHeader(path: path, reason: "magic is \(Array(magic).map { String(format: "%02x", $0) }.joined()), not 'GGUF'")
        }
        let version = try reader.u32("the version")
        guard version == 2 || version == 3 else {
            let reason = version.byteSwapped == 2 || version.byteSwapped == 3 ? "big-endian GGUF is not supported"
                                                                                 : "version \(version) is not supported (expected 2 or 3)"
            throw .invalidHeader(path: path, reason: reason)
        }
        let tensorCount = try reader.count("the tensor count", minimumBytesEach: 32)
        let metadataCount = try reader.count("the metadata count", minimumBytesEach: 13)
        var metadata: [(key: String, value: GGUFValue)] = []
        var metadataIndex: [String: Int] = [:]
        for index in 0..<metadataCount {
            let key = try reader.string("metadata key \(index)")
            guard metadataIndex[key] == nil else { throw .invalidMetadata(path: path, key: key, reason: "appears more than once") }
            let type = try reader.u32("the value type of '\(key)'")
            let value = try reader.value(type: type, key: key, depth: 0)
            metadataIndex[key] = metadata.count
            metadata.append((key, value))
        }
        var alignment = 32
        if let index = metadataIndex["general.alignment"] {
            guard case .uint32(let value) = metadata[index].value, value > 0, value & (value - 1) == 0 else {
                throw .invalidMetadata(path: path, key: "general.alignment", reason: "must be a uint32 power of two, found \(metadata[index].value.summary)")
            }
            alignment = Int(value)
        }
        var infos: [(name: String, shape: [Int], type: GGMLType, offset: UInt64, bytes: Int)] = []
        var tensorIndex: [String: Int] = [:]
        for index in 0..<tensorCount {
            let name = try reader.string("the name of tensor \(index)")
            guard tensorIndex[name] == nil else { throw .duplicateTensor(path: path, tensor: name) }
            let rank = try reader.u32("the dimension count of '\(name)'")
            guard rank >= 1, rank <= UInt32(Self.maximumDimensions) else {
                throw .invalidShape(path: path, tensor: name, reason: "\(rank) dimensions (expected 1 to \(Self.maximumDimensions))")
            }
            var dimensions: [Int] = []
            var elements = 1
            for axis in 0..<Int(rank) {
                let raw = try reader.u64("dimension \(axis) of '\(name)'")
                guard let dimension = Int(exactly: raw) else {
                    throw .invalidShape(path: path, tensor: name, reason: "dimension \(axis) is \(raw)")
                }
                let (product, overflow) = elements.multipliedReportingOverflow(by: dimension)
                guard !overflow else { throw .invalidShape(path: path, tensor: name, reason: "the element count overflows") }
                elements = product
                dimensions.append(dimension)
            }
            let typeNumber = try reader.u32("the type of '\(name)'")
            guard let type = GGMLType(ggmlNumber: typeNumber) else {
                throw .unknownTensorType(path: path, tensor: name, type: typeNumber)
            }
            guard dimensions[0] % type.blockLength == 0 else {
                throw .invalidShape(path: path, tensor: name,
                                    reason: "rows of \(dimensions[0]) are not a multiple of \(type.name)'s block of \(type.blockLength)")
            }
            let (bytes, overflow) = (elements / type.blockLength).multipliedReportingOverflow(by: type.blockBytes)
            guard !overflow else { throw .invalidShape(path: path, tensor: name, reason: "the byte size overflows") }
            let offset = try reader.u64("the offset of '\(name)'")
            guard offset % UInt64(alignment) == 0 else {
                throw .invalidEntry(path: path, tensor: name, reason: "data offset \(offset) is not a multiple of the alignment \(alignment)")
            }
            tensorIndex[name] = infos.count
            infos.append((name, dimensions.reversed(), type, offset, bytes))
        }
        let dataOffset = (reader.position + alignment - 1) / alignment * alignment
        let dataSize = mappedFile.bytes.count - dataOffset
        var tensors: [GGUFTensorInfo] = []
        for info in infos {
            let (end, overflow) = info.offset.addingReportingOverflow(UInt64(info.bytes))
            guard dataSize >= 0, !overflow, end <= UInt64(dataSize) else {
                throw .offsetsOutOfBounds(path: path, tensor: info.name, begin: info.offset, end: overflow ? .max : end, dataSize: max(dataSize, 0))
            }
            let begin = dataOffset + Int(info.offset)
            tensors.append(GGUFTensorInfo(name: info.name, shape: info.shape, type: info.type, byteRange: begin..<(begin + info.bytes)))
        }
        let ordered = tensors.sorted { ($0.byteRange.lowerBound, $0.byteRange.upperBound) < ($1.byteRange.lowerBound, $1.byteRange.upperBound) }
        for (previous, next) in zip(ordered, ordered.dropFirst()) where next.byteRange.lowerBound < previous.byteRange.upperBound {
            throw .overlappingTensors(path: path, tensor: next.name, other: previous.name, byteOffset: next.byteRange.lowerBound - dataOffset)
        }
        self.path = path
        self.version = version
        self.metadata = metadata
        self.metadataIndex = metadataIndex
        self.tensors = tensors
        self.tensorIndex = tensorIndex
        self.alignment = alignment
        self.dataOffset = dataOffset
        self.mappedFile = mappedFile
    }

    /// The metadata value of `key`, if present.
    public func value(_ key: String) -> GGUFValue? { metadataIndex[key].map { metadata[$0].value } }

    /// The tensor named `name`, if present.
    public func tensor(named name: String) -> GGUFTensorInfo? { tensorIndex[name].map { tensors[$0] } }

    /// The bytes of `tensor` as stored, viewing the mapped file.
    public func storage(of tensor: GGUFTensorInfo) -> TensorStorage {
        TensorStorage(mappedFile: mappedFile, range: tensor.byteRange)
    }
}

/// Reads GGUF's little-endian fields, checking each length against the bytes left.
struct GGUFReader {
    let bytes: UnsafeRawBufferPointer
    let path: String
    var position = 0

    init(bytes: UnsafeRawBufferPointer, path: String) {
        self.bytes = bytes
        self.path = path
    }

    var remaining: Int { bytes.count - position }

    mutating func bytes(_ count: Int, what: String) throws(ShrinkIOError) -> UnsafeRawBufferPointer.SubSequence {
        guard count <= remaining else {
            throw .truncated(path: path, what: what, needed: UInt64(position) + UInt64(count), fileSize: bytes.count)
        }
        defer { position += count }
        return bytes[position..<(position + count)]
    }

    mutating func load<T: FixedWidthInteger>(_ type: T.Type, _ what: String) throws(ShrinkIOError) -> T {
        let slice = try bytes(MemoryLayout<T>.size, what: what)
        return T(littleEndian: UnsafeRawBufferPointer(rebasing: slice).loadUnaligned(as: T.self))
    }

    mutating func u32(_ what: String) throws(ShrinkIOError) -> UInt32 { try load(UInt32.self, what) }
    mutating func u64(_ what: String) throws(ShrinkIOError) -> UInt64 { try load(UInt64.self, what) }

    /// A `u64` count of items that each take at least `minimumBytesEach` bytes, checked against
    /// the bytes left so that no allocation follows a hostile count.
    mutating func count(_ what: String, minimumBytesEach: Int) throws(ShrinkIOError) -> Int {
        let raw = try u64(what)
        guard raw <= UInt64(remaining / max(minimumBytesEach, 1)) else {
            throw .invalidHeader(path: path, reason: "\(what) \(raw) cannot fit in the \(remaining) bytes left")
        }
        return Int(raw)
    }

    mutating func string(_ what: String) throws(ShrinkIOError) -> String {
        let length = try u64("the length of \(what)")
        guard length <= UInt64(remaining) else {
            throw .truncated(path: path, what: what, needed: UInt64(position).addingReportingOverflow(length).partialValue, fileSize: bytes.count)
        }
        let start = position
        let slice = try bytes(Int(length), what: what)
        guard let text = String(validating: slice, as: UTF8.self) else { throw .headerNotUTF8(path: path, byteOffset: start) }
        return text
    }

    mutating func value(type: UInt32, key: String, depth: Int) throws(ShrinkIOError) -> GGUFValue {
        let what = "the value of '\(key)'"
        switch type {
        case 0: return .uint8(try load(UInt8.self, what))
        case 1: return .int8(try load(Int8.self, what))
        case 2: return .uint16(try load(UInt16.self, what))
        case 3: return .int16(try load(Int16.self, what))
        case 4: return .uint32(try load(UInt32.self, what))
        case 5: return .int32(try load(Int32.self, what))
        case 6: return .float32(Float(bitPattern: try load(UInt32.self, what)))
        case 7:
            let byte = try load(UInt8.self, what)
            guard byte <= 1 else { throw .invalidMetadata(path: path, key: key, reason: "bool byte is \(byte), expected 0 or 1") }
            return .bool(byte == 1)
        case 8: return .string(try string(what))
        case 9:
            guard depth < GGUFFile.maximumArrayDepth else {
                throw .invalidMetadata(path: path, key: key, reason: "arrays nested deeper than \(GGUFFile.maximumArrayDepth)")
            }
            let elementType = try u32("the element type of '\(key)'")
            let sizes: [UInt32: Int] = [0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 8: 8, 9: 12, 10: 8, 11: 8, 12: 8]
            guard let size = sizes[elementType] else {
                throw .invalidMetadata(path: path, key: key, reason: "unknown array element type \(elementType)")
            }
            let count = try count("the element count of '\(key)'", minimumBytesEach: size)
            var elements: [GGUFValue] = []
            elements.reserveCapacity(count)
            for _ in 0..<count { elements.append(try value(type: elementType, key: key, depth: depth + 1)) }
            return .array(elementType: elementType, elements)
        case 10: return .uint64(try load(UInt64.self, what))
        case 11: return .int64(try load(Int64.self, what))
        case 12: return .float64(Double(bitPattern: try load(UInt64.self, what)))
        default: throw .invalidMetadata(path: path, key: key, reason: "unknown value type \(type)")
        }
    }
}
