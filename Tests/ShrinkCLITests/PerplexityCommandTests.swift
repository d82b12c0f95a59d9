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
    }

    @Test func refusesWhatItCannotMeasure() {
        let folder = TemporaryDirectory()
        let short = folder.file("short.txt")
        FileManager.default.createFile(atPath: short, contents: Data("A few words only.".utf8))
        let tooShort = run(["perplexity", "--text", short])
        #expect(tooShort.code != 0 && tooShort.errors.contains("fewer than one context of 512"))
        let encoder = run(["perplexity", "--model", "minilm", "--chunks", "1"])
        #expect(encoder.code != 0 && encoder.errors.contains("does not provide next-token logits"))
        let missing = run(["perplexity", "--text", folder.file("none.txt")])
        #expect(missing.code != 0 && missing.errors.contains("none.txt"))
        #expect(run(["perplexity", "--ctx", "2"]).errors.contains("--ctx must be at least 4"))
    }
}
