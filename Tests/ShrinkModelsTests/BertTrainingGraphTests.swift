import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkKernels
import ShrinkModels
import ShrinkTestSupport

/// The differentiable BERT of end-to-end tuning, on a small random encoder (hidden 32, 4 heads,
/// 2 layers, intermediate 64): its forward pass against `BertEncoder`, its gradients against
/// central finite differences, and the `tune` recipe key end to end.
@Suite struct BertTrainingGraphTests {
    static let config = BertConfig(hiddenSize: 32, layers: 2, heads: 4, intermediateSize: 64, maxPositions: 24, layerNormEpsilon: 1e-12,
                                   vocabularySize: 40, typeVocabularySize: 2)

    /// Random tensors of `config` by Hugging Face names (weights ~ N(0, 0.3²), norms near 1).
    static func randomTensors(seed: UInt64) -> [(name: String, shape: [Int], values: [Float])] {
        var generator = SeededGenerator(seed: seed)
        func normal(_ count: Int, _ scale: Float, _ center: Float = 0) -> [Float] {
            (0..<count).map { _ in center + scale * Float.random(in: -1.7...1.7, using: &generator) }
        }
        let architecture = BertArchitecture(config: config)
        return architecture.tensorTable.filter { $0.required }.map { tensor in
            let count = tensor.shape.reduce(1, *)
            if tensor.opType == "norm" { return (tensor.name, tensor.shape, normal(count, 0.2, tensor.name.hasSuffix(".weight") ? 1 : 0)) }
            if tensor.name.hasSuffix(".bias") { return (tensor.name, tensor.shape, normal(count, 0.1)) }
            return (tensor.name, tensor.shape, normal(count, tensor.opType.hasPrefix("embedding") ? 0.8 : 0.3))
        }
    }

    static func sequences(count: Int, seed: UInt64) -> [[Int32]] {
        var generator = SeededGenerator(seed: seed)
        return (0..<count).map { _ in (0..<Int.random(in: 1...config.maxPositions, using: &generator)).map { _ in Int32.random(in: 0..<40, using: &generator) } }
    }

    static func unitRows(_ count: Int, seed: UInt64) -> [Float] {
        var generator = SeededGenerator(seed: seed)
        var rows: [Float] = []
        for _ in 0..<count {
            let row = (0..<config.hiddenSize).map { _ in Float.random(in: -1...1, using: &generator) }
            let norm = row.reduce(0) { $0 + $1 * $1 }.squareRoot()
            rows += row.map { $0 / norm }
        }
        return rows
    }

    @Test func forwardPassIsTheEncoders() throws {
        let tensors = Self.randomTensors(seed: 1)
        let folder = TemporaryDirectory()
        try SafetensorsWriter.write(tensors.map { ($0.name, try DenseTensor(converting: $0.values, shape: $0.shape)) }, to: folder.file("m.safetensors"))
        for pooling in [SentencePooling(mode: .mean), SentencePooling(mode: .cls)] {
            let encoder = try BertEncoder(config: Self.config, pooling: pooling,
                                          source: try WeightSource(path: folder.file("m.safetensors"), activations: .float32))
            let graph = try BertTrainingGraph(config: Self.config, pooling: pooling,
                                              parameters: BertTrainingParameters(tensors: Dictionary(uniqueKeysWithValues: tensors.map { ($0.name, $0.values) })))
            let sequences = Self.sequences(count: 7, seed: 2)
            let expected = try encoder.embed(sequences).flatMap { $0 }
            let actual = try graph.embeddings(sequences)
            let worst = zip(expected, actual).map { abs($0 - $1) }.max()!
            #expect(worst < 2e-5, "\(pooling.mode): largest difference \(worst)")
        }
    }

