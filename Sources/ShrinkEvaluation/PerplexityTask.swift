import Foundation
import ShrinkCore
import Shrink
import ShrinkKernels
import ShrinkModels

/// A decoder's perplexity on a text, llama.cpp's method (`Perplexity`: windows of `context`
/// tokens, the second half of each scored). Outputs stream as each window's scored rows of
/// next-token log-probabilities; drift is the KL-divergence `Σ p_base · (log p_base − log p)` of
/// every scored row from the baseline's (mean and 99th percentile) and the rate at which both
/// put the same token on top (`same_top`, 0…1). Timed: a 128-token prompt evaluated as one batch
/// (`prompt`, llama-bench's pp128) and 64 tokens decoded one at a time from an empty cache
/// (`decode`, its tg64), both in tokens per second.
public struct PerplexityTask: EvaluationTask {
    static let accuracy = "perplexity"
    static let drift = ["mean_kld", "p99_kld", "same_top"]
    static let promptTokens = 128
    static let decodeTokens = 64
    static let workloads = [LatencyWorkload(name: "prompt", kind: .throughput(unit: "tokens"), column: "pp\(promptTokens) /s"),
                            LatencyWorkload(name: "decode", kind: .throughput(unit: "tokens"), column: "tg\(decodeTokens) /s")]
    /// Windows scored when none are asked for: llama.cpp's comparisons here use 40.
    public static let defaultChunks = 40

    public let name = "perplexity"
    public let accuracyMetric = PerplexityTask.accuracy
    public let accuracyDirection = MetricDirection.lowerIsBetter
    public let driftMetrics = PerplexityTask.drift
    public let latencyWorkloads = PerplexityTask.workloads
    public let textPath: String
    public let text: String
    public let context: Int
    /// Windows to score (fewer when the text holds fewer).
    public let chunks: Int
    /// The text's ids under the last tokenizer it was encoded with, so a scan that loads many
    /// compressed copies of one model tokenizes once.
    let encoded = EncodedText()

    /// - Throws: `DatasetError.cannotRead` naming the file when it cannot be read as UTF-8 text, or
    ///   when `context` is below 4.
    public init(text path: String, context: Int = 512, chunks: Int = PerplexityTask.defaultChunks) throws {
        guard context >= 4 else { throw DatasetError.cannotRead(path: path, reason: "a context of \(context) tokens is too short (at least 4)") }
        guard let data = FileManager.default.contents(atPath: path) else { throw DatasetError.cannotRead(path: path, reason: "cannot read the text") }
        guard let text = String(data: data, encoding: .utf8) else { throw DatasetError.cannotRead(path: path, reason: "not UTF-8 text") }
        textPath = path
        self.text = text
        self.context = context
        self.chunks = chunks
    }

    public func load(weights: String, replacing: [EncodedTensor], threads: Int, activations: ActivationPrecision) throws -> any TaskModel {
        let location = try ModelLocation.resolve(weights)
        let (files, architecture) = try ModelArchitectures.open(weightsPath: location.weightsPath, configPath: location.configPath)
        guard let family = architecture as? any LlamaFamilyArchitecture else {
            throw ModelError.wrongCapability(architecture: type(of: architecture).name, needed: "next-token logits (task perplexity)")
        }
        let decoder = try family.makeDecoder(files: try files.replacing(replacing), options: RuntimeOptions(threads: threads, activations: activations))
        guard let tokenizer = decoder.tokenizer else {
            throw ModelError.notRunnable(architecture: decoder.architecture, reason: "task perplexity needs the model's tokenizer (GGUF metadata)")
        }
        let tokens = encoded.ids(of: text, tokenizer: tokenizer)
        guard tokens.count >= context else {
            throw DatasetError.cannotRead(path: textPath, reason: Perplexity.Failure.tooShort(tokens: tokens.count, context: context).description)
        }
        return PerplexityModel(task: self, decoder: decoder, tokens: tokens)
    }

    public func makeDrift(reference: TaskOutputs) -> any DriftAccumulator { KLDivergenceDrift(reference: reference) }
}

/// One text's ids under one tokenizer, encoded again only for a tokenizer that encodes
/// differently (`BPETokenizer.encodesLike`).
final class EncodedText: @unchecked Sendable {
    private let lock = NSLock()
    private var cached: (tokenizer: BPETokenizer, ids: [Int32])?

