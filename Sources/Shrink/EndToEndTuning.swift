import Dispatch
import Foundation
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkKernels
import ShrinkModels

/// What end-to-end tuning (recipe key `tune`) did.
public struct TuningSummary: Codable, Sendable {
    /// Training inputs, optimizer steps, and the palettes whose LUTs were trained.
    public let lines: Int
    public let steps: Int
    public let tunedPalettes: Int
    /// Embedding tables trained (`"embeddings": true`).
    public let tunedEmbeddingTables: Int
    /// Mean cosine of the compressed model's pooled embeddings to the uncompressed model's over
    /// the first `evaluatedLines` training inputs, before tuning and after (LUTs on their stored grid).
    public let evaluatedLines: Int
    public let cosineBefore: Double
    public let cosineAfter: Double
    public let seconds: Double
}

/// End-to-end tuning of an encoded BERT encoder (`TuningConfig`): palette LUT entries, linear
/// biases and LayerNorms (and, with `embeddings`, the embedding tables the recipe leaves dense)
/// trained against the uncompressed model's pooled embeddings through `BertTrainingGraph`,
/// indices and every other encoding fixed.
///
/// A trained palette's weight is `W'[i·v + j] = lut[row(i)·v + j]` for vector `i` of `v`
/// elements, `row(i)` its group's LUT offset plus its index, so `∂L/∂lut[e·v + j]` is the sum of
/// `∂L/∂W'[i·v + j]` over the vectors `i` with `row(i) = e` (`W'` the stored weight, before any
/// input rotation). Each step costs about three forward passes of the batch.
///
/// Work is split by sentences: each batch into one shard per thread (contiguous, balanced by
/// tokens), each shard's forward and backward pass on its own thread with single-threaded BLAS,
/// gradients summed weighted by the shards' sentence counts (the batch mean's gradient).
enum EndToEndTuning {
    /// The tuned tensors, the dense tensors (biases, norms, tables) to store in place of the source's, and the summary.
    struct Result {
        let tensors: [EncodedTensor]
        let dense: [String: DenseTensor]
        let summary: TuningSummary
    }

    /// A palette whose LUT entries are trained.
    struct TrainedPalette {
        let index: Int
        let weightName: String
        let vectorSize: Int
        /// Each vector's LUT row (group offset plus index), in the order of the stored weight's vectors.
        let rows: [Int32]
        var lut: [Float]

        /// `W'` from the LUT.
        func weight(into values: inout [Float]) {
            let v = vectorSize
            lut.withUnsafeBufferPointer { table in
                values.withUnsafeMutableBufferPointer { out in
                    for (vector, row) in rows.enumerated() {
                        for j in 0..<v { out[vector * v + j] = table[Int(row) * v + j] }
                    }
                }
            }
        }

        /// `∂L/∂lut` from `∂L/∂W'`.
        func lutGradient(_ weightGradient: [Float]) -> [Float] {
            let v = vectorSize
            var gradient = [Float](repeating: 0, count: lut.count)
            weightGradient.withUnsafeBufferPointer { dW in
                gradient.withUnsafeMutableBufferPointer { out in
                    for (vector, row) in rows.enumerated() {
                        for j in 0..<v { out[Int(row) * v + j] += dW[vector * v + j] }
                    }
                }
            }
            return gradient
        }
    }

    /// Adam state of one tensor.
    struct AdamState {
        var first: [Float]
        var second: [Float]
        /// Steps are relative to this magnitude: the tensor's mean |value| at the start (at least 1e-3).
        let scale: Float

        init(_ values: [Float]) {
            first = [Float](repeating: 0, count: values.count)
            second = first
            scale = max(values.reduce(0) { $0 + abs($1) } / Float(max(values.count, 1)), 1e-3)
        }

        /// One Adam step of `rate` (relative) at step `step` (from 1).
        mutating func update(_ values: inout [Float], gradient: [Float], rate: Double, step: Int) {
            let correction1 = Float(1 - pow(0.9, Double(step))), correction2 = Float(1 - pow(0.999, Double(step)))
            let size = Float(rate) * scale
            for index in values.indices {
                let g = gradient[index]
                first[index] = 0.9 * first[index] + 0.1 * g
                second[index] = 0.999 * second[index] + 0.001 * g * g
                values[index] -= size * (first[index] / correction1) / ((second[index] / correction2).squareRoot() + 1e-12)
            }
        }
    }

