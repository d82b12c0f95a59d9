import Foundation

/// Builds small GGUF files byte by byte, valid or broken on purpose.
public struct GGUFBuilder {
    public var bytes: [UInt8] = []

    public init() {}

    public mutating func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
    public mutating func u64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
    public mutating func string(_ text: String) {
        u64(UInt64(text.utf8.count))
        bytes += Array(text.utf8)
    }

    /// Header with `tensors` tensors and `metadata` key-value pairs declared.
    public static func header(version: UInt32 = 3, tensors: UInt64, metadata: UInt64) -> GGUFBuilder {
        var builder = GGUFBuilder()
        builder.bytes = Array("GGUF".utf8)
        builder.u32(version)
        builder.u64(tensors)
        builder.u64(metadata)
        return builder
    }

    public mutating func tensorInfo(_ name: String, dimensions: [UInt64], type: UInt32, offset: UInt64) {
        string(name)
        u32(UInt32(dimensions.count))
        for dimension in dimensions { u64(dimension) }
        u32(type)
        u64(offset)
    }

    /// Pads to `alignment` and appends `dataBytes` bytes of data.
    public mutating func data(_ dataBytes: Int, alignment: Int = 32) {
        while bytes.count % alignment != 0 { bytes.append(0) }
        bytes += [UInt8](repeating: 0x11, count: dataBytes)
    }

    /// A valid file: one F32 tensor `w` [2, 4] and one Q8_0 tensor `q` [1, 32], metadata `general.name`.
    public static func valid() -> GGUFBuilder {
        var builder = header(tensors: 2, metadata: 1)
        builder.string("general.name")
        builder.u32(8)
        builder.string("tiny")
        builder.tensorInfo("w", dimensions: [4, 2], type: 0, offset: 0)
        builder.tensorInfo("q", dimensions: [32, 1], type: 8, offset: 32)
        builder.data(32 + 34)
        return builder
    }

    public func write(_ folder: TemporaryDirectory, _ name: String = "model.gguf") -> String {
        let path = folder.file(name)
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        return path
    }
}
