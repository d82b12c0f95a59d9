import Foundation
import Testing
@testable import ShrinkModels
import ShrinkTestSupport

/// `LanguageModelSession` on SmolLM2 (Q4_1 GGUF): streamed tokens are the decoder's own greedy or
/// seeded decode, later turns reuse the cache, cancellation stops generation, sessions sharing
/// one model respond at once as they do alone, and what cannot run is a typed error.
@Suite struct LanguageModelSessionTests {
    static let model = Result { try LlamaDecoderTests.decoder(threads: 2) }

    static func decoder() throws -> LlamaDecoder { try model.get() }

    /// The session's greedy answer is the loop `shrink generate --chat` runs, token for token.
    @Test func streamedTokensAreTheDecodersGreedyDecode() async throws {
        let decoder = try Self.decoder()
        let tokenizer = try #require(decoder.tokenizer)
        let source = try #require(tokenizer.chatTemplate)
        let template = try #require(ChatTemplate(template: source))
        let question = "What is the capital of France?"
        let prompt = tokenizer.encode(template.prompt(user: question), parseSpecial: true)
        let state = decoder.makeState(capacity: 256)
        var sampler = try TokenSampler(temperature: 0, seed: 0)
        var expected: [Int32] = [], next: Int32 = 0
        try decoder.evaluate(prompt, state: state, logitRows: (prompt.count - 1)..<prompt.count) { _, logits in next = sampler.next(logits) }
        while !tokenizer.endOfGeneration.contains(next), expected.count < 24 {
            expected.append(next)
            guard expected.count < 24 else { break }
            try decoder.evaluate([next], state: state, logitRows: 0..<1) { _, logits in next = sampler.next(logits) }
        }
        let session = try LanguageModelSession(model: decoder, capacity: 256)
        var ids: [Int32] = [], text = ""
        for try await token in session.streamResponse(to: question, options: GenerationOptions(maximumTokens: 24)) {
            ids.append(token.id)
            text += token.text
        }
        #expect(ids == expected && ids.count >= 3)
        #expect(text == String(decoding: expected.flatMap { tokenizer.bytes(of: $0) }, as: UTF8.self))
        #expect(session.transcript == [ChatTurn(role: .user, content: question), ChatTurn(role: .assistant, content: text)])
        #expect(session.lastResponse == ResponseStatistics(evaluatedPromptTokens: prompt.count, reusedPromptTokens: 0, generatedTokens: ids.count))
    }

    /// A second turn evaluates only what it adds to the cache, and answers as a session that
    /// starts from the same transcript and evaluates it whole.
    @Test func laterTurnsReuseTheCache() async throws {
        let decoder = try Self.decoder()
        let options = GenerationOptions(maximumTokens: 12)
        let session = try LanguageModelSession(model: decoder, capacity: 512)
        _ = try await session.respond(to: "Name a fruit that is yellow.", options: options)
        let first = try #require(session.lastResponse)
        let second = try await session.respond(to: "And one that is red?", options: options)
        let reuse = try #require(session.lastResponse)
        #expect(reuse.reusedPromptTokens >= first.evaluatedPromptTokens, "the first turn's prompt stays cached")
        #expect(reuse.evaluatedPromptTokens < reuse.reusedPromptTokens)
        let fresh = try LanguageModelSession(model: decoder, transcript: Array(session.transcript.prefix(2)), capacity: 512)
        #expect(try await fresh.respond(to: "And one that is red?", options: options) == second && !second.isEmpty)
        #expect(fresh.lastResponse?.reusedPromptTokens == 0)
        #expect(fresh.lastResponse?.evaluatedPromptTokens == reuse.evaluatedPromptTokens + reuse.reusedPromptTokens)
    }