    /// The BERT architecture, pooling and tokenized training text that tuning `model` needs.
    /// - Throws: `CompressionError.invalidRecipe` at key `tune` for a model that is no BERT
    ///   encoder; `ModelError` for unreadable text, vocabulary or pooling.
    static func inputs(model: ModelLocation, config: TuningConfig, recipeFile: String) throws -> Inputs {
        let (files, architecture) = try ModelCompressor.openForCalibration(model)
        guard let bert = architecture as? BertArchitecture, let folder = files.folder else {
            throw CompressionError.invalidRecipe(file: recipeFile, keyPath: "tune",
                                                 reason: "end-to-end tuning trains BERT sentence encoders; this model is \(type(of: architecture).name)")
        }
        let pooling = try SentencePooling(folder: folder)
        let tokenizer = try WordPieceTokenizer(vocabularyFile: folder + "/vocab.txt",
                                               maximumLength: min(BertArchitecture.longestInput, bert.config.maxPositions))
        if let largest = tokenizer.vocabulary.values.max(), Int(largest) >= bert.config.vocabularySize {
            throw ModelError.invalidFile(path: folder + "/vocab.txt",
                                         reason: "token id \(largest) has no row in the \(bert.config.vocabularySize)-row word embedding table")
        }
        return Inputs(architecture: bert, pooling: pooling, sequences: try Calibration.lines(config.data.path, limit: config.data.limit).map { tokenizer.encode($0) },
                      recipeFile: recipeFile)
    }

    struct Inputs {
        let architecture: BertArchitecture
        let pooling: SentencePooling
        let sequences: [[Int32]]
        let recipeFile: String
    }

    /// Tunes the `encoded` tensors of the model in `store` (`TuningConfig`) on `inputs`' text.
    static func tune(_ inputs: Inputs, store: any TensorStore, encoded: [EncodedTensor], config: TuningConfig, threads: Int) throws -> Result {
        let start = DispatchTime.now()
        let (bert, pooling, sequences) = (inputs.architecture, inputs.pooling, inputs.sequences)

        var teacherTensors: [String: [Float]] = [:]
        for name in store.names { teacherTensors[name] = try ModelCompressor.denseSource(store, name).floats() }
        let teacher = try BertTrainingGraph(config: bert.config, pooling: pooling, parameters: BertTrainingParameters(tensors: teacherTensors),
                                            threads: 1)
        var student = BertTrainingParameters(tensors: teacherTensors)
        var palettes: [TrainedPalette] = []
        for (index, tensor) in encoded.enumerated() {
            if let palette = try trainablePalette(tensor, index: index) {
                if let rotation = tensor.inputRotation?.rotation { student.rotations[tensor.name] = rotation }
                palette.weight(into: &student.tensors[tensor.name]!)
                palettes.append(palette)
            } else {
                student.tensors[tensor.name] = tensor.decode()
            }
        }
        let graph = try BertTrainingGraph(config: bert.config, pooling: pooling, parameters: student, threads: 1)
        return try BLASThreading.singleThreaded {
            try train(graph: graph, teacher: teacher, palettes: palettes, sequences: sequences, encoded: encoded, store: store, config: config,
                      recipeFile: inputs.recipeFile, threads: threads, start: start)
        }
    }

    /// The training loop and the re-encoding of `tune`.
    static func train(graph: BertTrainingGraph, teacher: BertTrainingGraph, palettes trained: [TrainedPalette], sequences: [[Int32]],
                      encoded: [EncodedTensor], store: any TensorStore, config: TuningConfig, recipeFile: String, threads: Int,
                      start: DispatchTime) throws -> Result {
        var palettes = trained
        let batch = config.batchSize, hidden = graph.config.hiddenSize
        let batches = stride(from: 0, to: sequences.count, by: batch).map { Array(sequences[$0..<min($0 + batch, sequences.count)]) }
        let targets = try Parallel.map(batches.count, threads: threads) { try teacher.embeddings(batches[$0]) }.flatMap { $0 }
        let evaluated = min(sequences.count, 2048)
        func meanCosine() throws -> Double {
            let parts = try Parallel.map((evaluated + batch - 1) / batch, threads: threads) { index -> Double in
                let first = index * batch, end = min(first + batch, evaluated)
                let unit = try graph.embeddings(Array(sequences[first..<end]))
                var total = 0.0
                for s in 0..<(end - first) {
                    var dot: Float = 0
                    for c in 0..<hidden { dot += unit[s * hidden + c] * targets[(first + s) * hidden + c] }
                    total += Double(dot)
                }
                return total
            }
            return parts.reduce(0, +) / Double(evaluated)
        }
        let before = try meanCosine()

        // Dense tensors trained in place: norms and biases, and with `embeddings` the tables the recipe left dense.
        let encodedNames = Set(encoded.map(\.name))
        let tables = config.embeddings ? BertTrainingGraph.embeddingNames.filter { !encodedNames.contains($0) } : []
        let normsAndBiases = graph.normAndBiasNames + tables
        var adam: [String: AdamState] = [:]
        for name in normsAndBiases { adam[name] = AdamState(graph.parameters.tensors[name]!) }
        for palette in palettes { adam[palette.weightName] = AdamState(palette.lut) }
        let weightNames = Set(palettes.map(\.weightName) + tables)
        let totalSteps = config.epochs * batches.count
        var generator = SplitMix64(seed: config.seed)
        var step = 0
        for _ in 0..<config.epochs {
            let order = Array(sequences.indices).shuffled(using: &generator)
            for first in stride(from: 0, to: order.count, by: batch) {
                let chosen = Array(order[first..<min(first + batch, order.count)])
                let gradients = try shardedGradients(graph, sequences: chosen.map { sequences[$0] }, targets: chosen.flatMap { targets[($0 * hidden)..<(($0 + 1) * hidden)] },
                                                     weights: weightNames, threads: threads)
                step += 1
                let rate = config.learningRate * 0.5 * (1 + cos(Double.pi * Double(step) / Double(totalSteps)))
                for name in normsAndBiases {
                    adam[name]!.update(&graph.parameters.tensors[name]!, gradient: gradients[name]!, rate: rate, step: step)
                }
                for index in palettes.indices {
                    let name = palettes[index].weightName
                    adam[name]!.update(&palettes[index].lut, gradient: palettes[index].lutGradient(gradients[name]!), rate: rate, step: step)
                    palettes[index].weight(into: &graph.parameters.tensors[name]!)
                }
            }
        }

        // Adam's steps are bounded, but a non-finite value would reach the LUT grids: refuse it.
        let diverged = normsAndBiases.first { graph.parameters.tensors[$0]!.contains { !$0.isFinite } }
            ?? palettes.first { $0.lut.contains { !$0.isFinite } }?.weightName
        if let diverged {
            throw CompressionError.invalidRecipe(file: recipeFile, keyPath: "tune.learning_rate",
                                                 reason: "training diverged (\(diverged) holds non-finite values); use a smaller learning rate")
        }
        var tensors = encoded
        for index in palettes.indices {
            let tuned = try encoded[palettes[index].index].replacingPaletteLUTs(palettes[index].lut)
            tensors[palettes[index].index] = tuned
            palettes[index].lut = tuned.paletteLUTs()
            palettes[index].weight(into: &graph.parameters.tensors[palettes[index].weightName]!)
        }
        let after = try meanCosine()
        var dense: [String: DenseTensor] = [:]
        for name in normsAndBiases {
            guard let source = store.descriptors.first(where: { $0.name == name }) else { continue }
            dense[name] = try DenseTensor(converting: graph.parameters.tensors[name]!, to: source.dtype.isFloatingPoint ? source.dtype : .f32,
                                          shape: source.shape)
        }
        let summary = TuningSummary(lines: sequences.count, steps: step, tunedPalettes: palettes.count, tunedEmbeddingTables: tables.count, evaluatedLines: evaluated,
                                    cosineBefore: before, cosineAfter: after, seconds: ModelCompressor.seconds(since: start))
        return Result(tensors: tensors, dense: dense, summary: summary)
    }

