import Foundation
import Testing
import ShrinkModels

/// Token ids must equal the reference implementation's for every reference sentence (needs the
/// model: scripts/fetch-models.py minilm).
@Suite struct WordPieceTokenizerTests {
    static let reference = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/minilm-reference")
    static var modelFolder: String {
        (ProcessInfo.processInfo.environment["SHRINK_MODELS_DIR"] ?? NSHomeDirectory() + "/.cache/shrink/models") + "/all-MiniLM-L6-v2"
    }

    @Test func matchesTheReferenceTokenIDsForEverySentence() throws {
        let tokenizer = try WordPieceTokenizer(vocabularyFile: Self.modelFolder + "/vocab.txt")
        let sentences = try String(contentsOf: Self.reference.appendingPathComponent("sentences.txt"), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty }
        let expected = try JSONSerialization.jsonObject(with: Data(contentsOf: Self.reference.appendingPathComponent("token_ids.json"))) as! [[Int]]
        #expect(sentences.count == expected.count)
        var mismatches: [String] = []
        for (sentence, ids) in zip(sentences, expected) {
            let actual = tokenizer.encode(sentence).map(Int.init)
            if actual != ids { mismatches.append("\(sentence.prefix(60)): \(actual.prefix(20)) vs \(ids.prefix(20))") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) mismatches, first: \(mismatches.first ?? "")")
    }

    @Test func edgeCases() throws {
        let tokenizer = try WordPieceTokenizer(vocabularyFile: Self.modelFolder + "/vocab.txt", maximumLength: 8)
        #expect(tokenizer.words(of: "Héllo,\tWORLD!\u{0}\u{200B}x") == ["hello", ",", "world", "!", "x"])
        #expect(tokenizer.words(of: "日本語") == ["日", "本", "語"])
        #expect(tokenizer.encode("") == [101, 102])
        #expect(tokenizer.encode(String(repeating: "a ", count: 50)).count == 8)
        #expect(tokenizer.wordPieces(String(repeating: "x", count: 101)) == [tokenizer.unknownID])
        #expect(tokenizer.wordPieces("☃") == [tokenizer.unknownID])
        #expect(throws: ModelError.self) { try WordPieceTokenizer(vocabularyFile: Self.modelFolder + "/vocab.txt", maximumLength: 1) }
        #expect(try WordPieceTokenizer(vocabularyFile: Self.modelFolder + "/vocab.txt", maximumLength: 2).encode("a b c") == [101, 102])
    }
}
