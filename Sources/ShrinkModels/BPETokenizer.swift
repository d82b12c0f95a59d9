import ShrinkIO

/// Byte-level BPE as GGUF stores it (`tokenizer.ggml.model = gpt2`): the vocabulary
/// (`tokenizer.ggml.tokens`, `token_type`), the merges in rank order (`tokenizer.ggml.merges`,
/// `"left right"`), the pre-tokenizer named by `tokenizer.ggml.pre`, and the BOS/EOS ids and rule.
///
/// Encoding: special tokens are split off first (user-defined tokens always, control tokens such
/// as `<|im_start|>` only with `parseSpecial`, longest match first); the rest is split into chunks
/// by the pre-tokenizer, each chunk's UTF-8 bytes become the vocabulary's byte symbols (GPT-2's
/// byte-to-character table), and the adjacent pair of lowest merge rank is merged (leftmost
/// first) until no pair has a merge. O(n²) in the length of a chunk; chunks repeat, so results are
/// cached per call.
public struct BPETokenizer: Sendable {
    /// How text is cut into chunks before merging.
    public enum PreTokenizer: String, Sendable, CaseIterable {
        /// GPT-2's `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
        case gpt2
        /// Every number character a chunk of its own (`\p{N}`), then GPT-2's rule on the rest
        /// (SmolLM, StarCoder, Refact, Command R, CodeShell, EXAONE).
        case digitsThenGPT2
        /// Llama 3's `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
        case llama3
        /// Qwen2's (Qwen2, Qwen2.5, Qwen3): Llama 3's rule with one number character per chunk (`\p{N}`).
        case qwen2

        /// The pre-tokenizer of a `tokenizer.ggml.pre` name, or nil when Shrink does not have it.
        public init?(ggufName: String) {
            switch ggufName {
            case "gpt2", "default", "mpt", "olmo", "jais": self = .gpt2
            case "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone": self = .digitsThenGPT2
            case "llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral": self = .llama3
            case "qwen2", "deepseek-r1-qwen", "megrez": self = .qwen2
            default: return nil
            }
        }
    }

    /// Each token's text (byte symbols for ordinary tokens).
    public let tokens: [String]
    public let preTokenizer: PreTokenizer
    public let bos: Int32?
    public let eos: Int32?
    /// Whether `encode` puts BOS first by default (`tokenizer.ggml.add_bos_token`).
    public let addsBOS: Bool
    /// The ids that end a generated turn: EOS, EOT (`tokenizer.ggml.eot_token_id`).
    public let endOfGeneration: Set<Int32>
    /// The chat template (`tokenizer.chat_template`, Jinja), when the file has one.
    public let chatTemplate: String?
    let ids: [String: Int32]
    /// Merge of the pair (left id << 32 | right id): its rank and the merged token's id.
    let merges: [UInt64: (rank: Int32, merged: Int32)]
    /// The token of each byte's symbol (the unknown token, else −1 and dropped, when the
    /// vocabulary lacks it).
    let byteTokens: [Int32]
    /// Special tokens by text, longest first, and whether each needs `parseSpecial` (control).
    let specials: [(text: [UInt8], id: Int32, control: Bool)]

    /// Reads the tokenizer from `file`'s metadata; errors name the file and key.
    public init(gguf file: GGUFFile) throws(ModelError) { try self.init(metadata: GGUFMetadata(file: file)) }