    /// The gradient of the batch mean of the loss over `sequences`: one shard per thread,
    /// contiguous and balanced by tokens, each shard's gradient weighted by its share of sentences.
    static func shardedGradients(_ graph: BertTrainingGraph, sequences: [[Int32]], targets: [Float],
                                 weights: Set<String>,
                                 threads: Int) throws -> [String: [Float]] {
        let hidden = graph.config.hiddenSize
        let tokenCount = sequences.reduce(0) { $0 + $1.count }
        var bounds = [0]
        var seen = 0
        for (index, sequence) in sequences.enumerated() where bounds.count < min(threads, sequences.count) {
            seen += sequence.count
            if seen * min(threads, sequences.count) >= tokenCount * bounds.count, index + 1 < sequences.count { bounds.append(index + 1) }
        }
        bounds.append(sequences.count)
        let cuts = bounds
        let shards = try Parallel.map(bounds.count - 1, threads: threads) { shard -> [String: [Float]] in
            let range = cuts[shard]..<cuts[shard + 1]
            return try graph.lossAndGradients(Array(sequences[range]), targets: Array(targets[(range.lowerBound * hidden)..<(range.upperBound * hidden)]),
                                          weights: weights).gradients
        }
        var total = shards[0]
        let share = (0..<shards.count).map { Float(bounds[$0 + 1] - bounds[$0]) / Float(sequences.count) }
        for name in total.keys {
            total[name]!.withUnsafeMutableBufferPointer { sum in
                for i in sum.indices { sum[i] *= share[0] }
                for shard in 1..<shards.count {
                    shards[shard][name]!.withUnsafeBufferPointer { part in for i in sum.indices { sum[i] += share[shard] * part[i] } }
                }
            }
        }
        return total
    }

    /// The trainable palette `tensor` holds (a palette without channel or block scales, possibly
    /// input-rotated), or nil for any other encoding.
    static func trainablePalette(_ tensor: EncodedTensor, index: Int) throws -> TrainedPalette? {
        let base = tensor.inputRotation?.rotated ?? tensor
        guard case .palette(let layout) = base.encoding, !layout.perChannelScale, layout.blockScales == nil,
              let indices = base.parts["indices"] else { return nil }
        let v = layout.vectorSize, count = base.elementCount / v
        var rows = [Int32](repeating: 0, count: count)
        do {
            let packed = indices.bytes
            for vector in 0..<count {
                let group = EncodingLayout.group(of: vector * v, layout.granularity, shape: base.shape)
                rows[vector] = Int32(group * layout.entries + Int(PackedBits.value(at: vector, bits: layout.bits, in: packed)))
            }
        }
        return TrainedPalette(index: index, weightName: tensor.name, vectorSize: v, rows: rows, lut: base.paletteLUTs())
    }
}
