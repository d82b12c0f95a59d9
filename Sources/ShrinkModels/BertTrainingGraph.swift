import CBLAS
import Foundation
import ShrinkCore
import ShrinkKernels

/// The tensors of a float32 BERT encoder that a training step reads, by Hugging Face names:
/// every tensor as row-major floats (a linear weight `[out, in]` as stored), and the input
/// rotation `R` of each linear weight stored as `W'` that runs as `W'·R` (keyed by the weight's name).
public struct BertTrainingParameters: Sendable {
    public var tensors: [String: [Float]]
    public var rotations: [String: HadamardRotation]

    public init(tensors: [String: [Float]], rotations: [String: HadamardRotation] = [:]) {
        self.tensors = tensors
        self.rotations = rotations
    }
}

/// A float32 BERT encoder (the operations of `BertEncoder` with fp32 activations) that runs
/// batches forward keeping its activations and back again, for end-to-end tuning.
///
/// Loss of a batch of `S` sentences with unit targets `t_s`: `L = (1/S) Σ_s (1 − ê_s · t_s)`, with
/// `ê_s` the sentence's pooled embedding (`SentencePooling`: mean or CLS) scaled to unit length.
/// `lossAndGradients` returns `∂L/∂θ` for every LayerNorm scale and shift, every linear bias, and
/// the stored weights `W'` and embedding tables it is asked for. Tokens are packed as in `BertEncoder` (attention per
/// sentence over its own tokens). Cost per batch of `N` tokens: three times a forward pass's
/// `2·N·P` multiply-adds for the `P` linear weights (BLAS), plus attention's `O(Σ L_s²·hidden)`.
public final class BertTrainingGraph: @unchecked Sendable {
    public let config: BertConfig
    public let pooling: SentencePooling
    public var parameters: BertTrainingParameters
    let threads: Int

    /// The per-layer linear ops, as `BertArchitecture.layerLinears` names them.
    static let linears = BertArchitecture.layerLinears.map(\.name)

    /// Checks that `parameters` hold every tensor the encoder runs, with its element count, and
    /// that every rotation fits its weight's input width.
    /// - Throws: `ModelError.invalidWeight` naming the tensor.
    public init(config: BertConfig, pooling: SentencePooling, parameters: BertTrainingParameters,
                threads: Int = ProcessInfo.processInfo.activeProcessorCount) throws(ModelError) {
        self.config = config
        self.pooling = pooling
        self.parameters = parameters
        self.threads = max(1, threads)
        let hidden = config.hiddenSize, wide = config.intermediateSize
        var expected: [(String, Int)] = [
            ("embeddings.word_embeddings.weight", config.vocabularySize * hidden),
            ("embeddings.position_embeddings.weight", config.maxPositions * hidden),
            ("embeddings.token_type_embeddings.weight", config.typeVocabularySize * hidden),
            ("embeddings.LayerNorm.weight", hidden), ("embeddings.LayerNorm.bias", hidden),
        ]
        for layer in 0..<config.layers {
            let prefix = "encoder.layer.\(layer)."
            for op in BertArchitecture.layerLinears {
                let (out, inputs) = (op.wideOutput ? wide : hidden, op.wideInput ? wide : hidden)
                expected += [(prefix + op.name + ".weight", out * inputs), (prefix + op.name + ".bias", out)]
                if let rotation = parameters.rotations[prefix + op.name + ".weight"], rotation.size != inputs {
                    throw .invalidWeight(tensor: prefix + op.name + ".weight", reason: "a rotation of \(rotation.size) does not fit \(inputs) inputs")
                }
            }
            for norm in ["attention.output.LayerNorm", "output.LayerNorm"] {
                expected += [(prefix + norm + ".weight", hidden), (prefix + norm + ".bias", hidden)]
            }
        }
        for (name, count) in expected {
            guard let values = parameters.tensors[name] else { throw .invalidWeight(tensor: name, reason: "missing") }
            guard values.count == count else { throw .invalidWeight(tensor: name, reason: "\(values.count) values where \(count) are needed") }
        }
    }