    /// Reads the tokenizer from GGUF metadata (a file's, or a compressed container's copy); errors
    /// name the file and key.
    public init(metadata file: GGUFMetadata) throws(ModelError) {
        func fail(_ reason: String) -> ModelError { .invalidFile(path: file.path, reason: reason) }
        guard let model = file.value("tokenizer.ggml.model")?.stringValue else { throw fail("tokenizer.ggml.model is missing") }
        guard model == "gpt2" else { throw fail("tokenizer.ggml.model '\(model)' is not byte-level BPE (gpt2)") }
        let preName = file.value("tokenizer.ggml.pre")?.stringValue ?? "default"
        guard let pre = PreTokenizer(ggufName: preName) else {
            throw fail("tokenizer.ggml.pre '\(preName)' is not a pre-tokenizer Shrink has (\(PreTokenizer.allCases.map(\.rawValue)))")
        }
        guard let tokenValues = file.value("tokenizer.ggml.tokens")?.arrayValue, !tokenValues.isEmpty else {
            throw fail("tokenizer.ggml.tokens is missing or empty")
        }
        var tokens: [String] = []
        tokens.reserveCapacity(tokenValues.count)
        for (index, value) in tokenValues.enumerated() {
            guard let text = value.stringValue else { throw fail("tokenizer.ggml.tokens[\(index)] is not a string") }
            tokens.append(text)
        }
        let types = file.value("tokenizer.ggml.token_type")?.arrayValue?.map { $0.integerValue ?? 1 } ?? []
        guard types.isEmpty || types.count == tokens.count else {
            throw fail("tokenizer.ggml.token_type has \(types.count) entries for \(tokens.count) tokens")
        }
        func tokenID(_ key: String) throws(ModelError) -> Int32? {
            guard let value = file.value(key) else { return nil }
            guard let id = value.integerValue, id >= 0, id < tokens.count else { throw fail("\(key) is not a token id below \(tokens.count)") }
            return Int32(id)
        }
        var ids: [String: Int32] = [:]
        ids.reserveCapacity(tokens.count)
        for (index, text) in tokens.enumerated() where ids[text] == nil { ids[text] = Int32(index) }
        let unknown = try tokenID("tokenizer.ggml.unknown_token_id")
        // Vocabularies may lack the symbols of bytes text rarely holds (SmolLM2 has no byte 4):
        // such a byte becomes the unknown token, or is dropped without one.
        let byteTokens = Self.byteSymbols.map { ids[String($0)] ?? unknown ?? -1 }
        var merges: [UInt64: (rank: Int32, merged: Int32)] = [:]
        let mergeValues = file.value("tokenizer.ggml.merges")?.arrayValue ?? []
        merges.reserveCapacity(mergeValues.count)
        for (rank, value) in mergeValues.enumerated() {
            guard let text = value.stringValue, let space = text.firstIndex(of: " ") else {
                throw fail("tokenizer.ggml.merges[\(rank)] is not 'left right'")
            }
            let left = String(text[..<space]), right = String(text[text.index(after: space)...])
            guard let l = ids[left], let r = ids[right], let merged = ids[left + right] else {
                throw fail("tokenizer.ggml.merges[\(rank)] '\(text)' names a token not in the vocabulary")
            }
            let key = UInt64(UInt32(l)) << 32 | UInt64(UInt32(r))
            if merges[key] == nil { merges[key] = (Int32(rank), merged) }
        }
        bos = try tokenID("tokenizer.ggml.bos_token_id")
        eos = try tokenID("tokenizer.ggml.eos_token_id")
        let eot = try tokenID("tokenizer.ggml.eot_token_id")
        endOfGeneration = Set([eos, eot].compactMap { $0 })
        chatTemplate = file.value("tokenizer.chat_template")?.stringValue
        if case .bool(let flag)? = file.value("tokenizer.ggml.add_bos_token") { addsBOS = flag && bos != nil } else { addsBOS = false }
        // ggml token types: 3 control, 4 user-defined.
        specials = types.enumerated().filter { $0.element == 3 || $0.element == 4 }
            .map { (text: Array(tokens[$0.offset].utf8), id: Int32($0.offset), control: $0.element == 3) }
            .filter { !$0.text.isEmpty }
            .sorted { $0.text.count > $1.text.count }
        self.tokens = tokens
        self.ids = ids
        self.merges = merges
        self.byteTokens = byteTokens
        preTokenizer = pre
    }

