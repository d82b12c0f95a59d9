import Foundation
import ShrinkIO

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

    /// A valid file with `metadata` and no tensors.
    public static func metadataOnly(_ metadata: [(String, GGUFValue)]) -> GGUFBuilder {
        var builder = header(tensors: 0, metadata: UInt64(metadata.count))
        for (key, value) in metadata {
            builder.string(key)
            builder.u32(typeNumber(value))
            builder.payload(value)
        }
        return builder
    }

    static func typeNumber(_ value: GGUFValue) -> UInt32 {
        switch value {
        case .uint8: 0
        case .int8: 1
        case .uint16: 2
        case .int16: 3
        case .uint32: 4
        case .int32: 5
        case .float32: 6
        case .bool: 7
        case .string: 8
        case .array: 9
        case .uint64: 10
        case .int64: 11
        case .float64: 12
        }
    }

    /// `value` as GGUF stores it after its type number.
    public mutating func payload(_ value: GGUFValue) {
        switch value {
        case .uint8(let v): bytes.append(v)
        case .int8(let v): bytes.append(UInt8(bitPattern: v))
        case .uint16(let v): withUnsafeBytes(of: v.littleEndian) { bytes += $0 }
        case .int16(let v): withUnsafeBytes(of: v.littleEndian) { bytes += $0 }
        case .uint32(let v): u32(v)
        case .int32(let v): u32(UInt32(bitPattern: v))
        case .float32(let v): u32(v.bitPattern)
        case .bool(let v): bytes.append(v ? 1 : 0)
        case .string(let text): string(text)
        case .array(let type, let elements):
            u32(type)
            u64(UInt64(elements.count))
            for element in elements { payload(element) }
        case .uint64(let v): u64(v)
        case .int64(let v): u64(UInt64(bitPattern: v))
        case .float64(let v): u64(v.bitPattern)
        }
    }

    public func write(_ folder: TemporaryDirectory, _ name: String = "model.gguf") -> String {
        let path = folder.file(name)
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        return path
    }
}
