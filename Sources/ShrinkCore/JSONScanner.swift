/// A strict JSON reader over UTF-8 bytes that can build a whole `JSONValue` or be driven token by
/// token, so that a format with a known schema (a safetensors header) is read without building a
/// tree: memory then grows with what is kept, not with the document.
public struct JSONScanner {
    /// The document.
    public let bytes: UnsafeRawBufferPointer
    /// The offset of the next unread byte.
    public private(set) var position = 0
    /// The deepest nesting `readValue` accepts.
    public static let maximumDepth = 256

    /// A scanner at the start of `bytes`.
    public init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// An error at `offset` (default: the current position).
    public func error(_ message: String, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(offset: offset ?? position, message: message)
    }

    /// The next unread byte, if any.
    public var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    /// Skips spaces, tabs and line breaks.
    public mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { position += 1 }
    }

    private mutating func expect(_ literal: String) throws(JSONParseError) {
        for byte in literal.utf8 {
            guard current == byte else { throw error("invalid literal, expected '\(literal)'") }
            position += 1
        }
    }

    /// Reads one value and everything nested in it.
    public mutating func readValue(depth: Int = 0) throws(JSONParseError) -> JSONValue {
        guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
        guard let byte = current else { throw error("unexpected end of JSON") }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try readNumber())
        default: throw error("unexpected character '\(Self.printable(byte))'")
        }
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        position += 1
        var pairs: [(key: String, value: JSONValue)] = []
        var seen = Set<String>()
        skipWhitespace()
        if current == UInt8(ascii: "}") { position += 1; return .object(pairs) }
        while true {
            skipWhitespace()
            let keyOffset = position
            guard current == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try readString()
            guard seen.insert(key).inserted else {
                throw JSONParseError(offset: keyOffset, message: "duplicate key \"\(key)\"", duplicateKey: key)
            }
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw error("expected ':' after key") }
            position += 1
            skipWhitespace()
            pairs.append((key, try readValue(depth: depth + 1)))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"): position += 1; return .object(pairs)
            default: throw error("expected ',' or '}' in object")
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        position += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") { position += 1; return .array(elements) }
        while true {
            skipWhitespace()
            elements.append(try readValue(depth: depth + 1))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"): position += 1; return .array(elements)
            default: throw error("expected ',' or ']' in array")
            }
        }
    }

    /// Reads a number and returns its source text.
    public mutating func readNumber() throws(JSONParseError) -> String {
        let start = position
        func digits(_ parser: inout JSONScanner) -> Int {
            var count = 0
            while let byte = parser.current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { parser.position += 1; count += 1 }
            return count
        }
        if current == UInt8(ascii: "-") { position += 1 }
        if current == UInt8(ascii: "0") {
            position += 1
            if let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { throw error("leading zero in number") }
        } else if digits(&self) == 0 {
            throw error("expected a digit")
        }
        if current == UInt8(ascii: ".") {
            position += 1
            guard digits(&self) > 0 else { throw error("expected a digit after '.'") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard digits(&self) > 0 else { throw error("expected a digit in exponent") }
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
    }

    /// Reads a string (the scanner must be at its opening quote): UTF-8 runs are validated and
    /// copied and escapes decoded into one byte buffer, O(length) however many escapes it holds.
    public mutating func readString() throws(JSONParseError) -> String {
        position += 1
        var utf8: [UInt8] = []
        var runStart = position
        func flushRun(_ parser: JSONScanner, upTo end: Int, into utf8: inout [UInt8]) throws(JSONParseError) {
            guard runStart < end else { return }
            let run = UnsafeRawBufferPointer(rebasing: parser.bytes[runStart..<end])
            guard String(validating: run, as: UTF8.self) != nil else {
                throw parser.error("invalid UTF-8 in string", at: runStart)
            }
            utf8.append(contentsOf: run)
        }
        func append(_ scalar: Unicode.Scalar, to utf8: inout [UInt8]) { utf8.append(contentsOf: String(scalar).utf8) }
        while true {
            guard let byte = current else { throw error("unterminated string") }
            if byte == UInt8(ascii: "\"") {
                try flushRun(self, upTo: position, into: &utf8)
                position += 1
                return String(decoding: utf8, as: UTF8.self)
            }
            if byte < 0x20 { throw error("control character in string") }
            if byte == UInt8(ascii: "\\") {
                try flushRun(self, upTo: position, into: &utf8)
                position += 1
                guard let escape = current else { throw error("unterminated escape") }
                position += 1
                switch escape {
                case UInt8(ascii: "\""): utf8.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): utf8.append(UInt8(ascii: "\\"))
                case UInt8(ascii: "/"): utf8.append(UInt8(ascii: "/"))
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"): append(try parseUnicodeEscape(), to: &utf8)
                default: throw error("invalid escape '\\\(Self.printable(escape))'", at: position - 1)
                }
                runStart = position
                continue
            }
            position += 1
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = current else { throw error("unterminated \\u escape") }
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            position += 1
        }
        return value
    }

    private mutating func parseUnicodeEscape() throws(JSONParseError) -> Unicode.Scalar {
        let start = position - 2
        let high = try parseHex4()
        if (0xD800...0xDBFF).contains(high) {
            guard current == UInt8(ascii: "\\"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") else {
                throw error("unpaired surrogate in \\u escape", at: start)
            }
            position += 2
            let low = try parseHex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate in \\u escape", at: start) }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!
        }
        guard let scalar = Unicode.Scalar(high) else { throw error("unpaired surrogate in \\u escape", at: start) }
        return scalar
    }

    /// Consumes `byte` after optional whitespace, or throws naming what was expected.
    public mutating func expect(_ byte: UInt8, _ what: String) throws(JSONParseError) {
        skipWhitespace()
        guard current == byte else { throw error("expected \(what)") }
        position += 1
    }

    /// Consumes `byte` after optional whitespace when it is next; returns whether it was.
    public mutating func consume(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard current == byte else { return false }
        position += 1
        return true
    }

    /// The kind of the value starting at the current byte, without reading it (`"object"`, …), or
    /// `nil` when no value can start there.
    public var upcomingKind: String? {
        guard let current else { return nil }
        return switch current {
        case UInt8(ascii: "{"): "object"
        case UInt8(ascii: "["): "array"
        case UInt8(ascii: "\""): "string"
        case UInt8(ascii: "t"), UInt8(ascii: "f"): "boolean"
        case UInt8(ascii: "n"): "null"
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): "number"
        default: nil
        }
    }

    static func printable(_ byte: UInt8) -> String {
        byte >= 0x20 && byte < 0x7F ? String(UnicodeScalar(byte)) : "0x" + String(byte, radix: 16)
    }
}
