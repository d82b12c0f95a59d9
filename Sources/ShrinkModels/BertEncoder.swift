import Foundation
import ShrinkCore
import ShrinkKernels

/// The sentence-transformers BERT encoder (all-MiniLM-L6-v2): word + position + token-type
/// embeddings and LayerNorm; `layers` × (multi-head self-attention, residual, LayerNorm, GELU
/// feed-forward, residual, LayerNorm); pooling over the tokens (mean, or the CLS token) and
/// optional L2 normalization, as `SentencePooling` says.
///
/// A batch is run packed: the tokens of all sentences form one matrix for every linear layer (so
/// no compute is spent on padding), and attention runs per sentence over exactly its own tokens,
/// which is what an attention mask over padded sequences computes.
public final class BertEncoder: @unchecked Sendable {
    public let config: BertConfig
    public let pooling: SentencePooling
    let wordEmbeddings: EmbeddingTable
    let positionEmbeddings: EmbeddingTable
    let typeEmbeddings: EmbeddingTable
    let embeddingNorm: LayerNormWeights
    let layers: [Layer]

    struct Layer {
        let query, key, value, attentionOutput, intermediate, output: any LinearOperator
        let attentionNorm, outputNorm: LayerNormWeights
    }

    /// Builds the encoder from the tensors `source` provides, by the Hugging Face BERT names.
    public init(config: BertConfig, pooling: SentencePooling = SentencePooling(), source: WeightSource) throws(ModelError) {
        self.config = config
        self.pooling = pooling
        let hidden = config.hiddenSize
        wordEmbeddings = try source.embedding("embeddings.word_embeddings.weight", columns: hidden)
        positionEmbeddings = try source.embedding("embeddings.position_embeddings.weight", columns: hidden)
        typeEmbeddings = try source.embedding("embeddings.token_type_embeddings.weight", columns: hidden)
        embeddingNorm = try source.layerNorm("embeddings.LayerNorm", size: hidden)
        var layers: [Layer] = []
        for index in 0..<config.layers {
            let prefix = "encoder.layer.\(index)."
            layers.append(Layer(
                query: try source.linear(prefix + "attention.self.query", out: hidden, in: hidden),
                key: try source.linear(prefix + "attention.self.key", out: hidden, in: hidden),
                value: try source.linear(prefix + "attention.self.value", out: hidden, in: hidden),
                attentionOutput: try source.linear(prefix + "attention.output.dense", out: hidden, in: hidden),
                intermediate: try source.linear(prefix + "intermediate.dense", out: config.intermediateSize, in: hidden),
                output: try source.linear(prefix + "output.dense", out: hidden, in: config.intermediateSize),
                attentionNorm: try source.layerNorm(prefix + "attention.output.LayerNorm", size: hidden),
                outputNorm: try source.layerNorm(prefix + "output.LayerNorm", size: hidden)))
        }
        self.layers = layers
    }

    /// Checks that every id `tokenizer` can produce has an embedding row and that its longest
    /// output fits the position table.
    public func check(_ tokenizer: WordPieceTokenizer, vocabularyFile: String) throws(ModelError) {
        let largest = Int(tokenizer.vocabulary.values.max() ?? 0)
        guard largest < wordEmbeddings.rows else {
            throw .invalidFile(path: vocabularyFile, reason: "token id \(largest) has no row in the \(wordEmbeddings.rows)-row word embedding table")
        }
        guard tokenizer.maximumLength <= positionEmbeddings.rows, typeEmbeddings.rows >= 1 else {
            throw .invalidFile(path: vocabularyFile, reason: "sequences of \(tokenizer.maximumLength) tokens do not fit \(positionEmbeddings.rows) positions")
        }
    }

    /// Sentence embeddings (`hiddenSize` floats each; unit length when normalizing) of token-id sequences.
    /// - Precondition: every sequence is non-empty, fits the position table and its ids have
    ///   embedding rows (`check(_:vocabularyFile:)` guarantees it for a tokenizer's output).
    public func embed(_ sequences: [[Int32]]) -> [[Float]] {
        let hidden = config.hiddenSize
        let total = sequences.reduce(0) { $0 + $1.count }
        var states = [Float](repeating: 0, count: total * hidden)
        var row = 0
        for sequence in sequences {
            precondition(!sequence.isEmpty && sequence.count <= positionEmbeddings.rows)
            for (position, id) in sequence.enumerated() {
                states.withUnsafeMutableBufferPointer { buffer in
                    let target = buffer.baseAddress! + row * hidden
                    wordEmbeddings.gather(row: Int(id), into: target)
                    positionEmbeddings.add(row: position, into: target)
                    typeEmbeddings.add(row: 0, into: target)
                }
                row += 1
            }
        }
        embeddingNorm.apply(&states, rows: total, epsilon: config.layerNormEpsilon)
        let lengths = sequences.map(\.count)
        for layer in layers { run(layer, states: &states, lengths: lengths) }
        var start = 0
        return lengths.map { length in
            var pooled = [Float](repeating: 0, count: hidden)
            switch pooling.mode {
            case .mean:
                for token in start..<(start + length) {
                    for column in 0..<hidden { pooled[column] += states[token * hidden + column] }
                }
                for column in 0..<hidden { pooled[column] /= Float(length) }
            case .cls:
                for column in 0..<hidden { pooled[column] = states[start * hidden + column] }
            }
            start += length
            guard pooling.normalize else { return pooled }
            let norm = max(sqrt(pooled.reduce(0) { $0 + $1 * $1 }), 1e-12)
            return pooled.map { $0 / norm }
        }
    }

