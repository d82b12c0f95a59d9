import Foundation

/// The models Shrink knows by a short name, and where `scripts/fetch-models.py` puts them.
///
/// The cache folder is `$SHRINK_MODELS_DIR` when set, else `~/.cache/shrink/models`.
public enum ModelRegistry {
    /// A model fetched into the cache.
    public struct Entry: Sendable {
        /// The short name used on the command line (`minilm`).
        public let alias: String
        /// The folder inside the cache.
        public let folder: String
        /// The weights file inside that folder.
        public let weightsFile: String
    }

    /// Every known model, by alias. The default model comes first.
    public static let entries: [Entry] = [
        Entry(alias: "minilm", folder: "all-MiniLM-L6-v2", weightsFile: "model.safetensors"),
        Entry(alias: "smollm2", folder: "SmolLM2-135M-Instruct", weightsFile: "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ]

    /// The model used when none is named.
    public static var defaultEntry: Entry { entries[0] }

    /// The cache folder.
    public static var cacheDirectory: String {
        if let custom = ProcessInfo.processInfo.environment["SHRINK_MODELS_DIR"], !custom.isEmpty { return custom }
        return NSHomeDirectory() + "/.cache/shrink/models"
    }

    /// The folder of `entry` in the cache.
    public static func directory(of entry: Entry) -> String {
        cacheDirectory + "/" + entry.folder
    }

    /// The entry whose alias is `name`, if any.
    public static func entry(alias name: String) -> Entry? {
        entries.first { $0.alias == name }
    }
}
