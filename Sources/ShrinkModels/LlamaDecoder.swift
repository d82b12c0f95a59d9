import Foundation
import ShrinkCore
import ShrinkIO
import ShrinkKernels

/// A Llama-family decoder built from any `TensorStore`: token embedding, per layer RMSNorm →
/// q/k/v (Qwen3: RMSNorm of each query and key head) → rotary positions → causal grouped-query
/// attention over a key/value cache → output projection → residual, RMSNorm → SwiGLU
/// feed-forward → residual; final RMSNorm and the output projection (the token embedding when
/// the file has no `output.weight`). Linear layers run as stored through their kernels
/// (`WeightSource`: integer kernels for the encodings they cover). A file whose residual stream
/// is rotated (`FoldedResidualRotation`) has its embeddings rotated on entry and its stream
/// un-rotated before the final norm.
public final class LlamaDecoder: ModelRuntime, @unchecked Sendable {
    public let config: LlamaConfig
    public let architecture: String
    /// The tokenizer: a GGUF file's, or a Hugging Face folder's `tokenizer.json` (nil without one).
    public let tokenizer: BPETokenizer?
    public let linearExecutions: [LinearLayerExecution]
    public let threads: Int
    /// The float kernels (attention and SwiGLU).
    let kernels: KernelVariant
    /// Whether this load mapped its panels from the specialization cache or wrote them there.
    public internal(set) var specializationOutcome = WeightSource.SpecializationOutcome.unused

    struct Layer {
        let attentionNorm: RMSNormWeights
        let query, key, value, attentionOutput: any LinearOperator
        let queryNorm, keyNorm: RMSNormWeights?
        let feedForwardNorm: RMSNormWeights
        let gate, up, down: any LinearOperator
        /// The query, key and value projections as one pass (one input quantization, one hand-off),
        /// and the gate and up projections.
        let projections, gateUp: LinearGroup
    }

    let layers: [Layer]
    let embedding: EmbeddingTable
    let outputNorm: RMSNormWeights
    let output: any LinearOperator
    let rope: RotaryEmbedding
    /// The weights' store and names, to release a layer's mapped pages after calibration runs it.
    let store: any TensorStore
    let table: LlamaTensorTable
    /// The rotation of the residual stream folded into the weights, nil when there is none: the
    /// embeddings are rotated on entry and the stream un-rotated before the final norm.
    let residualRotation: HadamardRotation?

    /// Builds the decoder of `config` from `source`; `perHeadNorms` for Qwen3.
    /// - Throws: `ModelError` naming a missing or misshapen tensor, or what cannot run.
    init(config: LlamaConfig, architecture: String, perHeadNorms: Bool, source: WeightSource, tokenizer: BPETokenizer?) throws(ModelError) {
        let table = LlamaTensorTable(config: config, perHeadNorms: perHeadNorms)
        let folded = try FoldedResidualRotation(metadata: source.store.metadata, path: source.store.path)
        if let folded, !folded.covers(table.residualStream) {
            throw .invalidFile(path: source.store.path, reason: "metadata \(FoldedResidualRotation.metadataKey) does not match this model's layers")
        }
        residualRotation = folded?.rotation
        if source.store.tensor(named: "rope_freqs.weight") != nil {
            throw .notRunnable(architecture: architecture, reason: "rope_freqs.weight (Llama 3.1 frequency factors) is not supported yet")
        }
        let c = config
        let queries = c.heads * c.headDimension, keys = c.keyValueHeads * c.headDimension
        func norm(_ name: String, _ size: Int) throws(ModelError) -> RMSNormWeights {
            RMSNormWeights(weight: try source.floats(name, shape: [size]), epsilon: c.rmsNormEpsilon)
        }
        var layers: [Layer] = []
        for layer in 0..<c.layers {
            func op(_ index: Int) -> String { table.op(layer, index) }
            let query = try source.linear(op(1), out: queries, in: c.hiddenSize)
            let key = try source.linear(op(2), out: keys, in: c.hiddenSize)
            let value = try source.linear(op(3), out: keys, in: c.hiddenSize)
            let gate = try source.linear(op(6), out: c.intermediateSize, in: c.hiddenSize)
            let up = try source.linear(op(7), out: c.intermediateSize, in: c.hiddenSize)
            layers.append(Layer(
                attentionNorm: try norm(op(0) + ".weight", c.hiddenSize),
                query: query, key: key, value: value,
                attentionOutput: try source.linear(op(4), out: c.hiddenSize, in: queries),
                queryNorm: perHeadNorms ? try norm(op(9) + ".weight", c.headDimension) : nil,
                keyNorm: perHeadNorms ? try norm(op(10) + ".weight", c.headDimension) : nil,
                feedForwardNorm: try norm(op(5) + ".weight", c.hiddenSize),
                gate: gate, up: up,
                down: try source.linear(op(8), out: c.hiddenSize, in: c.intermediateSize),
                projections: LinearGroup([query, key, value]), gateUp: LinearGroup([gate, up])))
        }
        let names = table.globalNames
        embedding = try source.embedding(names.embedding, columns: c.hiddenSize)
        guard embedding.rows == c.vocabularySize else {
            throw .invalidWeight(tensor: names.embedding, reason: "has \(embedding.rows) rows for a vocabulary of \(c.vocabularySize)")
        }
        outputNorm = try norm(names.norm, c.hiddenSize)
        let outputOp = source.store.tensor(named: names.output) == nil ? names.embedding : names.output
        output = try source.linear(String(outputOp.dropLast(".weight".count)), out: c.vocabularySize, in: c.hiddenSize)
        // GGUF's Llama rows are permuted for ggml's adjacent pairs; Qwen3 and Hugging Face files
        // rotate halves.
        rope = RotaryEmbedding(dimensions: c.headDimension, base: c.ropeTheta,
                               pairing: c.ggufNames && !perHeadNorms ? .adjacent : .halves)
        self.layers = layers
        self.store = source.store
        self.table = table
        self.config = config
        self.architecture = architecture
        self.tokenizer = tokenizer
        threads = source.threads
        kernels = source.kernels
        linearExecutions = source.linearExecutions
    }