    /// Whether `other` encodes every text to the same ids: the same vocabulary, pre-tokenizer,
    /// special tokens, merges (ranks and results), byte symbols and BOS rule. O(vocabulary + merges).
    public func encodesLike(_ other: BPETokenizer) -> Bool {
        guard tokens == other.tokens, preTokenizer == other.preTokenizer, bos == other.bos, addsBOS == other.addsBOS,
              byteTokens == other.byteTokens, merges.count == other.merges.count,
              specials.map(\.id) == other.specials.map(\.id), specials.map(\.control) == other.specials.map(\.control) else { return false }
        return merges.allSatisfy { pair, merge in other.merges[pair].map { $0.rank == merge.rank && $0.merged == merge.merged } ?? false }
    }

    /// The ids of `text`, with BOS first when `addBOS` (default: the file's rule).
    public func encode(_ text: String, addBOS: Bool? = nil, parseSpecial: Bool = false) -> [Int32] {
        var output: [Int32] = []
        if addBOS ?? addsBOS, let bos { output.append(bos) }
        var cache: [[UInt8]: [Int32]] = [:]
        for piece in splitSpecial(Array(text.utf8), parseSpecial: parseSpecial) {
            switch piece {
            case .special(let id): output.append(id)
            case .text(let bytes):
                let scalars = Array(String(decoding: bytes, as: UTF8.self).unicodeScalars)
                for chunk in Self.chunks(scalars, preTokenizer) {
                    var utf8: [UInt8] = []
                    for scalar in chunk { utf8.append(contentsOf: String(scalar).utf8) }
                    if let known = cache[utf8] {
                        output.append(contentsOf: known)
                    } else {
                        let merged = merge(utf8)
                        cache[utf8] = merged
                        output.append(contentsOf: merged)
                    }
                }
            }
        }
        return output
    }

    /// The bytes token `id` stands for (its byte symbols mapped back; a special token's text as is);
    /// empty for an id outside the vocabulary.
    public func bytes(of id: Int32) -> [UInt8] {
        guard id >= 0, Int(id) < tokens.count else { return [] }
        if specials.contains(where: { $0.id == id }) { return Array(tokens[Int(id)].utf8) }
        var bytes: [UInt8] = []
        for character in tokens[Int(id)].unicodeScalars {
            if let byte = Self.symbolBytes[character] { bytes.append(byte) } else { bytes.append(contentsOf: String(character).utf8) }
        }
        return bytes
    }

    /// The text of `ids` (invalid UTF-8 replaced by U+FFFD).
    public func decode(_ ids: [Int32]) -> String {
        String(decoding: ids.flatMap { bytes(of: $0) }, as: UTF8.self)
    }

    // MARK: - Merging

    /// BPE merges over one chunk's bytes: O(n²) in its length.
    func merge(_ bytes: [UInt8]) -> [Int32] {
        var symbols = bytes.map { byteTokens[Int($0)] }
        while symbols.count > 1 {
            var best: (rank: Int32, position: Int, merged: Int32)?
            for position in 0..<(symbols.count - 1) {
                let key = UInt64(UInt32(bitPattern: symbols[position])) << 32 | UInt64(UInt32(bitPattern: symbols[position + 1]))
                if let merge = merges[key], merge.rank < (best?.rank ?? .max) { best = (merge.rank, position, merge.merged) }
            }
            guard let best else { break }
            symbols[best.position] = best.merged
            symbols.remove(at: best.position + 1)
        }
        return symbols.filter { $0 >= 0 }
    }

    enum Piece: Equatable { case text([UInt8]), special(Int32) }

    /// `bytes` cut at special tokens' texts (leftmost, then longest).
    func splitSpecial(_ bytes: [UInt8], parseSpecial: Bool) -> [Piece] {
        let candidates = specials.filter { parseSpecial || !$0.control }
        guard !candidates.isEmpty else { return bytes.isEmpty ? [] : [.text(bytes)] }
        var pieces: [Piece] = []
        var start = 0, position = 0
        while position < bytes.count {
            if let match = candidates.first(where: { special in
                special.text.count <= bytes.count - position && special.text.first == bytes[position]
                    && bytes[position..<(position + special.text.count)].elementsEqual(special.text)
            }) {
                if start < position { pieces.append(.text(Array(bytes[start..<position]))) }
                pieces.append(.special(match.id))
                position += match.text.count
                start = position
            } else {
                position += 1
            }
        }
        if start < bytes.count { pieces.append(.text(Array(bytes[start..<bytes.count]))) }
        return pieces
    }

