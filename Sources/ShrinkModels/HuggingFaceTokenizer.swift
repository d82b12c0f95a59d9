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
