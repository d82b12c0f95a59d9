import ShrinkCore

/// The subset of JSON Schema that guided generation holds a model to.
///
/// JSON: `{"type": "object", "properties": {...}, "required": [...]}`, `{"type": "string",
/// "minLength": n, "maxLength": n}`, `{"enum": ["a", "b"]}` (strings), `{"type": "integer"}`,
/// `{"type": "number"}`, `{"type": "boolean"}`, `{"type": "array", "items": {...}, "minItems": n,
/// "maxItems": n}`; `title`, `description`, `$schema` and `additionalProperties: false` are
/// allowed and ignored. Generated objects hold every property, in the schema's order (so every
/// required one); numbers are generated with at most 15 integer and 6 fraction digits, no exponent.
public indirect enum JSONSchema: Sendable, Equatable {
    case object([(name: String, schema: JSONSchema)])
    case string(minLength: Int, maxLength: Int?)
    case enumeration([String])
    case integer
    case number
    case boolean
    case array(items: JSONSchema, minItems: Int, maxItems: Int?)

    public static func == (lhs: JSONSchema, rhs: JSONSchema) -> Bool {
        switch (lhs, rhs) {
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.name == $1.name && $0.schema == $1.schema }
        case (.string(let a, let b), .string(let c, let d)): a == c && b == d
        case (.enumeration(let a), .enumeration(let b)): a == b
        case (.integer, .integer), (.number, .number), (.boolean, .boolean): true
        case (.array(let a, let b, let c), .array(let d, let e, let f)): a == d && b == e && c == f
        default: false
        }
    }

    /// Reads a schema document.
    /// - Throws: `ModelError.invalidFile` naming `path` and the key path of what is not supported.
    public init(json: JSONValue, path: String) throws(ModelError) {
        self = try Self.read(json, at: "", path: path)
    }

    static func read(_ json: JSONValue, at key: String, path: String) throws(ModelError) -> JSONSchema {
        func fail(_ at: String, _ reason: String) -> ModelError { .invalidFile(path: path, reason: "schema\(at): \(reason)") }
        guard let members = json.objectValue else { throw fail(key, "expected an object") }
        let known: Set<String> = ["type", "properties", "required", "enum", "items", "minItems", "maxItems", "minLength", "maxLength",
                                  "title", "description", "$schema", "additionalProperties"]
        if let unknown = members.first(where: { !known.contains($0.key) }) { throw fail("\(key).\(unknown.key)", "is not supported") }
        if let extra = json.member("additionalProperties"), extra != .bool(false) {
            throw fail("\(key).additionalProperties", "only false is supported (generated objects hold their properties only)")
        }
        func count(_ name: String) throws(ModelError) -> Int? {
            guard let value = json.member(name) else { return nil }
            guard let number = value.integerValue, number >= 0 else { throw fail("\(key).\(name)", "expected a whole number ≥ 0") }
            return number
        }
        if let values = json.member("enum") {
            guard let list = values.arrayValue, !list.isEmpty else { throw fail("\(key).enum", "expected a non-empty array") }
            var strings: [String] = []
            for (index, value) in list.enumerated() {
                guard let string = value.stringValue else { throw fail("\(key).enum[\(index)]", "only strings are supported") }
                strings.append(string)
            }
            return .enumeration(strings)
        }
        guard let type = json.member("type")?.stringValue else { throw fail("\(key).type", "missing or not a string") }
        switch type {
        case "object":
            guard let properties = json.member("properties")?.objectValue, !properties.isEmpty else {
                throw fail("\(key).properties", "an object schema needs a non-empty properties object")
            }
            var fields: [(name: String, schema: JSONSchema)] = []
            for (name, value) in properties { fields.append((name, try read(value, at: "\(key).properties.\(name)", path: path))) }
            for (index, name) in (json.member("required")?.arrayValue ?? []).enumerated() {
                guard let name = name.stringValue, properties.contains(where: { $0.key == name }) else {
                    throw fail("\(key).required[\(index)]", "names no property")
                }
            }
            return .object(fields)
        case "string":
            let minimum = try count("minLength") ?? 0, maximum = try count("maxLength")
            if let maximum, maximum < minimum { throw fail("\(key).maxLength", "is below minLength") }
            return .string(minLength: minimum, maxLength: maximum)
        case "integer": return .integer
        case "number": return .number
        case "boolean": return .boolean
        case "array":
            guard let items = json.member("items") else { throw fail("\(key).items", "an array schema needs items") }
            let minimum = try count("minItems") ?? 0, maximum = try count("maxItems")
            if let maximum, maximum < minimum { throw fail("\(key).maxItems", "is below minItems") }
            return .array(items: try read(items, at: "\(key).items", path: path), minItems: minimum, maxItems: maximum)
        default:
            throw fail("\(key).type", "'\(type)' is not supported (object, string, integer, number, boolean, array, or an enum of strings)")
        }
    }
}

/// A Swift type whose values a model can be held to generate: its schema, and decoding from the
/// generated JSON (`Decodable`). A protocol rather than a macro: macros need the swift-syntax
/// package, which this project cannot depend on.
public protocol GuidedGenerable: Decodable {
    static var generationSchema: JSONSchema { get }
}
