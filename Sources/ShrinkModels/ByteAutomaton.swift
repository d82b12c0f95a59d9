import ShrinkCore

/// A regular language over bytes: the patterns `JSONSchema` compiles to.
indirect enum BytePattern: Sendable {
    case empty
    /// One byte in any of the ranges.
    case byte([ClosedRange<UInt8>])
    case sequence([BytePattern])
    case choice([BytePattern])
    /// Zero or more repetitions.
    case star(BytePattern)

    static func literal(_ text: String) -> BytePattern { .sequence(text.utf8.map { .byte([$0...$0]) }) }

    /// `pattern` `minimum` times, then up to `maximum − minimum` more (unbounded without `maximum`).
    static func repeated(_ pattern: BytePattern, minimum: Int, maximum: Int?) -> BytePattern {
        var parts = Array(repeating: pattern, count: minimum)
        if let maximum {
            var optional = BytePattern.empty
            for _ in minimum..<maximum { optional = .choice([.empty, .sequence([pattern, optional])]) }
            parts.append(optional)
        } else {
            parts.append(.star(pattern))
        }
        return .sequence(parts)
    }
}

/// A deterministic automaton over bytes, built from a `BytePattern` by Thompson's construction and
/// the subset construction (states made as they are reached), with each state's shortest
/// distance, in bytes, to acceptance.
struct ByteAutomaton {
    /// The dead state: no continuation accepted.
    static let dead: Int32 = -1
    private var epsilon: [[Int]] = []
    private var edges: [[(range: ClosedRange<UInt8>, to: Int)]] = []
    private var accept = 0
    /// Per NFA state, the fewest bytes to acceptance (Int.max when none).
    private var nfaDistance: [Int] = []
    /// Each DFA state's NFA states (ε-closed, sorted).
    private(set) var states: [[Int]] = []
    private var index: [[Int]: Int32] = [:]
    /// Transitions, 256 per state, `Int32.min` where not yet made.
    private var table: [Int32] = []
    /// Whether each DFA state accepts, and its distance to acceptance.
    private(set) var accepting: [Bool] = []
    private(set) var distance: [Int] = []

    init(_ pattern: BytePattern) {
        let start = newState()
        accept = build(pattern, from: start)
        computeDistances()
        _ = intern(closure([start]))
    }

    /// The start state's id.
    var start: Int32 { 0 }

    /// The state after `byte` from `state` (`dead` for none), made on first use.
    mutating func step(_ state: Int32, _ byte: UInt8) -> Int32 {
        let slot = Int(state) * 256 + Int(byte)
        if table[slot] != Int32.min { return table[slot] }
        var targets: [Int] = []
        for member in states[Int(state)] {
            for edge in edges[member] where edge.range.contains(byte) { targets.append(edge.to) }
        }
        let next = targets.isEmpty ? Self.dead : intern(closure(targets))
        table[slot] = next
        return next
    }

    /// The state after `byte` from `state` once `completeAll` made every transition.
    func transition(_ state: Int32, _ byte: UInt8) -> Int32 { table[Int(state) * 256 + Int(byte)] }

    /// Makes every state reachable from the start (breadth first); the count of states.
    mutating func completeAll() -> Int {
        var next = 0
        while next < states.count {
            for byte in 0...255 { _ = step(Int32(next), UInt8(byte)) }
            next += 1
        }
        return states.count
    }

    private mutating func newState() -> Int {
        epsilon.append([])
        edges.append([])
        return epsilon.count - 1
    }

    /// Adds `pattern`'s fragment after NFA state `from`; returns its end state.
    private mutating func build(_ pattern: BytePattern, from: Int) -> Int {
        switch pattern {
        case .empty:
            return from
        case .byte(let ranges):
            let to = newState()
            for range in ranges { edges[from].append((range, to)) }
            return to
        case .sequence(let parts):
            var end = from
            for part in parts { end = build(part, from: end) }
            return end
        case .choice(let options):
            let join = newState()
            for option in options {
                let entry = newState()
                epsilon[from].append(entry)
                epsilon[build(option, from: entry)].append(join)
            }
            return join
        case .star(let body):
            let entry = newState(), exit = newState()
            epsilon[from].append(entry)
            epsilon[entry].append(exit)
            epsilon[build(body, from: entry)].append(entry)
            return exit
        }
    }

    private func closure(_ seeds: [Int]) -> [Int] {
        var seen = Set(seeds), stack = seeds
        while let state = stack.popLast() {
            for next in epsilon[state] where seen.insert(next).inserted { stack.append(next) }
        }
        return seen.sorted()
    }