    // MARK: - Pre-tokenization

    /// The chunks of `text` under `rule`.
    static func chunks(_ text: [Unicode.Scalar], _ rule: PreTokenizer) -> [ArraySlice<Unicode.Scalar>] {
        switch rule {
        case .gpt2: return gpt2Chunks(text[...])
        case .digitsThenGPT2:
            var result: [ArraySlice<Unicode.Scalar>] = []
            var start = 0
            for (index, scalar) in text.enumerated() where isDigit(scalar) {
                if start < index { result += gpt2Chunks(text[start..<index]) }
                result.append(text[index...index])
                start = index + 1
            }
            if start < text.count { result += gpt2Chunks(text[start..<text.count]) }
            return result
        case .llama3: return llama3Chunks(text[...], digits: 3)
        case .qwen2: return llama3Chunks(text[...], digits: 1)
        }
    }

    /// Llama 3's rule over `text` (see `PreTokenizer.llama3`), numbers in runs of at most
    /// `digits`: at each position the first alternative that matches, as the regular expression would.
    static func llama3Chunks(_ text: ArraySlice<Unicode.Scalar>, digits: Int) -> [ArraySlice<Unicode.Scalar>] {
        var result: [ArraySlice<Unicode.Scalar>] = []
        var position = text.startIndex
        let end = text.endIndex
        func run(from start: Int, limit: Int = .max, while predicate: (Unicode.Scalar) -> Bool) -> Int {
            var index = start
            while index < end, index - start < limit, predicate(text[index]) { index += 1 }
            return index
        }
        func isNewline(_ scalar: Unicode.Scalar) -> Bool { scalar == "\r" || scalar == "\n" }
        while position < end {
            let scalar = text[position]
            let next: Unicode.Scalar? = position + 1 < end ? text[position + 1] : nil
            // Where ` ?[^\s\p{L}\p{N}]+` would start its symbols.
            let symbolsStart = scalar == " " && next != nil ? position + 1 : position
            let stop: Int
            if scalar == "'", let contraction = contractionLength(text, at: position, ignoringCase: true) {
                stop = position + contraction
            } else if isLetter(scalar) {
                stop = run(from: position, while: isLetter)
            } else if !isNewline(scalar), !isNumber(scalar), let next, isLetter(next) {
                stop = run(from: position + 1, while: isLetter)
            } else if isNumber(scalar) {
                stop = run(from: position, limit: digits, while: isNumber)
            } else if !isWhitespace(text[symbolsStart]), !isLetter(text[symbolsStart]), !isNumber(text[symbolsStart]) {
                // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
                let symbols = run(from: symbolsStart) { !isWhitespace($0) && !isLetter($0) && !isNumber($0) }
                stop = run(from: symbols, while: isNewline)
            } else {
                let runEnd = run(from: position, while: isWhitespace)
                if let lastNewline = text[position..<runEnd].lastIndex(where: isNewline) {
                    // `\s*[\r\n]+`: the whitespace up to the run's last line break.
                    stop = lastNewline + 1
                } else {
                    stop = whitespaceChunkEnd(start: position, runEnd: runEnd, textEnd: end)
                }
            }
            result.append(text[position..<stop])
            position = stop
        }
        return result
    }