    /// Bytes a decoded token reads from its weights: every linear layer's packed weight (the
    /// integer kernels' panels; 4 bytes per weight for the other operators) and one embedding row.
    public var streamedBytesPerToken: Int {
        let linears = layers.flatMap { [$0.query, $0.key, $0.value, $0.attentionOutput, $0.gate, $0.up, $0.down] } + [output]
        return linears.reduce(config.hiddenSize * 4) { total, op in
            total + ((op as? Int8ActivationLinear)?.weights.byteCount ?? op.inFeatures * op.outFeatures * 4)
        }
    }

    /// A key/value cache of `capacity` positions and buffers for batches of up to `batch` tokens.
    public func makeState(capacity: Int, batch: Int = 512) -> DecoderState {
        DecoderState(config: config, capacity: capacity, batch: max(1, min(batch, capacity)), threads: threads, kernels: kernels)
    }

    /// Runs `tokens` at the state's next positions (in batches of at most `state.batch`) and
    /// returns, for each position of `logitRows` (indices into `tokens`), the next-token logits
    /// in order, `vocabularySize` floats each.
    /// - Throws: `ModelError` when the cache would overflow or a token id is outside the vocabulary.
    public func evaluate(_ tokens: [Int32], state: DecoderState, logitRows: Range<Int>? = nil,
                         consume: (_ row: Int, _ logits: UnsafeBufferPointer<Float>) -> Void = { _, _ in }) throws(ModelError) {
        guard state.position + tokens.count <= state.capacity else {
            throw .notRunnable(architecture: architecture,
                               reason: "\(state.position + tokens.count) positions exceed the cache of \(state.capacity)")
        }
        try checkVocabulary(tokens)
        var first = 0
        while first < tokens.count {
            let count = min(state.batch, tokens.count - first)
            forward(Array(tokens[first..<(first + count)]), state: state)
            if let wanted = logitRows?.clamped(to: first..<(first + count)), !wanted.isEmpty {
                logits(rows: (wanted.lowerBound - first)..<(wanted.upperBound - first), state: state) { row, values in
                    consume(first + row, values)
                }
            }
            first += count
        }
    }

    /// - Throws: `ModelError.notRunnable` naming the first token id outside the vocabulary.
    func checkVocabulary(_ tokens: [Int32]) throws(ModelError) {
        if let bad = tokens.first(where: { $0 < 0 || Int($0) >= config.vocabularySize }) {
            throw .notRunnable(architecture: architecture, reason: "token id \(bad) is outside the vocabulary of \(config.vocabularySize)")
        }
    }

