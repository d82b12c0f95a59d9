import Foundation
import Testing
import Shrink
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// `inspect` and `decompress` on GGUF files: the real SmolLM2 file and small handcrafted ones.
@Suite struct GGUFCommandTests {
    @Test func inspectShowsEachTensorsTypeBitsAndOpTypeAndTheMetadata() throws {
        let text = run(["inspect", "smollm2"])
        #expect(text.code == 0, "\(text.errors)")
        #expect(text.output.contains("Format:       gguf v3 (architecture: llama)"))
        #expect(text.output.contains("Parameters:   134,515,008"))
        #expect(text.output.contains("blk.29.ffn_gate.weight") && text.output.contains("mlp.gate"))
        #expect(text.output.contains("tokenizer.ggml.pre = smollm") && text.output.contains("tokenizer.ggml.tokens = [49152 × string]"))
        let json = run(["inspect", "--json", "smollm2"])
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let inspection = try decoder.decode(ModelInspection.self, from: Data(json.output.utf8))
        #expect(inspection.storage.map(\.storage) == ["Q4_1", "Q8_0", "F32"])
        #expect(inspection.storage.first.map { $0.bitsPerWeight == 5 } == true)
        let query = inspection.layers.flatMap(\.tensors).first { $0.name == "blk.3.attn_q.weight" }
        #expect(query?.kind == "attention.q" && query?.storage == "Q4_1" && query?.shape == [576, 576] && query?.opType == .linear)
        #expect(inspection.metadata["llama.block_count"] == "30")
    }

    @Test func decompressWritesGGUFTensorsAsDenseSafetensors() throws {
        let folder = TemporaryDirectory()
        var builder = GGUFBuilder.header(tensors: 2, metadata: 2)
        builder.string("general.name")
        builder.u32(8)
        builder.string("tiny")
        builder.string("tokenizer.ggml.tokens")
        builder.u32(9)
        builder.u32(8)
        builder.u64(1)
        builder.string("a")
        builder.tensorInfo("blk.0.w", dimensions: [4, 2], type: 0, offset: 0)
        builder.tensorInfo("blk.0.q", dimensions: [32, 1], type: 8, offset: 32)
        while builder.bytes.count % 32 != 0 { builder.bytes.append(0) }
        for value in [Float](stride(from: 1, through: 8, by: 1)) { builder.u32(value.bitPattern) }
        builder.bytes += [0x00, 0x38]  // Q8_0 scale 0.5 (f16)
        builder.bytes += (0..<32).map { UInt8(bitPattern: Int8($0 - 16)) }
        let input = builder.write(folder)
        let output = folder.file("dense.safetensors")
        let result = run(["decompress", "--input", input, "--output", output])
        #expect(result.code == 0, "\(result.errors)")
        let file = try SafetensorsFile(path: output)
        #expect(try file.tensor(named: "blk.0.w").floats() == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(try file.tensor(named: "blk.0.w").shape == [2, 4])
        let q = try file.tensor(named: "blk.0.q")
        #expect(q.shape == [1, 32] && q.dtype == .f32)
        #expect(q.floats() == (0..<32).map { Float($0 - 16) * 0.5 })
        #expect(file.metadata == ["general.name": "tiny"])
    }

    @Test func aBrokenGGUFIsOneLineAndLeavesNothingBehind() {
        let folder = TemporaryDirectory()
        var builder = GGUFBuilder.valid()
        builder.bytes.removeLast(10)
        let input = builder.write(folder, "cut.gguf")
        let output = folder.file("dense.safetensors")
        let result = run(["decompress", "--input", input, "--output", output])
        #expect(result.code == 2)
        #expect(result.errors == "shrink decompress: error: \(input): tensor 'q': data_offsets [32, 66] outside the data section of 56 bytes")
        #expect(folder.contents == ["cut.gguf"])
        let inspected = run(["inspect", input])
        #expect(inspected.code == 2 && inspected.errors.contains("cut.gguf") && !inspected.errors.contains("\n"))
    }
}
