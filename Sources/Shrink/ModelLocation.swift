import Foundation
import ShrinkIO

/// Where a model's files are: a weights file and, for a model folder, its `config.json`.
public struct ModelLocation: Sendable, Equatable {
    /// The weights file.
    public let weightsPath: String
    /// The Hugging Face `config.json` next to the weights, when there is one.
    public let configPath: String?

    /// Resolves what a user typed: a registry alias (`minilm`), a model folder (containing
    /// `model.safetensors`), or a weights file.
    /// - Throws: `ShrinkIOError.cannotOpen` naming the path when nothing usable is there.
    public static func resolve(_ argument: String) throws(ShrinkIOError) -> ModelLocation {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        var path = argument
        if !fileManager.fileExists(atPath: path), let entry = ModelRegistry.entry(alias: argument) {
            path = ModelRegistry.directory(of: entry)
            guard fileManager.fileExists(atPath: path) else {
                throw .cannotOpen(path: path, reason: "model '\(argument)' is not downloaded; run scripts/fetch-models.py")
            }
        }
        guard fileManager.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .cannotOpen(path: path, reason: "no such file or folder")
        }
        if isDirectory.boolValue {
            let folder = path.hasSuffix("/") ? String(path.dropLast()) : path
            let candidates = ["model.safetensors"] + ModelRegistry.entries.map(\.weightsFile)
            guard let weights = candidates.map({ folder + "/" + $0 }).first(where: { fileManager.fileExists(atPath: $0) }) else {
                throw .cannotOpen(path: folder, reason: "folder holds no model.safetensors")
            }
            let config = folder + "/config.json"
            return ModelLocation(weightsPath: weights, configPath: fileManager.fileExists(atPath: config) ? config : nil)
        }
        let sibling = (path as NSString).deletingLastPathComponent
        let config = (sibling.isEmpty ? "." : sibling) + "/config.json"
        return ModelLocation(weightsPath: path, configPath: fileManager.fileExists(atPath: config) ? config : nil)
    }
}
