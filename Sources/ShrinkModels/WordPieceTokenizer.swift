import Foundation

/// The BERT WordPiece tokenizer (uncased), matching Hugging Face's `BertNormalizer` +
/// `BertPreTokenizer` + `WordPiece` as configured for all-MiniLM-L6-v2.
///
/// 1. Clean: drop U+0000, U+FFFD and control characters (Unicode category C*, except tab, newline
///    and carriage return, which count as whitespace); turn every whitespace (those three, space
///    and category Zs) into a space.
/// 2. Put spaces around CJK ideographs (the CJK Unified Ideographs blocks and their extensions,
///    and the compatibility ideographs).
/// 3. Strip accents (canonical decomposition, then drop nonspacing marks, category Mn) and
///    lower-case (full Unicode lower-case mappings).
/// 4. Split on spaces, and isolate every punctuation character (ASCII 33–47, 58–64, 91–96,
///    123–126 and Unicode category P*).
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

    /// Reads `vocab.txt` (one token per line, id = line number).
    /// - Throws: `ModelError.invalidFile` when a special token is missing.
    public init(vocabularyFile path: String, maximumLength: Int = 256) throws(ModelError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .invalidFile(path: path, reason: "cannot read the vocabulary")
        }
        var vocabulary: [String: Int32] = [:]
        // "\r\n" is one Character in Swift, so both line endings are separators here.
        var lines = String(decoding: data, as: UTF8.self)
            .split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        if lines.last == "" { lines.removeLast() }
        for (index, line) in lines.enumerated() where vocabulary[String(line)] == nil {
            vocabulary[String(line)] = Int32(index)
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
        self.maximumLength = maximumLength
    }

    /// The ids of `text`: `[CLS]`, its word pieces (truncated), `[SEP]`.
    public func encode(_ text: String) -> [Int32] {
        var ids = [classifierID]
        let budget = maximumLength - 2
        outer: for word in words(of: text) {
            for id in wordPieces(word) {
                if ids.count - 1 >= budget { break outer }
                ids.append(id)
            }
        }
        ids.append(separatorID)
        return ids
    }

    /// Normalized, pre-tokenized words (steps 1–4).
    public func words(of text: String) -> [String] {
        var cleaned = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar.value == 0 || scalar.value == 0xFFFD { continue }
            if Self.isWhitespace(scalar) { cleaned.append(" "); continue }
            if Self.isControl(scalar) { continue }
            if Self.isCJK(scalar) {
                cleaned.append(" "); cleaned.append(scalar); cleaned.append(" ")
            } else {
                cleaned.append(scalar)
            }
        }
        let decomposed = String(cleaned).decomposedStringWithCanonicalMapping
        var normalized = String.UnicodeScalarView()
        for scalar in decomposed.unicodeScalars where scalar.properties.generalCategory != .nonspacingMark {
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

    static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" || scalar.properties.generalCategory == .spaceSeparator
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        if scalar == "\t" || scalar == "\n" || scalar == "\r" { return false }
        switch scalar.properties.generalCategory {
        case .control, .format, .unassigned, .privateUse, .surrogate: return true
        default: return false
        }
    }

    static func isPunctuation(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        if (33...47).contains(value) || (58...64).contains(value) || (91...96).contains(value) || (123...126).contains(value) {
            return true
        }
        switch scalar.properties.generalCategory {
        case .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation,
             .initialPunctuation, .finalPunctuation, .otherPunctuation: return true
        default: return false
        }
    }

    static func isCJK(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x4E00...0x9FFF, 0x3400...0x4DBF, 0x20000...0x2A6DF, 0x2A700...0x2B73F, 0x2B740...0x2B81F,
             0x2B820...0x2CEAF, 0xF900...0xFAFF, 0x2F800...0x2FA1F: return true
        default: return false
        }
    }
}
