import Foundation
import Testing
import ShrinkEvaluation
import ShrinkModels
import ShrinkTestSupport

/// Perplexity as llama.cpp measures it, on SmolLM2 (Q4_1 GGUF, executed as stored) and WikiText-2 test.
@Suite struct PerplexityTests {
    static func decoder() throws -> LlamaDecoder {
        let path = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
        let (files, architecture) = try ModelArchitectures.open(weightsPath: path, configPath: nil)
        return try (architecture as! LlamaArchitecture).makeDecoder(files: files, options: RuntimeOptions(threads: 2))
    }

    /// llama.cpp (llama-cpp-python 0.3.36's build, `llama-perplexity -c 512 --chunks 2`) prints
    /// `[1]10.1184,[2]14.3926` on WikiText-2 test: Shrink's must be within 0.5 %.
    @Test func perplexityMatchesLlamaCpp() throws {
        let decoder = try Self.decoder()
        let text = try String(contentsOfFile: Perplexity.defaultText, encoding: .utf8)
        let tokens = decoder.tokenizer!.encode(text)
        var running: [Double] = []
        let result = try Perplexity.measure(decoder: decoder, tokens: tokens, context: 512, chunks: 2, progress: { _, value in running.append(value) })
        #expect(result.chunks == 2 && result.scoredTokens == 2 * 255)
        #expect(abs(running[0] / 10.1184 - 1) < 0.01, "chunk 1 alone (255 tokens): \(running[0])")
        #expect(abs(result.perplexity / 14.3926 - 1) < 0.005, "2 chunks: \(result.perplexity)")
    }


    @Test func negativeLogLikelihoodIsTheLogSoftmax() {
        let logits: [Float] = [1, 2, 3, 1000]
        logits.withUnsafeBufferPointer { values in
            #expect(abs(Perplexity.negativeLogLikelihood(values, target: 3)) < 1e-12)
            let expected = -(1.0 - (1000.0 + log(1 + exp(-997.0) + exp(-998.0) + exp(-999.0))))
            #expect(abs(Perplexity.negativeLogLikelihood(values, target: 0) - expected) < 1e-9)
        }
        #expect(throws: Perplexity.Failure.tooShort(tokens: 3, context: 4)) {
            _ = try Perplexity.measure(decoder: try Self.decoder(), tokens: [1, 2, 3], context: 4)
        }
    }
}
