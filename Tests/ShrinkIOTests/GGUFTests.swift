import Foundation
import Testing
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// GGUF files written by the `gguf` package (PyPI) read with the same metadata, and every ggml
/// type decodes bit for bit as `gguf.quants.dequantize` decodes it; the real SmolLM2 file (written
/// by llama.cpp's tools) too.
@Suite struct GGUFCrossCheckTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/gguf_crosscheck.py").path

    static func runScript(_ arguments: [String]) throws {
        let (status, errorText, _) = try runPythonScript(script, arguments)
        guard status == 0 else {
            throw PythonCrossCheckTests.CrossCheckFailure(message: "python3 \(script) \(arguments[0]) failed (pip install gguf?): \(errorText)")
        }
    }

    /// Every element of `tensor` decoded by Shrink equals the expected float bit for bit (NaN as NaN).
    static func expectIdentical(_ name: String, _ actual: [Float], _ expected: DenseTensor, shape: [Int]) {
        #expect(expected.shape == shape, "\(name): shape \(shape), Python \(expected.shape)")
        let reference = expected.floats()
        #expect(actual.count == reference.count, "\(name): element count")
        let mismatch = firstBitMismatch(actual, reference)
        #expect(mismatch == nil, "\(name): element \(mismatch?.offset ?? -1) is \(mismatch?.actual ?? 0), gguf.quants says \(mismatch?.expected ?? 0)")
    }

    @Test func everyTypeDecodesAsTheGGUFPackageDoes() throws {
        let folder = TemporaryDirectory()
        try Self.runScript(["write", folder.path])
        let store = try GGUFStore(path: folder.file("synthetic.gguf"))
        let expected = try SafetensorsFile(path: folder.file("expected.safetensors"))
        #expect(store.file.version == 3)
        #expect(store.file.alignment == 64)
        #expect(Set(store.names) == Set(GGMLType.allCases.map { "tensor." + $0.name }))
        for type in GGMLType.allCases {
            let name = "tensor." + type.name
            let tensor = try store.require(name)
            #expect(store.storage(of: name)?.summary == type.name)
            #expect(store.storage(of: name)?.bytes == 3 * (type.blockLength == 1 ? 37 : 2) * type.blockBytes)
            if let encoding = GGMLEncoding.encoding(of: type), case .encoded(let encoded) = tensor {
                #expect(encoded.encoding == encoding, "\(name): \(encoded.encoding.summary)")
            }
            Self.expectIdentical(name, tensor.decodedFloats(), try expected.tensor(named: name), shape: tensor.shape)
        }
        let file = store.file
        #expect(file.value("test.u8") == .uint8(200))
        #expect(file.value("test.i8") == .int8(-100))
        #expect(file.value("test.u16") == .uint16(60000))
        #expect(file.value("test.i16") == .int16(-30000))
        #expect(file.value("test.u32") == .uint32(4_000_000_000))
        #expect(file.value("test.i32") == .int32(-2_000_000_000))
        #expect(file.value("test.f32") == .float32(0.5))
        #expect(file.value("test.bool") == .bool(true))
        #expect(file.value("test.string") == .string("héllo ✓"))
        #expect(file.value("test.u64") == .uint64(1 << 63 + 5))
        #expect(file.value("test.i64") == .int64(-(1 << 62)))
        #expect(file.value("test.f64") == .float64(1.25))
        #expect(file.value("test.strings")?.arrayValue == [.string("a"), .string(""), .string("ü")])
        #expect(file.value("test.ints")?.arrayValue?.compactMap(\.integerValue) == [1, -2, 3])
        #expect(file.value("test.nested") == .array(elementType: 9, [.array(elementType: 5, [.int32(1), .int32(2)]), .array(elementType: 5, [.int32(3)])]))
        #expect(store.metadata["general.architecture"] == "llama")
    }

    @Test func theSmolLM2FileDecodesAsTheGGUFPackageDoes() throws {
        let path = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
        let store = try GGUFStore(path: path)
        #expect(store.names.count == 272)
        #expect(store.metadata["general.architecture"] == "llama")
        // The token embedding (Q8_0), one layer's every tensor (Q4_1 linears, F32 norms) and the last norm.
        let names = ["token_embd.weight", "output_norm.weight"] + store.names.filter { $0.hasPrefix("blk.7.") }
        let folder = TemporaryDirectory()
        try Self.runScript(["decode", path, folder.file("expected.safetensors")] + names)
        let expected = try SafetensorsFile(path: folder.file("expected.safetensors"))
        var types = Set<String>()
        for name in names {
            let tensor = try store.require(name)
            types.insert(store.storage(of: name)!.summary)
            Self.expectIdentical(name, tensor.decodedFloats(), try expected.tensor(named: name), shape: tensor.shape)
        }
        #expect(types == ["Q8_0", "Q4_1", "F32"])
    }
}

