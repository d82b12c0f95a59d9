import CAllocationCounter
import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkKernels
import ShrinkModels
import ShrinkTestSupport

/// all-MiniLM-L6-v2 against the reference implementation's embeddings (sentence-transformers,
/// fp32, each sentence alone). Needs the model: scripts/fetch-models.py minilm.
@Suite struct BertEncoderTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/minilm-reference")

    static func referenceSentences() throws -> [String] {
        try String(contentsOf: fixtures.appendingPathComponent("sentences.txt"), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty }
    }

    static func referenceEmbeddings() throws -> [[Float]] {
        let values = try SafetensorsFile(path: fixtures.appendingPathComponent("embeddings.safetensors").path).tensor(named: "embeddings").floats()
        return stride(from: 0, to: values.count, by: 384).map { Array(values[$0..<($0 + 384)]) }
    }

    static func cosine(_ a: [Float], _ b: [Float]) -> Double {
        var dot = 0.0, na = 0.0, nb = 0.0
        for (x, y) in zip(a, b) { dot += Double(x) * Double(y); na += Double(x) * Double(x); nb += Double(y) * Double(y) }
        return dot / (na.squareRoot() * nb.squareRoot())
    }

    static func encoder(weights: String) throws -> BertEncoder {
        try BertEncoder(config: try BertConfig(path: TestModels.miniLM + "/config.json"), pooling: try SentencePooling(folder: TestModels.miniLM),
                        source: try WeightSource(path: weights))
    }

    /// Token sequences the encoder cannot run are typed errors naming the sequence, before any work.
    @Test func sequencesItCannotRunAreErrorsNotTraps() throws {
        let encoder = try Self.encoder(weights: TestModels.miniLM + "/model.safetensors")
        let good: [Int32] = [101, 1037, 102]
        #expect(throws: ModelError.invalidInput(index: 1, reason: "the token sequence is empty")) { try encoder.embed([good, []]) }
        #expect(throws: ModelError.invalidInput(index: 0, reason: "513 tokens exceed the 512 positions of the model")) {
            try encoder.embed([[Int32](repeating: 1037, count: 513)])
        }
        #expect(throws: ModelError.invalidInput(index: 2, reason: "token id 30522 is outside the vocabulary of 30522")) {
            try encoder.embed([good, good, [101, 30522, 102]])
        }
        #expect(throws: ModelError.invalidInput(index: 0, reason: "token id -1 is outside the vocabulary of 30522")) { try encoder.embed([[-1]]) }
        var small = [Float](repeating: 0, count: 10)
        #expect(throws: ModelError.self) { try small.withUnsafeMutableBufferPointer { try encoder.embed([good], into: $0) } }
        #expect(try encoder.embed([]).isEmpty && encoder.embed([good]).count == 1)
    }

    @Test func fp32EmbeddingsMatchTheReference() throws {
        let tokenizer = try WordPieceTokenizer(vocabularyFile: TestModels.miniLM + "/vocab.txt")
        let encoder = try Self.encoder(weights: TestModels.miniLM + "/model.safetensors")
        let sentences = try Self.referenceSentences()
        let reference = try Self.referenceEmbeddings()
        let ids = sentences.map(tokenizer.encode)
        var worst = (index: -1, cosine: 1.0)
        for (index, sequence) in ids.enumerated() {
            let embedding = try encoder.embed([sequence])[0]
            let cosine = Self.cosine(embedding, reference[index])
            if cosine < worst.cosine { worst = (index, cosine) }
        }
        #expect(worst.cosine >= 0.9999, "worst sentence \(worst.index): cosine \(worst.cosine)")
        // A packed batch gives the same embeddings as one sentence at a time.
        let batch = try encoder.embed(Array(ids.prefix(32)))
        for index in 0..<32 {
            #expect(Self.cosine(batch[index], reference[index]) >= 0.9999, "batched sentence \(index)")
        }
    }

    @Test func compressedWeightsRunThroughTheReferenceKernels() throws {
        let folder = TemporaryDirectory()
        let recipe = folder.file("recipe.json")
        try Data(#"{"global": {"quantize": {"bits": 8}}, "weight_threshold": 2048}"#.utf8).write(to: URL(fileURLWithPath: recipe))
        let output = folder.file("int8.safetensors")
        _ = try ModelCompressor.compress(model: try ModelLocation.resolve(TestModels.miniLM), recipe: try Recipe.load(path: recipe), output: output)
        let encoder = try Self.encoder(weights: output)
        let tokenizer = try WordPieceTokenizer(vocabularyFile: TestModels.miniLM + "/vocab.txt")
        let reference = try Self.referenceEmbeddings()
        let sentences = try Self.referenceSentences()
        for index in [0, 1, 100, 258] {
            let cosine = Self.cosine(try encoder.embed([tokenizer.encode(sentences[index])])[0], reference[index])
            #expect(cosine >= 0.995, "int8 sentence \(index): cosine \(cosine)")
        }
    }

    /// Each level of kernels this CPU runs (portable Swift; AVX2; AVX-512 with VNNI), chosen through
    /// `WeightSource`, gives the embeddings of the fastest one, for fp32 and int8 weights, one
    /// sentence at a time and in a batch, including a sentence longer than the fused attention
    /// takes. fp32 agrees to rounding (measured 1 − 4e-13). With int8 activations a rounding
    /// difference of the float kernels (LayerNorm's summation order, GELU's and softmax's exp)
    /// flips an activation code now and then, and the next layers' quantization spreads it: the
    /// levels then agree to about the activation quantization's own noise (measured ≥ 0.9999,
    /// against 0.9994 from fp32), while the integer kernels agree bit for bit
    /// (`Int8ActivationLinearTests`).
    @Test(arguments: [(KernelVariant.swift, IntegerKernelVariant.swift), (.avx2, .avx2), (.avx512, .avx512vnni)]
        .filter { KernelVariant.available.contains($0.0) && IntegerKernelVariant.available.contains($0.1) })
    func everyKernelLevelRunsTheEncoder(kernels: KernelVariant, integerKernels: IntegerKernelVariant) throws {
        let folder = TemporaryDirectory()
        let recipe = folder.file("recipe.json")
        try Data(#"{"global": {"quantize": {"bits": 8}}, "weight_threshold": 2048}"#.utf8).write(to: URL(fileURLWithPath: recipe))
        let int8 = folder.file("int8.safetensors")
        _ = try ModelCompressor.compress(model: try ModelLocation.resolve(TestModels.miniLM), recipe: try Recipe.load(path: recipe), output: int8)
        let tokenizer = try WordPieceTokenizer(vocabularyFile: TestModels.miniLM + "/vocab.txt")
        let sentences = try Self.referenceSentences()
        let long = Array(repeating: sentences[5], count: 8).joined(separator: " ")
        let ids = ([sentences[0], sentences[100], sentences[258]] + [long]).map(tokenizer.encode)
        #expect(ids.last!.count > 64, "the long sentence takes the tiled attention")
        for weights in [TestModels.miniLM + "/model.safetensors", int8] {
            let encoders = try [(kernels, integerKernels), (KernelVariant.best, IntegerKernelVariant.best)].map { pair in
                try BertEncoder(config: try BertConfig(path: TestModels.miniLM + "/config.json"), pooling: try SentencePooling(folder: TestModels.miniLM),
                                source: try WeightSource(path: weights, threads: 2, kernels: pair.0, integerKernels: pair.1))
            }
            let batched = try encoders.map { try $0.embed(ids) }
            for index in ids.indices {
                let alone = try encoders.map { try $0.embed([ids[index]])[0] }
                let cosine = min(Self.cosine(alone[0], alone[1]), Self.cosine(batched[0][index], batched[1][index]))
                #expect(cosine >= (weights == int8 ? 0.9995 : 0.999_999), "\(kernels)/\(integerKernels) \(weights) sentence \(index): cosine \(cosine)")
            }
        }
    }

    /// Once warmed up on a batch, a forward pass (`embed(_:into:)`) makes no heap allocation on the
    /// calling thread, which also runs worker 0 of every parallel job and hands the others out:
    /// fp32, int8 and 4-bit (affine blocks, centered path; palette) weights, and rotated linears,
    /// batches of 1 and 32.
    @Test(arguments: [nil, #"{"global": {"quantize": {"bits": 8}}, "weight_threshold": 2048}"#,
                      #"{"global": {"quantize": {"bits": 4, "mode": "affine", "signed": false, "granularity": "per_block"}}, "weight_threshold": 2048}"#,
                      #"{"global": {"palettize": {"bits": 4}}, "weight_threshold": 2048}"#,
                      #"{"op_type": {"linear": {"rotate": {}, "quantize": {"bits": 8}}}}"#])
    func forwardPassesDoNotAllocate(recipeJSON: String?) throws {
        let folder = TemporaryDirectory()
        var weights = TestModels.miniLM + "/model.safetensors"
        if let recipeJSON {
            try Data(recipeJSON.utf8).write(to: URL(fileURLWithPath: folder.file("recipe.json")))
            weights = folder.file("model.safetensors")
            _ = try ModelCompressor.compress(model: try ModelLocation.resolve(TestModels.miniLM), recipe: try Recipe.load(path: folder.file("recipe.json")),
                                             output: weights)
        }
        let encoder = try BertEncoder(config: try BertConfig(path: TestModels.miniLM + "/config.json"),
                                      pooling: try SentencePooling(folder: TestModels.miniLM), source: try WeightSource(path: weights, threads: 2))
        let tokenizer = try WordPieceTokenizer(vocabularyFile: TestModels.miniLM + "/vocab.txt")
        let ids = try Self.referenceSentences().prefix(32).map(tokenizer.encode)
        for batch in [[ids[3]], ids] {
            var output = [Float](repeating: 0, count: batch.count * 384)
            try output.withUnsafeMutableBufferPointer { buffer in
                try encoder.embed(batch, into: buffer)
                shrink_count_allocations_begin()
                try encoder.embed(batch, into: buffer)
                let allocations = shrink_count_allocations_end()
                #expect(shrink_allocations_counted() == 0 || allocations == 0, "\(recipeJSON ?? "fp32"), batch of \(batch.count): \(allocations) allocations")
                let reference = try Self.referenceEmbeddings()
                // The outputs are real embeddings (4-bit round-to-nearest drifts most, to about 0.95).
                #expect(Self.cosine(Array(buffer.prefix(384)), reference[batch.count == 1 ? 3 : 0]) >= 0.9)
            }
        }
    }

    /// A model stored in F16 or BF16 runs from its 16-bit weights (linear layers widened by the
    /// kernels, not at load) and stays close to the fp32 reference.
    @Test(arguments: [(DType.f16, 0.9999), (.bf16, 0.999)])
    func halfPrecisionModelsRun(dtype: DType, minimumCosine: Double) throws {
        let source = try SafetensorsFile(path: TestModels.miniLM + "/model.safetensors")
        let tensors = try source.entries.map { entry in
            let tensor = try source.tensor(named: entry.name)
            return (name: entry.name, tensor: entry.dtype == .f32 ? try DenseTensor(converting: tensor.floats(), to: dtype, shape: entry.shape) : tensor)
        }
        let folder = TemporaryDirectory()
        try SafetensorsWriter.write(tensors, to: folder.file("model.safetensors"))
        let encoder = try Self.encoder(weights: folder.file("model.safetensors"))
        let tokenizer = try WordPieceTokenizer(vocabularyFile: TestModels.miniLM + "/vocab.txt")
        let reference = try Self.referenceEmbeddings()
        let ids = try Self.referenceSentences().prefix(40).map(tokenizer.encode)
        let batch = try encoder.embed(Array(ids))
        let worst = (0..<ids.count).map { Self.cosine(batch[$0], reference[$0]) }.min()!
        #expect(worst >= minimumCosine, "\(dtype): worst cosine \(worst)")
        #expect(Self.cosine(try encoder.embed([ids[3]])[0], reference[3]) >= minimumCosine)

        // A non-finite 16-bit weight is an error naming the tensor and element.
        let poisoned = "encoder.layer.2.intermediate.dense.weight"
        let bad = try tensors.map { item -> (name: String, tensor: DenseTensor) in
            guard item.name == poisoned else { return item }
            var values = item.tensor.floats()
            values[5] = .infinity
            return (item.name, try DenseTensor(converting: values, to: dtype, shape: item.tensor.shape))
        }
        try SafetensorsWriter.write(bad, to: folder.file("bad.safetensors"))
        #expect(throws: ModelError.invalidWeight(tensor: poisoned, reason: "element 5 is inf")) {
            _ = try Self.encoder(weights: folder.file("bad.safetensors"))
        }
    }

    @Test func poolingComesFromTheModelFolder() throws {
        #expect(try SentencePooling(folder: TestModels.miniLM) == SentencePooling(mode: .mean, normalize: true))
        let folder = TemporaryDirectory()
        #expect(try SentencePooling(folder: folder.path) == SentencePooling(mode: .mean, normalize: true))
        try FileManager.default.createDirectory(atPath: folder.file("1_Pooling"), withIntermediateDirectories: true)
        try #"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#.write(toFile: folder.file("1_Pooling/config.json"), atomically: true, encoding: .utf8)
        try #"[{"type": "sentence_transformers.models.Transformer"}]"#.write(toFile: folder.file("modules.json"), atomically: true, encoding: .utf8)
        #expect(try SentencePooling(folder: folder.path) == SentencePooling(mode: .cls, normalize: false))
        try #"{"pooling_mode_max_tokens": true}"#.write(toFile: folder.file("1_Pooling/config.json"), atomically: true, encoding: .utf8)
        #expect(throws: ModelError.invalidFile(path: folder.file("1_Pooling/config.json"),
                                               reason: "pooling pooling_mode_max_tokens is not supported (mean or cls tokens)")) {
            try SentencePooling(folder: folder.path)
        }
    }
}