    /// One batch of tokens through every layer: `state.x` holds their hidden states afterwards,
    /// and the cache their keys and values.
    func forward(_ tokens: [Int32], state: DecoderState) {
        embed(tokens, state: state)
        setAngles(rows: tokens.count, state: state)
        for index in layers.indices { run(layer: index, rows: tokens.count, state: state) }
        state.position += tokens.count
        state.rows = tokens.count
    }

    /// The embeddings of `tokens` in `state.x`.
    func embed(_ tokens: [Int32], state: DecoderState) {
        let hidden = config.hiddenSize
        state.x.withUnsafeMutableBufferPointer { x in
            for (row, token) in tokens.enumerated() { embedding.gather(row: Int(token), into: x.baseAddress! + row * hidden) }
            if let residualRotation { kernels.rotate(residualRotation, from: x.baseAddress!, into: x.baseAddress!, rows: tokens.count) }
        }
    }

    /// The rotation angles of `rows` rows at the state's next positions, in `state.angles`.
    func setAngles(rows: Int, state: DecoderState) {
        let start = state.position
        state.angles.withUnsafeMutableBufferPointer { table in
            for row in 0..<rows { rope.angles(position: start + row, into: table.baseAddress! + row * rope.tableSize) }
        }
    }

    /// Layer `index` over the `rows` hidden states in `state.x` (in place), at the state's next
    /// positions, whose angles `state.angles` holds: their keys and values go to the layer's cache.
    func run(layer index: Int, rows: Int, state: DecoderState) {
        let c = config, layer = layers[index]
        let queries = c.heads * c.headDimension, keys = c.keyValueHeads * c.headDimension
        copyNormalized(state, rows: rows, norm: layer.attentionNorm)
        layer.projections.forward(state.normalized, rows: rows, into: &state.query, &state.key, &state.value)
        state.query.withUnsafeMutableBufferPointer { q in
            state.key.withUnsafeMutableBufferPointer { k in
                state.angles.withUnsafeBufferPointer { table in
                    for row in 0..<rows {
                        let qRow = q.baseAddress! + row * queries, kRow = k.baseAddress! + row * keys
                        layer.queryNorm?.apply(qRow, rows: c.heads)
                        layer.keyNorm?.apply(kRow, rows: c.keyValueHeads)
                        let angles = table.baseAddress! + row * rope.tableSize
                        rope.rotate(qRow, heads: c.heads, headSize: c.headDimension, table: angles)
                        rope.rotate(kRow, heads: c.keyValueHeads, headSize: c.headDimension, table: angles)
                    }
                }
            }
        }
        state.store(layer: index, rows: rows)
        state.attend(layer: index, rows: rows, heads: c.heads, keyValueHeads: c.keyValueHeads, headSize: c.headDimension)
        layer.attentionOutput.forward(state.context, rows: rows, into: &state.projected)
        addProjected(state, rows: rows)
        copyNormalized(state, rows: rows, norm: layer.feedForwardNorm)
        layer.gateUp.forward(state.normalized, rows: rows, into: &state.gate, &state.up)
        state.gate.withUnsafeMutableBufferPointer { gate in
            state.up.withUnsafeBufferPointer { up in
                // Split over the threads for prompts (a decoded token's row is too little work to hand off).
                WorkerPool.shared.run(rows >= 8 ? threads : 1, SwiGLUJob(gate: gate.baseAddress!, up: up.baseAddress!, count: rows * c.intermediateSize,
                                                                           kernel: kernels))
            }
        }
        layer.down.forward(state.gate, rows: rows, into: &state.projected)
        addProjected(state, rows: rows)
    }

    /// Logits of rows `rows` of the last batch, in groups of up to 32 rows.
    func logits(rows: Range<Int>, state: DecoderState, _ consume: (Int, UnsafeBufferPointer<Float>) -> Void) {
        let hidden = config.hiddenSize, vocabulary = config.vocabularySize
        var first = rows.lowerBound
        while first < rows.upperBound {
            let count = min(DecoderState.logitRows, rows.upperBound - first)
            state.x.withUnsafeBufferPointer { x in
                state.normalized.withUnsafeMutableBufferPointer { n in
                    n.baseAddress!.update(from: x.baseAddress! + first * hidden, count: count * hidden)
                    if let residualRotation {
                        state.rotationScratch.withUnsafeMutableBufferPointer { scratch in
                            for row in 0..<count { residualRotation.unrotate(n.baseAddress! + row * hidden, scratch: scratch.baseAddress!) }
                        }
                    }
                    outputNorm.apply(n.baseAddress!, rows: count)
                }
            }
            output.forward(state.normalized, rows: count, into: &state.logits)
            state.logits.withUnsafeBufferPointer { values in
                for row in 0..<count { consume(first + row, UnsafeBufferPointer(rebasing: values[(row * vocabulary)..<((row + 1) * vocabulary)])) }
            }
            first += count
        }
    }