/// The encodings GGUF types take (float offsets, two-level integer scales and offsets, palettes
/// with block scales) are part of the one vocabulary: the compressed container stores and reads
/// them back, and malformed parts are named.
@Suite struct GGMLEncodingTests {
    @Test func everyTypeRoundTripsThroughTheContainer() throws {
        var generator = SeededGenerator(seed: 4)
        let tensors = try GGMLBlocks.quantizedTypes.map { try GGMLBlocks.tensor($0, rows: 3, columns: 512, generator: &generator) }
        let folder = TemporaryDirectory()
        let path = folder.file("ggml.safetensors")
        try CompressedModel(denseTensors: [], encodedTensors: tensors, metadata: [:]).write(to: path)
        let store = try SafetensorsStore(path: path)
        for tensor in tensors {
            guard case .encoded(let read) = try store.require(tensor.name) else { Issue.record("\(tensor.name) is not encoded"); continue }
            #expect(read.encoding == tensor.encoding, "\(tensor.name): \(read.encoding.summary)")
            #expect(firstBitMismatch(read.decode(), tensor.decode()) == nil, "\(tensor.name) decodes differently after the round trip")
        }
    }

    @Test func malformedPartsAreNamed() throws {
        var generator = SeededGenerator(seed: 6)
        let q4K = try GGMLBlocks.tensor(.q4_K, rows: 2, columns: 256, generator: &generator)
        func rebuilt(_ encoding: WeightEncoding, removing part: String? = nil) throws(ShrinkCoreError) -> EncodedTensor {
            var parts = q4K.parts
            if let part { parts[part] = nil }
            return try EncodedTensor(name: "w", shape: q4K.shape, sourceDType: .f32, encoding: encoding, parts: parts)
        }
        #expect(throws: ShrinkCoreError.invalidEncodedTensor(name: "w", reason: "missing part 'super_offsets'")) {
            try rebuilt(q4K.encoding, removing: "super_offsets")
        }
        guard case .affine(var layout) = q4K.encoding else { Issue.record("Q4_K is affine"); return }
        layout.symmetric = true
        #expect(throws: ShrinkCoreError.invalidEncodedTensor(name: "w", reason: "offsets replace the zero points of an affine (not symmetric) encoding")) {
            try rebuilt(.affine(layout))
        }
        layout.symmetric = false
        layout.superBlockSize = 48
        #expect(throws: ShrinkCoreError.invalidEncodedTensor(name: "w", reason: "super-blocks need integer per-block scales and a multiple of the block size")) {
            try rebuilt(.affine(layout))
        }
        let iq4 = try GGMLBlocks.tensor(.iq4_XS, rows: 2, columns: 256, generator: &generator)
        var parts = iq4.parts
        parts["block_scales"] = try DenseTensor(dtype: .i8, shape: [3], bytes: [1, 2, 3])
        #expect(throws: ShrinkCoreError.invalidEncodedTensor(name: "w", reason: "part 'block_scales' has 3 elements, expected 16")) {
            try EncodedTensor(name: "w", shape: iq4.shape, sourceDType: .f32, encoding: iq4.encoding, parts: parts)
        }
    }
}
