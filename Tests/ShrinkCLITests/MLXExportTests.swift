import Foundation
import Testing
import Shrink
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// `shrink export --format mlx`, proven by MLX itself (PyPI `mlx` on the CPU, `mlx-lm`): every
/// tensor `mlx.core.dequantize`s to Shrink's decoding bit for bit, `mlx_lm` loads the SmolLM2
/// folder and predicts what Shrink does, and a BERT written with `mlx.core` over the MiniLM folder
/// embeds as `shrink embed` does; what MLX cannot hold is refused with nothing written.
@Suite struct MLXExportTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/mlx_crosscheck.py").path
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The JSON object the script printed, after checking that it succeeded.
    static func python(_ arguments: [String]) throws -> [String: Any] {
        let (status, errors, output) = try runPythonScript(script, arguments)
        #expect(status == 0, "mlx_crosscheck.py \(arguments[0]): \(errors)")
        return (try? JSONSerialization.jsonObject(with: Data(output.utf8))) as? [String: Any] ?? [:]
    }

    @Test func smolLM2LoadsInMLXLMWithShrinksWeightsAndPredictions() throws {
        let model = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
        let folder = TemporaryDirectory()
        let exported = folder.file("smollm2-mlx")
        let result = run(["export", "--format", "mlx", "--input", model, "--output", exported])
        #expect(result.code == 0, "\(result.errors)")
        #expect(result.output.contains("210 4-bit group 32, 1 8-bit group 32"), "\(result.output)")
        #expect(run(["decompress", "--input", model, "--output", folder.file("decoded.safetensors")]).code == 0)
        let weights = try Self.python(["weights", exported, folder.file("decoded.safetensors"), "gguf-llama"])
        #expect(weights["tensors"] as? Int == 272 && weights["quantized"] as? Int == 211)

        let text = Self.repository.appendingPathComponent("data/wikitext-2/test.txt").path
        let base = folder.file("shrink.logprobs")
        let perplexity = run(["perplexity", "--model", model, "--text", text, "--ctx", "64", "--chunks", "2", "--activations", "f32",
                              "--kl-base", base])
        #expect(perplexity.code == 0, "\(perplexity.errors)")
        let logits = try Self.python(["logits", exported, base])
        // Both run the same weights in f32; what differs is summation order and MLX's own kernels.
        #expect(logits["rows"] as? Int == 62)
        #expect((logits["mean_kld"] as? Double ?? 1) < 1e-4 && (logits["same_top"] as? Double ?? 0) >= 0.98, "\(logits)")

        // The folder's tokenizer (written from the GGUF metadata) loads in mlx_lm and splits text
        // as Shrink does.
        #expect(result.output.contains("tokenizer: tokenizer.json, tokenizer_config.json"))
        let sample = folder.file("sample.txt")
        try (String(try String(contentsOfFile: text, encoding: .utf8).prefix(2000)) + "<|im_start|>user\nDON'T 12345!<|im_end|>\n")
            .write(toFile: sample, atomically: true, encoding: .utf8)
        let shrinkIDs = run(["tokenize", "--model", model, "--input", sample, "--special", "--json"])
        let (status, errors, mlxIDs) = try runPythonScript(Self.script, ["tokenize", exported, sample])
        #expect(status == 0, "\(errors)")
        func ids(_ json: String) -> [Int]? { (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [Int] }
        let expected = try #require(ids(shrinkIDs.output), "\(shrinkIDs.output.prefix(200))")
        #expect(expected.count > 400 && ids(mlxIDs) == expected)
    }

    @Test func miniLMWithAMixedRecipeLoadsInMLXAndEmbedsAsShrinkDoes() throws {
        let folder = TemporaryDirectory()
        let recipe = folder.file("mixed.json")
        try #"""
        {"op_type": {"linear": {"quantize": {"bits": 4, "mode": "affine", "signed": false, "granularity": "per_block", "block_size": 64}},
                     "attention.q": {"quantize": {"bits": 8, "mode": "symmetric", "granularity": "per_channel", "axis": 0, "scale_dtype": "f16"}},
                     "mlp.down": {"quantize": {"bits": 3, "mode": "affine", "signed": false, "granularity": "per_block", "block_size": 32}},
                     "embedding": null}}
        """#.write(toFile: recipe, atomically: true, encoding: .utf8)
        let compressed = folder.file("minilm-mixed.safetensors")
        let compression = run(["compress", "--model", "minilm", "--recipe", recipe, "--output", compressed])
        #expect(compression.code == 0, "\(compression.errors)")
        let exported = folder.file("minilm-mlx")
        let result = run(["export", "--format", "mlx", "--input", compressed, "--base", TestModels.miniLM, "--output", exported])
        #expect(result.code == 0, "\(result.errors)")
        #expect(result.output.contains("25 4-bit group 64, 6 8-bit group 128, 6 3-bit group 32") && result.output.contains("tokenizer.json"),
                "\(result.output)")
        let config = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: exported + "/config.json"))) as! [String: Any]
        let quantization = config["quantization"] as! [String: Any]
        #expect(quantization["group_size"] as? Int == 64 && quantization["bits"] as? Int == 4)
        #expect((quantization["encoder.layer.0.attention.self.query"] as? [String: Int]) == ["group_size": 128, "bits": 8])
        #expect(quantization["embeddings.word_embeddings"] as? Bool == false)

        #expect(run(["decompress", "--input", compressed, "--output", folder.file("decoded.safetensors")]).code == 0)
        let weights = try Self.python(["weights", exported, folder.file("decoded.safetensors"), "same"])
        #expect(weights["quantized"] as? Int == 37)

        let sentences = folder.file("sentences.txt")
        try ["A man is playing a guitar.", "Compressed weights, as stored, are computed.", "Un chat dort sur le canapé.",
             String(repeating: "long sentence words ", count: 40)].joined(separator: "\n").write(toFile: sentences, atomically: true, encoding: .utf8)
        let embeddings = folder.file("embeddings.safetensors")
        let embed = run(["embed", "--model", compressed, "--base", TestModels.miniLM, "--input", sentences, "--output", embeddings, "--activations", "f32"])
        #expect(embed.code == 0, "\(embed.errors)")
        let cosine = try Self.python(["embeddings", exported, sentences, embeddings])
        #expect(cosine["sentences"] as? Int == 4 && (cosine["min_cosine"] as? Double ?? 0) > 0.99999, "\(cosine)")
    }

    @Test func whatMLXCannotHoldIsNamedAndNothingIsWritten() throws {
        let folder = TemporaryDirectory()
        let compressed = folder.file("minilm-palette.safetensors")
        #expect(run(["compress", "--model", "minilm", "--recipe", Self.repository.appendingPathComponent("recipes/minilm-palette-4bit.json").path,
                     "--output", compressed]).code == 0)
        let output = folder.file("out")
        let refused = run(["export", "--format", "mlx", "--input", compressed, "--base", TestModels.miniLM, "--output", output])
        #expect(refused.code == 2)
        #expect(refused.errors.contains("palette 4-bit") && refused.errors.contains("nearest MLX layout: affine 4-bit, group 32")
                && refused.errors.contains(".weight"), "\(refused.errors)")
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).allSatisfy { !$0.hasPrefix(".") })

        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: false)
        try "keep me".write(toFile: output + "/notes.txt", atomically: true, encoding: .utf8)
        let model = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
        let occupied = run(["export", "--format", "mlx", "--input", model, "--output", output])
        #expect(occupied.code == 2 && occupied.errors.contains("not empty"), "\(occupied.errors)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: output) == ["notes.txt"])
    }
}
