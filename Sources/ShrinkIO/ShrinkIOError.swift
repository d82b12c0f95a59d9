import ShrinkCore

/// Errors reading or writing model files. Each names the file and, where it applies, the tensor,
/// key or byte offset, and prints as one line.
public enum ShrinkIOError: Error, Equatable, CustomStringConvertible {
    /// The file or folder does not exist or cannot be opened.
    case cannotOpen(path: String, reason: String)
    /// The file ends before `needed` bytes (`fileSize` available) while reading `what`.
    case truncated(path: String, what: String, needed: UInt64, fileSize: Int)
    /// The declared header length exceeds the format's limit.
    case headerTooLarge(path: String, length: UInt64, limit: Int)
    /// The header is not valid UTF-8; `byteOffset` is from the start of the file.
    case headerNotUTF8(path: String, byteOffset: Int)
    /// The header is not valid JSON; `byteOffset` is from the start of the file.
    case headerNotJSON(path: String, byteOffset: Int, reason: String)
    /// The header is valid JSON but not a description of tensors.
    case invalidHeader(path: String, reason: String)
    /// Two tensors in one file have the same name.
    case duplicateTensor(path: String, tensor: String)
    /// A tensor entry is malformed (missing or unknown key, wrong JSON type).
    case invalidEntry(path: String, tensor: String, reason: String)
    /// A tensor declares a dtype this format does not define.
    case unknownDType(path: String, tensor: String, dtype: String)
    /// A GGUF tensor has a ggml type number Shrink does not read.
    case unknownTensorType(path: String, tensor: String, type: UInt32)
    /// A tensor's shape has a negative, fractional or overflowing dimension.
    case invalidShape(path: String, tensor: String, reason: String)
    /// A tensor's byte range lies outside the data section (offsets relative to the data section).
    case offsetsOutOfBounds(path: String, tensor: String, begin: UInt64, end: UInt64, dataSize: Int)
    /// A tensor's byte range does not match its shape × dtype size.
    case sizeMismatch(path: String, tensor: String, expected: Int, actual: Int)
    /// Two tensors' byte ranges overlap; `byteOffset` is where the second one starts in the data section.
    case overlappingTensors(path: String, tensor: String, other: String, byteOffset: Int)
    /// Bytes of the data section that no tensor covers.
    case uncoveredBytes(path: String, begin: Int, end: Int)
    /// The `__metadata__` map is not an object of strings.
    case invalidMetadata(path: String, key: String, reason: String)
    /// A tensor that was asked for is not in the file.
    case tensorNotFound(path: String, tensor: String)
    /// A tensor cannot be written under this name.
    case invalidTensorName(path: String, tensor: String, reason: String)
    /// Writing failed; nothing was left at `path`.
    case writeFailed(path: String, reason: String)
    /// A model's `config.json` cannot be used.
    case invalidConfig(path: String, reason: String)
    /// The file is in a format this build cannot read.
    case unsupportedFormat(path: String, reason: String)
    /// Tensor `tensor` of the model at `path` cannot be written in the export format; `reason`
    /// names the nearest type the format has.
    case notExportable(path: String, tensor: String, reason: String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let reason):
            "\(path): cannot open: \(reason)"
        case .truncated(let path, let what, let needed, let fileSize):
            "\(path): truncated: \(what) needs \(needed) bytes but the file has \(fileSize)"
        case .headerTooLarge(let path, let length, let limit):
            "\(path): header length \(length) exceeds the limit of \(limit) bytes"
        case .headerNotUTF8(let path, let byteOffset):
            "\(path): header is not valid UTF-8 (byte \(byteOffset))"
        case .headerNotJSON(let path, let byteOffset, let reason):
            "\(path): header is not valid JSON: \(reason) (byte \(byteOffset))"
        case .invalidHeader(let path, let reason):
            "\(path): invalid header: \(reason)"
        case .duplicateTensor(let path, let tensor):
            "\(path): tensor '\(tensor)' appears more than once"
        case .invalidEntry(let path, let tensor, let reason):
            "\(path): tensor '\(tensor)': \(reason)"
        case .unknownDType(let path, let tensor, let dtype):
            "\(path): tensor '\(tensor)': unknown dtype '\(dtype)' (expected one of \(DType.allCases.map(\.rawValue).joined(separator: ", ")))"
        case .unknownTensorType(let path, let tensor, let type):
            "\(path): tensor '\(tensor)': ggml type \(type) is not supported (expected one of \(GGMLType.allCases.map(\.name).joined(separator: ", ")))"
        case .invalidShape(let path, let tensor, let reason):
            "\(path): tensor '\(tensor)': invalid shape: \(reason)"
        case .offsetsOutOfBounds(let path, let tensor, let begin, let end, let dataSize):
            "\(path): tensor '\(tensor)': data_offsets [\(begin), \(end)] outside the data section of \(dataSize) bytes"
        case .sizeMismatch(let path, let tensor, let expected, let actual):
            "\(path): tensor '\(tensor)': shape and dtype need \(expected) bytes but data_offsets span \(actual)"
        case .overlappingTensors(let path, let tensor, let other, let byteOffset):
            "\(path): tensor '\(tensor)' at data byte \(byteOffset) overlaps tensor '\(other)'"
        case .uncoveredBytes(let path, let begin, let end):
            "\(path): data bytes [\(begin), \(end)) belong to no tensor"
        case .invalidMetadata(let path, let key, let reason):
            "\(path): __metadata__ '\(key)': \(reason)"
        case .tensorNotFound(let path, let tensor):
            "\(path): no tensor named '\(tensor)'"
        case .invalidTensorName(let path, let tensor, let reason):
            "\(path): cannot write tensor '\(tensor)': \(reason)"
        case .writeFailed(let path, let reason):
            "\(path): write failed: \(reason)"
        case .invalidConfig(let path, let reason):
            "\(path): invalid model config: \(reason)"
        case .unsupportedFormat(let path, let reason):
            "\(path): unsupported format: \(reason)"
        case .notExportable(let path, let tensor, let reason):
            "\(path): tensor '\(tensor)' cannot be exported: \(reason)"
        }
    }
}
