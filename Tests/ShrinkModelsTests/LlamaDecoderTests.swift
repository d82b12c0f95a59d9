import Foundation
import Testing
import ShrinkEvaluation
import ShrinkIO
import ShrinkKernels
import ShrinkModels
import ShrinkTestSupport

/// SmolLM2 (Q4_1 GGUF, executed as stored) end to end: perplexity as llama.cpp measures it,
/// decoding token by token against one batch, and typed errors for what a cache cannot take.
@Suite struct LlamaDecoderTests {
    static func decoder(threads: Int = 2) throws -> LlamaDecoder {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: ModelArchitectureTests.smolLM2, configPath: nil)
        return try (architecture as! LlamaArchitecture).makeDecoder(files: files, options: RuntimeOptions(threads: threads))
    }

    /// llama.cpp (llama-cpp-python 0.3.36's build, `llama-perplexity -c 512 --chunks 2`) prints
    /// `[1]10.1184,[2]14.3926` on WikiText-2 test: Shrink's must be within 0.5 %.
    @Test func perplexityMatchesLlamaCpp() throws {
        let decoder = try Self.decoder()
        let text = try String(contentsOfFile: Perplexity.defaultText, encoding: .utf8)
        let tokens = decoder.tokenizer!.encode(text)
        var running: [Double] = []
        let result = try Perplexity.measure(decoder: decoder, tokens: tokens, context: 512, chunks: 2) { _, value in running.append(value) }
        #expect(result.chunks == 2 && result.scoredTokens == 2 * 255)
        #expect(abs(running[0] / 10.1184 - 1) < 0.01, "chunk 1 alone (255 tokens): \(running[0])")
        #expect(abs(result.perplexity / 14.3926 - 1) < 0.005, "2 chunks: \(result.perplexity)")
    }

    /// The same tokens give the same next-token logits whether they run as one batch, in two
    /// batches or one at a time through the cache (GEMM against GEMV: rounding only).
    @Test(arguments: [1, 2])
    func decodingTokenByTokenMatchesOneBatch(threads: Int) throws {
        let decoder = try Self.decoder(threads: threads)
        let tokens = decoder.tokenizer!.encode("The capital of France is Paris, and the capital of Germany is Berlin. The capital of")
        let vocabulary = decoder.config.vocabularySize
        func logits(batches: [Int]) throws -> [[Float]] {
            let state = decoder.makeState(capacity: 64, batch: 32)
            var rows: [[Float]] = []
            var first = 0
            for size in batches {
                try decoder.evaluate(Array(tokens[first..<(first + size)]), state: state, logitRows: 0..<size) { _, values in rows.append(Array(values)) }
                first += size
            }
            #expect(state.position == tokens.count)
            return rows
        }
        let batch = try logits(batches: [tokens.count])
        let split = try logits(batches: [7, tokens.count - 7])
        let single = try logits(batches: Array(repeating: 1, count: tokens.count))
        #expect(batch.count == tokens.count && batch.allSatisfy { $0.count == vocabulary })
        for (name, other) in [("two batches", split), ("one at a time", single)] {
            for (row, (expected, actual)) in zip(batch, other).enumerated() {
                let spread = expected.max()! - expected.min()!
                let difference = zip(expected, actual).map { abs($0 - $1) }.max()!
                #expect(difference <= 0.02 * spread, "\(name), row \(row): max |Δ| \(difference) against a spread of \(spread)")
                #expect(expected.firstIndex(of: expected.max()!) == actual.firstIndex(of: actual.max()!), "\(name), row \(row): argmax")
            }
        }
        // A working model predicts " Berlin" after "the capital of Germany is".
        let berlin = try #require(tokens.firstIndex(of: decoder.tokenizer!.encode(" Berlin")[0]))
        let before = batch[berlin - 1]
        #expect(Int32(before.firstIndex(of: before.max()!)!) == tokens[berlin])
    }

    @Test func whatACacheCannotTakeIsATypedError() throws {
        let decoder = try Self.decoder(threads: 1)
        let state = decoder.makeState(capacity: 4)
        #expect(throws: ModelError.self) { try decoder.evaluate([1, 2, 3, 4, 5], state: state) }
        #expect(state.position == 0)
        #expect(throws: ModelError.self) { try decoder.evaluate([1, 49152], state: state) }
        #expect(throws: ModelError.self) { try decoder.evaluate([-1], state: state) }
        try decoder.evaluate([1, 2, 3, 4], state: state)
        #expect(throws: ModelError.self) { try decoder.evaluate([5], state: state) }
        state.reset()
        try decoder.evaluate([5], state: state)
        #expect(state.position == 1)
    }
}