    /// The word, position and token-type embedding tables.
    public static let embeddingNames = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                                        "embeddings.token_type_embeddings.weight"]

    /// The names of the tensors `lossAndGradients` always differentiates: LayerNorm scales and
    /// shifts and linear biases.
    public var normAndBiasNames: [String] {
        var names = ["embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"]
        for layer in 0..<config.layers {
            let prefix = "encoder.layer.\(layer)."
            names += Self.linears.map { prefix + $0 + ".bias" }
            names += ["attention.output.LayerNorm", "output.LayerNorm"].flatMap { [prefix + $0 + ".weight", prefix + $0 + ".bias"] }
        }
        return names
    }

    /// Unit-length pooled embeddings of `sequences` (`count × hiddenSize` floats, row after row).
    /// - Throws: `ModelError.invalidInput` naming the first sequence that is empty, longer than the
    ///   position table or holds an id without a row, before any work.
    public func embeddings(_ sequences: [[Int32]]) throws(ModelError) -> [Float] {
        try validate(sequences)
        var tape = Tape()
        return forward(sequences, tape: &tape, keep: false).unit
    }

    /// The loss over `sequences` against `targets` (`count × hiddenSize` unit vectors) and its
    /// gradient with respect to every tensor of `normAndBiasNames` and the tensors `weights`
    /// (linear weights as stored, embedding tables).
    /// - Throws: `ModelError.invalidInput` as `embeddings(_:)`; `.invalidArgument` when `targets`
    ///   is not one row per sequence or `weights` names a tensor the parameters lack.
    public func lossAndGradients(_ sequences: [[Int32]], targets: [Float],
                                 weights: Set<String>) throws(ModelError) -> (loss: Double, gradients: [String: [Float]]) {
        let hidden = config.hiddenSize, count = sequences.count
        try validate(sequences)
        guard targets.count == count * hidden else {
            throw .invalidArgument(name: "targets", reason: "\(targets.count) values for \(count) sequences of \(hidden)")
        }
        if let missing = weights.sorted().first(where: { parameters.tensors[$0] == nil }) {
            throw .invalidArgument(name: "weights", reason: "no tensor \(missing)")
        }
        var tape = Tape()
        let pooled = forward(sequences, tape: &tape, keep: true)
        var loss = 0.0
        // dL/dê = −t/S; ê = e/|e| gives dL/de = (dê − ê (ê·dê)) / |e|.
        var dPooled = [Float](repeating: 0, count: count * hidden)
        for s in 0..<count {
            var dot: Float = 0
            for c in 0..<hidden { dot += pooled.unit[s * hidden + c] * targets[s * hidden + c] }
            loss += Double(1 - dot)
            var projection: Float = 0
            for c in 0..<hidden { projection += pooled.unit[s * hidden + c] * -targets[s * hidden + c] }
            for c in 0..<hidden {
                let dUnit = -targets[s * hidden + c] / Float(count)
                dPooled[s * hidden + c] = (dUnit - pooled.unit[s * hidden + c] * projection / Float(count)) / pooled.norms[s]
            }
        }
        var gradients: [String: [Float]] = [:]
        for name in normAndBiasNames { gradients[name] = [Float](repeating: 0, count: parameters.tensors[name]!.count) }
        for name in weights { gradients[name] = [Float](repeating: 0, count: parameters.tensors[name]!.count) }
        backward(dPooled: dPooled, tape: tape, gradients: &gradients)
        return (loss / Double(count), gradients)
    }

    /// - Throws: `ModelError.invalidInput` for the first sequence the forward pass cannot run.
    func validate(_ sequences: [[Int32]]) throws(ModelError) {
        try BertEncoder.validate(sequences, positions: config.maxPositions, vocabulary: config.vocabularySize)
    }

    // MARK: - Forward

    /// What the forward pass keeps for the backward pass.
    struct Tape {
        var sequences: [[Int32]] = []
        var lengths: [Int] = []
        var embeddingNorm = NormTape()
        var layers: [LayerTape] = []
    }

    struct NormTape {
        /// `(x − μ)·rstd` per row, and `rstd = 1/√(var + ε)` per row.
        var normalized: [Float] = []
        var inverseDeviation: [Float] = []
    }

    struct LayerTape {
        var input: [Float] = []
        /// Each linear's input after its rotation, for rotated linears (by op name).
        var rotatedInputs: [String: [Float]] = [:]
        var query: [Float] = [], key: [Float] = [], value: [Float] = []
        /// Attention probabilities: per sentence, per head, `L × L` row-major, one after another.
        var probabilities: [Float] = []
        var context: [Float] = []
        var attentionNorm = NormTape()
        var attended: [Float] = []
        /// GELU's input derivative `Φ(x) + x·φ(x)` and its output.
        var activationSlope: [Float] = []
        var activated: [Float] = []
        var outputNorm = NormTape()
    }

    func tensor(_ name: String) -> [Float] { parameters.tensors[name]! }

    /// The forward pass over sequences `validate` accepted.
    func forward(_ sequences: [[Int32]], tape: inout Tape, keep: Bool) -> (unit: [Float], norms: [Float]) {
        let hidden = config.hiddenSize
        let rows = sequences.reduce(0) { $0 + $1.count }
        tape.lengths = sequences.map(\.count)
        if keep { tape.sequences = sequences }
        let words = tensor("embeddings.word_embeddings.weight"), positions = tensor("embeddings.position_embeddings.weight")
        let types = tensor("embeddings.token_type_embeddings.weight")
        var states = [Float](repeating: 0, count: rows * hidden)
        var row = 0
        for sequence in sequences {
            for (position, id) in sequence.enumerated() {
                let (w, p) = (Int(id) * hidden, position * hidden)
                for c in 0..<hidden { states[row * hidden + c] = words[w + c] + positions[p + c] + types[c] }
                row += 1
            }
        }
        layerNorm(&states, rows: rows, name: "embeddings.LayerNorm", tape: &tape.embeddingNorm)
        for layer in 0..<config.layers {
            var layerTape = LayerTape()
            states = forward(layer: layer, states, rows: rows, lengths: tape.lengths, tape: &layerTape)
            if keep { tape.layers.append(layerTape) }
        }
        var pooled = [Float](repeating: 0, count: sequences.count * hidden)
        var norms = [Float](repeating: 0, count: sequences.count)
        var start = 0
        for (s, length) in tape.lengths.enumerated() {
            switch pooling.mode {
            case .mean:
                for t in start..<(start + length) { for c in 0..<hidden { pooled[s * hidden + c] += states[t * hidden + c] } }
                for c in 0..<hidden { pooled[s * hidden + c] /= Float(length) }
            case .cls:
                for c in 0..<hidden { pooled[s * hidden + c] = states[start * hidden + c] }
            }
            var squares: Float = 0
            for c in 0..<hidden { squares += pooled[s * hidden + c] * pooled[s * hidden + c] }
            norms[s] = max(squares.squareRoot(), 1e-12)
            for c in 0..<hidden { pooled[s * hidden + c] /= norms[s] }
            start += length
        }
        return (pooled, norms)
    }

    func forward(layer: Int, _ input: [Float], rows: Int, lengths: [Int], tape: inout LayerTape) -> [Float] {
        let hidden = config.hiddenSize, wide = config.intermediateSize
        let prefix = "encoder.layer.\(layer)."
        tape.input = input
        tape.query = linear(prefix + "attention.self.query", input, rows: rows, inputs: hidden, outputs: hidden, tape: &tape)
        tape.key = linear(prefix + "attention.self.key", input, rows: rows, inputs: hidden, outputs: hidden, tape: &tape)
        tape.value = linear(prefix + "attention.self.value", input, rows: rows, inputs: hidden, outputs: hidden, tape: &tape)
        tape.context = attention(tape: &tape, rows: rows, lengths: lengths)
        var attended = linear(prefix + "attention.output.dense", tape.context, rows: rows, inputs: hidden, outputs: hidden, tape: &tape)
        for index in attended.indices { attended[index] += input[index] }
        layerNorm(&attended, rows: rows, name: prefix + "attention.output.LayerNorm", tape: &tape.attentionNorm)
        tape.attended = attended
        var activated = linear(prefix + "intermediate.dense", attended, rows: rows, inputs: hidden, outputs: wide, tape: &tape)
        tape.activationSlope = [Float](repeating: 0, count: activated.count)
        let count = activated.count
        activated.withUnsafeMutableBufferPointer { values in
            tape.activationSlope.withUnsafeMutableBufferPointer { slopes in
                nonisolated(unsafe) let v = values.baseAddress!, d = slopes.baseAddress!
                Parallel.forEachRange(count, threads: threads, minimumPerThread: 1 << 15) { range in
                    for i in range {
                        let x = v[i]
                        let cdf = 0.5 * (1 + erff(x * 0.70710678118654752))
                        d[i] = cdf + x * 0.39894228040143268 * expf(-0.5 * x * x)
                        v[i] = x * cdf
                    }
                }
            }
        }
        tape.activated = activated
        var output = linear(prefix + "output.dense", activated, rows: rows, inputs: wide, outputs: hidden, tape: &tape)
        for index in output.indices { output[index] += attended[index] }
        layerNorm(&output, rows: rows, name: prefix + "output.LayerNorm", tape: &tape.outputNorm)
        return output
    }

    /// `y = x·W'ᵀ + b`, with `x` rotated first (and kept) when the weight has a rotation.
    func linear(_ op: String, _ input: [Float], rows: Int, inputs: Int, outputs: Int, tape: inout LayerTape) -> [Float] {
        var operand = input
        if let rotation = parameters.rotations[op + ".weight"] {
            rotateRows(&operand, rows: rows, rotation: rotation, inverse: false)
            tape.rotatedInputs[op] = operand
        }
        let weight = tensor(op + ".weight"), bias = tensor(op + ".bias")
        var output = [Float](repeating: 0, count: rows * outputs)
        for r in 0..<rows { for c in 0..<outputs { output[r * outputs + c] = bias[c] } }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(rows), Int32(outputs), Int32(inputs), 1,
                    operand, Int32(inputs), weight, Int32(inputs), 1, &output, Int32(outputs))
        return output
    }

    /// Each row `x` of `values` ← `R·x`, or `Rᵀ·x` when `inverse`. Both run the vector kernel
    /// (`KernelVariant.rotate`): with Sylvester blocks `H` is symmetric, so `Rᵀ·x = D·H·x =
    /// D·R·(D·x)` for the sign diagonal `D`; Paley blocks take the reference `unrotate`.
    func rotateRows(_ values: inout [Float], rows: Int, rotation: HadamardRotation, inverse: Bool) {
        let width = rotation.size
        values.withUnsafeMutableBufferPointer { buffer in
            nonisolated(unsafe) let base = buffer.baseAddress!
            Parallel.forEachRange(rows, threads: threads, minimumPerThread: 64) { range in
                let first = base + range.lowerBound * width, count = range.count * width
                guard inverse else { return KernelVariant.best.rotate(rotation, from: first, into: first, rows: range.count) }
                guard rotation.twelves == 0 else {
                    let scratch = UnsafeMutablePointer<Float>.allocate(capacity: rotation.blockSize)
                    defer { scratch.deallocate() }
                    for r in range { rotation.unrotate(base + r * width, scratch: scratch) }
                    return
                }
                rotation.signs.withUnsafeBufferPointer { signs in
                    for i in 0..<count { first[i] *= signs[i % width] }
                    KernelVariant.best.rotate(rotation, from: first, into: first, rows: range.count)
                    for i in 0..<count { first[i] *= signs[i % width] }
                }
            }
        }
    }

    /// `body(length, column, offset)` for every sentence (of `length` tokens) and head: `column`
    /// is the offset of the head's first value of the sentence's first token in a packed
    /// `tokens × hidden` matrix, `offset` that of its `length × length` probabilities.
    func forEachHead(_ lengths: [Int], _ body: (Int, Int, Int) -> Void) {
        let hidden = config.hiddenSize, size = hidden / config.heads
        var (start, offset) = (0, 0)
        for length in lengths {
            for head in 0..<config.heads {
                body(length, start * hidden + head * size, offset)
                offset += length * length
            }
            start += length
        }
    }

    /// Multi-head attention of every sentence over its own tokens; keeps the probabilities.
    func attention(tape: inout LayerTape, rows: Int, lengths: [Int]) -> [Float] {
        let hidden = config.hiddenSize, heads = config.heads, size = hidden / heads
        let scale = 1 / Float(size).squareRoot()
        var probabilities = [Float](repeating: 0, count: lengths.reduce(0) { $0 + heads * $1 * $1 })
        var context = [Float](repeating: 0, count: rows * hidden)
        tape.query.withUnsafeBufferPointer { q in tape.key.withUnsafeBufferPointer { k in tape.value.withUnsafeBufferPointer { v in
            probabilities.withUnsafeMutableBufferPointer { probabilityBuffer in context.withUnsafeMutableBufferPointer { out in
                forEachHead(lengths) { length, column, offset in
                        let n = Int32(length)
                        let p = probabilityBuffer.baseAddress! + offset
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, Int32(size), scale,
                                    q.baseAddress! + column, Int32(hidden), k.baseAddress! + column, Int32(hidden), 0, p, n)
                        for r in 0..<length {
                            let row = p + r * length
                            var largest = -Float.infinity
                            for c in 0..<length { largest = max(largest, row[c]) }
                            var sum: Float = 0
                            for c in 0..<length { row[c] = expf(row[c] - largest); sum += row[c] }
                            for c in 0..<length { row[c] /= sum }
                        }
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, Int32(size), n, 1,
                                    p, n, v.baseAddress! + column, Int32(hidden), 0, out.baseAddress! + column, Int32(hidden))
                }
            } }
        } } }
        tape.probabilities = probabilities
        return context
    }

    /// In-place LayerNorm with the scale and shift `name.weight`, `name.bias`.
    func layerNorm(_ values: inout [Float], rows: Int, name: String, tape: inout NormTape) {
        let hidden = config.hiddenSize, epsilon = config.layerNormEpsilon
        let scale = tensor(name + ".weight"), shift = tensor(name + ".bias")
        tape.normalized = [Float](repeating: 0, count: rows * hidden)
        tape.inverseDeviation = [Float](repeating: 0, count: rows)
        for r in 0..<rows {
            var mean: Float = 0
            for c in 0..<hidden { mean += values[r * hidden + c] }
            mean /= Float(hidden)
            var variance: Float = 0
            for c in 0..<hidden { let d = values[r * hidden + c] - mean; variance += d * d }
            let inverse = 1 / (variance / Float(hidden) + epsilon).squareRoot()
            tape.inverseDeviation[r] = inverse
            for c in 0..<hidden {
                let normalized = (values[r * hidden + c] - mean) * inverse
                tape.normalized[r * hidden + c] = normalized
                values[r * hidden + c] = normalized * scale[c] + shift[c]
            }
        }
    }

    // MARK: - Backward

    /// Backward from the gradients of the pooled embeddings (before their unit scaling).
    func backward(dPooled: [Float], tape: Tape, gradients: inout [String: [Float]]) {
        let hidden = config.hiddenSize
        let rows = tape.lengths.reduce(0, +)
        var dStates = [Float](repeating: 0, count: rows * hidden)
        var start = 0
        for (s, length) in tape.lengths.enumerated() {
            switch pooling.mode {
            case .mean:
                for t in start..<(start + length) {
                    for c in 0..<hidden { dStates[t * hidden + c] = dPooled[s * hidden + c] / Float(length) }
                }
            case .cls:
                for c in 0..<hidden { dStates[start * hidden + c] = dPooled[s * hidden + c] }
            }
            start += length
        }
        for layer in (0..<config.layers).reversed() {
            dStates = backward(layer: layer, dOutput: dStates, rows: rows, lengths: tape.lengths, tape: tape.layers[layer], gradients: &gradients)
        }
        layerNormBackward(&dStates, rows: rows, name: "embeddings.LayerNorm", tape: tape.embeddingNorm, gradients: &gradients)
        // x₀ = word[id] + position[p] + type[0]: each table's rows gather the gradients of their tokens.
        for (kind, name) in Self.embeddingNames.enumerated() where gradients[name] != nil {
            gradients[name]!.withUnsafeMutableBufferPointer { table in
                var token = 0
                for sequence in tape.sequences {
                    for (position, id) in sequence.enumerated() {
                        let row = [Int(id), position, 0][kind]
                        for c in 0..<hidden { table[row * hidden + c] += dStates[token * hidden + c] }
                        token += 1
                    }
                }
            }
        }
    }

    /// The gradient with respect to the layer's input, given the gradient of its output.
    func backward(layer: Int, dOutput: [Float], rows: Int, lengths: [Int], tape: LayerTape, gradients: inout [String: [Float]]) -> [Float] {
        let hidden = config.hiddenSize, wide = config.intermediateSize
        let prefix = "encoder.layer.\(layer)."
        var dSum = dOutput
        layerNormBackward(&dSum, rows: rows, name: prefix + "output.LayerNorm", tape: tape.outputNorm, gradients: &gradients)
        // output = down(activated) + attended.
        var dAttended = dSum
        var dActivated = [Float](repeating: 0, count: rows * wide)
        linearBackward(prefix + "output.dense", dOutput: dSum, input: tape.activated, rows: rows, inputs: wide, outputs: hidden,
                       tape: tape, dInput: &dActivated, gradients: &gradients)
        for index in dActivated.indices { dActivated[index] *= tape.activationSlope[index] }
        linearBackward(prefix + "intermediate.dense", dOutput: dActivated, input: tape.attended, rows: rows, inputs: hidden, outputs: wide,
                       tape: tape, dInput: &dAttended, gradients: &gradients)
        layerNormBackward(&dAttended, rows: rows, name: prefix + "attention.output.LayerNorm", tape: tape.attentionNorm, gradients: &gradients)
        // attended = LN(attention_output(context) + input).
        var dInput = dAttended
        var dContext = [Float](repeating: 0, count: rows * hidden)
        linearBackward(prefix + "attention.output.dense", dOutput: dAttended, input: tape.context, rows: rows, inputs: hidden, outputs: hidden,
                       tape: tape, dInput: &dContext, gradients: &gradients)
        let (dQuery, dKey, dValue) = attentionBackward(dContext: dContext, tape: tape, rows: rows, lengths: lengths)
        for (op, d) in [("attention.self.query", dQuery), ("attention.self.key", dKey), ("attention.self.value", dValue)] {
            linearBackward(prefix + op, dOutput: d, input: tape.input, rows: rows, inputs: hidden, outputs: hidden,
                           tape: tape, dInput: &dInput, gradients: &gradients)
        }
        return dInput
    }

    /// Adds `∂L/∂x` to `dInput` and sets the bias's (and, when requested, the weight's) gradient.
    func linearBackward(_ op: String, dOutput: [Float], input: [Float], rows: Int, inputs: Int, outputs: Int, tape: LayerTape,
                        dInput: inout [Float], gradients: inout [String: [Float]]) {
        let weight = tensor(op + ".weight")
        let rotation = parameters.rotations[op + ".weight"]
        let operand = tape.rotatedInputs[op] ?? input
        if gradients[op + ".weight"] != nil {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int32(outputs), Int32(inputs), Int32(rows), 1,
                        dOutput, Int32(outputs), operand, Int32(inputs), 0, &gradients[op + ".weight"]!, Int32(inputs))
        }
        var dBias = [Float](repeating: 0, count: outputs)
        for r in 0..<rows { for c in 0..<outputs { dBias[c] += dOutput[r * outputs + c] } }
        gradients[op + ".bias"] = dBias
        if let rotation {
            var dRotated = [Float](repeating: 0, count: rows * inputs)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(rows), Int32(inputs), Int32(outputs), 1,
                        dOutput, Int32(outputs), weight, Int32(inputs), 0, &dRotated, Int32(inputs))
            rotateRows(&dRotated, rows: rows, rotation: rotation, inverse: true)
            for index in dRotated.indices { dInput[index] += dRotated[index] }
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(rows), Int32(inputs), Int32(outputs), 1,
                        dOutput, Int32(outputs), weight, Int32(inputs), 1, &dInput, Int32(inputs))
        }
    }

    /// The gradients of the query, key and value projections' outputs, given the context's.
    func attentionBackward(dContext: [Float], tape: LayerTape, rows: Int, lengths: [Int]) -> ([Float], [Float], [Float]) {
        let hidden = config.hiddenSize, heads = config.heads, size = hidden / heads
        let scale = 1 / Float(size).squareRoot()
        var dQuery = [Float](repeating: 0, count: rows * hidden), dKey = dQuery, dValue = dQuery
        let longest = lengths.max() ?? 0
        var dScores = [Float](repeating: 0, count: longest * longest)
        tape.query.withUnsafeBufferPointer { q in tape.key.withUnsafeBufferPointer { k in tape.value.withUnsafeBufferPointer { v in
        dContext.withUnsafeBufferPointer { dc in tape.probabilities.withUnsafeBufferPointer { probabilities in
        dScores.withUnsafeMutableBufferPointer { dsBuffer in dQuery.withUnsafeMutableBufferPointer { dq in
        dKey.withUnsafeMutableBufferPointer { dk in dValue.withUnsafeMutableBufferPointer { dv in
            let ds = dsBuffer.baseAddress!
            forEachHead(lengths) { length, column, offset in
                    let n = Int32(length)
                    let p = probabilities.baseAddress! + offset
                    // dP = dC·Vᵀ; dV = Pᵀ·dC; dS = P ⊙ (dP − rowsum(dP ⊙ P)) · scale; dQ = dS·K; dK = dSᵀ·Q.
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, Int32(size), 1, dc.baseAddress! + column, Int32(hidden),
                                v.baseAddress! + column, Int32(hidden), 0, ds, n)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, Int32(size), n, 1, p, n, dc.baseAddress! + column, Int32(hidden),
                                0, dv.baseAddress! + column, Int32(hidden))
                    for r in 0..<length {
                        var dot: Float = 0
                        for c in 0..<length { dot += ds[r * length + c] * p[r * length + c] }
                        for c in 0..<length { ds[r * length + c] = p[r * length + c] * (ds[r * length + c] - dot) * scale }
                    }
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, Int32(size), n, 1, ds, n, k.baseAddress! + column, Int32(hidden),
                                0, dq.baseAddress! + column, Int32(hidden))
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, Int32(size), n, 1, ds, n, q.baseAddress! + column, Int32(hidden),
                                0, dk.baseAddress! + column, Int32(hidden))
            }
        } } } }
        } }
        } } }
        return (dQuery, dKey, dValue)
    }

    /// Replaces `dValues` (the gradient of the norm's output) by the gradient of its input, and
    /// sets the scale's and shift's gradients: `dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂))`, `dx̂ = dy·γ`.
    func layerNormBackward(_ dValues: inout [Float], rows: Int, name: String, tape: NormTape, gradients: inout [String: [Float]]) {
        let hidden = config.hiddenSize
        let scale = tensor(name + ".weight")
        var dScale = [Float](repeating: 0, count: hidden), dShift = dScale
        var dNormalized = [Float](repeating: 0, count: hidden)
        for r in 0..<rows {
            var (meanD, meanDX): (Float, Float) = (0, 0)
            for c in 0..<hidden {
                let dy = dValues[r * hidden + c], x = tape.normalized[r * hidden + c]
                dScale[c] += dy * x
                dShift[c] += dy
                dNormalized[c] = dy * scale[c]
                meanD += dNormalized[c]
                meanDX += dNormalized[c] * x
            }
            meanD /= Float(hidden)
            meanDX /= Float(hidden)
            for c in 0..<hidden {
                dValues[r * hidden + c] = tape.inverseDeviation[r] * (dNormalized[c] - meanD - tape.normalized[r * hidden + c] * meanDX)
            }
        }
        gradients[name + ".weight"] = dScale
        gradients[name + ".bias"] = dShift
    }
}
