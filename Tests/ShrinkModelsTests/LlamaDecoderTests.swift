import CAllocationCounter
import Foundation
import Testing
import ShrinkIO
import ShrinkKernels
import ShrinkModels
import ShrinkTestSupport

/// SmolLM2 (Q4_1 GGUF, executed as stored): decoding token by token against one batch, and typed
/// errors for what a cache cannot take (its perplexity: `PerplexityTests`).
@Suite struct LlamaDecoderTests {
    static func decoder(threads: Int = 2) throws -> LlamaDecoder {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: ModelArchitectureTests.smolLM2, configPath: nil)
        return try (architecture as! LlamaArchitecture).makeDecoder(files: files, options: RuntimeOptions(threads: threads))
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

    /// A decoded token and a prompt batch allocate nothing on the heap: the state's buffers, the
    /// kernels' scratch and the worker pool are made once (`DecoderState`, `WorkerPool`).
    @Test(arguments: [1, 2])
    func decodingAllocatesNothingPerToken(threads: Int) throws {
        let decoder = try Self.decoder(threads: threads)
        let state = decoder.makeState(capacity: 64, batch: 16)
        let prompt: [Int32] = Array(1...16), token: [Int32] = [42]
        var best: Float = 0
        try decoder.evaluate(prompt, state: state, logitRows: 15..<16) { _, logits in best = logits[0] }
        try decoder.evaluate(token, state: state, logitRows: 0..<1) { _, logits in best = logits[0] }
        state.reset()
        shrink_count_allocations_begin()
        try decoder.evaluate(prompt, state: state, logitRows: 15..<16) { _, logits in best = logits[0] }
        let promptAllocations = shrink_count_allocations_end()
        shrink_count_allocations_begin()
        for _ in 0..<8 { try decoder.evaluate(token, state: state, logitRows: 0..<1) { _, logits in best = logits[0] } }
        let decodeAllocations = shrink_count_allocations_end()
        #expect(shrink_allocations_counted() == 0 || (promptAllocations == 0 && decodeAllocations == 0), "prompt: \(promptAllocations), 8 tokens: \(decodeAllocations) allocations")
        #expect(best.isFinite)
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
