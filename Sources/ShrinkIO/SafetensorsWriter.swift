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
        var names = Set<String>()
        for (name, _) in tensors {
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
            let entries = metadata.keys.sorted().map { (key: $0, value: JSONValue.string(metadata[$0]!)) }
            pairs.append((key: "__metadata__", value: .object(entries)))
        }
        var offset = 0
        for (name, tensor) in tensors {
            let entry: JSONValue = .object([
                (key: "dtype", value: .string(tensor.dtype.rawValue)),
                (key: "shape", value: .array(tensor.shape.map { .number(String($0)) })),
                (key: "data_offsets", value: .array([.number(String(offset)), .number(String(offset + tensor.byteCount))])),
            ])
            pairs.append((key: name, value: entry))
            offset += tensor.byteCount
        }
        var header = JSONValue.object(pairs).serialized()
        header += String(repeating: " ", count: (8 - header.utf8.count % 8) % 8)

        let file = try AtomicFile(path: path)
        let length = UInt64(header.utf8.count).littleEndian
        try withUnsafeBytes(of: length) { bytes in
            Result { () throws(ShrinkIOError) in try file.write(bytes) }
        }.get()
        try file.write(header)
        for (_, tensor) in tensors {
            try file.write(tensor.bytes)
        }
        try file.commit()
    }
}
