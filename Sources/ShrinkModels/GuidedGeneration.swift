/// A JSON schema compiled against a tokenizer's vocabulary: for every state of the schema's byte
/// automaton, the tokens whose bytes it accepts (a bit per token), so that each generated token
/// costs one mask over the logits and a walk of its own bytes.
///
/// Compiling makes every automaton state, walks the vocabulary's byte trie from each (pruning at
/// the first refused byte), and finds each state's fewest tokens to a complete value (a
/// breadth-first search backwards over the token transitions); a token is allowed when the
/// automaton takes its bytes and a complete value can still follow it in tokens: O(states × trie
/// nodes reached), twice. Special tokens (`<|im_end|>`…) are never allowed inside the value;
/// the end-of-generation tokens only once the value is complete. Near the end of a token budget,
/// only tokens after which the value can be completed in the tokens left are allowed, so a
/// generated value is complete whenever `maximumTokens` ≥ `minimumTokens`.
public final class TokenConstraint: @unchecked Sendable {
    public let schema: JSONSchema
    private let automaton: ByteAutomaton
    private let tokenBytes: [[UInt8]]
    private let trie: ByteTrie
    /// Per state, the allowed tokens as bits (`words` words each).
    private let masks: [UInt64]
    private let words: Int
    /// Per state, the fewest tokens to a complete value (`Int.max` when none can follow).
    private let distance: [Int]
    /// Per state, the largest `distance` after an allowed token.
    private let furthest: [Int]

    /// The number of automaton states.
    public var stateCount: Int { automaton.states.count }
    /// The fewest tokens a complete value takes.
    public var minimumTokens: Int { distance[Int(automaton.start)] }

    /// Compiles `schema` for `tokenizer`'s vocabulary.
    public init(schema: JSONSchema, tokenizer: BPETokenizer) {
        self.schema = schema
        var automaton = ByteAutomaton(schema.pattern)
        let count = automaton.completeAll()
        let special = Set(tokenizer.specials.map(\.id))
        let tokenBytes = (0..<tokenizer.tokens.count).map { special.contains(Int32($0)) ? [] : tokenizer.bytes(of: Int32($0)) }
        let trie = ByteTrie(tokenBytes)
        let words = (tokenBytes.count + 63) / 64
        let complete = automaton
        // The states one token leads to, backwards, then the fewest tokens from each state to acceptance.
        var predecessors = [Set<Int32>](repeating: [], count: count)
        for state in 0..<count {
            var ends = Set<Int32>()
            trie.walk(from: Int32(state), step: complete.transition) { _, end in ends.insert(end) }
            for end in ends { predecessors[Int(end)].insert(Int32(state)) }
        }
        var distance = (0..<count).map { complete.accepting[$0] ? 0 : Int.max }
        var queue = (0..<count).filter { complete.accepting[$0] }, head = 0
        while head < queue.count {
            let state = queue[head]
            head += 1
            for previous in predecessors[state] where distance[Int(previous)] == Int.max {
                distance[Int(previous)] = distance[state] + 1
                queue.append(Int(previous))
            }
        }
        var masks = [UInt64](repeating: 0, count: count * words)
        var furthest = [Int](repeating: 0, count: count)
        for state in 0..<count {
            trie.walk(from: Int32(state), step: complete.transition) { token, end in
                guard distance[Int(end)] != Int.max else { return }
                masks[state * words + token / 64] |= 1 << UInt64(token % 64)
                furthest[state] = max(furthest[state], distance[Int(end)])
            }
        }
        self.tokenBytes = tokenBytes
        self.trie = trie
        self.words = words
        self.automaton = complete
        self.masks = masks
        self.distance = distance
        self.furthest = furthest
    }

    /// The fewest tokens from `state` to a complete value (`Int.max` when none can follow).
    func tokensToComplete(_ state: Int32) -> Int { distance[Int(state)] }

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
        var allowed = [UInt64](masks[row..<(row + words)])
        if remaining - 1 < furthest[Int(state)] {
            // Only tokens after which the value can still be finished in the tokens left.
            allowed = [UInt64](repeating: 0, count: words)
            trie.walk(from: state, step: automaton.transition) { token, end in
                if distance[Int(end)] <= remaining - 1 { allowed[token / 64] |= 1 << UInt64(token % 64) }
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
