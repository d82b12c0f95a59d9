import Foundation

/// The BERT WordPiece tokenizer (uncased), matching Hugging Face's `BertNormalizer` +
/// `BertPreTokenizer` + `WordPiece` as configured for all-MiniLM-L6-v2. Character classes are the
/// reference's own, probed code point by code point (`BertCharacterClasses`), not the current
/// Unicode tables, which differ from them (unassigned characters, U+2B820–U+2B91F, punctuation).
///
/// 1. Clean: drop U+0000, U+FFFD, control, format and private-use characters; turn every
///    whitespace (tab, newline, carriage return and the other White_Space characters, U+2028 and
///    U+2029 among them) into a space.
/// 2. Put spaces around CJK ideographs.
/// 3. Strip accents (canonical decomposition, then drop nonspacing marks) and lower-case (full
///    Unicode lower-case mappings).
/// 4. Split on spaces, and isolate every punctuation character.
/// 5. Each word of at most `maximumCharactersPerWord` characters becomes the longest vocabulary
///    prefix, then the longest `##`-prefixed continuations; a word that cannot be covered is `[UNK]`.
/// 6. `[CLS]` … `[SEP]`, keeping at most `maximumLength` ids (word pieces beyond are dropped).
public struct WordPieceTokenizer: Sendable {
    public let vocabulary: [String: Int32]
    public let unknownID: Int32
    public let classifierID: Int32
    public let separatorID: Int32
    public let paddingID: Int32
    public let maximumLength: Int
    public let maximumCharactersPerWord = 100
    /// BERT's special tokens the vocabulary has, longest first, matched in text by `encode`.
    let specialTokens: [(scalars: [Unicode.Scalar], id: Int32)]

    /// Reads `vocab.txt` (one token per line, id = line number).
    /// - Throws: `ModelError.invalidFile` when a special token is missing;
    ///   `ModelError.invalidArgument` when `maximumLength` is below 2 (`[CLS]` and `[SEP]`).
    public init(vocabularyFile path: String, maximumLength: Int = 256) throws(ModelError) {
        guard maximumLength >= 2 else {
            throw .invalidArgument(name: "maximumLength", reason: "\(maximumLength) cannot hold [CLS] and [SEP]")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .invalidFile(path: path, reason: "cannot read the vocabulary")
        }
        var vocabulary: [String: Int32] = [:]
        // One token per line (ended by "\n" or "\r\n"; a last empty line is no token); a repeated
        // token keeps its first id. Lines are cut on bytes: a multi-byte character never holds "\n".
        data.withUnsafeBytes { bytes in
            let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            vocabulary.reserveCapacity(lines.count)
            for (index, line) in lines.enumerated() {
                let ended = index < lines.count - 1
                if !ended, line.isEmpty { break }
                let token = String(decoding: ended && line.last == UInt8(ascii: "\r") ? line.dropLast() : line, as: UTF8.self)
                if let first = vocabulary.updateValue(Int32(index), forKey: token) { vocabulary[token] = first }
            }
        }
        func special(_ token: String) throws(ModelError) -> Int32 {
            guard let id = vocabulary[token] else { throw .invalidFile(path: path, reason: "the vocabulary has no \(token)") }
            return id
        }
        self.vocabulary = vocabulary
        unknownID = try special("[UNK]")
        classifierID = try special("[CLS]")
        separatorID = try special("[SEP]")
        paddingID = try special("[PAD]")
        specialTokens = ["[MASK]", "[PAD]", "[UNK]", "[CLS]", "[SEP]"].compactMap { token in
            vocabulary[token].map { (Array(token.unicodeScalars), $0) }
        }
        self.maximumLength = maximumLength
    }