    /// Leaving the stream stops generation within a bounded number of tokens, however slowly the
    /// consumer runs; the transcript keeps the answer so far and the session answers again. The
    /// same seed samples the same tokens.
    @Test func cancellationStopsAndSeedsRepeat() async throws {
        let decoder = try Self.decoder()
        let story = "Write a long story about a dragon.", budget = GenerationOptions(maximumTokens: 160)
        let whole = try LanguageModelSession(model: decoder, capacity: 512)
        _ = try await whole.respond(to: story, options: budget)
        #expect(whole.lastResponse?.generatedTokens == 160, "the uncancelled answer fills the budget")
        let session = try LanguageModelSession(model: decoder, capacity: 512)
        var seen = ""
        var count = 0
        for try await token in session.streamResponse(to: story, options: budget) {
            seen += token.text
            count += 1
            if count == 3 { break }
        }
        var answer = ""
        for _ in 0..<200 {
            if let last = session.transcript.last, last.role == .assistant {
                answer = last.content
                break
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        #expect(answer.hasPrefix(seen) && !seen.isEmpty)
        // The generator runs at most lookahead + 1 tokens ahead, and stops after the token in flight.
        #expect((session.lastResponse?.generatedTokens ?? 160) <= 3 + TokenStream.lookahead + 2)
        let sampled = GenerationOptions(maximumTokens: 16, temperature: 0.9, topP: 0.95, seed: 7)
        let one = try await LanguageModelSession(model: decoder, capacity: 256).respond(to: "Tell me a joke.", options: sampled)
        let two = try await LanguageModelSession(model: decoder, capacity: 256).respond(to: "Tell me a joke.", options: sampled)
        #expect(one == two && !one.isEmpty)
    }

    /// Eight sessions over one decoder, responding at once, give the tokens each gives alone.
    @Test func concurrentSessionsAnswerAsTheyDoAlone() async throws {
        let decoder = try Self.decoder()
        let prompts = ["What is 2 + 2?", "Name a color.", "Say hello.", "What is the capital of Italy?",
                       "Name an animal.", "What day comes after Monday?", "Count to three.", "What is water made of?"]
        let options = GenerationOptions(maximumTokens: 10)
        var alone: [String] = []
        for prompt in prompts { alone.append(try await LanguageModelSession(model: decoder, capacity: 128).respond(to: prompt, options: options)) }
        let together = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for (index, prompt) in prompts.enumerated() {
                group.addTask { (index, try await LanguageModelSession(model: decoder, capacity: 128).respond(to: prompt, options: options)) }
            }
            var answers = [String](repeating: "", count: prompts.count)
            for try await (index, answer) in group { answers[index] = answer }
            return answers
        }
        #expect(together == alone && alone.allSatisfy { !$0.isEmpty })
    }

    @Test func whatCannotRunIsATypedError() async throws {
        let decoder = try Self.decoder()
        #expect(throws: ModelError.invalidArgument(name: "capacity", reason: "1 positions; a session needs at least 2")) {
            try LanguageModelSession(model: decoder, capacity: 1)
        }
        let small = try LanguageModelSession(model: decoder, capacity: 8)
        await #expect(throws: SessionError.self) { try await small.respond(to: "A question far longer than eight tokens can hold, surely.") }
        let session = try LanguageModelSession(model: decoder, capacity: 256)
        await #expect(throws: SessionError.invalidOptions(reason: "maximumTokens is 0, at least 1 needed")) {
            try await session.respond(to: "Hi", options: GenerationOptions(maximumTokens: 0))
        }
        await #expect(throws: SessionError.self) { try await session.respond(to: "Hi", options: GenerationOptions(temperature: -1)) }
        // A second response while one is being generated.
        var nested: Error?
        try session.respond(to: "Hi", options: GenerationOptions(maximumTokens: 2), stop: StopFlag()) { _ in
            if nested == nil {
                do { try session.respond(to: "Again", options: GenerationOptions(), stop: StopFlag()) { _ in } } catch { nested = error }
            }
        }
        #expect(nested as? SessionError == .busy)
        #expect(session.transcript.count == 2)
    }
}