    /// GPT-2's rule over `text` (see `PreTokenizer.gpt2`): at each position the first alternative
    /// that matches, as the regular expression would.
    static func gpt2Chunks(_ text: ArraySlice<Unicode.Scalar>) -> [ArraySlice<Unicode.Scalar>] {
        var result: [ArraySlice<Unicode.Scalar>] = []
        var position = text.startIndex
        let end = text.endIndex
        func run(from start: Int, while predicate: (Unicode.Scalar) -> Bool) -> Int {
            var index = start
            while index < end, predicate(text[index]) { index += 1 }
            return index
        }
        while position < end {
            let scalar = text[position]
            let next: Unicode.Scalar? = position + 1 < end ? text[position + 1] : nil
            let stop: Int
            if scalar == "'", let contraction = contractionLength(text, at: position) {
                stop = position + contraction
            } else {
                // ` ?X+` for letters, numbers and everything else that is not whitespace.
                let body = scalar == " " && next.map({ !isWhitespace($0) }) == true ? position + 1 : position
                let first = text[body]
                if body < end, !isWhitespace(first) {
                    if isLetter(first) {
                        stop = run(from: body, while: isLetter)
                    } else if isNumber(first) {
                        stop = run(from: body, while: isNumber)
                    } else {
                        stop = run(from: body) { !isWhitespace($0) && !isLetter($0) && !isNumber($0) }
                    }
                } else {
                    stop = whitespaceChunkEnd(start: position, runEnd: run(from: position, while: isWhitespace), textEnd: end)
                }
            }
            result.append(text[position..<stop])
            position = stop
        }
        return result
    }

    /// Where `\s+(?!\S)|\s+` ends for the whitespace run `start..<runEnd`: the whole run when it
    /// reaches the end of the text or is one character long, else all but its last character
    /// (which goes with the text that follows).
    static func whitespaceChunkEnd(start: Int, runEnd: Int, textEnd: Int) -> Int {
        runEnd == textEnd || runEnd - start == 1 ? runEnd : runEnd - 1
    }

    /// The length of `'s|'t|'re|'ve|'m|'ll|'d` at `position` (any letter case when
    /// `ignoringCase`), if one starts there.
    static func contractionLength(_ text: ArraySlice<Unicode.Scalar>, at position: Int, ignoringCase: Bool = false) -> Int? {
        func letter(_ index: Int) -> Unicode.Scalar {
            let scalar = text[index]
            guard ignoringCase, ("A"..."Z").contains(scalar) else { return scalar }
            return Unicode.Scalar(scalar.value + 32)!
        }
        guard position + 1 < text.endIndex else { return nil }
        let first = letter(position + 1)
        if first == "s" || first == "t" || first == "m" || first == "d" { return 2 }
        guard position + 2 < text.endIndex else { return nil }
        let second = letter(position + 2)
        if (first == "r" && second == "e") || (first == "v" && second == "e") || (first == "l" && second == "l") { return 3 }
        return nil
    }

    /// `\p{L}`, `\p{N}` and `\s` as the reference's regular expressions see them, and the
    /// numerals its `Digits` pre-tokenizer isolates (`ByteLevelCharacterClasses`: older Unicode
    /// tables than Swift's, so a newer letter such as U+2B73F is none there).
    static func isLetter(_ scalar: Unicode.Scalar) -> Bool { ByteLevelCharacterClasses.letters.holds(scalar) }

    static func isNumber(_ scalar: Unicode.Scalar) -> Bool { ByteLevelCharacterClasses.numbers.holds(scalar) }

    static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool { ByteLevelCharacterClasses.spaces.holds(scalar) }

    static func isDigit(_ scalar: Unicode.Scalar) -> Bool { ByteLevelCharacterClasses.digits.holds(scalar) }

    // MARK: - Byte symbols

    /// GPT-2's printable character for each byte: bytes `!`…`~`, `¡`…`¬` and `®`…`ÿ` stand for
    /// themselves, the other 68 take U+0100 onwards in byte order.
    static let byteSymbols: [Unicode.Scalar] = {
        var symbols: [Unicode.Scalar] = []
        var extra: UInt32 = 256
        for byte in 0..<256 {
            if (33...126).contains(byte) || (161...172).contains(byte) || (174...255).contains(byte) {
                symbols.append(Unicode.Scalar(UInt8(byte)))
            } else {
                symbols.append(Unicode.Scalar(extra)!)
                extra += 1
            }
        }
        return symbols
    }()

    static let symbolBytes: [Unicode.Scalar: UInt8] = Dictionary(uniqueKeysWithValues: byteSymbols.enumerated().map { ($1, UInt8($0)) })
}
