import Foundation
import Testing
import ShrinkTestSupport

/// `shrink perplexity` on SmolLM2: one window of WikiText-2 as JSON, and what it refuses.
@Suite struct PerplexityCommandTests {
    @Test func scoresOneWindowAsJSON() throws {
        let result = run(["perplexity", "--ctx", "128", "--chunks", "1", "--threads", "2", "--json"])
        #expect(result.code == 0, "\(result.errors)")
        let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as! [String: Any]
        #expect(object["chunks"] as? Int == 1 && object["scored_tokens"] as? Int == 63 && object["ctx"] as? Int == 128)
        let perplexity = try #require(object["perplexity"] as? Double)
        #expect(perplexity > 1 && perplexity < 100)
        // fp32 activations: the same window within a few percent of the int8 path's perplexity.
        let float = run(["perplexity", "--ctx", "128", "--chunks", "1", "--threads", "2", "--activations", "f32", "--json"])
        let floatObject = try JSONSerialization.jsonObject(with: Data(float.output.utf8)) as! [String: Any]
        let floatPerplexity = try #require(floatObject["perplexity"] as? Double)
        #expect(floatPerplexity != perplexity && abs(floatPerplexity / perplexity - 1) < 0.05, "f32 \(floatPerplexity), int8 \(perplexity)")
    }

    @Test func refusesWhatItCannotMeasure() {
        let folder = TemporaryDirectory()
        let short = folder.file("short.txt")
        _ = FileManager.default.createFile(atPath: short, contents: Data("A few words only.".utf8))
        let tooShort = run(["perplexity", "--text", short])
        #expect(tooShort.code != 0 && tooShort.errors.contains("fewer than one context of 512"))
        let encoder = run(["perplexity", "--model", "minilm", "--chunks", "1"])
        #expect(encoder.code != 0 && encoder.errors.contains("does not provide next-token logits"))
        let missing = run(["perplexity", "--text", folder.file("none.txt")])
        #expect(missing.code != 0 && missing.errors.contains("none.txt"))
        #expect(run(["perplexity", "--ctx", "2"]).errors.contains("--ctx must be at least 4"))
        #expect(run(["perplexity", "--activations", "bf16"]).errors.contains("--activations must be int8 or f32"))
    }
}

/// `shrink generate` and `shrink tokenize` on SmolLM2.
@Suite struct GenerateCommandTests {
    @Test func greedyGenerationCompletesAFact() {
        let result = run(["generate", "--prompt", "The capital of France is", "--max-tokens", "3", "--threads", "2"])
        #expect(result.code == 0, "\(result.errors)")
        #expect(result.output.replacingOccurrences(of: "\n", with: "").hasPrefix(" Paris"), "\(result.output)")
        #expect(result.errors.contains("prompt: 5 tokens") && result.errors.contains("decode: 3 tokens"))
        let chat = run(["generate", "--prompt", "Say hello.", "--chat", "--max-tokens", "8", "--temperature", "0.7", "--seed", "4"])
        #expect(chat.code == 0 && !chat.output.isEmpty)
        #expect(run(["generate", "--prompt", "x", "--top-p", "0"]).errors.contains("--top-p is out of range"))
        #expect(run(["generate", "--prompt", "x", "--model", "minilm"]).errors.contains("does not provide next-token logits"))
    }

    @Test func tokenizePrintsTheReferenceIDs() {
        let folder = TemporaryDirectory()
        let input = folder.file("text.txt")
        _ = FileManager.default.createFile(atPath: input, contents: Data("Hello world! The quick brown fox jumps over the lazy dog.".utf8))
        let result = run(["tokenize", "--input", input, "--json"])
        #expect(result.code == 0 && result.output == "[19556, 905, 17, 378, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30]")
        #expect(run(["tokenize", "--input", folder.file("none.txt")]).code != 0)
    }
}

/// `--kl-base` then `--kl-divergence` on the same model: no divergence, and a base from another
/// run is refused.
@Suite struct KLDivergenceCommandTests {
    @Test func aModelAgainstItsOwnBaseDivergesByTheQuantizationOnly() throws {
        let folder = TemporaryDirectory()
        let base = folder.file("base.klp")
        #expect(run(["perplexity", "--ctx", "64", "--chunks", "2", "--kl-base", base]).code == 0)
        let result = run(["perplexity", "--ctx", "64", "--chunks", "2", "--threads", "1", "--kl-divergence", base, "--json"])
        #expect(result.code == 0, "\(result.errors)")
        let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as! [String: Any]
        #expect((object["kld_mean"] as! Double) < 1e-3 && (object["same_top_token"] as! Double) > 0.95)
        let other = run(["perplexity", "--ctx", "64", "--chunks", "1", "--kl-divergence", base])
        #expect(other.code != 0 && other.errors.contains("was made from another run"))
    }
}

/// `shrink compress` on SmolLM2's GGUF: the decoded Q4_1 model is the base, the container keeps
/// the tokenizer and configuration, and the compressed model runs and is scored against the base.
@Suite struct DecoderCompressionTests {
    @Test func theInt8RecipeRunsAndStaysCloseToTheBase() throws {
        let folder = TemporaryDirectory()
        let output = folder.file("int8.safetensors"), base = folder.file("base.klp")
        let recipe = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("recipes/smollm2-int8-channel.json").path
        let compressed = run(["compress", "--model", "smollm2", "--recipe", recipe, "--output", output])
        #expect(compressed.code == 0, "\(compressed.errors)")
        #expect(run(["perplexity", "--ctx", "128", "--chunks", "2", "--kl-base", base]).code == 0)
        let result = run(["perplexity", "--model", output, "--ctx", "128", "--chunks", "2", "--kl-divergence", base, "--json"])
        #expect(result.code == 0, "\(result.errors)")
        let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as! [String: Any]
        #expect((object["kld_mean"] as! Double) < 0.02 && (object["same_top_token"] as! Double) > 0.9, "\(object)")
        let generated = run(["generate", "--model", output, "--prompt", "The capital of France is", "--max-tokens", "2"])
        #expect(generated.output.contains("Paris"), "\(generated.output)")
    }
}
