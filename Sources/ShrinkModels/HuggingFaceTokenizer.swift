import Foundation
import ShrinkCore
import ShrinkIO

/// A Hugging Face byte-level BPE tokenizer (`tokenizer.json`, with `tokenizer_config.json` when
/// present) read as the GGUF tokenizer metadata llama.cpp's converter would write for it, so that
/// `BPETokenizer(metadata:)` is the one tokenizer for both kinds of model folder.
///
/// Mapping: `model.vocab` and `added_tokens` give `tokenizer.ggml.tokens` by id (`special` added
/// tokens are control tokens, type 3; others user-defined, type 4); `model.merges` (`"a b"` or
/// `["a", "b"]`) the merges; `pre_tokenizer` the pre-tokenizer: `ByteLevel` with its regex is
/// `gpt2`, `Digits` (individual) then `ByteLevel` is `smollm`, a `Split` on Llama 3's regex
/// (numbers in runs of 1–3) or Qwen2's (single digits) then `ByteLevel` is `llama-bpe` or `qwen2`.
/// BOS, EOS, `add_bos_token` and `chat_template` come from `tokenizer_config.json` (BOS added
/// when its post-processor's template starts with the BOS token and the config does not say).
public enum HuggingFaceTokenizer {
    /// The GGUF-style metadata of the tokenizer in `folder`, nil when it has no `tokenizer.json`.
    /// - Throws: `ModelError.invalidFile` naming the file and key path that is missing or not
    ///   understood (a tokenizer other than byte-level BPE, an unknown pre-tokenizer, a gap in ids).
    public static func metadata(folder: String) throws(ModelError) -> GGUFMetadata? {
        let path = folder + "/tokenizer.json"
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let root = try ModelConfiguration.jsonObject(path: path)
        func fail(_ key: String, _ reason: String) -> ModelError { .invalidFile(path: path, reason: "\(key): \(reason)") }
        guard let model = root.member("model"), model.member("type")?.stringValue == "BPE" else {
            throw fail("model.type", "expected \"BPE\" (byte-level BPE is the tokenizer Shrink runs)")
        }
        var byID: [Int: String] = [:]
        for (text, value) in model.member("vocab")?.objectValue ?? [] {
            guard let id = value.integerValue, id >= 0 else { throw fail("model.vocab.\(text)", "not a token id") }
            byID[id] = text
        }
        var types: [Int: Int32] = [:]
        for (index, entry) in (root.member("added_tokens")?.arrayValue ?? []).enumerated() {
            guard let id = entry.member("id")?.integerValue, id >= 0, let text = entry.member("content")?.stringValue else {
                throw fail("added_tokens[\(index)]", "needs an id and a content")
            }
            byID[id] = text
            types[id] = entry.member("special") == .bool(true) ? 3 : 4
        }
        guard !byID.isEmpty else { throw fail("model.vocab", "is empty") }
        let count = byID.keys.max()! + 1
        guard byID.count == count else {
            throw fail("model.vocab", "ids are not 0..<\(count): id \((0..<count).first { byID[$0] == nil }!) has no token")
        }
        let tokens = (0..<count).map { byID[$0]! }
        var merges: [GGUFValue] = []
        for (index, merge) in (model.member("merges")?.arrayValue ?? []).enumerated() {
            if let text = merge.stringValue {
                merges.append(.string(text))
            } else if let pair = merge.arrayValue?.compactMap(\.stringValue), pair.count == 2 {
                merges.append(.string(pair[0] + " " + pair[1]))
            } else {
                throw fail("model.merges[\(index)]", "expected \"left right\" or [left, right]")
            }
        }
        let pre = try preTokenizer(root.member("pre_tokenizer"), fail: fail)
        let ids = Dictionary(tokens.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { first, _ in first })

        var entries: [(key: String, value: GGUFValue)] = [
            ("tokenizer.ggml.model", .string("gpt2")), ("tokenizer.ggml.pre", .string(pre)),
            ("tokenizer.ggml.tokens", .array(elementType: 8, tokens.map { .string($0) })),
            ("tokenizer.ggml.token_type", .array(elementType: 5, (0..<count).map { .int32(types[$0] ?? 1) })),
            ("tokenizer.ggml.merges", .array(elementType: 8, merges)),
        ]
        if let unknown = model.member("unk_token")?.stringValue, let id = ids[unknown] {
            entries.append(("tokenizer.ggml.unknown_token_id", .uint32(UInt32(id))))
        }
        let configPath = folder + "/tokenizer_config.json"
        let config = FileManager.default.fileExists(atPath: configPath) ? try ModelConfiguration.jsonObject(path: configPath) : JSONValue.object([])
        func tokenID(_ key: String) throws(ModelError) -> Int? {
            guard let value = config.member(key), value != .null else { return nil }
            guard let text = value.stringValue ?? value.member("content")?.stringValue, let id = ids[text] else {
                throw ModelError.invalidFile(path: configPath, reason: "\(key): not a token of \(path)")
            }
            return id
        }
        let bos = try tokenID("bos_token")
        if let bos { entries.append(("tokenizer.ggml.bos_token_id", .uint32(UInt32(bos)))) }
        if let eos = try tokenID("eos_token") { entries.append(("tokenizer.ggml.eos_token_id", .uint32(UInt32(eos)))) }
        let addsBOS: Bool
        if case .bool(let flag)? = config.member("add_bos_token") {
            addsBOS = flag
        } else {
            addsBOS = bos.map { templateStarts(with: tokens[$0], root.member("post_processor")) } ?? false
        }
        entries.append(("tokenizer.ggml.add_bos_token", .bool(addsBOS)))
        if let template = config.member("chat_template")?.stringValue { entries.append(("tokenizer.chat_template", .string(template))) }
        return GGUFMetadata(path: path, entries: entries)
    }

