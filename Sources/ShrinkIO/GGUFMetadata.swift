import ShrinkCore

/// The key-value metadata of a GGUF file (hyper-parameters, tokenizer, chat template), read from
/// the file or carried in a compressed container made from one (metadata key `shrink.gguf_metadata`),
/// where every value keeps its GGUF type.
///
/// JSON form: an array of `[key, value]`; a value is `[type, payload]` with GGUF's type numbers
/// (0 uint8 … 12 float64), numbers written exactly (`Float` in its shortest round-trip form), and
/// an array `[9, elementType, [value…]]`.
public struct GGUFMetadata: Sendable {
    /// The container key the JSON form is stored under.
    public static let containerKey = "shrink.gguf_metadata"

    /// The file the metadata came from (for error messages).
    public let path: String
    public let entries: [(key: String, value: GGUFValue)]
    let index: [String: Int]

    public init(path: String, entries: [(key: String, value: GGUFValue)]) {
        self.path = path
        self.entries = entries
        var index: [String: Int] = [:]
        for (position, entry) in entries.enumerated() where index[entry.key] == nil { index[entry.key] = position }
        self.index = index
    }

    public init(file: GGUFFile) { self.init(path: file.path, entries: file.metadata) }

    public func value(_ key: String) -> GGUFValue? { index[key].map { entries[$0].value } }

    /// The JSON form (see the type's documentation).
    public var json: String {
        JSONValue.array(entries.map { .array([.string($0.key), Self.encode($0.value)]) }).serialized()
    }

    /// Reads the JSON form stored in the container at `path`.
    /// - Throws: `ShrinkIOError.invalidMetadata` naming the container, the key and the entry.
    public init(json: String, path: String) throws(ShrinkIOError) {
        func fail(_ reason: String) -> ShrinkIOError { .invalidMetadata(path: path, key: Self.containerKey, reason: reason) }
        let root: JSONValue
        do {
            root = try JSONValue.parse(json)
        } catch {
            throw fail("not JSON: \(error)")
        }
        guard let list = root.arrayValue else { throw fail("not an array of [key, value]") }
        var entries: [(key: String, value: GGUFValue)] = []
        for (position, item) in list.enumerated() {
            guard let pair = item.arrayValue, pair.count == 2, let key = pair[0].stringValue else { throw fail("entry \(position) is not [key, value]") }
            guard let value = Self.decode(pair[1]) else { throw fail("entry \(position) ('\(key)') is not a typed GGUF value") }
            entries.append((key, value))
        }
        self.init(path: path, entries: entries)
    }

    static func encode(_ value: GGUFValue) -> JSONValue {
        func tagged(_ type: Int, _ payload: JSONValue) -> JSONValue { .array([.number("\(type)"), payload]) }
        switch value {
        case .uint8(let v): return tagged(0, .number("\(v)"))
        case .int8(let v): return tagged(1, .number("\(v)"))
        case .uint16(let v): return tagged(2, .number("\(v)"))
        case .int16(let v): return tagged(3, .number("\(v)"))
        case .uint32(let v): return tagged(4, .number("\(v)"))
        case .int32(let v): return tagged(5, .number("\(v)"))
        case .float32(let v): return tagged(6, v.isFinite ? .number("\(v)") : .string("\(v)"))
        case .bool(let v): return tagged(7, .bool(v))
        case .string(let v): return tagged(8, .string(v))
        case .array(let elementType, let elements):
            return .array([.number("9"), .number("\(elementType)"), .array(elements.map(encode))])
        case .uint64(let v): return tagged(10, .number("\(v)"))
        case .int64(let v): return tagged(11, .number("\(v)"))
        case .float64(let v): return tagged(12, v.isFinite ? .number("\(v)") : .string("\(v)"))
        }
    }

    static func decode(_ json: JSONValue) -> GGUFValue? {
        guard let parts = json.arrayValue, parts.count >= 2, let type = parts[0].integerValue else { return nil }
        let payload = parts[1]
        func text() -> String? {
            if case .number(let text) = payload { return text }
            return payload.stringValue
        }
        switch type {
        case 0: return text().flatMap(UInt8.init).map(GGUFValue.uint8)
        case 1: return text().flatMap(Int8.init).map(GGUFValue.int8)
        case 2: return text().flatMap(UInt16.init).map(GGUFValue.uint16)
        case 3: return text().flatMap(Int16.init).map(GGUFValue.int16)
        case 4: return text().flatMap(UInt32.init).map(GGUFValue.uint32)
        case 5: return text().flatMap(Int32.init).map(GGUFValue.int32)
        case 6: return text().flatMap(Float.init).map(GGUFValue.float32)
        case 7: if case .bool(let v) = payload { return .bool(v) } else { return nil }
        case 8: return payload.stringValue.map(GGUFValue.string)
        case 9:
            guard parts.count == 3, let elementType = payload.integerValue, elementType >= 0, let items = parts[2].arrayValue else { return nil }
            var elements: [GGUFValue] = []
            elements.reserveCapacity(items.count)
            for item in items {
                guard let element = decode(item) else { return nil }
                elements.append(element)
            }
            return .array(elementType: UInt32(elementType), elements)
        case 10: return text().flatMap(UInt64.init).map(GGUFValue.uint64)
        case 11: return text().flatMap(Int64.init).map(GGUFValue.int64)
        case 12: return text().flatMap(Double.init).map(GGUFValue.float64)
        default: return nil
        }
    }
}
