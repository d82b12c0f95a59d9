import Foundation
import Testing
import ShrinkIO
import ShrinkModels
import ShrinkTestSupport

/// Both tokenizers against Hugging Face's `tokenizers` (the reference implementation) on random
/// and adversarial Unicode (`Tests/Python/tokenizer_differential.py`): WordPiece with MiniLM's own
/// `tokenizer.json`, byte-level BPE with SmolLM2's GGUF vocabulary written as a `tokenizer.json`.
/// 100,000 strings per run (`SHRINK_DIFFERENTIAL_STRINGS` sets another count, `..._SEED` the seed);
/// zero differences allowed.
@Suite struct TokenizerDifferentialTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/tokenizer_differential.py").path

    struct Case: Decodable {
        let text: String
        let wordpiece: [Int32]
        let bpe: [Int32]
    }

    /// `text` with every scalar outside printable ASCII as `U+XXXX`, for failure messages.
    static func escaped(_ text: String) -> String {
        text.unicodeScalars.map { (32..<127).contains($0.value) ? String($0) : String(format: "<U+%04X>", $0.value) }.joined()
    }

    /// The ids Shrink gives each case's text that differ from the reference's, described.
    static func differences(_ cases: [Case]) throws -> (wordPiece: [String], bpe: [String]) {
        let wordPiece = try WordPieceTokenizer(vocabularyFile: TestModels.miniLM + "/vocab.txt", maximumLength: 1 << 30)
        let bpe = try BPETokenizer(metadata: GGUFMetadata(file: try GGUFFile(path: ModelArchitectureTests.smolLM2)))
        var wordPieceDifferences: [String] = [], bpeDifferences: [String] = []
        for item in cases {
            let pieces = wordPiece.encode(item.text)
            if pieces != item.wordpiece {
                wordPieceDifferences.append("\(Self.escaped(item.text)): \(pieces) vs reference \(item.wordpiece)")
            }
            let ids = bpe.encode(item.text, addBOS: false, parseSpecial: true)
            if ids != item.bpe { bpeDifferences.append("\(Self.escaped(item.text)): \(ids) vs reference \(item.bpe)") }
        }
        return (wordPieceDifferences, bpeDifferences)
    }

    static func cases(_ path: String) throws -> [Case] {
        let decoder = JSONDecoder()
        return try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { try decoder.decode(Case.self, from: Data($0.utf8)) }
    }

    /// The committed sample (the first 300 strings of seed 22, with the reference's ids of
    /// `tokenizers` 0.23.3), checked without Python.
    @Test func theCommittedSampleMatches() throws {
        let sample = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/tokenizer-differential-sample.jsonl").path
        let cases = try Self.cases(sample)
        let (wordPiece, bpe) = try Self.differences(cases)
        #expect(cases.count == 300 && wordPiece.isEmpty && bpe.isEmpty, "\(wordPiece.prefix(3)) \(bpe.prefix(3))")
    }

    @Test func bothTokenizersMatchTheReferenceOnAdversarialUnicode() throws {
        let environment = ProcessInfo.processInfo.environment
        let count = environment["SHRINK_DIFFERENTIAL_STRINGS"].flatMap(Int.init) ?? 100_000
        let seed = environment["SHRINK_DIFFERENTIAL_SEED"].flatMap(Int.init) ?? 22
        let folder = TemporaryDirectory()
        let metadata = GGUFMetadata(file: try GGUFFile(path: ModelArchitectureTests.smolLM2))
        let (tokenizerJSON, _) = try HuggingFaceTokenizer.files(metadata: metadata)
        try tokenizerJSON.serialized().write(toFile: folder.file("bpe.json"), atomically: true, encoding: .utf8)
        let cases = folder.file("cases.jsonl")
        let generated = try runPythonScript(Self.script, [String(count), String(seed), cases, TestModels.miniLM + "/tokenizer.json", folder.file("bpe.json")])
        #expect(generated.status == 0, "\(generated.errors)")

        let all = try Self.cases(cases)
        let checked = all.count
        let (wordPieceDifferences, bpeDifferences) = try Self.differences(all)
        #expect(checked == count)
        #expect(wordPieceDifferences.isEmpty, "\(wordPieceDifferences.count) WordPiece differences, first: \(wordPieceDifferences.prefix(5).joined(separator: "\n"))")
        #expect(bpeDifferences.isEmpty, "\(bpeDifferences.count) BPE differences, first: \(bpeDifferences.prefix(5).joined(separator: "\n"))")
    }
}
