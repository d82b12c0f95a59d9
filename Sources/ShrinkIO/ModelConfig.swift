import ShrinkCore

/// The parts of a Hugging Face `config.json` that Shrink reads.
public struct ModelConfig: Sendable, Equatable {
    /// `model_type`, e.g. `"bert"` or `"llama"`.
    public let modelType: String?
    /// `architectures[0]`, e.g. `"BertModel"`.
    public let architecture: String?

    /// Reads and parses the config at `path`.
    /// - Throws: `ShrinkIOError.cannotOpen` or `.invalidConfig` naming the file and the problem.
    public init(path: String) throws(ShrinkIOError) {
        let file = try mapForReading(path)
        let root: JSONValue
        do { root = try JSONValue.parse(file.bytes) } catch { throw .invalidConfig(path: path, reason: error.description) }
        guard let pairs = root.objectValue else { throw .invalidConfig(path: path, reason: "expected a JSON object") }
        func value(_ key: String) -> JSONValue? { pairs.first { $0.key == key }?.value }
        if let type = value("model_type"), type.stringValue == nil {
            throw .invalidConfig(path: path, reason: "model_type must be a string, found \(type.kindName)")
        }
        modelType = value("model_type")?.stringValue
        architecture = value("architectures")?.arrayValue?.first?.stringValue
    }
}
