import ShrinkCore

/// The container formats a weights file can be in, told apart by their first bytes.
public enum ModelFileFormat: String, Sendable {
    /// safetensors: an 8-byte header length, then a JSON header starting with `{`.
    case safetensors
    /// GGUF: the magic `GGUF`.
    case gguf

    /// Detects the format of the file at `path` from its first bytes.
    /// - Throws: `ShrinkIOError.cannotOpen`, or `.unsupportedFormat` when the bytes match no format.
    public static func detect(path: String) throws(ShrinkIOError) -> ModelFileFormat {
        let file = try mapForReading(path)
        let bytes = file.bytes
        if bytes.count >= 4, Array(bytes.prefix(4)) == Array("GGUF".utf8) { return .gguf }
        if bytes.count >= 9, bytes[8] == UInt8(ascii: "{") { return .safetensors }
        if bytes.count < 9 { return .safetensors }  // Too short for any format: let the reader name the truncation.
        throw .unsupportedFormat(path: path, reason: "neither safetensors (JSON header) nor GGUF (magic 'GGUF')")
    }
}

/// Maps `path` read-only, reporting failures as `ShrinkIOError.cannotOpen`.
func mapForReading(_ path: String) throws(ShrinkIOError) -> MemoryMappedFile {
    do {
        return try MemoryMappedFile(path: path)
    } catch {
        guard case .cannotMap(_, let reason) = error else { throw .cannotOpen(path: path, reason: error.description) }
        throw .cannotOpen(path: path, reason: reason)
    }
}
