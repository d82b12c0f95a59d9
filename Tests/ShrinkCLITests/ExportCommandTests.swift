import Foundation
import Testing
import Shrink
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// `shrink export --format gguf`, proven by the `gguf` package (PyPI): every ggml type and the real
/// SmolLM2 file come back with the same metadata and the same tensor bytes; a tensor no ggml type
/// holds is named with its nearest type and nothing is written.
@Suite struct ExportCommandTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/gguf_crosscheck.py").path

    static func python(_ arguments: [String]) throws -> (status: Int32, errors: String, output: String) { try runPythonScript(script, arguments) }

    @Test func everyGGMLTypeExportsAsTheGGUFPackageWroteIt() throws {
        let folder = TemporaryDirectory()
        #expect(try Self.python(["write", folder.path]).status == 0)
        let output = folder.file("exported.gguf")
        let result = run(["export", "--format", "gguf", "--input", folder.file("synthetic.gguf"), "--output", output])
        #expect(result.code == 0, "\(result.errors)")
        #expect(result.output.contains("1 Q2_K") && result.output.contains("1 IQ4_XS") && result.output.contains("metadata entries: 17"))
        let compared = try Self.python(["compare", folder.file("synthetic.gguf"), output])
        #expect(compared.status == 0, "\(compared.errors)")
    }

    @Test func theSmolLM2FileExportsBitExactly() throws {
        let path = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
        let folder = TemporaryDirectory()
        let output = folder.file("smollm2.gguf")
        let result = run(["export", "--format", "gguf", "--input", path, "--output", output])
        #expect(result.code == 0, "\(result.errors)")
        #expect(result.output.contains("61 F32, 210 Q4_1, 1 Q8_0"))
        let compared = try Self.python(["compare", path, output])
        #expect(compared.status == 0, "\(compared.errors)")
    }

    @Test func aTensorNoGGMLTypeHoldsIsNamedAndNothingIsWritten() throws {
        var generator = SplitMix64(seed: 21)
        let palette = try GGMLBlocks.tensor(.iq4_NL, rows: 2, columns: 64, generator: &generator)
        var parts = palette.parts
        parts["lut"] = try DenseTensor(dtype: .i8, shape: [16], bytes: (0..<16).map { UInt8($0 * 3) })
        let tensor = try EncodedTensor(name: "blk.0.ffn_up.weight", shape: [2, 64], sourceDType: .f32, encoding: palette.encoding, parts: parts)
        let metadata = GGUFMetadata(path: "test", entries: [("general.architecture", .string("llama"))])
        let folder = TemporaryDirectory()
        let input = folder.file("palette.safetensors")
        try CompressedModel(denseTensors: [], encodedTensors: [tensor], metadata: [GGUFMetadata.containerKey: metadata.json]).write(to: input)
        let output = folder.file("out.gguf")
        let refused = run(["export", "--format", "gguf", "--input", input, "--output", output])
        #expect(refused.code == 2)
        #expect(refused.errors.contains("blk.0.ffn_up.weight") && refused.errors.contains("part 'lut'") && refused.errors.contains("nearest ggml type: IQ4_NL"),
                "\(refused.errors)")
        #expect(!FileManager.default.fileExists(atPath: output))

        let converted = folder.file("requantized.gguf")
        let requantized = run(["export", "--format", "gguf", "--input", input, "--output", converted, "--requantize", "nearest"])
        #expect(requantized.code == 0, "\(requantized.errors)")
        #expect(requantized.output.contains("requantized blk.0.ffn_up.weight: palette 4-bit") && requantized.output.contains("-> Q4_0, SNR"),
                "\(requantized.output)")
        let written = try GGUFStore(path: converted)
        #expect(written.storage(of: "blk.0.ffn_up.weight")?.summary == "Q4_0")
        let decoded = written.tensor(named: "blk.0.ffn_up.weight")!.decodedFloats(), original = tensor.decode()
        let error = zip(decoded, original).map { Double($0 - $1) * Double($0 - $1) }.reduce(0, +)
        let energy = original.map { Double($0) * Double($0) }.reduce(0, +)
        let snr = 10 * log10(energy / error)
        #expect(requantized.output.contains("SNR \(String(format: "%.1f", snr)) dB"), "\(snr)")
        #expect(run(["export", "--format", "gguf", "--input", input, "--output", output, "--requantize", "best"]).code == 2)

        let plain = folder.file("plain.safetensors")
        try CompressedModel(denseTensors: [], encodedTensors: [palette], metadata: [:]).write(to: plain)
        let withoutMetadata = run(["export", "--format", "gguf", "--input", plain, "--output", output])
        #expect(withoutMetadata.code == 2 && withoutMetadata.errors.contains("GGUF export needs a model made from a GGUF file"), "\(withoutMetadata.errors)")
        let withoutConfig = run(["export", "--format", "mlx", "--input", plain, "--output", output])
        #expect(withoutConfig.code == 2 && withoutConfig.errors.contains("config.json"), "\(withoutConfig.errors)")
        #expect(!FileManager.default.fileExists(atPath: output))
    }
}