    private mutating func intern(_ members: [Int]) -> Int32 {
        if let id = index[members] { return id }
        let id = Int32(states.count)
        states.append(members)
        index[members] = id
        table.append(contentsOf: repeatElement(Int32.min, count: 256))
        accepting.append(members.contains(accept))
        distance.append(members.map { nfaDistance[$0] }.min() ?? Int.max)
        return id
    }

    /// Fewest bytes from each NFA state to `accept`: a breadth-first search backwards, ε edges
    /// costing 0 and byte edges 1 (0-1 BFS).
    private mutating func computeDistances() {
        var reverse = [[(to: Int, cost: Int)]](repeating: [], count: epsilon.count)
        for state in epsilon.indices {
            for next in epsilon[state] { reverse[next].append((state, 0)) }
            for edge in edges[state] { reverse[edge.to].append((state, 1)) }
        }
        nfaDistance = [Int](repeating: Int.max, count: epsilon.count)
        nfaDistance[accept] = 0
        var deque = [accept], head = 0
        var front: [Int] = []
        while head < deque.count || !front.isEmpty {
            let state = front.popLast() ?? { defer { head += 1 }; return deque[head] }()
            for (previous, cost) in reverse[state] where nfaDistance[state] + cost < nfaDistance[previous] {
                nfaDistance[previous] = nfaDistance[state] + cost
                if cost == 0 { front.append(previous) } else { deque.append(previous) }
            }
        }
    }
}

extension JSONSchema {
    /// The language of compact JSON values of this schema (a space allowed after `:` and `,`).
    var pattern: BytePattern {
        let space = BytePattern.choice([.empty, .literal(" ")])
        switch self {
        case .object(let fields):
            var parts: [BytePattern] = [.literal("{")]
            for (index, field) in fields.enumerated() {
                if index > 0 { parts += [.literal(","), space] }
                parts += [.literal(JSONValue.string(field.name).serialized() + ":"), space, field.schema.pattern]
            }
            return .sequence(parts + [.literal("}")])
        case .string(let minimum, let maximum):
            return .sequence([.literal("\""), .repeated(Self.character, minimum: minimum, maximum: maximum), .literal("\"")])
        case .enumeration(let values):
            return .choice(values.map { .literal(JSONValue.string($0).serialized()) })
        case .integer:
            return Self.integerPart
        case .number:
            return .sequence([Self.integerPart, .choice([.empty, .sequence([.literal("."), .repeated(Self.digit, minimum: 1, maximum: 6)])])])
        case .boolean:
            return .choice([.literal("true"), .literal("false")])
        case .array(let items, let minimum, let maximum):
            let item = items.pattern
            let separated = BytePattern.sequence([.literal(","), space, item])
            let body: BytePattern
            if minimum == 0 {
                body = .choice([.empty, .sequence([item, .repeated(separated, minimum: 0, maximum: maximum.map { max($0 - 1, 0) })])])
                if maximum == 0 { return .literal("[]") }
            } else {
                body = .sequence([item, .repeated(separated, minimum: minimum - 1, maximum: maximum.map { $0 - 1 })])
            }
            return .sequence([.literal("["), body, .literal("]")])
        }
    }

    static let digit = BytePattern.byte([UInt8(ascii: "0")...UInt8(ascii: "9")])

    /// `-?(0|[1-9][0-9]{0,14})`.
    static let integerPart = BytePattern.sequence([
        .choice([.empty, .literal("-")]),
        .choice([.literal("0"), .sequence([.byte([UInt8(ascii: "1")...UInt8(ascii: "9")]), .repeated(digit, minimum: 0, maximum: 14)])]),
    ])

    /// One character inside a JSON string: printable ASCII but `"` and `\`, an escape
    /// (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`), or a well-formed multi-byte UTF-8 sequence.
    static let character: BytePattern = {
        let tail: ClosedRange<UInt8> = 0x80...0xBF
        return .choice([
            .byte([0x20...0x21, 0x23...0x5B, 0x5D...0x7E]),
            .sequence([.literal("\\"), .byte("\"\\/bfnrt".utf8.map { $0...$0 })]),
            .sequence([.byte([0xC2...0xDF]), .byte([tail])]),
            .sequence([.byte([0xE0...0xE0]), .byte([0xA0...0xBF]), .byte([tail])]),
            .sequence([.byte([0xE1...0xEC, 0xEE...0xEF]), .byte([tail]), .byte([tail])]),
            .sequence([.byte([0xED...0xED]), .byte([0x80...0x9F]), .byte([tail])]),
            .sequence([.byte([0xF0...0xF0]), .byte([0x90...0xBF]), .byte([tail]), .byte([tail])]),
            .sequence([.byte([0xF1...0xF3]), .byte([tail]), .byte([tail]), .byte([tail])]),
            .sequence([.byte([0xF4...0xF4]), .byte([0x80...0x8F]), .byte([tail]), .byte([tail])]),
        ])
    }()
}
