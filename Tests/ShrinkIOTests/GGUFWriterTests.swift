import Foundation
import Testing
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// Encoded tensors go back into ggml blocks exactly (`GGMLBlockPacking`), and `GGUFWriter` writes
/// files `GGUFFile` reads back with the same metadata and tensors.
@Suite struct GGUFWriterTests {
    @Test func everyTypesBlocksPackBackToTheBytesTheyCameFrom() throws {
        var generator = SplitMix64(seed: 11)
        for type in GGMLBlocks.quantizedTypes {
            let bytes = GGMLBlocks.random(type, blocks: 3 * 512 / type.blockLength, generator: &generator)
            let tensor = try bytes.withUnsafeBytes { try GGMLEncoding.encode($0, type: type, name: type.name, shape: [3, 512]) }
            let packed = try GGMLBlockPacking.blocks(of: tensor)
            #expect(packed.type == type)
            #expect(packed.bytes == bytes, "\(type.name): the packed blocks differ from the original")
        }
    }

    @Test func aTensorNoTypeHoldsExactlyIsRefusedNamingThePart() throws {
        var generator = SplitMix64(seed: 12)
        let palette = try GGMLBlocks.tensor(.iq4_NL, rows: 2, columns: 64, generator: &generator)
        var parts = palette.parts
        parts["lut"] = try DenseTensor(dtype: .i8, shape: [16], bytes: (0..<16).map { UInt8($0) })
        let changed = try EncodedTensor(name: "w", shape: [2, 64], sourceDType: .f32, encoding: palette.encoding, parts: parts)
        #expect(throws: GGMLBlockPacking.Failure.notExact(type: .iq4_NL, part: "lut")) { try GGMLBlockPacking.blocks(of: changed) }
        let q8 = try GGMLBlocks.tensor(.q8_0, rows: 2, columns: 64, generator: &generator)
        guard case .affine(var layout) = q8.encoding else { Issue.record("Q8_0 is not affine"); return }
        layout.granularity = .perChannel(axis: 0)
        let perChannel = try EncodedTensor(name: "w", shape: [2, 64], sourceDType: .f32, encoding: .affine(layout),
                                           parts: ["codes": q8.parts["codes"]!, "scales": try DenseTensor(converting: [1, 2], to: .f16, shape: [2])])
        #expect(throws: GGMLBlockPacking.Failure.noType(encoding: WeightEncoding.affine(layout).summary)) { try GGMLBlockPacking.blocks(of: perChannel) }
    }

    @Test func writtenFilesReadBackWithTheirMetadataAndTensors() throws {
        var generator = SplitMix64(seed: 13)
        let metadata: [(key: String, value: GGUFValue)] = [
            ("general.architecture", .string("llama")), ("general.alignment", .uint32(64)), ("test.i8", .int8(-3)),
            ("test.u16", .uint16(65000)), ("test.i16", .int16(-2)), ("test.f32", .float32(0.25)), ("test.bool", .bool(false)),
            ("test.u64", .uint64(1 << 40)), ("test.i64", .int64(-5)), ("test.f64", .float64(-1.5)), ("test.u8", .uint8(7)),
            ("test.nested", .array(elementType: 9, [.array(elementType: 8, [.string("ä"), .string("")])])),
        ]
        let q4 = GGMLBlocks.random(.q4_K, blocks: 2, generator: &generator)
        let floats: [Float] = [1, -2, 3.5]
        let tensors = [
            GGUFWriter.Tensor(name: "a", shape: [3], type: .f32, bytes: floats.flatMap { withUnsafeBytes(of: $0.bitPattern.littleEndian, Array.init) }),
            GGUFWriter.Tensor(name: "b", shape: [2, 256], type: .q4_K, bytes: q4),
        ]
        let folder = TemporaryDirectory()
        let path = folder.file("written.gguf")
        try GGUFWriter.write(metadata: metadata, tensors: tensors, to: path)
        let file = try GGUFFile(path: path)
        #expect(file.version == 3 && file.alignment == 64)
        #expect(file.metadata.map(\.key) == metadata.map(\.key))
        #expect(file.metadata.map(\.value) == metadata.map(\.value))
        #expect(file.tensors.map(\.name) == ["a", "b"])
        #expect(file.tensor(named: "b")?.shape == [2, 256] && file.tensor(named: "b")?.type == .q4_K)
        #expect(file.tensor(named: "b").map { Array(file.storage(of: $0).bytes) } == q4)
        #expect(file.tensor(named: "a").map { Array(file.storage(of: $0).bytes) } == tensors[0].bytes)
        #expect(throws: ShrinkIOError.self) {
            try GGUFWriter.write(metadata: [], tensors: [GGUFWriter.Tensor(name: "c", shape: [2, 100], type: .q8_0, bytes: [])], to: folder.file("bad.gguf"))
        }
        #expect(!FileManager.default.fileExists(atPath: folder.file("bad.gguf")))
    }
}