    /// The ids of `text`: `[CLS]`, its word pieces (truncated), `[SEP]`. The special tokens
    /// (`[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]`) written in the text are matched first, as
    /// they are, and become their ids (the reference's added tokens: not normalized, anywhere).
    public func encode(_ text: String) -> [Int32] {
        var ids = [classifierID]
        let budget = maximumLength - 2
        outer: for piece in splitSpecial(text) {
            switch piece {
            case .special(let id):
                if ids.count - 1 >= budget { break outer }
                ids.append(id)
            case .text(let part):
                for word in words(of: part) {
                    for id in wordPieces(word) {
                        if ids.count - 1 >= budget { break outer }
                        ids.append(id)
                    }
                }
            }
        }
        ids.append(separatorID)
        return ids
    }

    enum Piece: Equatable { case text(String), special(Int32) }

    /// `text` cut at the special tokens written in it (leftmost first).
    func splitSpecial(_ text: String) -> [Piece] {
        let scalars = Array(text.unicodeScalars)
        var pieces: [Piece] = []
        var start = 0, position = 0
        func flush(_ end: Int) {
            if start < end { pieces.append(.text(String(String.UnicodeScalarView(scalars[start..<end])))) }
        }
        while position < scalars.count {
            if scalars[position] == "[", let match = specialTokens.first(where: { token in
                token.scalars.count <= scalars.count - position && scalars[position..<(position + token.scalars.count)].elementsEqual(token.scalars)
            }) {
                flush(position)
                pieces.append(.special(match.id))
                position += match.scalars.count
                start = position
            } else {
                position += 1
            }
        }
        flush(scalars.count)
        return pieces
    }

    /// Normalized, pre-tokenized words (steps 1–4).
    public func words(of text: String) -> [String] {
        var cleaned = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if Self.isRemoved(scalar) { continue }
            if Self.isWhitespace(scalar) { cleaned.append(" "); continue }
            if Self.isCJK(scalar) {
                cleaned.append(" "); cleaned.append(scalar); cleaned.append(" ")
            } else {
                cleaned.append(scalar)
            }
        }
        let decomposed = String(cleaned).decomposedStringWithCanonicalMapping
        var normalized = String.UnicodeScalarView()
        for scalar in decomposed.unicodeScalars where !Self.isNonspacingMark(scalar) {
            normalized.append(contentsOf: scalar.properties.lowercaseMapping.unicodeScalars)
        }
        var words: [String] = []
        var current = String.UnicodeScalarView()
        func flush() {
            if !current.isEmpty { words.append(String(current)); current = String.UnicodeScalarView() }
        }
        for scalar in normalized {
            if Self.isWhitespace(scalar) {
                flush()
            } else if Self.isPunctuation(scalar) {
                flush()
                words.append(String(scalar))
            } else {
                current.append(scalar)
            }
        }
        flush()
        return words
    }

    /// Greedy longest-match-first WordPiece of one word.
    public func wordPieces(_ word: String) -> [Int32] {
        let characters = Array(word.unicodeScalars)
        guard characters.count <= maximumCharactersPerWord else { return [unknownID] }
        var pieces: [Int32] = []
        var start = 0
        while start < characters.count {
            var end = characters.count
            var found: Int32?
            while start < end {
                var piece = String(String.UnicodeScalarView(characters[start..<end]))
                if start > 0 { piece = "##" + piece }
                if let id = vocabulary[piece] { found = id; break }
                end -= 1
            }
            guard let found else { return [unknownID] }
            pieces.append(found)
            start = end
        }
        return pieces
    }

    static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool { BertCharacterClasses.whitespace.holds(scalar) }

    static func isRemoved(_ scalar: Unicode.Scalar) -> Bool { BertCharacterClasses.removed.holds(scalar) }

    static func isPunctuation(_ scalar: Unicode.Scalar) -> Bool { BertCharacterClasses.punctuation.holds(scalar) }

    static func isCJK(_ scalar: Unicode.Scalar) -> Bool { BertCharacterClasses.ideographs.holds(scalar) }

    static func isNonspacingMark(_ scalar: Unicode.Scalar) -> Bool { BertCharacterClasses.nonspacingMarks.holds(scalar) }
}
