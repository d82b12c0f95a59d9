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
///
/// The header is read token by token against its schema rather than into a JSON tree, so memory
/// grows with the entries kept (names, shapes of at most `maximumRank` dimensions), never with
/// declared sizes or with values the schema does not allow.
enum SafetensorsHeader {
    struct Parsed {
        var entries: [SafetensorsEntry]
        var metadata: [String: String]
    }

    /// The most dimensions a tensor may have (NumPy's limit).
    static let maximumRank = 64
    static let fileOffset = 8

    /// Reads the header against the schema; `fail` turns a token-level error into a file error.
    struct Reader {
        var scanner: JSONScanner
        let path: String
        let dataSize: Int

        func notJSON(_ error: JSONParseError) -> ShrinkIOError {
            .headerNotJSON(path: path, byteOffset: SafetensorsHeader.fileOffset + error.offset, reason: error.message)
        }

        mutating func token<T>(_ body: (inout JSONScanner) throws(JSONParseError) -> T) throws(ShrinkIOError) -> T {
            do { return try body(&scanner) } catch { throw notJSON(error) }
        }

        /// Reads `{ "key": value, ... }`, calling `member` with each key; the scanner is left at
        /// the value, which `member` must read.
        mutating func object(duplicate: (String) -> ShrinkIOError,
                             member: (inout Reader, String) throws(ShrinkIOError) -> Void) throws(ShrinkIOError) {
            try token { (s) throws(JSONParseError) in try s.expect(UInt8(ascii: "{"), "'{'") }
            if try token({ s in s.consume(UInt8(ascii: "}")) }) { return }
            var seen = Set<String>()
            while true {
                let key = try token { (s) throws(JSONParseError) -> String in
                    s.skipWhitespace()
                    guard s.current == UInt8(ascii: "\"") else { throw s.error("expected a string key") }
                    return try s.readString()
                }
                guard seen.insert(key).inserted else { throw duplicate(key) }
                try token { (s) throws(JSONParseError) in try s.expect(UInt8(ascii: ":"), "':' after key"); s.skipWhitespace() }
                try member(&self, key)
                if try token({ s in s.consume(UInt8(ascii: ",")) }) { continue }
                try token { (s) throws(JSONParseError) in try s.expect(UInt8(ascii: "}"), "',' or '}' in object") }
                return
            }
        }

        /// Reads `[ n, ... ]` of numbers, passing each number's text; other values are an error.
        mutating func numbers(onOther: (String) -> ShrinkIOError, each: (String) throws(ShrinkIOError) -> Void) throws(ShrinkIOError) {
            try token { (s) throws(JSONParseError) in try s.expect(UInt8(ascii: "["), "'['") }
            if try token({ s in s.consume(UInt8(ascii: "]")) }) { return }
            while true {
                let kind = try upcomingKind()
                guard kind == "number" else { throw onOther(kind) }
                try each(try token { (s) throws(JSONParseError) in try s.readNumber() })
                if try token({ s in s.consume(UInt8(ascii: ",")) }) { continue }
                try token { (s) throws(JSONParseError) in try s.expect(UInt8(ascii: "]"), "',' or ']' in array") }
                return
            }
        }

        /// The kind of the value at the scanner, or the JSON error when no value starts there.
        mutating func upcomingKind() throws(ShrinkIOError) -> String {
            scanner.skipWhitespace()
            guard let kind = scanner.upcomingKind else {
                let found = scanner.current.map { "unexpected character '\(Unicode.Scalar($0))'" } ?? "unexpected end of JSON"
                throw notJSON(scanner.error(found))
            }
            return kind
        }

        /// Reads a string value, or throws `onOther` with the kind of value found instead.
        mutating func string(onOther: (String) -> ShrinkIOError) throws(ShrinkIOError) -> String {
            let kind = try upcomingKind()
            guard kind == "string" else { throw onOther(kind) }
            return try token { (s) throws(JSONParseError) in try s.readString() }
        }
    }

