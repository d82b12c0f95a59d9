import Foundation
import ShrinkModels

/// Perplexity the way llama.cpp's `llama-perplexity` measures it: the text's tokens cut into
/// chunks of `context` tokens (`⌊tokens / context⌋` of them, or fewer when asked), each run from
/// an empty cache (its first token replaced by BOS when the model adds one); in each chunk the
/// tokens of the second half are scored, position `j` in `context/2 … context − 2` predicting
/// token `j + 1`: `PPL = exp(mean of −log softmax(logits_j)[token_{j+1}])`, the log-softmax in
/// `Double`. Scored tokens: `chunks · (context − 1 − context/2)`.
public enum Perplexity {
    public struct Result: Sendable, Equatable {
        public var chunks: Int
        public var scoredTokens: Int
        /// Mean negative log-likelihood (nats per token).
        public var meanNLL: Double
        public var perplexity: Double { exp(meanNLL) }
        /// llama.cpp's ± : the standard error of the mean NLL carried to the perplexity.
        public var uncertainty: Double
        public var seconds: Double
    }

    /// WikiText-2's test split shipped with the project (`data/wikitext-2/test.txt`, CC BY-SA).
    public static var defaultText: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("data/wikitext-2/test.txt").path
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case tooShort(tokens: Int, context: Int)

        public var description: String {
            switch self {
            case .tooShort(let tokens, let context): "the text has \(tokens) tokens, fewer than one context of \(context)"
            }
        }
    }

    /// The chunks `measure` scores for a text of `tokens` tokens: ⌊tokens / context⌋, at most `chunks`.
    public static func chunkCount(tokens: Int, context: Int, chunks: Int?) -> Int { min(chunks ?? tokens / context, tokens / context) }

    /// The tokens `measure` evaluates: its chunks' windows, in order (BOS put first when the model adds one).
    public static func windows(_ tokens: [Int32], context: Int, chunks: Int, bos: Int32?) -> [Int32] {
        (0..<chunks).flatMap { chunk in
            var window = Array(tokens[(chunk * context)..<((chunk + 1) * context)])
            if let bos { window[0] = bos }
            return window
        }
    }

    /// Scores `tokens` with `decoder` (see the type's documentation); `observe(row, logits)` sees
    /// each scored row's logits (rows counted from 0 over all chunks), `progress(chunk, runningPPL)`
    /// runs after each chunk.
    public static func measure(decoder: LlamaDecoder, tokens: [Int32], context: Int, chunks: Int? = nil,
                               observe: (Int, UnsafeBufferPointer<Float>) -> Void = { _, _ in },
                               progress: (Int, Double) -> Void = { _, _ in }) throws -> Result {
        guard tokens.count >= context else { throw Failure.tooShort(tokens: tokens.count, context: context) }
        let count = chunkCount(tokens: tokens.count, context: context, chunks: chunks)
        let first = context / 2
        let state = decoder.makeState(capacity: context, batch: context)
        let all = windows(tokens, context: context, chunks: count, bos: decoder.tokenizer.flatMap { $0.addsBOS ? $0.bos : nil })
        var sum = 0.0, squares = 0.0, scored = 0
        let start = Date()
        for chunk in 0..<count {
            let window = Array(all[(chunk * context)..<((chunk + 1) * context)])
            state.reset()
            try decoder.evaluate(window, state: state, logitRows: first..<(context - 1)) { row, logits in
                observe(scored, logits)
                let nll = negativeLogLikelihood(logits, target: Int(window[row + 1]))
                sum += nll
                squares += nll * nll
                scored += 1
            }
            progress(chunk + 1, exp(sum / Double(scored)))
        }
        let mean = sum / Double(scored)
        let variance = max(0, squares / Double(scored) - mean * mean)
        let uncertainty = scored > 1 ? (variance / Double(scored - 1)).squareRoot() * exp(mean) : 0
        return Result(chunks: count, scoredTokens: scored, meanNLL: mean, uncertainty: uncertainty, seconds: Date().timeIntervalSince(start))
    }

    /// `log Σ exp(logits)`, the sum in `Double` after subtracting the maximum: the shift that
    /// turns logits into log-probabilities (`log softmax = logit − logSumExp`). O(V).
    public static func logSumExp(_ logits: UnsafeBufferPointer<Float>) -> Double {
        let largest = logits.max() ?? 0
        var total = 0.0
        for value in logits { total += exp(Double(value - largest)) }
        return Double(largest) + log(total)
    }

    /// `−log softmax(logits)[target]`.
    public static func negativeLogLikelihood(_ logits: UnsafeBufferPointer<Float>, target: Int) -> Double {
        logSumExp(logits) - Double(logits[target])
    }
}
