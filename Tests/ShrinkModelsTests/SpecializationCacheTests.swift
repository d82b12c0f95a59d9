import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkKernels
import ShrinkModels
import ShrinkTestSupport

/// The specialization cache on SmolLM2 (Q4_1 GGUF, int8 panels) and MiniLM (F32 safetensors, fp32
/// panels): a load writes its repacked panels, the next maps them and computes the same outputs
/// bit for bit, and a corrupt or truncated entry is seen as stale and rebuilt, never trusted.
@Suite struct SpecializationCacheTests {
    static func decoder(cache: SpecializationCache?) throws -> LlamaDecoder {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: ModelArchitectureTests.smolLM2, configPath: nil)
        return try (architecture as! LlamaArchitecture).makeDecoder(files: files, options: RuntimeOptions(threads: 2, specialization: cache))
    }

    static func logits(_ decoder: LlamaDecoder) throws -> [Float] {
        let tokens = try #require(decoder.tokenizer).encode("The capital of France is Paris, and the capital of Germany is")
        var rows: [Float] = []
        try decoder.evaluate(tokens, state: decoder.makeState(capacity: 64), logitRows: 0..<tokens.count) { _, values in rows += values }
        return rows
    }

    static func entry(in folder: String) throws -> String {
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".panels") }
        try #require(files.count == 1)
        return folder + "/" + files[0]
    }

    @Test func warmLoadsMapThePanelsAndComputeTheSameLogits() throws {
        let folder = TemporaryDirectory()
        let cache = SpecializationCache(directory: folder.path)
        #expect(cache.status(modelPath: ModelArchitectureTests.smolLM2) == .missing)
        let reference = try Self.logits(try Self.decoder(cache: nil))
        let cold = try Self.decoder(cache: cache)
        #expect(cold.specializationOutcome == .written(rebuilt: false))
        #expect(cache.status(modelPath: ModelArchitectureTests.smolLM2) == .ready)
        let warm = try Self.decoder(cache: cache)
        #expect(warm.specializationOutcome == .mapped)
        #expect(warm.linearExecutions.map(\.execution) == cold.linearExecutions.map(\.execution))
        #expect(try Self.logits(cold) == reference)
        #expect(try Self.logits(warm) == reference)
        // A cache that only maps does not write entries for models it has none of.
        let other = TemporaryDirectory()
        #expect(try Self.decoder(cache: SpecializationCache(directory: other.path, createsEntries: false)).specializationOutcome
                == .repacked(reason: "no entry, and the cache only maps existing ones"))
        #expect(other.contents == [])
    }

    @Test func corruptOrTruncatedEntriesAreRebuilt() throws {
        let folder = TemporaryDirectory()
        let cache = SpecializationCache(directory: folder.path, createsEntries: false)
        _ = try Self.decoder(cache: SpecializationCache(directory: folder.path))
        let path = try Self.entry(in: folder.path)
        let reference = try Self.logits(try Self.decoder(cache: nil))
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        for (label, damaged) in [("one flipped byte in the data", { var d = whole; d[d.count - 100] ^= 0x10; return d }()),
                                 ("one flipped byte in the header", { var d = whole; d[40] ^= 0x01; return d }()),
                                 ("truncated", whole.prefix(whole.count / 2)),
                                 ("empty", Data())] {
            try damaged.write(to: URL(fileURLWithPath: path))
            guard case .stale = cache.status(modelPath: ModelArchitectureTests.smolLM2) else {
                Issue.record("\(label): not seen as stale")
                continue
            }
            let rebuilt = try Self.decoder(cache: cache)
            #expect(rebuilt.specializationOutcome == .written(rebuilt: true), "\(label)")
            #expect(try Self.logits(rebuilt) == reference, "\(label)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == whole, "\(label): the rebuilt entry is the original")
            #expect(cache.status(modelPath: ModelArchitectureTests.smolLM2) == .ready)
        }
    }

    static func encoder(cache: SpecializationCache?, activations: ActivationPrecision = .int8,
                        weights: String = TestModels.miniLM + "/model.safetensors") throws -> SentenceEncoder {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: weights, configPath: TestModels.miniLM + "/config.json")
        return try #require(try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: 2, activations: activations, specialization: cache))
                            as? SentenceEncoder)
    }

    /// MiniLM as shipped (F32: fp32 panels) at both activation precisions, and compressed with
    /// rotated int8 weights (int8 panels of `W'`, the rotation read from the file).
    @Test(arguments: [(ActivationPrecision.int8, false), (.float32, false), (.int8, true)])
    func miniLMMapsItsPanels(activations: ActivationPrecision, rotated: Bool) throws {
        let folder = TemporaryDirectory()
        var modelPath = TestModels.miniLM + "/model.safetensors"
        if rotated {
            let recipe = folder.file("rotated.json")
            try Data(#"{"op_type": {"linear": {"rotate": {}, "quantize": {"bits": 8}}}}"#.utf8).write(to: URL(fileURLWithPath: recipe))
            modelPath = folder.file("rotated.safetensors")
            _ = try ModelCompressor.compress(model: try ModelLocation.resolve(TestModels.miniLM), recipe: try Recipe.load(path: recipe), output: modelPath)
        }
        let cache = SpecializationCache(directory: folder.file("cache"))
        let sentences = ["A man is playing a guitar.", "Three dogs run across a snowy field at dawn."]
        func embeddings(_ encoder: SentenceEncoder) throws -> [[Float]] { try encoder.embed(sentences.map(encoder.tokenize)) }
        func encoder(_ cache: SpecializationCache?) throws -> SentenceEncoder { try Self.encoder(cache: cache, activations: activations, weights: modelPath) }
        let reference = try embeddings(try encoder(nil))
        let cold = try encoder(cache)
        #expect(cold.specializationOutcome == .written(rebuilt: false))
        #expect(cache.status(modelPath: modelPath, activations: activations) == .ready)
        let other = activations == .int8 ? ActivationPrecision.float32 : .int8
        #expect(cache.status(modelPath: modelPath, activations: other) == .missing)
        let warm = try encoder(cache)
        #expect(warm.specializationOutcome == .mapped)
        #expect(warm.linearExecutions.map(\.execution) == cold.linearExecutions.map(\.execution))
        if rotated { #expect(warm.linearExecutions.allSatisfy { $0.execution.kernel.hasPrefix("hadamard") }, "\(warm.linearExecutions.map(\.execution.kernel))") }
        #expect(try embeddings(cold) == reference)
        #expect(try embeddings(warm) == reference)
        let path = try Self.entry(in: folder.file("cache"))
        var damaged = try Data(contentsOf: URL(fileURLWithPath: path))
        damaged[damaged.count / 2] ^= 0x04
        try damaged.write(to: URL(fileURLWithPath: path))
        let rebuilt = try encoder(cache)
        #expect(rebuilt.specializationOutcome == .written(rebuilt: true))
        #expect(try embeddings(rebuilt) == reference)
    }

    /// A model file's hash is remembered by its identity only once the file has settled (two
    /// seconds unchanged); any change to the file, even of the same size, gives another key, and
    /// a damaged memo is read again from the file.
    @Test func rememberedHashesFollowTheFile() throws {
        let folder = TemporaryDirectory()
        let cache = SpecializationCache(directory: folder.file("cache"))
        let model = folder.file("model.bin")
        try Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: URL(fileURLWithPath: model))
        func key() throws -> String { try cache.key(modelPath: model, variant: .best, activations: .int8) }
        let first = try key()
        #expect(!FileManager.default.fileExists(atPath: folder.file("cache/identities")), "a file just written is not remembered")
        Thread.sleep(forTimeInterval: 3.1)
        #expect(try key() == first)
        let memos = try FileManager.default.contentsOfDirectory(atPath: folder.file("cache/identities"))
        try #require(memos.count == 1)
        #expect(try key() == first)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: folder.file("cache/identities/" + memos[0])))
        #expect(try key() == first)
        var changed = try Data(contentsOf: URL(fileURLWithPath: model))
        changed[12345] ^= 1
        try changed.write(to: URL(fileURLWithPath: model))
        #expect(try key() != first)
    }
}
