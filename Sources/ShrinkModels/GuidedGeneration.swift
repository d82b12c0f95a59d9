/// A JSON schema compiled against a tokenizer's vocabulary: for every state of the schema's byte
/// automaton, the tokens whose bytes it accepts (a bit per token), so that each generated token
/// costs one mask over the logits and a walk of its own bytes.
///
/// Compiling makes every automaton state and walks the vocabulary's byte trie from each, pruning
/// at the first refused byte: O(states × trie nodes reached). Special tokens (`<|im_end|>`…) are
/// never allowed inside the value; the end-of-generation tokens only once the value is complete.
/// Near the end of a token budget, only tokens after which the value can still be completed in
/// the tokens left are allowed (every byte is a token of a byte-level BPE vocabulary, so one
/// always is): a generated value is complete whenever `maximumTokens` ≥ `minimumTokens`.
public final class TokenConstraint: @unchecked Sendable {
    public let schema: JSONSchema
    private let automaton: ByteAutomaton
    private let tokenBytes: [[UInt8]]
    private let trie: ByteTrie
    /// Per state, the allowed tokens as bits (`words` words each).
    private let masks: [UInt64]
    private let words: Int
    /// Per state, the largest distance to acceptance after an allowed token.
    private let furthest: [Int]
    /// Whether every byte has a single-byte token (what finishing within a budget relies on).
    private let everyByteIsAToken: Bool

    /// The number of automaton states.
    public var stateCount: Int { automaton.states.count }
    /// The fewest tokens a complete value takes (its bytes, one token each at worst).
    public var minimumTokens: Int { automaton.distance[0] }

    /// Compiles `schema` for `tokenizer`'s vocabulary.
    public init(schema: JSONSchema, tokenizer: BPETokenizer) {
        self.schema = schema
        var automaton = ByteAutomaton(schema.pattern)
        let count = automaton.completeAll()
        let special = Set(tokenizer.specials.map(\.id))
        let tokenBytes = (0..<tokenizer.tokens.count).map { special.contains(Int32($0)) ? [] : tokenizer.bytes(of: Int32($0)) }
        let trie = ByteTrie(tokenBytes)
        let words = (tokenBytes.count + 63) / 64
        var masks = [UInt64](repeating: 0, count: count * words)
        var furthest = [Int](repeating: 0, count: count)
        let complete = automaton
        for state in 0..<count {
            trie.walk(from: Int32(state), step: complete.transition) { token, end in
                masks[state * words + token / 64] |= 1 << UInt64(token % 64)
                furthest[state] = max(furthest[state], complete.distance[Int(end)])
            }
        }
        self.tokenBytes = tokenBytes
        self.trie = trie
        self.words = words
        self.automaton = complete
        self.masks = masks
        self.furthest = furthest
        everyByteIsAToken = Set(tokenBytes.filter { $0.count == 1 }.map { $0[0] }).count == 256
    }

    /// The state after the start.
    public var start: Int32 { automaton.start }

    /// Whether `state`'s value is complete and nothing may follow it.
    public func isFinished(_ state: Int32) -> Bool { automaton.accepting[Int(state)] && allowedCount(state) == 0 }

    /// Whether the value is complete in `state` (end of generation allowed).
    public func isComplete(_ state: Int32) -> Bool { automaton.accepting[Int(state)] }

    private func allowedCount(_ state: Int32) -> Int {
        masks[(Int(state) * words)..<((Int(state) + 1) * words)].reduce(0) { $0 + $1.nonzeroBitCount }
    }

    /// Sets the logits of tokens not allowed in `state` to −∞ (end of generation allowed when
    /// complete), with `remaining` tokens left including this one.
    public func mask(_ logits: UnsafeMutableBufferPointer<Float>, state: Int32, remaining: Int, endOfGeneration: Set<Int32>) {
        let row = Int(state) * words
        let tight = remaining - 1 < furthest[Int(state)] && everyByteIsAToken
        var allowed = [UInt64](masks[row..<(row + words)])
        if tight {
            // Only tokens after which the value can still be finished in the tokens left.
            allowed = [UInt64](repeating: 0, count: words)
            trie.walk(from: state, step: automaton.transition) { token, end in
                if automaton.distance[Int(end)] <= remaining - 1 { allowed[token / 64] |= 1 << UInt64(token % 64) }
            }
        }
        let complete = automaton.accepting[Int(state)]
        for token in 0..<min(logits.count, tokenBytes.count) where allowed[token / 64] & (1 << UInt64(token % 64)) == 0 {
            if !(complete && endOfGeneration.contains(Int32(token))) { logits[token] = -.infinity }
        }
    }

    /// The state after `token` from `state` (`ByteAutomaton.dead` when the token is not allowed).
    public func advance(_ state: Int32, by token: Int32) -> Int32 {
        guard token >= 0, Int(token) < tokenBytes.count, !tokenBytes[Int(token)].isEmpty else { return ByteAutomaton.dead }
        var current = state
        for byte in tokenBytes[Int(token)] {
            current = automaton.transition(current, byte)
            if current == ByteAutomaton.dead { break }
        }
        return current
    }
}

/// The vocabulary's tokens by their bytes, as a trie: children of a node are contiguous, sorted by byte.
struct ByteTrie {
    private var children: [[(byte: UInt8, node: Int)]] = [[]]
    private var tokens: [[Int]] = [[]]

    init(_ vocabulary: [[UInt8]]) {
        for (token, bytes) in vocabulary.enumerated() where !bytes.isEmpty {
            var node = 0
            for byte in bytes {
                if let child = children[node].first(where: { $0.byte == byte })?.node {
                    node = child
                } else {
                    children.append([])
                    tokens.append([])
                    children[node].append((byte, children.count - 1))
                    node = children.count - 1
                }
            }
            tokens[node].append(token)
        }
    }

    /// Calls `visit(token, end state)` for every token the automaton accepts from `state`,
    /// following only bytes it accepts.
    func walk(from state: Int32, step: (Int32, UInt8) -> Int32, visit: (Int, Int32) -> Void) {
        var stack: [(node: Int, state: Int32)] = [(0, state)]
        while let (node, current) = stack.popLast() {
            for (byte, child) in children[node] {
                let next = step(current, byte)
                guard next != ByteAutomaton.dead else { continue }
                for token in tokens[child] { visit(token, next) }
                stack.append((child, next))
            }
        }
    }
}
