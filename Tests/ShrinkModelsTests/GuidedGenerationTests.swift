import Foundation
import Testing
@testable import ShrinkModels
import ShrinkCore
import ShrinkTestSupport

/// Guided generation: JSON schemas read and refused by key path, their byte automata, the
/// vocabulary masks compiled from them against brute force, and SmolLM2 held to a schema.
@Suite struct GuidedGenerationTests {
    static let schemaText = #"""
    {"type": "object", "properties": {
       "word": {"type": "string", "minLength": 1, "maxLength": 40},
       "translation": {"type": "string", "minLength": 1, "maxLength": 60},
       "example": {"type": "string", "minLength": 1},
       "part_of_speech": {"enum": ["noun", "verb", "adjective", "adverb"]},
       "difficulty": {"type": "integer"}},
     "required": ["word", "translation", "example", "part_of_speech", "difficulty"], "additionalProperties": false}
    """#

    static func schema(_ text: String) throws -> JSONSchema {
        try JSONSchema(json: try JSONValue.parse(text), path: "schema.json")
    }

    static func accepts(_ schema: JSONSchema, _ text: String) -> Bool {
        var automaton = ByteAutomaton(schema.pattern)
        var state = automaton.start
        for byte in text.utf8 {
            state = automaton.step(state, byte)
            if state == ByteAutomaton.dead { return false }
        }
        return automaton.accepting[Int(state)]
    }

    @Test func schemasReadAndRefuseByKeyPath() throws {
        #expect(try Self.schema(Self.schemaText) == VocabularyCard.generationSchema)
        let refused: [(String, String)] = [
            (#"{"type": "null"}"#, "schema.type: 'null' is not supported (object, string, integer, number, boolean, array, or an enum of strings)"),
            (#"{"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}"#, "schema.properties.a.pattern: is not supported"),
            (#"{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}"#, "schema.required[0]: names no property"),
            (#"{"type": "array"}"#, "schema.items: an array schema needs items"),
            (#"{"type": "string", "minLength": 3, "maxLength": 2}"#, "schema.maxLength: is below minLength"),
            (#"{"enum": [1, 2]}"#, "schema.enum[0]: only strings are supported"),
            (#"{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": true}"#,
             "schema.additionalProperties: only false is supported (generated objects hold their properties only)"),
        ]
        for (text, reason) in refused {
            #expect(throws: ModelError.invalidFile(path: "schema.json", reason: reason)) { try Self.schema(text) }
        }
    }

    @Test func automataAcceptTheirValuesOnly() throws {
        let card = VocabularyCard.generationSchema
        #expect(Self.accepts(card, #"{"word":"Haus","translation":"house","example":"Das Haus ist groß.","part_of_speech":"noun","difficulty":2}"#))
        #expect(Self.accepts(card, #"{"word": "laufen", "translation": "to run", "example": "Er sagt: \"Ich laufe.\"", "part_of_speech": "verb", "difficulty": -10}"#))
        for bad in [#"{"word":"Haus","translation":"house","example":"x","part_of_speech":"noun"}"#,
                    #"{"translation":"house","word":"Haus","example":"x","part_of_speech":"noun","difficulty":2}"#,
                    #"{"word":"","translation":"house","example":"x","part_of_speech":"noun","difficulty":2}"#,
                    #"{"word":"Haus","translation":"house","example":"x","part_of_speech":"pronoun","difficulty":2}"#,
                    #"{"word":"Haus","translation":"house","example":"\u0041","part_of_speech":"noun","difficulty":2}"#,
                    #"{"word":"Haus","translation":"house","example":"x","part_of_speech":"noun","difficulty":02}"#,
                    #"{"word":"Haus","translation":"house","example":"x","part_of_speech":"noun","difficulty":2} "#] {
            #expect(!Self.accepts(card, bad), "\(bad)")
        }
        #expect(!Self.accepts(card, #"{"word":""# + String(repeating: "a", count: 41) + #"","translation":"t","example":"x","part_of_speech":"noun","difficulty":1}"#))
        let list = JSONSchema.array(items: .number, minItems: 1, maxItems: 3)
        #expect(["[1]", "[1, -2.5, 0]", "[0.125,3]"].allSatisfy { Self.accepts(list, $0) })
        #expect(!["[]", "[1,2,3,4]", "[1.]", "[01]", "[1e3]"].contains { Self.accepts(list, $0) })
        #expect(Self.accepts(.array(items: .boolean, minItems: 0, maxItems: nil), "[]"))
        #expect(Self.accepts(.array(items: .boolean, minItems: 0, maxItems: nil), "[true, false, true]"))
    }

    /// Every state's mask is exactly the tokens whose bytes the automaton takes from it and after
    /// which a value can still be completed, along a card written out byte by byte; the shortest
    /// value takes fewer tokens than bytes.
    @Test func compiledMasksAreTheTokensTheAutomatonTakes() throws {
        let tokenizer = try #require(try LlamaDecoderTests.decoder().tokenizer)
        let constraint = TokenConstraint(schema: VocabularyCard.generationSchema, tokenizer: tokenizer)
        var automaton = ByteAutomaton(VocabularyCard.generationSchema.pattern)
        _ = automaton.completeAll()
        let shortest = #"{"word":"a","translation":"a","example":"a","part_of_speech":"noun","difficulty":0}"#
        #expect(constraint.minimumTokens > 0 && constraint.minimumTokens <= tokenizer.encode(shortest).count)
        let card = #"{"word": "Baum", "translation": "tree", "example": "Der Baum ist alt.", "part_of_speech": "noun", "difficulty": 1}"#
        var state = constraint.start
        let vocabulary = tokenizer.tokens.count
        var logits = [Float](repeating: 0, count: vocabulary)
        for (offset, byte) in card.utf8.enumerated() where offset % 7 == 0 || byte == UInt8(ascii: "\"") {
            // The state after the card's first `offset` bytes.
            state = constraint.start
            for earlier in card.utf8.prefix(offset) { state = automaton.step(state, earlier) }
            for index in logits.indices { logits[index] = 0 }
            logits.withUnsafeMutableBufferPointer { constraint.mask($0, state: state, remaining: 1000, endOfGeneration: tokenizer.endOfGeneration) }
            for token in 0..<vocabulary {
                let end = constraint.advance(state, by: Int32(token))
                let allowed = end != ByteAutomaton.dead && constraint.tokensToComplete(end) != Int.max
                if allowed != (logits[token] == 0) {
                    Issue.record("offset \(offset), token \(token) (\(tokenizer.bytes(of: Int32(token)))): mask \(logits[token]), automaton \(allowed)")
                    return
                }
            }
        }
    }

    /// SmolLM2 held to the card's schema: every answer is valid JSON that decodes into the type,
    /// also when the token budget is only just enough.
    @Test func smolLM2FillsVocabularyCards() async throws {
        let decoder = try LlamaDecoderTests.decoder()
        let session = try LanguageModelSession(model: decoder, capacity: 1024)
        let words = ["Haus", "Baum", "laufen", "schnell", "Katze", "schön", "essen", "immer"]
        for word in words {
            let card = try await session.respond(to: "Make a German vocabulary card for the word \"\(word)\" as JSON.", generating: VocabularyCard.self,
                                                 options: GenerationOptions(maximumTokens: 96))
            #expect(!card.word.isEmpty && !card.translation.isEmpty && !card.example.isEmpty)
        }
        let constraint = TokenConstraint(schema: VocabularyCard.generationSchema, tokenizer: try #require(decoder.tokenizer))
        let tight = try await LanguageModelSession(model: decoder, capacity: 512).respond(
            to: "Make a German vocabulary card for the word \"Wasser\" with a long example sentence.", constraint: constraint,
            options: GenerationOptions(maximumTokens: constraint.minimumTokens + 4))
        #expect(Self.accepts(VocabularyCard.generationSchema, tight), "\(tight)")
        #expect((try? JSONDecoder().decode(VocabularyCard.self, from: Data(tight.utf8))) != nil)
    }
}
