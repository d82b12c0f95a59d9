import ShrinkCore

/// A model whose weights may be encoded: a safetensors file in which uncompressed tensors are
/// stored as they were and each encoded tensor `name` stores its parts as tensors `name#part`
/// (for example `w#codes`, `w#scales`).
///
/// `__metadata__` keys:
/// - `shrink.format`: `"1"`;
/// - `shrink.tensors`: JSON object mapping each encoded tensor's name to
///   `{"shape": [...], "dtype": "<source dtype>", "encoding": <WeightEncoding JSON>, "parts": ["codes", …]}`;
/// - `shrink.recipe`: the recipe JSON; `shrink.source_sha256`: the source file's SHA-256;
/// - any other metadata of the source file, unchanged.
public struct CompressedModel: Sendable {
    /// The metadata value that marks a compressed model.
    public static let formatVersion = "1"
    /// Separator between a tensor's name and its part name.
    public static let partSeparator = "#"

    /// Tensors kept as they were, in file order.
    public var denseTensors: [(name: String, tensor: DenseTensor)]
    /// Encoded tensors, in file order.
    public var encodedTensors: [EncodedTensor]
    /// Metadata other than the `shrink.format` and `shrink.tensors` keys.
    public var metadata: [String: String]

    public init(denseTensors: [(name: String, tensor: DenseTensor)], encodedTensors: [EncodedTensor], metadata: [String: String]) {
        self.denseTensors = denseTensors
        self.encodedTensors = encodedTensors
        self.metadata = metadata
    }

    /// Whether an opened safetensors file is a compressed model.
    public static func isCompressed(_ file: SafetensorsFile) -> Bool { file.metadata["shrink.format"] != nil }

    /// Reads a compressed model (or a plain safetensors file, whose tensors are all dense).
    /// - Throws: `ShrinkIOError` naming the file and the metadata key or tensor that is wrong.
    public init(file: SafetensorsFile) throws(ShrinkIOError) {
        let path = file.path
        var metadata = file.metadata
        guard let version = metadata.removeValue(forKey: "shrink.format") else {
            self.init(denseTensors: file.tensors(), encodedTensors: [], metadata: metadata)
            return
        }
        guard version == Self.formatVersion else {
            throw .invalidMetadata(path: path, key: "shrink.format", reason: "version \(version) is not supported (expected \(Self.formatVersion))")
        }
        guard let description = metadata.removeValue(forKey: "shrink.tensors") else {
            throw .invalidMetadata(path: path, key: "shrink.tensors", reason: "missing")
        }
        let root: JSONValue
        do { root = try JSONValue.parse(description) } catch {
            throw .invalidMetadata(path: path, key: "shrink.tensors", reason: "invalid JSON: \(error)")
        }
        guard let entries = root.objectValue else {
            throw .invalidMetadata(path: path, key: "shrink.tensors", reason: "expected a JSON object")
        }
        var partNames = Set<String>()
        var encoded: [EncodedTensor] = []
        for (name, value) in entries {
            func fail(_ reason: String) -> ShrinkIOError { .invalidMetadata(path: path, key: "shrink.tensors.\(name)", reason: reason) }
            guard let fields = value.objectValue else { throw fail("expected an object") }
            func field(_ key: String) -> JSONValue? { fields.first { $0.key == key }?.value }
            guard let shape = field("shape")?.arrayValue?.compactMap(\.integerValue), shape.count == field("shape")?.arrayValue?.count,
                  shape.allSatisfy({ $0 >= 0 }) else { throw fail("shape must be an array of non-negative integers") }
            guard let dtypeName = field("dtype")?.stringValue, let dtype = DType(rawValue: dtypeName) else {
                throw fail("dtype must name a dtype")
            }
            guard let encodingValue = field("encoding") else { throw fail("encoding is missing") }
            let encoding: WeightEncoding
            do { encoding = try WeightEncoding(json: encodingValue) } catch { throw fail(error.message) }
            guard let parts = field("parts")?.arrayValue?.compactMap(\.stringValue) else { throw fail("parts must be an array of names") }
            var tensors: [String: DenseTensor] = [:]
            for part in parts {
                let stored = name + Self.partSeparator + part
                tensors[part] = try file.tensor(named: stored)
                partNames.insert(stored)
            }
            do {
                encoded.append(try EncodedTensor(name: name, shape: shape, sourceDType: dtype, encoding: encoding, parts: tensors))
            } catch {
                throw fail(error.description)
            }
        }
        self.init(denseTensors: file.tensors().filter { !partNames.contains($0.name) }, encodedTensors: encoded, metadata: metadata)
    }

    /// Writes the model atomically to `path`: dense tensors first, then each encoded tensor's parts.
    public func write(to path: String) throws(ShrinkIOError) {
        var tensors = denseTensors
        var descriptions: [(key: String, value: JSONValue)] = []
        for encoded in encodedTensors {
            let parts = encoded.parts.sorted { $0.key < $1.key }
            for (part, data) in parts { tensors.append((encoded.name + Self.partSeparator + part, data)) }
            descriptions.append((encoded.name, .object([
                ("shape", .array(encoded.shape.map { .number(String($0)) })),
                ("dtype", .string(encoded.sourceDType.rawValue)),
                ("encoding", encoded.encoding.json),
                ("parts", .array(parts.map { .string($0.key) })),
            ])))
        }
        var metadata = self.metadata
        metadata["shrink.format"] = Self.formatVersion
        metadata["shrink.tensors"] = JSONValue.object(descriptions).serialized()
        try SafetensorsWriter.write(tensors, metadata: metadata, to: path)
    }
}