    /// The GGUF pre-tokenizer name of a `pre_tokenizer` object.
    static func preTokenizer(_ value: JSONValue?, fail: (String, String) -> ModelError) throws(ModelError) -> String {
        let steps = value?.member("type")?.stringValue == "Sequence" ? value?.member("pretokenizers")?.arrayValue ?? [] : value.map { [$0] } ?? []
        let kinds = steps.map { $0.member("type")?.stringValue ?? "?" }
        switch kinds {
        case ["ByteLevel"] where steps[0].member("use_regex") != .bool(false):
            return "gpt2"
        case ["Digits", "ByteLevel"] where steps[0].member("individual_digits") == .bool(true):
            return "smollm"
        case ["Split", "ByteLevel"]:
            let pattern = steps[0].member("pattern")?.member("Regex")?.stringValue ?? ""
            if pattern.contains(#"\p{N}{1,3}"#) { return "llama-bpe" }
            if pattern.contains(#"\p{N}|"#) || pattern.contains(#"\p{N}| ?"#) { return "qwen2" }
            throw fail("pre_tokenizer.pretokenizers[0].pattern", "a split Shrink does not know: \(pattern)")
        default:
            throw fail("pre_tokenizer", "\(kinds) is not a byte-level pre-tokenizer Shrink has (ByteLevel; Digits, ByteLevel; Split, ByteLevel)")
        }
    }

    /// Whether a `TemplateProcessing` post-processor (alone or in a sequence) puts `token` first.
    static func templateStarts(with token: String, _ processor: JSONValue?) -> Bool {
        guard let processor else { return false }
        if processor.member("type")?.stringValue == "Sequence" {
            return (processor.member("processors")?.arrayValue ?? []).contains { templateStarts(with: token, $0) }
        }
        guard processor.member("type")?.stringValue == "TemplateProcessing" else { return false }
        return processor.member("single")?.arrayValue?.first?.member("SpecialToken")?.member("id")?.stringValue == token
    }
}

extension HuggingFaceTokenizer {
    /// Llama 3's pre-tokenizer split (numbers in runs of up to 3 digits); Qwen2's has single digits.
    static let llama3Split = #"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"#
    static let qwen2Split = #"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"#

    /// `tokenizer.json` and `tokenizer_config.json` for the byte-level BPE tokenizer in GGUF
    /// metadata: the inverse of `metadata(folder:)`, so that reading them back gives a tokenizer
    /// that `encodesLike` the GGUF one (vocabulary by id, merges, control tokens as special added
    /// tokens and user-defined ones as plain added tokens, the pre-tokenizer, BOS/EOS, whether BOS
    /// is added, the chat template).
    /// - Throws: `ModelError.invalidFile` when the metadata holds no byte-level BPE tokenizer.
    public static func files(metadata: GGUFMetadata) throws(ModelError) -> (tokenizer: JSONValue, config: JSONValue) {
        let tokenizer = try BPETokenizer(metadata: metadata)
        func number(_ value: some BinaryInteger) -> JSONValue { .number(String(value)) }
        let types = metadata.value("tokenizer.ggml.token_type")?.arrayValue?.map { $0.integerValue ?? 1 } ?? []
        var vocabulary: [(key: String, value: JSONValue)] = []
        var seen = Set<String>()
        for (id, text) in tokenizer.tokens.enumerated() where seen.insert(text).inserted { vocabulary.append((text, number(id))) }
        let added: [JSONValue] = types.enumerated().filter { $0.element == 3 || $0.element == 4 }.map { id, kind in
            .object([("id", number(id)), ("content", .string(tokenizer.tokens[id])), ("single_word", .bool(false)),
                     ("lstrip", .bool(false)), ("rstrip", .bool(false)), ("normalized", .bool(false)), ("special", .bool(kind == 3))])
        }
        let merges: [JSONValue] = (metadata.value("tokenizer.ggml.merges")?.arrayValue ?? []).compactMap { value in
            guard let text = value.stringValue, let space = text.firstIndex(of: " ") else { return nil }
            return .array([.string(String(text[..<space])), .string(String(text[text.index(after: space)...]))])
        }
        func byteLevel(regex: Bool) -> JSONValue {
            .object([("type", .string("ByteLevel")), ("add_prefix_space", .bool(false)), ("trim_offsets", .bool(true)), ("use_regex", .bool(regex))])
        }
        func split(_ pattern: String) -> JSONValue {
            .object([("type", .string("Sequence")), ("pretokenizers", .array([
                .object([("type", .string("Split")), ("pattern", .object([("Regex", .string(pattern))])),
                         ("behavior", .string("Isolated")), ("invert", .bool(false))]),
                byteLevel(regex: false)]))])
        }
        let pre: JSONValue
        switch tokenizer.preTokenizer {
        case .gpt2: pre = byteLevel(regex: true)
        case .digitsThenGPT2:
            pre = .object([("type", .string("Sequence")), ("pretokenizers", .array([
                .object([("type", .string("Digits")), ("individual_digits", .bool(true))]), byteLevel(regex: true)]))])
        case .llama3: pre = split(llama3Split)
        case .qwen2: pre = split(qwen2Split)
        }
        let unknown = metadata.value("tokenizer.ggml.unknown_token_id")?.integerValue.map { JSONValue.string(tokenizer.tokens[$0]) } ?? .null
        let model: JSONValue = .object([
            ("type", .string("BPE")), ("dropout", .null), ("unk_token", unknown), ("continuing_subword_prefix", .null),
            ("end_of_word_suffix", .null), ("fuse_unk", .bool(false)), ("byte_fallback", .bool(false)), ("ignore_merges", .bool(false)),
            ("vocab", .object(vocabulary)), ("merges", .array(merges)),
        ])
        let file: JSONValue = .object([
            ("version", .string("1.0")), ("truncation", .null), ("padding", .null), ("added_tokens", .array(added)),
            ("normalizer", .null), ("pre_tokenizer", pre),
            ("post_processor", .object([("type", .string("ByteLevel")), ("add_prefix_space", .bool(true)), ("trim_offsets", .bool(false)), ("use_regex", .bool(true))])),
            ("decoder", .object([("type", .string("ByteLevel")), ("add_prefix_space", .bool(true)), ("trim_offsets", .bool(true)), ("use_regex", .bool(true))])),
            ("model", model),
        ])
        var config: [(key: String, value: JSONValue)] = [("add_bos_token", .bool(tokenizer.addsBOS)), ("add_eos_token", .bool(false))]
        if let bos = tokenizer.bos { config.append(("bos_token", .string(tokenizer.tokens[Int(bos)]))) }
        if let eos = tokenizer.eos { config.append(("eos_token", .string(tokenizer.tokens[Int(eos)]))) }
        if unknown != .null { config.append(("unk_token", unknown)) }
        if let template = tokenizer.chatTemplate { config.append(("chat_template", .string(template))) }
        config.append(("tokenizer_class", .string("PreTrainedTokenizerFast")))
        return (file, .object(config))
    }
}
