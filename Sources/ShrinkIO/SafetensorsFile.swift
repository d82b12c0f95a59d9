import ShrinkCore

/// One tensor's entry in a safetensors header.
public struct SafetensorsEntry: Sendable, Equatable {
    /// The tensor's name (the header key).
    public let name: String
    /// The element type.
    public let dtype: DType
    /// The dimensions, outermost first.
    public let shape: [Int]
    /// The tensor's bytes, relative to the start of the data section.
    public let dataRange: Range<Int>
}

/// A safetensors file opened by memory mapping: the header is parsed and validated up front, the
/// tensor data is read from disk only when touched.
///
/// Layout (https://github.com/huggingface/safetensors): an unsigned 64-bit little-endian header
/// length `N`; `N` bytes of UTF-8 JSON, an object mapping each tensor name to `{"dtype", "shape",
/// "data_offsets": [begin, end]}` plus an optional `"__metadata__"` object of strings; then the data
/// section, where each tensor's row-major little-endian bytes lie at `[begin, end)`. Validation
/// follows the reference implementation: the header is at most 100 MB and starts with `{`, every
/// range matches its shape × dtype size, ranges do not overlap, and together they cover the data
/// section exactly.
public struct SafetensorsFile: Sendable {
    /// The largest header accepted, as in the reference implementation.
    public static let maximumHeaderLength = 100_000_000

    /// The path the file was opened from.
    public let path: String
    /// The tensors in header order.
    public let entries: [SafetensorsEntry]
    /// The `__metadata__` map (empty when absent).
    public let metadata: [String: String]
    /// The total size of the file in bytes.
    public var fileSize: Int { mappedFile.bytes.count }

    private let mappedFile: MemoryMappedFile
    private let dataStart: Int
    private let indexByName: [String: Int]

    /// Opens and validates the file at `path` without reading its tensor data.
    public init(path: String) throws(ShrinkIOError) {
        let mappedFile = try mapForReading(path)
        let bytes = mappedFile.bytes
        guard bytes.count >= 8 else {
            throw .truncated(path: path, what: "the 8-byte header length", needed: 8, fileSize: bytes.count)
        }
        let headerLength = UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self))
        guard headerLength <= UInt64(Self.maximumHeaderLength) else {
            throw .headerTooLarge(path: path, length: headerLength, limit: Self.maximumHeaderLength)
        }
        guard 8 + headerLength <= UInt64(bytes.count) else {
            throw .truncated(path: path, what: "the header", needed: 8 + headerLength, fileSize: bytes.count)
        }
        let header = UnsafeRawBufferPointer(rebasing: bytes[8..<(8 + Int(headerLength))])
        let dataStart = 8 + Int(headerLength)
        let parsed = try SafetensorsHeader.parse(header, path: path, dataSize: bytes.count - dataStart)
        self.path = path
        self.mappedFile = mappedFile
        self.dataStart = dataStart
        self.entries = parsed.entries
        self.metadata = parsed.metadata
        self.indexByName = Dictionary(uniqueKeysWithValues: parsed.entries.enumerated().map { ($1.name, $0) })
    }

    /// The entry named `name`, if present.
    public func entry(named name: String) -> SafetensorsEntry? {
        indexByName[name].map { entries[$0] }
    }

    /// The tensor named `name`, viewing the mapped file (no copy).
    public func tensor(named name: String) throws(ShrinkIOError) -> DenseTensor {
        guard let entry = entry(named: name) else { throw .tensorNotFound(path: path, tensor: name) }
        return tensor(for: entry)
    }

    /// The tensor described by `entry`, viewing the mapped file (no copy).
    public func tensor(for entry: SafetensorsEntry) -> DenseTensor {
        let range = (dataStart + entry.dataRange.lowerBound)..<(dataStart + entry.dataRange.upperBound)
        let storage = TensorStorage(mappedFile: mappedFile, range: range)
        // The header validation guarantees the range matches shape × dtype.
        return try! DenseTensor(dtype: entry.dtype, shape: entry.shape, storage: storage)
    }

    /// Every tensor in header order, viewing the mapped file.
    public func tensors() -> [(name: String, tensor: DenseTensor)] {
        entries.map { ($0.name, tensor(for: $0)) }
    }
}

/// Parsing and validation of the JSON header of a safetensors file.
enum SafetensorsHeader {
    struct Parsed {
        var entries: [SafetensorsEntry]
        var metadata: [String: String]
    }

    static let entryKeys: Set<String> = ["dtype", "shape", "data_offsets"]

    static func parse(_ header: UnsafeRawBufferPointer, path: String, dataSize: Int) throws(ShrinkIOError) -> Parsed {
        let fileOffset = 8
        if let invalid = firstInvalidUTF8Offset(header) {
            throw .headerNotUTF8(path: path, byteOffset: fileOffset + invalid)
        }
        guard header.first == UInt8(ascii: "{") else {
            throw .headerNotJSON(path: path, byteOffset: fileOffset, reason: "the header must start with '{'")
        }
        let root: JSONValue
        do {
            root = try JSONValue.parse(header)
        } catch {
            if let key = error.duplicateKey { throw .duplicateTensor(path: path, tensor: key) }
            throw .headerNotJSON(path: path, byteOffset: fileOffset + error.offset, reason: error.message)
        }
        guard let pairs = root.objectValue else { throw .invalidHeader(path: path, reason: "not a JSON object") }
        var entries: [SafetensorsEntry] = []
        var metadata: [String: String] = [:]
        for (name, value) in pairs {
            if name == "__metadata__" {
                metadata = try parseMetadata(value, path: path)
            } else {
                entries.append(try parseEntry(name: name, value: value, path: path, dataSize: dataSize))
            }
        }
        try checkLayout(entries, path: path, dataSize: dataSize)
        return Parsed(entries: entries, metadata: metadata)
    }

