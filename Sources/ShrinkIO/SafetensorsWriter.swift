import ShrinkCore

/// Writes tensors in the safetensors format (see `SafetensorsFile` for the layout).
///
/// Tensors are stored in the order given, contiguously; the header is padded with spaces to a
/// multiple of 8 bytes so that the data section starts aligned, as the reference writer does.
/// The write is atomic: on any error nothing is left at the destination.
public enum SafetensorsWriter {
    /// Writes `tensors` and `metadata` to `path`.
    /// - Throws: `ShrinkIOError.invalidTensorName` for an empty, reserved or repeated name;
    ///   `.writeFailed` when the file system refuses.
    public static func write(_ tensors: [(name: String, tensor: DenseTensor)], metadata: [String: String] = [:],
                             to path: String) throws(ShrinkIOError) {
        let layout = tensors.map { TensorDescriptor(name: $0.name, dtype: $0.tensor.dtype, shape: $0.tensor.shape) }
        try write(layout, metadata: metadata, to: path) { index throws(ShrinkIOError) in tensors[index].tensor }
    }

    /// Writes the tensors `layout` describes, asking `tensor(i)` for the `i`-th one only when its
    /// bytes are due, so at most one produced tensor is alive at a time; a produced tensor that
    /// views a mapped file has its pages released once written (`TensorStorage.releasePages`).
    /// - Throws: as `write(_:metadata:to:)`, and `.writeFailed` when a produced tensor does not have
    ///   its layout's dtype and shape; any error `tensor` throws, with nothing written.
    public static func write(_ layout: [TensorDescriptor], metadata: [String: String] = [:], to path: String,
                             tensor: (Int) throws(ShrinkIOError) -> DenseTensor) throws(ShrinkIOError) {
        var names = Set<String>()
        for entry in layout {
            let name = entry.name
            guard !name.isEmpty else { throw .invalidTensorName(path: path, tensor: name, reason: "the name is empty") }
            guard name != "__metadata__" else {
                throw .invalidTensorName(path: path, tensor: name, reason: "the name is reserved for metadata")
            }
            guard names.insert(name).inserted else {
                throw .invalidTensorName(path: path, tensor: name, reason: "the name appears more than once")
            }
        }
        var pairs: [(key: String, value: JSONValue)] = []
        if !metadata.isEmpty {
            let entries = metadata.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSONValue.string($0.value)) }
            pairs.append((key: "__metadata__", value: .object(entries)))
        }
        var offset = 0
        for entry in layout {
            guard let byteCount = Shape.byteCount(entry.shape, dtype: entry.dtype) else {
                throw .invalidShape(path: path, tensor: entry.name, reason: "\(entry.shape) overflows")
            }
            pairs.append((key: entry.name, value: .object([
                (key: "dtype", value: .string(entry.dtype.rawValue)),
                (key: "shape", value: .array(entry.shape.map { .number(String($0)) })),
                (key: "data_offsets", value: .array([.number(String(offset)), .number(String(offset + byteCount))])),
            ])))
            offset += byteCount
        }
        var header = JSONValue.object(pairs).serialized()
        header += String(repeating: " ", count: (8 - header.utf8.count % 8) % 8)

        let file = try AtomicFile(path: path)
        let length = UInt64(header.utf8.count).littleEndian
        try withUnsafeBytes(of: length) { bytes in
            Result { () throws(ShrinkIOError) in try file.write(bytes) }
        }.get()
        try file.write(header)
        for (index, entry) in layout.enumerated() {
            let produced = try tensor(index)
            guard produced.dtype == entry.dtype, produced.shape == entry.shape else {
                throw .writeFailed(path: path, reason: "tensor '\(entry.name)' came as \(produced.dtype.rawValue) \(produced.shape), not \(entry.dtype.rawValue) \(entry.shape)")
            }
            try file.write(produced.bytes)
            produced.storage.releasePages()
        }
        try file.commit()
    }
}
