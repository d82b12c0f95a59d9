import Foundation
import ShrinkCore

/// A GGUF file as a `TensorStore`: F32, F16 and BF16 tensors are dense views of the mapped file;
/// block-quantized ones are re-laid losslessly into their `WeightEncoding` (`GGMLEncoding`) the
/// first time they are asked for, and kept. Nothing is decoded to floats.
public struct GGUFStore: TensorStore, @unchecked Sendable {
    public let file: GGUFFile
    private let cache = EncodedCache()

    /// Encoded tensors already re-laid, by name.
    final class EncodedCache: @unchecked Sendable {
        let lock = NSLock()
        var tensors: [String: EncodedTensor] = [:]
    }
    public var path: String { file.path }
    public var formatName: String { "gguf v\(file.version)" }
    public var names: [String] { file.tensors.map(\.name) }
    public var fileBytes: Int { file.fileSize }
    /// Metadata values as one line of text each (`GGUFValue.summary`).
    public let metadata: [String: String]

    public init(path: String) throws(ShrinkIOError) {
        file = try GGUFFile(path: path)
        metadata = Dictionary(uniqueKeysWithValues: file.metadata.map { ($0.key, $0.value.summary) })
    }

    public func tensor(named name: String) -> StoredTensor? {
        guard let info = file.tensor(named: name) else { return nil }
        let storage = file.storage(of: info)
        // The parser checked that the byte range holds the shape's whole blocks (or values).
        if let dtype = info.type.denseDType {
            return (try? DenseTensor(dtype: dtype, shape: info.shape, storage: storage)).map(StoredTensor.dense)
        }
        return cache.lock.withLock {
            if let kept = cache.tensors[name] { return .encoded(kept) }
            guard let encoded = try? GGMLEncoding.encode(storage.bytes, type: info.type, name: name, shape: info.shape) else { return nil }
            cache.tensors[name] = encoded
            return .encoded(encoded)
        }
    }

    /// Block-quantized tensors are F32 before quantization as far as the file says.
    public var descriptors: [TensorDescriptor] {
        file.tensors.map { TensorDescriptor(name: $0.name, dtype: $0.type.denseDType ?? .f32, shape: $0.shape) }
    }

    /// The ggml type name and the tensor's bytes in the file.
    public func storage(of name: String) -> (summary: String, bytes: Int)? {
        file.tensor(named: name).map { ($0.type.name, $0.byteRange.count) }
    }
}