    static func parseMetadata(_ value: JSONValue, path: String) throws(ShrinkIOError) -> [String: String] {
        guard let pairs = value.objectValue else {
            throw .invalidMetadata(path: path, key: "__metadata__", reason: "expected an object, found \(value.kindName)")
        }
        var metadata: [String: String] = [:]
        for (key, item) in pairs {
            guard let text = item.stringValue else {
                throw .invalidMetadata(path: path, key: key, reason: "expected a string, found \(item.kindName)")
            }
            metadata[key] = text
        }
        return metadata
    }

    static func parseEntry(name: String, value: JSONValue, path: String, dataSize: Int) throws(ShrinkIOError) -> SafetensorsEntry {
        guard let pairs = value.objectValue else {
            throw .invalidEntry(path: path, tensor: name, reason: "expected an object, found \(value.kindName)")
        }
        if let unknown = pairs.first(where: { !entryKeys.contains($0.key) }) {
            throw .invalidEntry(path: path, tensor: name, reason: "unknown key '\(unknown.key)' (expected dtype, shape, data_offsets)")
        }
        func field(_ key: String) throws(ShrinkIOError) -> JSONValue {
            guard let found = pairs.first(where: { $0.key == key }) else {
                throw .invalidEntry(path: path, tensor: name, reason: "missing key '\(key)'")
            }
            return found.value
        }
        let dtypeValue = try field("dtype")
        guard let dtypeName = dtypeValue.stringValue else {
            throw .invalidEntry(path: path, tensor: name, reason: "dtype must be a string, found \(dtypeValue.kindName)")
        }
        guard let dtype = DType(rawValue: dtypeName) else {
            throw .unknownDType(path: path, tensor: name, dtype: dtypeName)
        }
        let shapeValue = try field("shape")
        guard let dimensions = shapeValue.arrayValue else {
            throw .invalidShape(path: path, tensor: name, reason: "expected an array, found \(shapeValue.kindName)")
        }
        var shape: [Int] = []
        for (axis, dimension) in dimensions.enumerated() {
            guard case .number(let text) = dimension else {
                throw .invalidShape(path: path, tensor: name, reason: "dimension \(axis) is a \(dimension.kindName)")
            }
            guard let size = Int(text), size >= 0 else {
                throw .invalidShape(path: path, tensor: name, reason: "dimension \(axis) is \(text), expected a non-negative integer")
            }
            shape.append(size)
        }
        guard let expectedBytes = Shape.byteCount(shape, dtype: dtype) else {
            throw .invalidShape(path: path, tensor: name, reason: "\(Shape.describe(shape)) of \(dtype.rawValue) overflows")
        }
        let offsetsValue = try field("data_offsets")
        guard let offsets = offsetsValue.arrayValue, offsets.count == 2 else {
            throw .invalidEntry(path: path, tensor: name, reason: "data_offsets must be an array of two integers")
        }
        var bounds: [UInt64] = []
        for offset in offsets {
            guard case .number(let text) = offset, let bound = UInt64(text) else {
                throw .invalidEntry(path: path, tensor: name, reason: "data_offsets must be non-negative integers, found \(offset.serialized())")
            }
            bounds.append(bound)
        }
        let (begin, end) = (bounds[0], bounds[1])
        guard begin <= end, end <= UInt64(dataSize) else {
            throw .offsetsOutOfBounds(path: path, tensor: name, begin: begin, end: end, dataSize: dataSize)
        }
        guard Int(end - begin) == expectedBytes else {
            throw .sizeMismatch(path: path, tensor: name, expected: expectedBytes, actual: Int(end - begin))
        }
        return SafetensorsEntry(name: name, dtype: dtype, shape: shape, dataRange: Int(begin)..<Int(end))
    }

    static func checkLayout(_ entries: [SafetensorsEntry], path: String, dataSize: Int) throws(ShrinkIOError) {
        let ordered = entries.sorted {
            ($0.dataRange.lowerBound, $0.dataRange.upperBound) < ($1.dataRange.lowerBound, $1.dataRange.upperBound)
        }
        var covered = 0
        var previous: SafetensorsEntry?
        for entry in ordered {
            if entry.dataRange.lowerBound < covered, let previous {
                throw .overlappingTensors(path: path, tensor: entry.name, other: previous.name, byteOffset: entry.dataRange.lowerBound)
            }
            if entry.dataRange.lowerBound > covered {
                throw .uncoveredBytes(path: path, begin: covered, end: entry.dataRange.lowerBound)
            }
            covered = max(covered, entry.dataRange.upperBound)
            previous = entry
        }
        if covered != dataSize {
            throw .uncoveredBytes(path: path, begin: covered, end: dataSize)
        }
    }

    /// The offset of the first byte that is not part of a valid UTF-8 sequence, if any.
    static func firstInvalidUTF8Offset(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var index = 0
        while index < bytes.count {
            let lead = bytes[index]
            if lead < 0x80 { index += 1; continue }
            let length: Int
            let minimum: UInt32
            switch lead {
            case 0xC2...0xDF: (length, minimum) = (2, 0x80)
            case 0xE0...0xEF: (length, minimum) = (3, 0x800)
            case 0xF0...0xF4: (length, minimum) = (4, 0x10000)
            default: return index
            }
            guard index + length <= bytes.count else { return index }
            var scalar = UInt32(lead) & (0xFF >> (length + 1))
            for continuation in 1..<length {
                let byte = bytes[index + continuation]
                guard byte & 0xC0 == 0x80 else { return index }
                scalar = scalar << 6 | UInt32(byte & 0x3F)
            }
            guard scalar >= minimum, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else { return index }
            index += length
        }
        return nil
    }
}
