import Foundation
import Testing
import ShrinkIO
@testable import ShrinkModels
import ShrinkTestSupport

/// SmolLM2's byte-level BPE read from its GGUF: ids equal the reference ids (Hugging Face
/// `tokenizers` on the same metadata, agreeing with llama.cpp) for the edge cases, the first 60
/// lines of WikiText-2 test and the whole test file; special tokens, decoding and bad metadata.
@Suite struct BPETokenizerTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/smollm2-reference")
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func smolLM2() throws -> BPETokenizer {
        try BPETokenizer(gguf: GGUFFile(path: TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
    }

    @Test func matchesTheReferenceIDs() throws {
        let tokenizer = try Self.smolLM2()
        let cases = try JSONSerialization.jsonObject(with: Data(contentsOf: Self.fixtures.appendingPathComponent("token_ids.json"))) as! [[String: Any]]
        #expect(cases.count == 7)
        for item in cases {
            let text = item["text"] as! String, ids = (item["ids"] as! [Int]).map(Int32.init)
            let actual = tokenizer.encode(text)
            #expect(actual == ids, "\(text.prefix(50).debugDescription): first difference at \(Array(zip(actual, ids)).firstIndex { $0 != $1 } ?? min(actual.count, ids.count))")
            #expect(tokenizer.decode(actual) == text)
        }
        #expect(tokenizer.bos == 1 && tokenizer.eos == 2 && !tokenizer.addsBOS)
    }

    @Test func tokenizesTheWholeWikiTextTestFileAsTheReference() throws {
        let tokenizer = try Self.smolLM2()
        let reference = try JSONSerialization.jsonObject(with: Data(contentsOf: Self.fixtures.appendingPathComponent("wikitext2_test_tokens.json"))) as! [String: Any]
        let text = try String(contentsOf: Self.repository.appendingPathComponent("data/wikitext-2/test.txt"), encoding: .utf8)
        let ids = tokenizer.encode(text)
        #expect(ids.count == reference["n_tokens"] as! Int)
        #expect(ids.prefix(64).map(Int.init) == reference["first_64"] as! [Int])
        #expect(ids.suffix(64).map(Int.init) == reference["last_64"] as! [Int])
    }

    @Test func specialTokensOnlyWhenAsked() throws {
        let tokenizer = try Self.smolLM2()
        let text = "<|im_start|>user\nHi<|im_end|>"
        let parsed = tokenizer.encode(text, parseSpecial: true)
        #expect(parsed.first == 1 && parsed.last == 2)
        #expect(tokenizer.decode(parsed) == text)
        let plain = tokenizer.encode(text)
        #expect(!plain.contains(1) && !plain.contains(2) && tokenizer.decode(plain) == text)
        #expect(tokenizer.encode("Hi", addBOS: true).first == 1)
        #expect(tokenizer.encode("").isEmpty)
        // Bytes that are not UTF-8 of their own still round-trip through byte tokens; a byte the
        // vocabulary lacks becomes the unknown token.
        #expect(tokenizer.decode(tokenizer.encode("🙂")) == "🙂")
        #expect(tokenizer.encode("a\u{4}b") == [81, 0, 82])
    }

    @Test func preTokenizerChunks() {
        func chunks(_ text: String, _ rule: BPETokenizer.PreTokenizer = .digitsThenGPT2) -> [String] {
            BPETokenizer.chunks(Array(text.unicodeScalars), rule).map { String(String.UnicodeScalarView($0)) }
        }
        #expect(chunks("Hello world's 2026!") == ["Hello", " world", "'s", " ", "2", "0", "2", "6", "!"])
        #expect(chunks("Hello world's 2026!", .gpt2) == ["Hello", " world", "'s", " 2026", "!"])
        #expect(chunks("a   b\n\nc  ") == ["a", "  ", " b", "\n", "\n", "c", "  "])
        #expect(chunks(" ... x") == [" ...", " x"])
        // Llama 3's and Qwen2's rules; expected chunks from Python's `regex` on the same expressions.
        let text = "Hello WORLD'S 12345 (test)...\n\n  x"
        #expect(chunks(text, .llama3) == ["Hello", " WORLD", "'S", " ", "123", "45", " (", "test", ")...\n\n", " ", " x"])
        #expect(chunks(text, .qwen2) == ["Hello", " WORLD", "'S", " ", "1", "2", "3", "4", "5", " (", "test", ")...\n\n", " ", " x"])
        #expect(chunks("a  \n \n  b\t\tc   ", .llama3) == ["a", "  \n \n", " ", " b", "\t", "\tc", "   "])
        #expect(chunks("I'LL don't\r\n\r\nok;\n", .qwen2) == ["I", "'LL", " don", "'t", "\r\n\r\n", "ok", ";\n"])
        #expect(chunks("€100,000 is 3.14159!", .llama3) == ["€", "100", ",", "000", " is", " ", "3", ".", "141", "59", "!"])
        #expect(chunks("(hello)[x]  ", .qwen2) == ["(hello", ")[", "x", "]", "  "])
        #expect(BPETokenizer.PreTokenizer(ggufName: "qwen2") == .qwen2 && BPETokenizer.PreTokenizer(ggufName: "llama-bpe") == .llama3)
    }

    @Test func badMetadataIsATypedErrorNamingTheKey() throws {
        let folder = TemporaryDirectory()
        func tokenizer(_ metadata: [(String, GGUFValue)]) throws -> BPETokenizer {
            try BPETokenizer(gguf: GGUFFile(path: GGUFBuilder.metadataOnly(metadata).write(folder)))
        }
        let bytes = GGUFValue.array(elementType: 8, (0..<256).map { .string(String(BPETokenizer.byteSymbols[$0])) })
        let cases: [([(String, GGUFValue)], String)] = [
            ([], "tokenizer.ggml.model is missing"),
            ([("tokenizer.ggml.model", .string("llama"))], "is not byte-level BPE"),
            ([("tokenizer.ggml.model", .string("gpt2")), ("tokenizer.ggml.pre", .string("qwen9"))], "tokenizer.ggml.pre 'qwen9'"),
            ([("tokenizer.ggml.model", .string("gpt2")), ("tokenizer.ggml.tokens", bytes),
              ("tokenizer.ggml.merges", .array(elementType: 8, [.string("a b")]))], "tokenizer.ggml.merges[0] 'a b' names a token not in the vocabulary"),
            ([("tokenizer.ggml.model", .string("gpt2")), ("tokenizer.ggml.tokens", bytes),
              ("tokenizer.ggml.bos_token_id", .uint32(999))], "tokenizer.ggml.bos_token_id is not a token id"),
        ]
        for (metadata, message) in cases {
            #expect {
                _ = try tokenizer(metadata)
            } throws: { error in
                "\(error)".contains(message) && "\(error)".contains(".gguf")
            }
        }
    }

    /// Two loads of one file encode alike; changing the merges' order, the pre-tokenizer or the
    /// BOS rule makes them differ.
    @Test func encodesLikeComparesEverythingThatShapesTheIDs() throws {
        #expect(try Self.smolLM2().encodesLike(try Self.smolLM2()))
        let folder = TemporaryDirectory()
        let symbols = (0..<256).map { GGUFValue.string(String(BPETokenizer.byteSymbols[$0])) }
        func tokenizer(merges: [String], pre: String = "gpt2", addBOS: Bool = false) throws -> BPETokenizer {
            let metadata: [(String, GGUFValue)] = [
                ("tokenizer.ggml.model", .string("gpt2")), ("tokenizer.ggml.pre", .string(pre)),
                ("tokenizer.ggml.tokens", .array(elementType: 8, symbols + [.string("ab"), .string("bc")])),
                ("tokenizer.ggml.merges", .array(elementType: 8, merges.map { .string($0) })),
                ("tokenizer.ggml.bos_token_id", .uint32(0)), ("tokenizer.ggml.add_bos_token", .bool(addBOS)),
            ]
            return try BPETokenizer(gguf: GGUFFile(path: GGUFBuilder.metadataOnly(metadata).write(folder)))
        }
        let base = try tokenizer(merges: ["a b", "b c"])
        #expect(base.encodesLike(try tokenizer(merges: ["a b", "b c"])))
        #expect(base.encode("abc") != (try tokenizer(merges: ["b c", "a b"])).encode("abc"))
        for other in [try tokenizer(merges: ["b c", "a b"]), try tokenizer(merges: ["a b"]), try tokenizer(merges: ["a b", "b c"], pre: "smollm"),
                      try tokenizer(merges: ["a b", "b c"], addBOS: true)] {
            #expect(!base.encodesLike(other) && !other.encodesLike(base))
        }
    }
}