    func run(_ layer: Layer, states: inout [Float], lengths: [Int]) {
        let hidden = config.hiddenSize, heads = config.heads, headSize = hidden / heads
        let total = lengths.reduce(0, +)
        var query = [Float](repeating: 0, count: total * hidden)
        var key = query, value = query, context = query
        layer.query.forward(states, rows: total, into: &query)
        layer.key.forward(states, rows: total, into: &key)
        layer.value.forward(states, rows: total, into: &value)
        let scale = 1 / sqrt(Float(headSize))
        var start = 0
        for length in lengths {
            Attention.run(query: query, key: key, value: value, start: start, length: length, hidden: hidden, heads: heads,
                          scale: scale, into: &context)
            start += length
        }
        var projected = [Float](repeating: 0, count: total * hidden)
        layer.attentionOutput.forward(context, rows: total, into: &projected)
        for index in projected.indices { projected[index] += states[index] }
        layer.attentionNorm.apply(&projected, rows: total, epsilon: config.layerNormEpsilon)
        var intermediate = [Float](repeating: 0, count: total * config.intermediateSize)
        layer.intermediate.forward(projected, rows: total, into: &intermediate)
        intermediate.withUnsafeMutableBufferPointer { KernelVariant.best.gelu($0.baseAddress!, $0.count) }
        layer.output.forward(intermediate, rows: total, into: &states)
        for index in states.indices { states[index] += projected[index] }
        layer.outputNorm.apply(&states, rows: total, epsilon: config.layerNormEpsilon)
    }
}

/// Scaled dot-product attention of one sentence, head by head: the head's query, key and
/// transposed value columns are copied into contiguous blocks so that both products run through
/// the tiled kernel (`KernelVariant.gemmNT`).
enum Attention {
    static func run(query: [Float], key: [Float], value: [Float], start: Int, length: Int, hidden: Int, heads: Int, scale: Float,
                    into context: inout [Float]) {
        let headSize = hidden / heads
        let kernel = KernelVariant.best
        var q = [Float](repeating: 0, count: length * headSize), k = q, vT = q
        var scores = [Float](repeating: 0, count: length * length)
        for head in 0..<heads {
            for token in 0..<length {
                let source = (start + token) * hidden + head * headSize
                for d in 0..<headSize {
                    q[token * headSize + d] = query[source + d] * scale
                    k[token * headSize + d] = key[source + d]
                    vT[d * length + token] = value[source + d]
                }
            }
            // scores[i][j] = q_i · k_j
            kernel.gemmNT(k, length, q, length, headSize, &scores, length)
            softmaxRows(&scores, rows: length, columns: length)
            // context[i][d] = Σ_j p_ij v_jd, written into the head's columns.
            context.withUnsafeMutableBufferPointer { output in
                kernel.gemmNT(vT, headSize, scores, length, length, output.baseAddress! + start * hidden + head * headSize, hidden)
            }
        }
    }

    static func softmaxRows(_ values: inout [Float], rows: Int, columns: Int) {
        for row in 0..<rows {
            var maximum = -Float.infinity
            for column in 0..<columns { maximum = max(maximum, values[row * columns + column]) }
            var sum: Float = 0
            for column in 0..<columns {
                let e = expf(values[row * columns + column] - maximum)
                values[row * columns + column] = e
                sum += e
            }
            for column in 0..<columns { values[row * columns + column] /= sum }
        }
    }
}

/// LayerNorm scale and shift: `y = (x − mean) / sqrt(var + ε) · γ + β` per row.
struct LayerNormWeights {
    let gamma: [Float]
    let beta: [Float]

    func apply(_ values: inout [Float], rows: Int, epsilon: Float) {
        let size = gamma.count
        for row in 0..<rows {
            var mean: Float = 0
            for column in 0..<size { mean += values[row * size + column] }
            mean /= Float(size)
            var variance: Float = 0
            for column in 0..<size {
                let delta = values[row * size + column] - mean
                variance += delta * delta
            }
            let inverse = 1 / sqrt(variance / Float(size) + epsilon)
            for column in 0..<size {
                values[row * size + column] = (values[row * size + column] - mean) * inverse * gamma[column] + beta[column]
            }
        }
    }
}
