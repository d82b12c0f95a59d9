import Foundation
import ShrinkFuzzTargets
import ShrinkTestSupport
import Testing

/// Every input that the fuzz campaigns kept (`Fuzz/Corpus/<fuzzer>`: minimised corpora, seeds from
/// the real files and recipes, past crashers) run through its fuzzer's own target in the test
/// process, so a regression in any parser shows here without a fuzzing build: a trap ends the run.
/// Each corpus must also reach past the parser's first check on some of its inputs (files that
/// open, recipes that resolve), or the replay would prove nothing.
@Suite struct FuzzCorpusReplayTests {
    static let corpora = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus")

    /// The paths of `fuzzer`'s corpus, sorted.
    static func inputs(_ fuzzer: String) throws -> [String] {
        let folder = corpora.appendingPathComponent(fuzzer).path
        return try FileManager.default.contentsOfDirectory(atPath: folder).sorted().map { folder + "/" + $0 }
    }

    static func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    /// Minimum counts are about four fifths of what the committed corpora give (16 of 413
    /// safetensors inputs open, 57 of 207 GGUF ones; 27 of 40 gates; 78 of 1,105 recipes; 135,198
    /// tokens from 791 texts), so that a parser that starts refusing valid input fails here too.
    @Test(arguments: [("FuzzSafetensors", 12), ("FuzzGGUF", 45)])
    func modelFiles(fuzzer: String, opening: Int) throws {
        let inputs = try Self.inputs(fuzzer)
        let opened = inputs.filter { FuzzTargets.readEveryTensor(path: $0) > 0 }
        #expect(inputs.count >= 200)
        #expect(opened.count >= opening, "\(fuzzer): \(opened.count) of \(inputs.count) inputs open with a tensor")
    }

    @Test func gateFiles() throws {
        let inputs = try Self.inputs("FuzzGate")
        let loaded = inputs.filter { FuzzTargets.loadGate(path: $0) }
        #expect(inputs.count >= 20)
        #expect(loaded.count >= 21, "\(loaded.count) of \(inputs.count) gate files load")
    }

    @Test func recipes() throws {
        let resolution = try FuzzTargets.RecipeResolution(modelFolder: TestModels.miniLM)
        let inputs = try Self.inputs("FuzzRecipe")
        let resolved = try inputs.filter { path in try Self.bytes(path).withUnsafeBytes { resolution.resolve($0) } }
        #expect(inputs.count >= 500)
        #expect(resolved.count >= 62, "\(resolved.count) of \(inputs.count) recipes resolve against MiniLM")
    }

    @Test func tokenizerTexts() throws {
        let tokenization = try FuzzTargets.Tokenization(modelsFolder: TestModels.cacheDirectory)
        let inputs = try Self.inputs("FuzzTokenizers")
        var tokens = 0
        for path in inputs { tokens += try Self.bytes(path).withUnsafeBytes { tokenization.tokenize($0) } }
        #expect(inputs.count >= 500)
        #expect(tokens >= 108_000, "\(tokens) tokens from \(inputs.count) texts")
    }
}
