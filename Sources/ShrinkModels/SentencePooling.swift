import Foundation
import ShrinkCore

/// How token states become a sentence embedding, from a sentence-transformers model folder:
/// `1_Pooling/config.json` (mean or CLS-token pooling) and `modules.json` (a `Normalize` module
/// means L2 normalization). Folders without these files get mean pooling and normalization,
/// as all-MiniLM-L6-v2 uses.
public struct SentencePooling: Sendable, Equatable {
    public enum Mode: String, Sendable { case mean, cls }

    public var mode: Mode
    public var normalize: Bool

    public init(mode: Mode = .mean, normalize: Bool = true) {
        self.mode = mode
        self.normalize = normalize
    }

    /// Reads the pooling of the model in `folder`.
    /// - Throws: `ModelError.invalidFile` for unreadable JSON or a pooling mode Shrink does not run.
    public init(folder: String) throws(ModelError) {
        self.init()
        func object(_ path: String) throws(ModelError) -> JSONValue? {
            guard let data = FileManager.default.contents(atPath: path) else { return nil }
            do {
                return try data.withUnsafeBytes { bytes in Result { () throws(JSONParseError) in try JSONValue.parse(bytes) } }.get()
            } catch {
                throw .invalidFile(path: path, reason: "invalid JSON: \(error)")
            }
        }
        if let modules = try object(folder + "/modules.json") {
            guard let list = modules.arrayValue else { throw .invalidFile(path: folder + "/modules.json", reason: "expected an array") }
            normalize = list.contains { module in
                module.objectValue?.first { $0.key == "type" }?.value.stringValue?.hasSuffix(".Normalize") == true
            }
        }
        let poolingPath = folder + "/1_Pooling/config.json"
        if let pooling = try object(poolingPath) {
            let flags = Dictionary((pooling.objectValue ?? []).map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
            func enabled(_ key: String) -> Bool { flags[key] == .bool(true) }
            let chosen = ["pooling_mode_mean_tokens", "pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens"]
                .filter(enabled)
            switch chosen {
            case ["pooling_mode_mean_tokens"]: mode = .mean
            case ["pooling_mode_cls_token"]: mode = .cls
            default:
                throw .invalidFile(path: poolingPath, reason: "pooling \(chosen.isEmpty ? "none" : chosen.joined(separator: " + ")) is not supported (mean or cls tokens)")
            }
        }
    }
}
