/// A JSON document as parsed by `JSONValue.parse`: objects keep their keys in file order and
/// numbers keep their source text, so integers of any size are read exactly.
///
/// The parser is strict (RFC 8259): one value, no trailing commas, no comments, valid UTF-8 in
/// strings and escapes, nesting at most 256 deep, and a duplicate key inside one object is an error.
public indirect enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    /// A number with its source text (for example `"12"`, `"-0.5e3"`).
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Key–value pairs in document order; keys are unique.
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.number(a), .number(b)): a == b
        case let (.string(a), .string(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.object(a), .object(b)): a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// The value as an exact integer when it is a number written without fraction or exponent
    /// that fits in `Int`.
    public var integerValue: Int? {
        guard case .number(let text) = self else { return nil }
        return Int(text)
    }

    /// The value as a `Double` when it is a number.
    public var doubleValue: Double? {
        guard case .number(let text) = self else { return nil }
        return Double(text)
    }

    /// The value when it is a string.
    public var stringValue: String? {
        guard case .string(let text) = self else { return nil }
        return text
    }

    /// The pairs when the value is an object.
    public var objectValue: [(key: String, value: JSONValue)]? {
        guard case .object(let pairs) = self else { return nil }
        return pairs
    }

    /// The elements when the value is an array.
    /// The value of the first member `key` of an object, nil for other values or a missing key.
    public func member(_ key: String) -> JSONValue? {
        objectValue?.first { $0.key == key }?.value
    }

    public var arrayValue: [JSONValue]? {
        guard case .array(let elements) = self else { return nil }
        return elements
    }

    /// A short name of the value's kind, for error messages (`"object"`, `"string"`, …).
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// The value written as compact JSON (objects in stored key order).
    public func serialized() -> String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .null: output += "null"
        case .bool(let value): output += value ? "true" : "false"
        case .number(let text): output += text
        case .string(let text): Self.writeString(text, to: &output)
        case .array(let elements):
            output += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { output += "," }
                element.write(to: &output)
            }
            output += "]"
        case .object(let pairs):
            output += "{"
            for (index, pair) in pairs.enumerated() {
                if index > 0 { output += "," }
                Self.writeString(pair.key, to: &output)
                output += ":"
                pair.value.write(to: &output)
            }
            output += "}"
        }
    }

    private static func writeString(_ text: String, to output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}

/// Why a JSON text was rejected, with the byte offset (from the start of the text) where it was.
public struct JSONParseError: Error, Equatable, CustomStringConvertible {
    /// Byte offset of the offending character.
    public let offset: Int
    /// What was wrong there.
    public let message: String
    /// The repeated key, when the error is a key that appears twice in one object.
    public let duplicateKey: String?

    public init(offset: Int, message: String, duplicateKey: String? = nil) {
        self.offset = offset
        self.message = message
        self.duplicateKey = duplicateKey
    }

    public var description: String { "\(message) at byte \(offset)" }
}

extension JSONValue {
    /// Parses one JSON value from UTF-8 bytes; surrounding whitespace is allowed.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONValue {
        var parser = JSONScanner(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.readValue()
        parser.skipWhitespace()
        guard parser.position == bytes.count else { throw parser.error("unexpected data after the JSON value") }
        return value
    }

    /// Parses one JSON value from a string.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var copy = text
        return try copy.withUTF8 { buffer in
            Result { () throws(JSONParseError) in try parse(UnsafeRawBufferPointer(buffer)) }
        }.get()
    }
}
