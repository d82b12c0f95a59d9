import Foundation
import Testing
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

@Suite struct SafetensorsRoundTripTests {
    static func sampleTensors() throws -> [(name: String, tensor: DenseTensor)] {
        var generator = SeededGenerator(seed: 7)
        var tensors: [(name: String, tensor: DenseTensor)] = []
        for dtype in DType.allCases {
            let shape = [3, 5]
            let bytes = (0..<(15 * dtype.byteSize)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            tensors.append(("t.\(dtype.rawValue)", try DenseTensor(dtype: dtype, shape: shape, bytes: bytes)))
        }
        tensors.append(("scalar", try DenseTensor(converting: [42], shape: [])))
        tensors.append(("empty", try DenseTensor(dtype: .f16, shape: [0, 3], bytes: [UInt8]())))
        tensors.append(("odd", try DenseTensor(dtype: .u8, shape: [7], bytes: [1, 2, 3, 4, 5, 6, 7])))
        tensors.append(("after.odd", try DenseTensor(converting: [1.5, -2.25], to: .f32, shape: [2])))
        return tensors
    }

    @Test func writtenFilesReadBackByteForByte() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("model.safetensors")
        let tensors = try Self.sampleTensors()
        try SafetensorsWriter.write(tensors, metadata: ["format": "pt", "note": "é \"quoted\""], to: path)
        let file = try SafetensorsFile(path: path)
        #expect(file.metadata == ["format": "pt", "note": "é \"quoted\""])
        #expect(file.entries.map(\.name) == tensors.map(\.name))
        for (name, tensor) in tensors {
            let read = try file.tensor(named: name)
            #expect(read.dtype == tensor.dtype && read.shape == tensor.shape, "\(name)")
            #expect(Array(read.bytes) == Array(tensor.bytes), "\(name)")
            #expect(read.storage.isMapped)
        }
        // The header is padded so that the data section starts at a multiple of 8.
        let headerLength = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        #expect(headerLength % 8 == 0)
        #expect(folder.contents == ["model.safetensors"])
    }

    @Test func rewritingReplacesTheFileAtomically() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("m.safetensors")
        try SafetensorsWriter.write([("a", try DenseTensor(converting: [1], shape: [1]))], to: path)
        try SafetensorsWriter.write([("b", try DenseTensor(converting: [2, 3], shape: [2]))], to: path)
        #expect(try SafetensorsFile(path: path).entries.map(\.name) == ["b"])
        #expect(folder.contents == ["m.safetensors"])
    }

    @Test func failedWritesLeaveNothingBehind() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("out.safetensors")
        let tensor = try DenseTensor(converting: [1], shape: [1])
        #expect(throws: ShrinkIOError.invalidTensorName(path: path, tensor: "x", reason: "the name appears more than once")) {
            try SafetensorsWriter.write([("x", tensor), ("x", tensor)], to: path)
        }
        #expect(throws: ShrinkIOError.self) { try SafetensorsWriter.write([("__metadata__", tensor)], to: path) }
        #expect(throws: ShrinkIOError.self) { try SafetensorsWriter.write([("", tensor)], to: path) }
        #expect(throws: ShrinkIOError.self) { try SafetensorsWriter.write([("x", tensor)], to: folder.file("missing/out.safetensors")) }
        #expect(folder.contents.isEmpty)
    }

    /// A sparse 1 GiB file: opening it must map, not read, the data.
    @Test func largeFilesOpenWithoutReadingTheirData() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("big.safetensors")
        let count = 1 << 28
        var header = #"{"big":{"dtype":"F32","shape":[\#(count)],"data_offsets":[0,\#(count * 4)]}}"#
        header += String(repeating: " ", count: (8 - header.utf8.count % 8) % 8)
        var bytes = withUnsafeBytes(of: UInt64(header.utf8.count).littleEndian) { Array($0) }
        bytes += Array(header.utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: UInt64(bytes.count + count * 4))
        try handle.close()

        let file = try SafetensorsFile(path: path)
        let tensor = try file.tensor(named: "big")
        #expect(tensor.elementCount == count)
        #expect(tensor.bytes.load(fromByteOffset: (count - 1) * 4, as: Float.self) == 0)
    }
}
