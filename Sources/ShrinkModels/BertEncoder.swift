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
    /// Every linear layer with what it runs.
    public let linearExecutions: [LinearLayerExecution]
    /// Threads for attention, LayerNorm and GELU (the linear layers carry their own).
    let threads: Int
    /// The float kernels (GELU, attention, LayerNorm) this encoder runs.
    let kernels: KernelVariant
    let workspaces = WorkspaceCache()
    /// Whether every linear layer's rows are independent (`LinearOperator.rowsAreIndependent`), so
    /// that a batch may run in groups of sentences (`grouping`).
    let rowsAreIndependent: Bool

    struct Layer {
        let query, key, value, attentionOutput, intermediate, output: any LinearOperator
        let attentionNorm, outputNorm: LayerNormWeights
        /// Query, key and value in one pass when they run on int8 activations (one quantization
        /// and one hand-off instead of three).
        let projections: LinearGroup

        init(query: any LinearOperator, key: any LinearOperator, value: any LinearOperator, attentionOutput: any LinearOperator,
             intermediate: any LinearOperator, output: any LinearOperator, attentionNorm: LayerNormWeights, outputNorm: LayerNormWeights) {
            (self.query, self.key, self.value, self.attentionOutput, self.intermediate, self.output) =
                (query, key, value, attentionOutput, intermediate, output)
            (self.attentionNorm, self.outputNorm) = (attentionNorm, outputNorm)
            projections = LinearGroup([query, key, value])
        }
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
        rowsAreIndependent = layers.allSatisfy { layer in
            [layer.query, layer.key, layer.value, layer.attentionOutput, layer.intermediate, layer.output].allSatisfy(\.rowsAreIndependent)
        }
        threads = source.threads
        kernels = source.kernels
        linearExecutions = source.linearExecutions
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
    /// - Throws: `ModelError.invalidInput` naming the first sequence that is empty, longer than
    ///   the position table or holds an id without an embedding row (a tokenizer's output never
    ///   does: `check(_:vocabularyFile:)`), before any work.
    public func embed(_ sequences: [[Int32]]) throws(ModelError) -> [[Float]] {
        let hidden = config.hiddenSize
        var output = [Float](repeating: 0, count: sequences.count * hidden)
        try output.withUnsafeMutableBufferPointer { buffer in
            Result { () throws(ModelError) in try embed(sequences, into: buffer) }
        }.get()
        return (0..<sequences.count).map { Array(output[($0 * hidden)..<(($0 + 1) * hidden)]) }
    }

    /// - Throws: `ModelError.invalidInput` for the first sequence `embed` cannot run.
    func validate(_ sequences: [[Int32]]) throws(ModelError) {
        try Self.validate(sequences, positions: positionEmbeddings.rows, vocabulary: wordEmbeddings.rows)
    }

    /// Checks token sequences for an encoder of `positions` positions and `vocabulary` token ids.
    /// - Throws: `ModelError.invalidInput` naming the first sequence that is empty, longer than
    ///   `positions` or holds an id outside `0..<vocabulary`.
    static func validate(_ sequences: [[Int32]], positions: Int, vocabulary: Int) throws(ModelError) {
        for (index, sequence) in sequences.enumerated() {
            guard !sequence.isEmpty else { throw .invalidInput(index: index, reason: "the token sequence is empty") }
            guard sequence.count <= positions else {
                throw .invalidInput(index: index, reason: "\(sequence.count) tokens exceed the \(positions) positions of the model")
            }
            if let bad = sequence.first(where: { $0 < 0 || Int($0) >= vocabulary }) {
                throw .invalidInput(index: index, reason: "token id \(bad) is outside the vocabulary of \(vocabulary)")
            }
        }
    }

    /// Writes the sentence embeddings of `sequences` into `output` (`sequences.count × hiddenSize`
    /// floats, row after row). Once the encoder has run a batch of at least as many tokens, this
    /// allocates no heap memory: activations live in a kept workspace, kernels in reused scratch,
    /// and the threads get their work through `ParallelJob`s.
    /// - Throws: as `embed(_:)`, and `ModelError.invalidInput` when `output` holds fewer than
    ///   `sequences.count × hiddenSize` floats.
    public func embed(_ sequences: [[Int32]], into output: UnsafeMutableBufferPointer<Float>) throws(ModelError) {
        let hidden = config.hiddenSize
        guard output.count >= sequences.count * hidden else {
            throw .invalidInput(index: 0, reason: "the output holds \(output.count) floats, \(sequences.count * hidden) needed")
        }
        try validate(sequences)
        let grouping = self.grouping(sequences)
        guard grouping.groups > 1 else { return forward(sequences, members: sequences.indices, into: output.baseAddress!) }
        withUnsafeTemporaryAllocation(of: Int.self, capacity: sequences.count + grouping.groups + 1) { buffer in
            let order = UnsafeMutableBufferPointer(rebasing: buffer[0..<sequences.count])
            let bounds = UnsafeMutableBufferPointer(rebasing: buffer[sequences.count...])
            Self.partition(sequences, groups: grouping.groups, order: order, bounds: bounds)
            WorkerPool.shared.run(grouping.threads, GroupsJob(encoder: self, sequences: sequences, groups: grouping.groups,
                                                              order: UnsafePointer(order.baseAddress!), bounds: UnsafePointer(bounds.baseAddress!),
                                                              output: output.baseAddress!))
        }
    }

    /// Least tokens per thread for a batch to run on several threads as groups.
    static let tokensPerThread = 32

    /// About how many tokens a group holds when a batch runs as groups. A smaller group's
    /// activations stay in cache through a layer: MiniLM int8, batches of 32 STS-B sentences (15
    /// tokens on average), AMD Zen 4, sentences/s against one group per thread, two sweeps: at 2
    /// threads groups of 64 tokens +7 %, 96 +5 %, 128 +7–13 %, 160 +5 %, 192 +9 %, 256 +4 %; at
    /// 1 thread 64 +9 %, 96 +11 %, 128 +8–15 %, 160 +9 %, 192 +19 %, 256 +18 %.
    static let tokensPerGroup = 128

    /// How a batch runs: `groups` groups of whole sentences (`partition`), each on one thread
    /// through every layer (`GroupsJob`), thread t running groups t, t + `threads`, … in turn.
    /// With layers whose rows are independent: up to `threads` threads of at least
    /// `tokensPerThread` tokens each, and groups of about `tokensPerGroup` tokens, a multiple of
    /// the threads (at most one per sentence). Else one group (every operation then splits its
    /// work over the threads). A sentence's embedding is the same bit for bit either way. Groups
    /// need no hand-off between operations: MiniLM int8, batches of 32 STS-B sentences, 2
    /// threads, AMD Zen 4: the workers spun at 5 % of the samples between the 72 operations of a batch.
    func grouping(_ sequences: [[Int32]]) -> (threads: Int, groups: Int) {
        guard rowsAreIndependent, !sequences.isEmpty else { return (1, 1) }
        let tokens = sequences.reduce(0) { $0 + $1.count }
        let threads = max(1, min(self.threads, sequences.count, tokens / Self.tokensPerThread))
        let perThread = (tokens + threads * Self.tokensPerGroup - 1) / (threads * Self.tokensPerGroup)
        return (threads, min(sequences.count, threads * perThread))
    }

    /// The sentence length at which a token's attention costs as much as its linear layers: a
    /// sentence of n tokens costs n · (n + attentionCostLength) in `partition`. Attention is
    /// quadratic in n, the rest linear; MiniLM int8 on STS-B sentences (15 tokens on average),
    /// AMD Zen 4: attention 8.6 % of the samples, so 15 · 0.914 / 0.086 ≈ 160.
    static let attentionCostLength = 160

    /// Splits a batch into `groups` (≥ 1) non-empty groups of near-equal cost (`attentionCostLength`):
    /// sentences longest first, each to the group with the least cost so far (the longest-processing-time
    /// rule, within 4/3 of the best split), at most `sequences.count` groups. Writes the sentence
    /// indices group after group into `order` (`sequences.count` entries), each group's in batch
    /// order, and group g's range `bounds[g]..<bounds[g + 1]` into `bounds` (`groups + 1` entries).
    /// O(n log n) for n sentences.
    static func partition(_ sequences: [[Int32]], groups: Int, order: UnsafeMutableBufferPointer<Int>, bounds: UnsafeMutableBufferPointer<Int>) {
        let count = sequences.count
        func cost(_ index: Int) -> Int { sequences[index].count * (sequences[index].count + attentionCostLength) }
        for index in 0..<count { order[index] = index }
        // Costliest first (ties in batch order), by an in-place heap sort: no allocation.
        func before(_ a: Int, _ b: Int) -> Bool { cost(a) > cost(b) || (cost(a) == cost(b) && a < b) }
        func siftDown(_ root: Int, _ end: Int) {
            var parent = root
            while 2 * parent + 1 < end {
                var child = 2 * parent + 1
                if child + 1 < end && before(order[child], order[child + 1]) { child += 1 }
                guard before(order[parent], order[child]) else { return }
                order.swapAt(parent, child)
                parent = child
            }
        }
        for root in stride(from: count / 2 - 1, through: 0, by: -1) { siftDown(root, count) }
        for end in stride(from: count - 1, to: 0, by: -1) {
            order.swapAt(0, end)
            siftDown(0, end)
        }
        withUnsafeTemporaryAllocation(of: Int.self, capacity: count + groups) { buffer in
            let group = UnsafeMutableBufferPointer(rebasing: buffer[0..<count])
            let load = UnsafeMutableBufferPointer(rebasing: buffer[count...])
            load.update(repeating: 0)
            for (rank, index) in order.enumerated() {
                // The first `groups` sentences open a group each, so none stays empty.
                var lightest = min(rank, groups - 1)
                if rank >= groups {
                    for candidate in 0..<groups where load[candidate] < load[lightest] { lightest = candidate }
                }
                group[index] = lightest
                load[lightest] += cost(index)
            }
            var next = 0
            for target in 0..<groups {
                bounds[target] = next
                for index in 0..<count where group[index] == target {
                    order[next] = index
                    next += 1
                }
            }
            bounds[groups] = count
        }
    }

    /// A batch's sentences in `groups` groups (`partition`), group g the sentences
    /// `order[bounds[g]..<bounds[g + 1]]`; worker w runs groups w, w + workers, … in turn.
    struct GroupsJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: GroupsJob.self).pointee.run(worker: worker, of: workers) } }
        unowned(unsafe) let encoder: BertEncoder
        let sequences: [[Int32]]
        let groups: Int
        let order: UnsafePointer<Int>
        let bounds: UnsafePointer<Int>
        let output: UnsafeMutablePointer<Float>

        func run(worker: Int, of workers: Int) {
            BufferSlot.with(worker) {
                for group in stride(from: worker, to: groups, by: workers) {
                    let members = UnsafeBufferPointer(start: order + bounds[group], count: bounds[group + 1] - bounds[group])
                    encoder.forward(sequences, members: members, into: output)
                }
            }
        }
    }

    /// The sentence embeddings of the sentences `members` of `sequences` (validated) into `output`,
    /// sentence m's at row m.
    func forward(_ sequences: [[Int32]], members: some Collection<Int>, into output: UnsafeMutablePointer<Float>) {
        let hidden = config.hiddenSize
        let total = members.reduce(0) { $0 + sequences[$1].count }
        var work = workspaces.take(tokens: total, hidden: hidden, intermediate: config.intermediateSize)
        defer { workspaces.give(work) }
        embedTokens(sequences, members: members, work: &work)
        let lengths = work.lengths
        for layer in layers { run(layer, work: &work, lengths: lengths) }
        var start = 0
        for (length, row) in zip(lengths, members) {
            let pooled = output + row * hidden
            switch pooling.mode {
            case .mean:
                pooled.update(repeating: 0, count: hidden)
                for token in start..<(start + length) {
                    for column in 0..<hidden { pooled[column] += work.states[token * hidden + column] }
                }
                for column in 0..<hidden { pooled[column] /= Float(length) }
            case .cls:
                for column in 0..<hidden { pooled[column] = work.states[start * hidden + column] }
            }
            start += length
            guard pooling.normalize else { continue }
            var squares: Float = 0
            for column in 0..<hidden { squares += pooled[column] * pooled[column] }
            let norm = max(sqrt(squares), 1e-12)
            for column in 0..<hidden { pooled[column] /= norm }
        }
    }

    /// Runs `batches` (each a batch of token-id sequences, as for `embed(_:)`) through the
    /// embeddings, then all of them through layer 0, then all through layer 1, and so on, calling
    /// `layerFinished(l)` after layer `l` has seen every batch. Each batch's hidden states go
    /// through the same operations as in `embed(_:)`, so every linear layer sees the same inputs
    /// bit for bit; between layers they are kept (`tokens × hiddenSize` floats in all), one layer's
    /// activations at a time are live.
    /// - Precondition: as for `embed(_:)`, for every batch.
    public func runLayerByLayer(_ batches: [[[Int32]]], layerFinished: (Int) throws -> Void) rethrows {
        let hidden = config.hiddenSize
        var states: [[Float]] = []
        var lengths: [[Int]] = []
        var work = workspaces.take(tokens: batches.map { $0.reduce(0) { $0 + $1.count } }.max() ?? 0, hidden: hidden,
                                   intermediate: config.intermediateSize)
        defer { workspaces.give(work) }
        for batch in batches {
            embedTokens(batch, members: batch.indices, work: &work)
            lengths.append(work.lengths)
            states.append(Array(work.states[0..<(work.lengths.reduce(0, +) * hidden)]))
        }
        for (index, layer) in layers.enumerated() {
            for batch in batches.indices {
                work.states.withUnsafeMutableBufferPointer { $0.baseAddress!.update(from: states[batch], count: states[batch].count) }
                run(layer, work: &work, lengths: lengths[batch])
                states[batch].withUnsafeMutableBufferPointer { $0.baseAddress!.update(from: work.states, count: $0.count) }
            }
            try layerFinished(index)
        }
    }

    /// The embedding LayerNorm's output for `sequences` in `work.states` (packed, sentence after
    /// sentence) and their lengths in `work.lengths`.
    func embedTokens(_ sequences: [[Int32]], members: some Sequence<Int>, work: inout Workspace) {
        let hidden = config.hiddenSize
        work.lengths.removeAll(keepingCapacity: true)
        var row = 0
        for member in members {
            let sequence = sequences[member]
            work.lengths.append(sequence.count)
            for (position, id) in sequence.enumerated() {
                work.states.withUnsafeMutableBufferPointer { buffer in
                    work.context.withUnsafeMutableBufferPointer { scratch in
                        let target = buffer.baseAddress! + row * hidden
                        wordEmbeddings.gather(row: Int(id), into: target)
                        positionEmbeddings.add(row: position, into: target, scratch: scratch.baseAddress!)
                        typeEmbeddings.add(row: 0, into: target, scratch: scratch.baseAddress!)
                    }
                }
                row += 1
            }
        }
        embeddingNorm.apply(&work.states, rows: row, epsilon: config.layerNormEpsilon, threads: threads)
    }

    /// The activations of one forward pass, reused by every layer and, through `WorkspaceCache`,
    /// by the next pass (arrays may be longer than a pass needs).
    struct Workspace {
        var tokens: Int
        var states, query, key, value, context, projected: [Float]
        var intermediate: [Float]
        /// The token count of each sentence of the pass.
        var lengths: [Int] = []
        /// Attention scratch, `Attention.scratch` floats per thread.
        var attentionScratch: [Float] = []

        init(tokens: Int, hidden: Int, intermediate: Int) {
            self.tokens = tokens
            states = [Float](repeating: 0, count: tokens * hidden)
            (query, key, value, context, projected) = (states, states, states, states, states)
            self.intermediate = [Float](repeating: 0, count: tokens * intermediate)
        }
    }

    /// Workspaces kept between passes, one per `BufferSlot` (grown when a pass needs more tokens);
    /// a concurrent pass of the same slot gets a fresh one.
    final class WorkspaceCache: @unchecked Sendable {
        private static let slots = 4
        private let lock = NSLock()
        /// Read and written under `lock` only (its count too: another slot's pass may be writing).
        private var kept = [Workspace?](repeating: nil, count: slots)

        func take(tokens: Int, hidden: Int, intermediate: Int) -> Workspace {
            let slot = BufferSlot.current % Self.slots
            return lock.withLock {
                defer { kept[slot] = nil }
                if let workspace = kept[slot], workspace.tokens >= tokens { return workspace }
                return Workspace(tokens: max(tokens, kept[slot]?.tokens ?? 0), hidden: hidden, intermediate: intermediate)
            }
        }

        func give(_ workspace: Workspace) {
            let slot = BufferSlot.current % Self.slots
            lock.withLock { if (kept[slot]?.tokens ?? -1) < workspace.tokens { kept[slot] = workspace } }
        }
    }

    func run(_ layer: Layer, work: inout Workspace, lengths: [Int]) {
        let hidden = config.hiddenSize
        let total = lengths.reduce(0, +)
        layer.projections.forward(work.states, rows: total, into: &work.query, &work.key, &work.value)
        let scratchPerWorker = Attention.scratch(longest: lengths.max() ?? 0, headSize: hidden / config.heads)
        if work.attentionScratch.count < threads * scratchPerWorker {
            work.attentionScratch = [Float](repeating: 0, count: threads * scratchPerWorker)
        }
        Attention.run(query: work.query, key: work.key, value: work.value, lengths: lengths, hidden: hidden, heads: config.heads,
                      threads: threads, kernel: kernels, scratch: &work.attentionScratch, into: &work.context)
        layer.attentionOutput.forward(work.context, rows: total, into: &work.projected)
        layer.attentionNorm.apply(&work.projected, adding: work.states, rows: total, epsilon: config.layerNormEpsilon, threads: threads)
        layer.intermediate.forward(work.projected, rows: total, into: &work.intermediate)
        let intermediateCount = total * config.intermediateSize
        work.intermediate.withUnsafeMutableBufferPointer { buffer in
            WorkerPool.shared.run(Parallel.workers(intermediateCount, threads: threads, minimumPerThread: 1 << 16),
                                  GELUJob(values: buffer.baseAddress!, count: intermediateCount, kernel: kernels))
        }
        layer.output.forward(work.intermediate, rows: total, into: &work.states)
        layer.outputNorm.apply(&work.states, adding: work.projected, rows: total, epsilon: config.layerNormEpsilon, threads: threads)
    }

}