    private func copyNormalized(_ state: DecoderState, rows: Int, norm: RMSNormWeights) {
        let count = rows * config.hiddenSize
        state.x.withUnsafeBufferPointer { x in
            state.normalized.withUnsafeMutableBufferPointer { n in
                n.baseAddress!.update(from: x.baseAddress!, count: count)
                norm.apply(n.baseAddress!, rows: rows)
            }
        }
    }

    private func addProjected(_ state: DecoderState, rows: Int) {
        let count = rows * config.hiddenSize
        state.x.withUnsafeMutableBufferPointer { x in
            state.projected.withUnsafeBufferPointer { p in for i in 0..<count { x[i] += p[i] } }
        }
    }

    /// Runs each text from an empty cache, layer by layer: every text's embeddings, then all texts
    /// through layer 0 (each in the batches `evaluate` would use, its cache filled as it goes), then
    /// all through layer 1, and so on; texts longer than the context (at most 2,048 tokens) are cut
    /// to it. Keeps every text's hidden states between layers (tokens × hiddenSize floats; in a
    /// spill file next to `spillNextTo` when given, else in memory) and a cache as long as the
    /// longest text; a layer's mapped weight pages are released once all texts went through it, so
    /// a model larger than memory streams through. With `resume`, the states go to its file in two
    /// generations (`CalibrationHiddenStates`), synchronized before each `blockFinished`, and the
    /// run starts at its first block, from the states the file holds.
    public func run(calibrationTexts texts: [String], spillNextTo: String?, resume: CalibrationResumePoint?,
                    blockFinished: (Int) throws -> Void) throws {
        guard let tokenizer else {
            throw ModelError.notRunnable(architecture: architecture, reason: "calibration needs a tokenizer (a GGUF file's, or tokenizer.json next to config.json)")
        }
        let hidden = config.hiddenSize
        let sequences = texts.map { Array(tokenizer.encode($0, addBOS: tokenizer.addsBOS).prefix(min(config.contextLength, 2048))) }.filter { !$0.isEmpty }
        for sequence in sequences { try checkVocabulary(sequence) }
        let firstBlock = resume?.firstBlock ?? 0
        guard firstBlock >= 0 && firstBlock <= layers.count else {
            throw ModelError.notRunnable(architecture: architecture, reason: "cannot resume calibration at block \(firstBlock) of \(layers.count)")
        }
        let longest = sequences.map(\.count).max() ?? 1
        let state = makeState(capacity: longest)
        let counts = sequences.map(\.count)
        let states = try resume.map { (resume) throws(ShrinkIOError) in
            try CalibrationHiddenStates(counts: counts, width: hidden, checkpointFile: resume.hiddenStates, resuming: resume.firstBlock > 0)
        } ?? CalibrationHiddenStates(counts: counts, width: hidden, spillNextTo: spillNextTo)
        // One text's hidden states, loaded before each layer and stored after it.
        var text = [Float](repeating: 0, count: longest * hidden)
        if firstBlock == 0 {
            for (index, tokens) in sequences.enumerated() {
                for first in stride(from: 0, to: tokens.count, by: state.batch) {
                    let count = min(state.batch, tokens.count - first)
                    embed(Array(tokens[first..<(first + count)]), state: state)
                    text.withUnsafeMutableBufferPointer { ($0.baseAddress! + first * hidden).update(from: state.x, count: count * hidden) }
                }
                try text.withUnsafeBufferPointer { (text) throws(ShrinkIOError) in try states.store(index, generation: 0, from: text.baseAddress!) }
            }
        }
        for layer in firstBlock..<layers.count {
            for index in sequences.indices {
                try text.withUnsafeMutableBufferPointer { (text) throws(ShrinkIOError) in try states.load(index, generation: layer, into: text.baseAddress!) }
                state.reset()
                for first in stride(from: 0, to: sequences[index].count, by: state.batch) {
                    let count = min(state.batch, sequences[index].count - first)
                    text.withUnsafeBufferPointer { source in
                        state.x.withUnsafeMutableBufferPointer { $0.baseAddress!.update(from: source.baseAddress! + first * hidden, count: count * hidden) }
                    }
                    setAngles(rows: count, state: state)
                    run(layer: layer, rows: count, state: state)
                    text.withUnsafeMutableBufferPointer { ($0.baseAddress! + first * hidden).update(from: state.x, count: count * hidden) }
                    state.position += count
                }
                try text.withUnsafeBufferPointer { (text) throws(ShrinkIOError) in try states.store(index, generation: layer + 1, from: text.baseAddress!) }
            }
            if resume != nil { try states.synchronize() }
            for index in table.linearOpIndices { store.tensor(named: table.op(layer, index) + ".weight")?.releasePages() }
            try blockFinished(layer)
        }
    }
}