    /// Sequences the forward pass cannot run, targets of the wrong size and unknown weights are
    /// typed errors naming what is wrong, not traps.
    @Test func badInputsAreErrors() throws {
        let graph = try BertTrainingGraph(config: Self.config, pooling: SentencePooling(),
                                          parameters: BertTrainingParameters(tensors: Dictionary(uniqueKeysWithValues: Self.randomTensors(seed: 3).map { ($0.name, $0.values) })),
                                          threads: 1)
        let good = Self.sequences(count: 2, seed: 4)
        let tooLong = [Int32](repeating: 1, count: Self.config.maxPositions + 1)
        for (sequences, expected) in [([good[0], []], "input 1: the token sequence is empty"),
                                      ([tooLong], "input 0: \(tooLong.count) tokens exceed the \(Self.config.maxPositions) positions of the model"),
                                      ([good[0], good[1] + [Int32(Self.config.vocabularySize)]],
                                       "input 1: token id \(Self.config.vocabularySize) is outside the vocabulary of \(Self.config.vocabularySize)"),
                                      ([[-1]], "input 0: token id -1 is outside the vocabulary of \(Self.config.vocabularySize)")] {
            #expect(throws: ModelError.self) { try graph.embeddings(sequences) }
            do { _ = try graph.embeddings(sequences) } catch { #expect(error.description == expected) }
        }
        let targets = Self.unitRows(2, seed: 5)
        #expect { try graph.lossAndGradients(good, targets: Array(targets.dropLast()), weights: []) } throws: { error in
            (error as? ModelError)?.description.hasPrefix("targets:") == true
        }
        #expect { try graph.lossAndGradients(good, targets: targets, weights: ["encoder.layer.9.output.dense.weight"]) } throws: { error in
            (error as? ModelError)?.description == "weights: no tensor encoder.layer.9.output.dense.weight"
        }
    }

    /// A weight stored as `W'` with an input rotation `R` computes what `W'·R` stored plainly does.
    @Test func rotatedWeightsRunAsTheirProduct() throws {
        let tensors = Dictionary(uniqueKeysWithValues: Self.randomTensors(seed: 3).map { ($0.name, $0.values) })
        let name = "encoder.layer.1.intermediate.dense.weight"
        let rotation = HadamardRotation(size: 32, seed: 9)
        var product = tensors
        let stored = tensors[name]!
        for row in 0..<64 {
            // Row of W'·R is Rᵀ applied to the row of W'.
            var values = Array(stored[(row * 32)..<((row + 1) * 32)])
            values.withUnsafeMutableBufferPointer { rotation.unrotate($0.baseAddress!) }
            product[name]!.replaceSubrange((row * 32)..<((row + 1) * 32), with: values)
        }
        let sequences = Self.sequences(count: 5, seed: 4)
        let rotated = try BertTrainingGraph(config: Self.config, pooling: SentencePooling(),
                                            parameters: BertTrainingParameters(tensors: tensors, rotations: [name: rotation]))
        let plain = try BertTrainingGraph(config: Self.config, pooling: SentencePooling(), parameters: BertTrainingParameters(tensors: product))
        let worst = zip(try rotated.embeddings(sequences), try plain.embeddings(sequences)).map { abs($0 - $1) }.max()!
        #expect(worst < 1e-5, "largest difference \(worst)")
    }

    /// `∂L/∂θ · d` against `(L(θ + εd) − L(θ − εd)) / 2ε` for a random unit direction `d` per
    /// tensor: every norm and bias, four weights (two with input rotations) and the three
    /// embedding tables. Float32 losses
    /// of about 1 with ε 1e-2 leave rounding near 1e-6 and a curvature term near ε², both below
    /// the bound; a softmax gradient 10 % off fails it many times over.
    @Test func gradientsMatchFiniteDifferences() throws {
        let tensors = Dictionary(uniqueKeysWithValues: Self.randomTensors(seed: 5).map { ($0.name, $0.values) })
        let rotations = ["encoder.layer.0.attention.self.key.weight": HadamardRotation(size: 32, seed: 1),
                         "encoder.layer.1.output.dense.weight": HadamardRotation(size: 64, seed: 2)]
        let graph = try BertTrainingGraph(config: Self.config, pooling: SentencePooling(),
                                          parameters: BertTrainingParameters(tensors: tensors, rotations: rotations), threads: 2)
        let sequences = Self.sequences(count: 6, seed: 6)
        let targets = Self.unitRows(6, seed: 7)
        let weights: Set<String> = ["encoder.layer.0.attention.self.key.weight", "encoder.layer.0.attention.self.value.weight",
                                    "encoder.layer.1.intermediate.dense.weight", "encoder.layer.1.output.dense.weight",
                                    "embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                                    "embeddings.token_type_embeddings.weight"]
        func evaluate(_ weights: Set<String>) throws -> (loss: Double, gradients: [String: [Float]]) {
            try graph.lossAndGradients(sequences, targets: targets, weights: weights)
        }
        let (loss, gradients) = try evaluate(weights)
        #expect(loss > 0.5, "a random target leaves a loss near 1: \(loss)")
        var generator = SeededGenerator(seed: 8)
        var checked = 0
        for name in graph.normAndBiasNames + weights.sorted() {
            let base = tensors[name]!
            let raw = base.map { _ in Float.random(in: -1...1, using: &generator) }
            let length = raw.reduce(0) { $0 + $1 * $1 }.squareRoot()
            let direction = raw.map { $0 / length }
            let analytic = zip(gradients[name]!, direction).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
            let epsilon: Float = 1e-2
            func loss(at sign: Float) throws -> Double {
                graph.parameters.tensors[name] = zip(base, direction).map { $0 + sign * epsilon * $1 }
                return try evaluate([]).loss
            }
            let numeric = (try loss(at: 1) - loss(at: -1)) / Double(2 * epsilon)
            graph.parameters.tensors[name] = base
            #expect(abs(numeric - analytic) <= 2e-5 + 0.005 * abs(analytic), "\(name): analytic \(analytic), numeric \(numeric)")
            checked += 1
        }
        #expect(checked == 2 + 2 * (6 + 4) + 7)
    }

    /// A model folder holding the random encoder of `randomTensors(seed: 11)`: its weights,
    /// config.json, a 40-word vocabulary (mean pooling, unit length), and 96 lines of text.
    static func modelFolder() throws -> TemporaryDirectory {
        let folder = TemporaryDirectory()
        try SafetensorsWriter.write(Self.randomTensors(seed: 11).map { ($0.name, try DenseTensor(converting: $0.values, shape: $0.shape)) },
                                    to: folder.file("model.safetensors"))
        let config = #"{"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64, "#
            + #""max_position_embeddings": 24, "vocab_size": 40, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}"#
        try config.write(toFile: folder.file("config.json"), atomically: true, encoding: .utf8)
        let words = (0..<35).map { "w\(Character(UnicodeScalar(97 + $0 % 26)!))\($0 / 26)" }
        try (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words).joined(separator: "\n").write(toFile: folder.file("vocab.txt"), atomically: true, encoding: .utf8)
        var generator = SeededGenerator(seed: 12)
        let lines = (0..<96).map { _ in (0..<Int.random(in: 1...12, using: &generator)).map { _ in words.randomElement(using: &generator)! }.joined(separator: " ") }
        try lines.joined(separator: "\n").write(toFile: folder.file("text.txt"), atomically: true, encoding: .utf8)
        return folder
    }

    /// `tune` trains a 2-bit model's LUTs (one of them input-rotated), biases and norms (and with
    /// `embeddings` the three embedding tables): the
    /// mean cosine to the uncompressed model rises, indices and LUT dtypes stay, and the runtime
    /// computes from the written file the cosine the summary reports.
    @Test(arguments: [false, true]) func tuningImprovesTheStoredModel(embeddings: Bool) throws {
        let folder = try Self.modelFolder()
        let location = try ModelLocation.resolve(folder.path)
        let palette = #"{"bits": 2, "granularity": "per_tensor", "lut_dtype": "int8"}"#
        let body = #"{"op_type": {"linear": {"palettize": \#(palette)}}, "op_name": {"encoder.layer.0.attention.self.key.weight": {"rotate": {}, "palettize": \#(palette)}}"#
        let tuned = try Recipe.parse(Data((body + #", "tune": {"data": "text.txt", "epochs": 4, "learning_rate": 0.01, "batch_size": 8, "embeddings": \#(embeddings)}}"#).utf8),
                                     file: folder.file("tuned.json"))
        let plain = try Recipe.parse(Data((body + "}").utf8), file: folder.file("plain.json"))
        let summary = try ModelCompressor.compress(model: location, recipe: tuned, output: folder.file("t.safetensors"), threads: 2)
        _ = try ModelCompressor.compress(model: location, recipe: plain, output: folder.file("p.safetensors"), threads: 2)
        let tuning = try #require(summary.tuning)
        #expect(tuning.lines == 96 && tuning.steps == 48 && tuning.tunedPalettes == 12 && tuning.evaluatedLines == 96)
        #expect(tuning.cosineAfter > tuning.cosineBefore + 0.01, "\(tuning.cosineBefore) → \(tuning.cosineAfter)")

        let tunedStore = try SafetensorsStore(path: folder.file("t.safetensors")), plainStore = try SafetensorsStore(path: folder.file("p.safetensors"))
        var changedDense = 0
        for name in tunedStore.names {
            switch (tunedStore.tensor(named: name), plainStore.tensor(named: name)) {
            case (.encoded(let a), .encoded(let b)):
                #expect(a.encoding == b.encoding && a.parts["indices"]!.floats() == b.parts["indices"]!.floats(), "\(name)")
                #expect(a.parts["lut"]!.dtype == .i8 && a.paletteLUTs() != b.paletteLUTs(), "\(name)")
            case (.dense(let a), .dense(let b)):
                if a.floats() != b.floats() { changedDense += 1 }
            default: Issue.record("\(name) is stored differently")
            }
        }
        #expect(changedDense == 12 + 2 * 5 + (embeddings ? 3 : 0), "every linear bias and LayerNorm (and embedding table) is tuned, nothing else: \(changedDense)")

        let text = try Calibration.lines(folder.file("text.txt"), limit: 96)
        let tokenizer = try WordPieceTokenizer(vocabularyFile: folder.file("vocab.txt"))
        let sequences = text.map(tokenizer.encode)
        func encoder(_ path: String) throws -> BertEncoder {
            try BertEncoder(config: Self.config, pooling: SentencePooling(folder: folder.path), source: try WeightSource(path: path, activations: .float32))
        }
        let reference = try encoder(folder.file("model.safetensors")).embed(sequences), compressed = try encoder(folder.file("t.safetensors")).embed(sequences)
        let cosine = zip(reference, compressed).reduce(0.0) { total, pair in total + zip(pair.0, pair.1).reduce(0.0) { $0 + Double($1.0 * $1.1) } } / 96
        #expect(abs(cosine - tuning.cosineAfter) < 1e-4, "runtime \(cosine), summary \(tuning.cosineAfter)")
    }

    /// A bad `tune` is a recipe error naming its key, and tuning a model it cannot train writes nothing.
    @Test func badTuningIsARecipeError() throws {
        let folder = try Self.modelFolder()
        func fails(_ tune: String, keyPath: String) {
            #expect(throws: CompressionError.self) { try Recipe.parse(Data(#"{"tune": \#(tune)}"#.utf8), file: "r.json") }
            do { _ = try Recipe.parse(Data(#"{"tune": \#(tune)}"#.utf8), file: "r.json") } catch {
                guard case .invalidRecipe(_, let path, _) = error else { Issue.record("\(error)"); return }
                #expect(path == keyPath, "\(tune): \(path)")
            }
        }
        fails(#"{"epochs": 2}"#, keyPath: "tune.data")
        fails(#"{"data": "t.txt", "epochs": 0}"#, keyPath: "tune.epochs")
        fails(#"{"data": "t.txt", "learning_rate": 1.5}"#, keyPath: "tune.learning_rate")
        fails(#"{"data": "t.txt", "batch": 8}"#, keyPath: "tune.batch")
        let missing = try Recipe.parse(Data(#"{"op_type": {"linear": {"quantize": {"bits": 8}}}, "tune": {"data": "nowhere.txt"}}"#.utf8),
                                       file: folder.file("r.json"))
        #expect(throws: (any Error).self) {
            try ModelCompressor.compress(model: try ModelLocation.resolve(folder.path), recipe: missing, output: folder.file("m.safetensors"), threads: 2)
        }
        let decoder = try Recipe.parse(Data(#"{"op_type": {"linear": {"quantize": {"bits": 8}}, "output": null}, "tune": {"data": "text.txt"}}"#.utf8),
                                       file: folder.file("r.json"))
        #expect { try ModelCompressor.compress(model: try ModelLocation.resolve(ResidualRotationTests.gguf), recipe: decoder,
                                               output: folder.file("d.safetensors"), threads: 2) } throws: { error in
            guard case CompressionError.invalidRecipe(_, let keyPath, let reason) = error else { return false }
            return keyPath == "tune" && reason.contains("BERT")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.file("m.safetensors")) && !FileManager.default.fileExists(atPath: folder.file("d.safetensors")))
    }
}