    func ids(of text: String, tokenizer: BPETokenizer) -> [Int32] {
        lock.lock()
        defer { lock.unlock() }
        if let cached, cached.tokenizer.encodesLike(tokenizer) { return cached.ids }
        let ids = tokenizer.encode(text)
        cached = (tokenizer, ids)
        return ids
    }
}

/// Drift of next-token distributions: each streamed row (log-probabilities) against the
/// reference's row at the same place.
final class KLDivergenceDrift: DriftAccumulator {
    let reference: TaskOutputs
    var chunk = 0
    var divergence = KLDivergenceAccumulator()

    init(reference: TaskOutputs) { self.reference = reference }

    func consume(_ outputs: UnsafeBufferPointer<Float>, rows: Int, width: Int) throws {
        let expected = try reference.chunk(chunk, rows: rows, width: width)
        chunk += 1
        expected.withUnsafeBufferPointer { base in
            for row in 0..<rows {
                divergence.add(base: UnsafeBufferPointer(rebasing: base[(row * width)..<((row + 1) * width)]),
                               logits: UnsafeBufferPointer(rebasing: outputs[(row * width)..<((row + 1) * width)]))
            }
        }
    }

    var metrics: [String: Double] {
        ["mean_kld": divergence.mean, "p99_kld": divergence.percentile(0.99), "same_top": divergence.sameTopRate]
    }
}

/// A decoder loaded for the perplexity task, with the text tokenized once.
final class PerplexityModel: TaskModel {
    let task: PerplexityTask
    let decoder: LlamaDecoder
    let tokens: [Int32]
    let state: DecoderState
    /// The timed prompt: the text's first tokens.
    let prompt: [Int32]

    init(task: PerplexityTask, decoder: LlamaDecoder, tokens: [Int32]) {
        self.task = task
        self.decoder = decoder
        self.tokens = tokens
        prompt = Array((tokens + tokens).prefix(PerplexityTask.promptTokens))
        state = decoder.makeState(capacity: max(task.context, PerplexityTask.promptTokens, PerplexityTask.decodeTokens), batch: task.context)
    }

    /// Scores the windows; streams each window's scored rows as log-probabilities (one chunk per window).
    func evaluate(streamingTo sink: any OutputSink) throws -> [String: Double] {
        let vocabulary = decoder.config.vocabularySize, rows = task.context - 1 - task.context / 2
        var buffer = [Float](repeating: 0, count: rows * vocabulary)
        var filled = 0
        var sinkError: Error?
        let result = try Perplexity.measure(decoder: decoder, tokens: tokens, context: task.context, chunks: task.chunks, observe: { _, logits in
            guard sinkError == nil else { return }
            let shift = Perplexity.logSumExp(logits)
            buffer.withUnsafeMutableBufferPointer { target in
                for index in 0..<vocabulary { target[filled * vocabulary + index] = Float(Double(logits[index]) - shift) }
            }
            filled += 1
            if filled == rows {
                filled = 0
                do { try buffer.withUnsafeBufferPointer { try sink.consume($0, rows: rows, width: vocabulary) } } catch { sinkError = error }
            }
        })
        if let sinkError { throw sinkError }
        return ["perplexity": result.perplexity, "perplexity_uncertainty": result.uncertainty, "scored_tokens": Double(result.scoredTokens)]
    }

    func itemCount(workload: Int) -> Int { workload == 0 ? 2 : 1 }
    func units(workload: Int, item: Int) -> Int { workload == 0 ? prompt.count : PerplexityTask.decodeTokens }

    /// `prompt`: the prompt as one batch, logits of its last row. `decode`: tokens one at a time
    /// from an empty cache, each the previous step's most likely token.
    func run(workload: Int, item: Int) throws {
        state.reset()
        if workload == 0 {
            try decoder.evaluate(prompt, state: state, logitRows: (prompt.count - 1)..<prompt.count)
            return
        }
        var token = prompt[0]
        for _ in 0..<PerplexityTask.decodeTokens {
            try decoder.evaluate([token], state: state, logitRows: 0..<1) { _, logits in
                var best = 0
                for index in 1..<logits.count where logits[index] > logits[best] { best = index }
                token = Int32(best)
            }
        }
    }
}