extension LlamaDecoder {
    /// A decoder's functions: `prefill(tokens: int32[?], state)` and `decode(token: int32[1], state)`
    /// run their tokens at the state's next positions and give the last one's next-token logits
    /// (`float32[vocabulary]`); `logits(tokens: int32[?])` runs its tokens from an empty cache and
    /// gives every position's (`float32[?, vocabulary]`).
    static func functions(_ config: LlamaConfig) -> [FunctionDescriptor] {
        let next = [TensorSignature(name: "logits", scalarType: .float32, shape: [config.vocabularySize])]
        return [
            FunctionDescriptor(name: "prefill", inputs: [TensorSignature(name: "tokens", scalarType: .int32, shape: [nil])], outputs: next,
                               stateful: true),
            FunctionDescriptor(name: "decode", inputs: [TensorSignature(name: "token", scalarType: .int32, shape: [1])], outputs: next,
                               stateful: true),
            FunctionDescriptor(name: "logits", inputs: [TensorSignature(name: "tokens", scalarType: .int32, shape: [nil])],
                               outputs: [TensorSignature(name: "logits", scalarType: .float32, shape: [nil, config.vocabularySize])]),
        ]
    }

    public var functions: [FunctionDescriptor] { Self.functions(config) }

    /// A cache of `capacity` positions (at least 1, at most the model's context) for `prefill` and `decode`.
    public func makeFunctionState(capacity: Int) -> (any FunctionState)? {
        let state = makeState(capacity: max(1, min(capacity, config.contextLength)))
        state.owner = self
        return state
    }

    public func call(_ name: String, _ inputs: [String: FunctionValue], state: (any FunctionState)?) throws(FunctionCallError) -> [String: FunctionValue] {
        let function = try functions.named(name)
        try function.validate(inputs)
        let input = function.inputs[0].name
        guard let tokens = inputs[input]?.int32Values else { throw .missingInput(function: name, input: input) }
        do {
            try checkVocabulary(tokens)
        } catch {
            throw .invalidValue(function: name, input: input, reason: error.inputReason)
        }
        let vocabulary = config.vocabularySize
        let decoding: DecoderState
        if function.stateful {
            guard let given = state as? DecoderState, given.owner === self else {
                throw .wrongState(function: name, reason: state == nil ? "needs a state (makeFunctionState)" : "the state was made by another model")
            }
            guard given.position + tokens.count <= given.capacity else {
                throw .invalidValue(function: name, input: input,
                                    reason: "\(given.position + tokens.count) positions exceed the state's capacity of \(given.capacity)")
            }
            decoding = given
        } else {
            guard state == nil else { throw .wrongState(function: name, reason: "takes no state") }
            guard tokens.count <= config.contextLength else {
                throw .invalidValue(function: name, input: input, reason: "\(tokens.count) tokens exceed the context of \(config.contextLength)")
            }
            decoding = makeState(capacity: tokens.count)
        }
        let rows = function.stateful ? (tokens.count - 1)..<tokens.count : 0..<tokens.count
        var logits = [Float](repeating: 0, count: rows.count * vocabulary)
        do {
            try evaluate(tokens, state: decoding, logitRows: rows) { row, values in
                let start = (row - rows.lowerBound) * vocabulary
                for index in 0..<vocabulary { logits[start + index] = values[index] }
            }
        } catch {
            throw .invalidValue(function: name, input: input, reason: error.inputReason)
        }
        return ["logits": .float32(logits, shape: function.stateful ? [vocabulary] : [tokens.count, vocabulary])]
    }
}