    static func parse(_ header: UnsafeRawBufferPointer, path: String, dataSize: Int) throws(ShrinkIOError) -> Parsed {
        if let invalid = firstInvalidUTF8Offset(header) {
            throw .headerNotUTF8(path: path, byteOffset: fileOffset + invalid)
        }
        guard header.first == UInt8(ascii: "{") else {
            throw .headerNotJSON(path: path, byteOffset: fileOffset, reason: "the header must start with '{'")
        }
        var reader = Reader(scanner: JSONScanner(bytes: header), path: path, dataSize: dataSize)
        var entries: [SafetensorsEntry] = []
        var metadata: [String: String] = [:]
        try reader.object(duplicate: { .duplicateTensor(path: path, tensor: $0) }) { (reader, name) throws(ShrinkIOError) in
            if name == "__metadata__" {
                metadata = try parseMetadata(&reader)
            } else {
                entries.append(try parseEntry(&reader, name: name))
            }
        }
        reader.scanner.skipWhitespace()
        guard reader.scanner.current == nil else {
            throw reader.notJSON(reader.scanner.error("unexpected data after the JSON value"))
        }
        try checkLayout(entries, path: path, dataSize: dataSize)
        return Parsed(entries: entries, metadata: metadata)
    }

    static func parseMetadata(_ reader: inout Reader) throws(ShrinkIOError) -> [String: String] {
        let path = reader.path
        let kind = try reader.upcomingKind()
        guard kind == "object" else {
            throw .invalidMetadata(path: path, key: "__metadata__", reason: "expected an object, found \(kind)")
        }
        var metadata: [String: String] = [:]
        try reader.object(duplicate: { .invalidMetadata(path: path, key: $0, reason: "appears more than once") }) {
            (reader, key) throws(ShrinkIOError) in
            metadata[key] = try reader.string { .invalidMetadata(path: path, key: key, reason: "expected a string, found \($0)") }
        }
        return metadata
    }

    static func parseEntry(_ reader: inout Reader, name: String) throws(ShrinkIOError) -> SafetensorsEntry {
        let path = reader.path, dataSize = reader.dataSize
        let kind = try reader.upcomingKind()
        guard kind == "object" else {
            throw .invalidEntry(path: path, tensor: name, reason: "expected an object, found \(kind)")
        }
        var dtypeName: String?
        var shape: [Int]?
        var bounds: [UInt64]?
        try reader.object(duplicate: { .invalidEntry(path: path, tensor: name, reason: "key '\($0)' appears more than once") }) {
            (reader, key) throws(ShrinkIOError) in
            switch key {
            case "dtype":
                dtypeName = try reader.string { .invalidEntry(path: path, tensor: name, reason: "dtype must be a string, found \($0)") }
            case "shape":
                let kind = try reader.upcomingKind()
                guard kind == "array" else {
                    throw .invalidShape(path: path, tensor: name, reason: "expected an array, found \(kind)")
                }
                var dimensions: [Int] = []
                try reader.numbers(onOther: { .invalidShape(path: path, tensor: name, reason: "dimension \(dimensions.count) is not a number (found \($0))") }) {
                    (text) throws(ShrinkIOError) in
                    guard dimensions.count < maximumRank else {
                        throw .invalidShape(path: path, tensor: name, reason: "more than \(maximumRank) dimensions")
                    }
                    guard let size = Int(text), size >= 0 else {
                        throw .invalidShape(path: path, tensor: name, reason: "dimension \(dimensions.count) is \(text), expected a non-negative integer")
                    }
                    dimensions.append(size)
                }
                shape = dimensions
            case "data_offsets":
                let malformed = ShrinkIOError.invalidEntry(path: path, tensor: name, reason: "data_offsets must be an array of two integers")
                guard try reader.upcomingKind() == "array" else { throw malformed }
                var values: [UInt64] = []
                try reader.numbers(onOther: { _ in malformed }) { (text) throws(ShrinkIOError) in
                    guard let bound = UInt64(text) else {
                        throw .invalidEntry(path: path, tensor: name, reason: "data_offsets must be non-negative integers, found \(text)")
                    }
                    guard values.count < 2 else { throw malformed }
                    values.append(bound)
                }
                guard values.count == 2 else { throw malformed }
                bounds = values
            default:
                throw .invalidEntry(path: path, tensor: name, reason: "unknown key '\(key)' (expected dtype, shape, data_offsets)")
            }
        }
        guard let dtypeName else { throw .invalidEntry(path: path, tensor: name, reason: "missing key 'dtype'") }
        guard let shape else { throw .invalidEntry(path: path, tensor: name, reason: "missing key 'shape'") }
        guard let bounds else { throw .invalidEntry(path: path, tensor: name, reason: "missing key 'data_offsets'") }
        guard let dtype = DType(rawValue: dtypeName) else {
            throw .unknownDType(path: path, tensor: name, dtype: dtypeName)
        }
        guard let expectedBytes = Shape.byteCount(shape, dtype: dtype) else {
            throw .invalidShape(path: path, tensor: name, reason: "\(Shape.describe(shape)) of \(dtype.rawValue) overflows")
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
