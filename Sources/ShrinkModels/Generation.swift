import Foundation
import ShrinkCore

/// Picks the next token from logits: greedy at temperature 0, else a draw from
/// `softmax(logits / temperature)` restricted to the smallest set of most likely tokens whose
/// probability reaches `topP` (nucleus sampling), from a seeded generator (same seed, same text).
public struct TokenSampler {
    public let temperature: Float
    public let topP: Float
    var generator: SplitMix64

    /// Throws `ModelError.invalidArgument` unless `temperature` is finite and ≥ 0 and `0 < topP ≤ 1`.
    public init(temperature: Float, topP: Float = 1, seed: UInt64) throws(ModelError) {
        guard temperature.isFinite && temperature >= 0 else {
            throw .invalidArgument(name: "temperature", reason: "\(temperature) is not a finite number ≥ 0")
        }
        guard topP > 0 && topP <= 1 else { throw .invalidArgument(name: "topP", reason: "\(topP) is not in (0, 1]") }
        self.temperature = temperature
        self.topP = topP
        generator = SplitMix64(seed: seed)
    }

    /// The next token: O(V) greedy, O(V + K log K) when sampling (K tokens above 1e-12 of the most likely).
    /// Empty logits give token 0.
    public mutating func next(_ logits: UnsafeBufferPointer<Float>) -> Int32 {
        guard !logits.isEmpty else { return 0 }
        var best = 0
        for index in 1..<logits.count where logits[index] > logits[best] { best = index }
        guard temperature > 0 else { return Int32(best) }
        let largest = logits[best]
        // Tokens below 1e-12 of the most likely one (together under 5e-8 of the mass for a 49,152
        // vocabulary) are left out before sorting.
        var probabilities: [(index: Int, p: Double)] = []
        for (index, logit) in logits.enumerated() {
            let p = exp(Double((logit - largest) / temperature))
            if p >= 1e-12 { probabilities.append((index, p)) }
        }
        probabilities.sort { $0.p > $1.p }
        let total = probabilities.reduce(0) { $0 + $1.p }
        var kept = 0, mass = 0.0
        while kept < probabilities.count {
            mass += probabilities[kept].p / total
            kept += 1
            if mass >= Double(topP) { break }
        }
        var draw = Double(generator.next() >> 11) / Double(1 << 53) * mass * total
        for candidate in probabilities.prefix(kept) {
            draw -= candidate.p
            if draw <= 0 { return Int32(candidate.index) }
        }
        return Int32(probabilities[kept - 1].index)
    }
}

/// A chat prompt in the ChatML form (`<|im_start|>role\ncontent<|im_end|>\n`), the form of
/// SmolLM2's and Qwen's templates; the template's default system message (the literal
/// `<|im_start|>system\n…<|im_end|>` it inserts when the conversation has none) is kept.
/// Shrink does not run Jinja: other templates are refused by name.
public struct ChatTemplate: Sendable, Equatable {
    public let defaultSystem: String?

    /// The ChatML form of `template` (GGUF `tokenizer.chat_template`), or nil when it is not ChatML.
    public init?(template: String) {
        guard template.contains("<|im_start|>"), template.contains("<|im_end|>") else { return nil }
        // The system turn's header as the template writes it: a newline, or `\n` inside a Jinja string.
        let header = ["<|im_start|>system\n", "<|im_start|>system\\n"].lazy.compactMap { template.range(of: $0) }.first
        if let header, let end = template.range(of: "<|im_end|>", range: header.upperBound..<template.endIndex),
           !template[header.upperBound..<end.lowerBound].contains("{") {
            defaultSystem = template[header.upperBound..<end.lowerBound].replacingOccurrences(of: "\\n", with: "\n")
        } else {
            defaultSystem = nil
        }
    }

    /// The prompt for one user turn, ending where the assistant's answer starts.
    public func prompt(user: String, system: String? = nil) -> String {
        prompt(turns: [ChatTurn(role: .user, content: user)], system: system)
    }

    /// The prompt for a conversation (`turns` in order, a `.system` turn first or none), ending
    /// where the next assistant answer starts.
    public func prompt(turns: [ChatTurn], system: String? = nil) -> String {
        var text = ""
        if turns.first?.role != .system, let system = system ?? defaultSystem { text += "<|im_start|>system\n\(system)<|im_end|>\n" }
        for turn in turns { text += "<|im_start|>\(turn.role.rawValue)\n\(turn.content)<|im_end|>\n" }
        return text + "<|im_start|>assistant\n"
    }
}

/// One turn of a chat.
public struct ChatTurn: Sendable, Equatable {
    public enum Role: String, Sendable {
        case system, user, assistant
    }

    public let role: Role
    public let content: String

    public init(role: Role, content: String) {
        self.role = role
        self.content = content
    }
}

/// Bytes of generated tokens turned into text as soon as they form whole UTF-8 characters (a
/// character may span tokens).
public struct UTF8Stream {
    var pending: [UInt8] = []

    public init() {}

    /// The text completed by `bytes`; an incomplete character waits for the next call.
    public mutating func append(_ bytes: [UInt8]) -> String {
        pending += bytes
        var end = pending.count
        // Back off an incomplete trailing sequence (at most 3 bytes).
        var back = 0
        while back < min(3, pending.count) {
            let byte = pending[pending.count - 1 - back]
            if byte & 0xC0 != 0x80 {
                let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1
                if length > back + 1 { end = pending.count - 1 - back }
                break
            }
            back += 1
        }
        let text = String(decoding: pending[..<end], as: UTF8.self)
        pending.removeFirst(end)
        return text
    }

    /// Whatever is left (invalid bytes replaced).
    public mutating func finish() -> String {
        defer { pending = [] }
        return String(decoding: pending, as: UTF8.self)
    }
}