/// What one decoding sequence holds: the key/value cache of every layer, its next position, and
/// the batch buffers the forward pass reuses (allocated once, so that a token allocates nothing).
public final class DecoderState: FunctionState {
    /// Rows of logits computed at a time.
    static let logitRows = 32
    public let capacity: Int
    public let batch: Int
    /// The next position (tokens in the cache).
    public internal(set) var position = 0
    /// The decoder a function state was made for (`LlamaDecoder.makeFunctionState`).
    weak var owner: LlamaDecoder?
    /// Rows of the last batch.
    var rows = 0
    let threads: Int
    /// The attention kernels.
    let kernels: KernelVariant
    /// Floats per cached position of the values (and of a batch row of keys).
    let valueStride: Int
    /// Positions each key/value head's tiled keys hold (`CausalAttention.keyCapacity`).
    let keyCapacity: Int
    /// Floats per attention head.
    let headSize: Int
    /// Per layer, the keys tiled (`CausalAttention`'s layout) and the values, position by position.
    var keys: [[Float]]
    var values: [[Float]]
    var x, normalized, query, key, value, context, projected, gate, up, logits, angles, scratch: [Float]
    /// `HadamardRotation.unrotate`'s scratch (one block of the residual stream at most).
    var rotationScratch: [Float]

    init(config c: LlamaConfig, capacity: Int, batch: Int, threads: Int, kernels: KernelVariant) {
        self.kernels = kernels
        self.capacity = capacity
        self.batch = batch
        self.threads = threads
        valueStride = c.keyValueHeads * c.headDimension
        keyCapacity = CausalAttention.keyCapacity(capacity)
        headSize = c.headDimension
        keys = Array(repeating: [Float](repeating: 0, count: valueStride * keyCapacity), count: c.layers)
        values = Array(repeating: [Float](repeating: 0, count: capacity * valueStride), count: c.layers)
        let queries = c.heads * c.headDimension
        x = [Float](repeating: 0, count: batch * c.hiddenSize)
        normalized = [Float](repeating: 0, count: max(batch, Self.logitRows) * max(c.hiddenSize, queries))
        query = [Float](repeating: 0, count: batch * queries)
        key = [Float](repeating: 0, count: batch * valueStride)
        value = key
        context = query
        projected = x
        gate = [Float](repeating: 0, count: batch * c.intermediateSize)
        up = gate
        logits = [Float](repeating: 0, count: Self.logitRows * c.vocabularySize)
        angles = [Float](repeating: 0, count: batch * c.headDimension)
        scratch = [Float](repeating: 0, count: max(1, threads) * CausalAttention.scratch(positions: capacity))
        rotationScratch = [Float](repeating: 0, count: c.hiddenSize)
    }

    /// Empties the cache.
    public func reset() { position = 0 }

    /// Writes the batch's keys (tiled) and values to the cache at positions `position…`.
    func store(layer: Int, rows: Int) {
        let start = position, valueStride = valueStride
        keys[layer].withUnsafeMutableBufferPointer { cache in
            key.withUnsafeBufferPointer { batch in
                CausalAttention.storeKeys(batch.baseAddress!, rows: rows, start: start, keyValueHeads: valueStride / headSize, headSize: headSize,
                                          keyCapacity: keyCapacity, into: cache.baseAddress!)
            }
        }
        values[layer].withUnsafeMutableBufferPointer { cache in
            value.withUnsafeBufferPointer { cache.baseAddress!.advanced(by: start * valueStride).update(from: $0.baseAddress!, count: rows * valueStride) }
        }
    }

    /// Attention of the batch's queries over the cache into `context`.
    func attend(layer: Int, rows: Int, heads: Int, keyValueHeads: Int, headSize: Int) {
        let start = position
        keys[layer].withUnsafeBufferPointer { k in
            values[layer].withUnsafeBufferPointer { v in
                query.withUnsafeBufferPointer { q in
                    scratch.withUnsafeMutableBufferPointer { s in
                        context.withUnsafeMutableBufferPointer { out in
                            CausalAttention.run(query: q.baseAddress!, rows: rows, start: start, heads: heads, keyValueHeads: keyValueHeads,
                                                headSize: headSize, keys: k.baseAddress!, keyCapacity: keyCapacity, values: v.baseAddress!,
                                                scale: 1 / Float(headSize).squareRoot(), threads: threads, kernels: kernels,
                                                scratch: s.baseAddress!, context: out.baseAddress!)
                        }
                    }
                }
            }
        }
    }
}
