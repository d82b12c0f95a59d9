import ShrinkCore

/// A GGUF tensor in a ggml block type, kept as stored (its bytes view the mapped file).
public struct GGMLTensor: Sendable {
    public let name: String
    /// Row-major shape, the contiguous (input) axis last.
    public let shape: [Int]
    public let type: GGMLType
    public let storage: TensorStorage

    public var elementCount: Int { shape.reduce(1, *) }
    public var byteCount: Int { storage.bytes.count }

    /// The reference decoding (`GGMLType.decode`) of flat positions `flatRange`, which must start
    /// and end on block boundaries.
    public func decode(blocks: Range<Int>, into output: UnsafeMutablePointer<Float>) {
        precondition(blocks.lowerBound >= 0 && blocks.upperBound * type.blockLength <= elementCount)
        type.decode(storage.bytes.baseAddress! + blocks.lowerBound * type.blockBytes, blocks: blocks.count, into: output)
    }

    /// The whole tensor decoded to floats, row-major.
    public func decode() -> [Float] {
        var output = [Float](repeating: 0, count: elementCount)
        output.withUnsafeMutableBufferPointer { decode(blocks: 0..<(elementCount / type.blockLength), into: $0.baseAddress!) }
        return output
    }
}

/// A GGUF file as a `TensorStore`: F32, F16 and BF16 tensors are dense views of the mapped file,
/// block-quantized ones `StoredTensor.ggml` views in their ggml layout (nothing is decoded at open).
public struct GGUFStore: TensorStore {
    public let file: GGUFFile
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
        if let dtype = info.type.denseDType {
            // The parser checked that the byte range is shape × dtype size.
            guard let tensor = try? DenseTensor(dtype: dtype, shape: info.shape, storage: storage) else { return nil }
            return .dense(tensor)
        }
        return .ggml(GGMLTensor(name: name, shape: info.shape, type: info.type, storage: storage))
    }
}
