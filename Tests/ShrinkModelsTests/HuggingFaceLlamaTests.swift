import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkIO
import ShrinkKernels
import ShrinkModels
import ShrinkTestSupport

/// A Hugging Face Llama folder (`config.json`, `model.safetensors`, `tokenizer.json`) runs and
/// compresses as the GGUF file it was written from does. No Hugging Face Llama can be fetched here,
/// so `scripts/gguf_to_hf_llama.py` writes SmolLM2's decoded Q4_1 weights in that layout (names,
/// query/key rows in Hugging Face's order) with a `tokenizer.json` the `tokenizers` package reads
/// back to the GGUF tokenizer's ids.
@Suite struct HuggingFaceLlamaTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func decoder(weights: String, config: String?, activations: ActivationPrecision) throws -> LlamaDecoder {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: weights, configPath: config)
        return try (architecture as! LlamaArchitecture).makeDecoder(files: files, options: RuntimeOptions(threads: 2, activations: activations))
    }

    /// Next-token logits of every position of `tokens`.
    static func logits(_ decoder: LlamaDecoder, _ tokens: [Int32]) throws -> [[Float]] {
        let state = decoder.makeState(capacity: tokens.count)
        var rows: [[Float]] = []
        try decoder.evaluate(tokens, state: state, logitRows: 0..<tokens.count) { _, values in rows.append(Array(values)) }
        return rows
    }

    /// The largest difference between two logit rows relative to the larger row's largest |logit|,
    /// and whether every row picks the same top token.
    static func compare(_ a: [[Float]], _ b: [[Float]]) -> (relative: Float, sameTop: Bool) {
        var relative: Float = 0
        var sameTop = true
        for (x, y) in zip(a, b) {
            let scale = max(x.map(abs).max()!, y.map(abs).max()!)
            relative = max(relative, zip(x, y).map { abs($0 - $1) }.max()! / scale)
            sameTop = sameTop && x.indices.max { x[$0] < x[$1] } == y.indices.max { y[$0] < y[$1] }
        }
        return (relative, sameTop)
    }

    @Test func aHuggingFaceFolderTokenizesRunsAndCompressesAsTheGGUFFileDoes() throws {
        let gguf = ModelArchitectureTests.smolLM2
        let folder = TemporaryDirectory()
        let hf = folder.file("smollm2-hf")
        let script = Self.repository.appendingPathComponent("scripts/gguf_to_hf_llama.py").path
        let written = try runPythonScript(script, [gguf, hf])
        #expect(written.status == 0, "\(written.errors)")
        let location = try ModelLocation.resolve(hf)
        #expect(location.configPath == hf + "/config.json")

        let fromGGUF = try Self.decoder(weights: gguf, config: nil, activations: .float32)
        let fromFolder = try Self.decoder(weights: location.weightsPath, config: location.configPath, activations: .float32)
        #expect(!fromFolder.config.ggufNames && fromFolder.config == { var c = fromGGUF.config; c.ggufNames = false; return c }())
        let tokenizer = try #require(fromFolder.tokenizer)
        #expect(tokenizer.encodesLike(fromGGUF.tokenizer!) && tokenizer.chatTemplate == fromGGUF.tokenizer!.chatTemplate
                && tokenizer.endOfGeneration == fromGGUF.tokenizer!.endOfGeneration)
        let wikitext = try String(contentsOf: Self.repository.appendingPathComponent("data/wikitext-2/test.txt"), encoding: .utf8)
        let text = String(wikitext.prefix(3000)) + "<|im_start|>user\nDON'T stop at 12345!<|im_end|>\n"
        let tokens = tokenizer.encode(text, parseSpecial: true)
        #expect(tokens == fromGGUF.tokenizer!.encode(text, parseSpecial: true))

        // Both compute with f32 activations over the same values; only summation order differs.
        let window = Array(tokens.prefix(48))
        let dense = Self.compare(try Self.logits(fromGGUF, window), try Self.logits(fromFolder, window))
        #expect(dense.relative < 1e-4 && dense.sameTop, "\(dense)")

        // The same recipe compresses both to the same model (rows of q and k in another order),
        // compared with f32 activations: with int8 ones the GGUF file's output projection (its
        // Q8_0 token embedding, which the recipe leaves alone) runs on int8 codes and the folder's
        // (the same values in F32) in floats.
        let recipe = try Recipe.load(path: Self.repository.appendingPathComponent("recipes/smollm2-int8-channel.json").path)
        let compressedGGUF = folder.file("gguf-int8.safetensors"), compressedFolder = folder.file("hf-int8.safetensors")
        let fromGGUFSummary = try ModelCompressor.compress(model: try ModelLocation.resolve(gguf), recipe: recipe, output: compressedGGUF, threads: 2)
        let fromFolderSummary = try ModelCompressor.compress(model: location, recipe: recipe, output: compressedFolder, threads: 2)
        #expect(fromGGUFSummary.compressedBytesAfter == fromFolderSummary.compressedBytesAfter && fromFolderSummary.tensors.count == 210)
        let int8 = Self.compare(
            try Self.logits(try Self.decoder(weights: compressedGGUF, config: nil, activations: .float32), window),
            try Self.logits(try Self.decoder(weights: compressedFolder, config: location.configPath, activations: .float32), window))
        #expect(int8.relative < 1e-4 && int8.sameTop, "\(int8)")
    }
}

/// `tokenizer.json` files Shrink cannot run are refused naming the file and key path.
@Suite struct HuggingFaceTokenizerTests {
    static func metadata(_ tokenizer: String, config: String? = nil) throws -> GGUFMetadata? {
        let folder = TemporaryDirectory()
        try tokenizer.write(toFile: folder.file("tokenizer.json"), atomically: true, encoding: .utf8)
        if let config { try config.write(toFile: folder.file("tokenizer_config.json"), atomically: true, encoding: .utf8) }
        return try HuggingFaceTokenizer.metadata(folder: folder.path)
    }

    static let byteLevel = #"{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}"#

    @Test func aSmallByteLevelTokenizerReadsWithItsSpecialTokensAndBOSRule() throws {
        let json = #"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]},"#
            + #""added_tokens": [{"id": 3, "content": "<s>", "special": true}, {"id": 4, "content": "<tool>", "special": false}],"#
            + #""pre_tokenizer": \#(Self.byteLevel),"#
            + #""post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]}}"#
        let metadata = try #require(try Self.metadata(json, config: #"{"bos_token": {"content": "<s>"}, "eos_token": "<s>"}"#))
        let tokenizer = try BPETokenizer(metadata: metadata)
        #expect(tokenizer.tokens == ["a", "b", "ab", "<s>", "<tool>"] && tokenizer.bos == 3 && tokenizer.addsBOS && tokenizer.preTokenizer == .gpt2)
        #expect(tokenizer.encode("ab<s><tool>", parseSpecial: true) == [3, 2, 3, 4])
    }

    @Test func gguFTokenizersWriteAsTokenizerJSONAndReadBackAlike() throws {
        let metadata = GGUFMetadata(file: try GGUFFile(path: ModelArchitectureTests.smolLM2))
        let original = try BPETokenizer(metadata: metadata)
        let (tokenizer, config) = try HuggingFaceTokenizer.files(metadata: metadata)
        let folder = TemporaryDirectory()
        try tokenizer.serialized().write(toFile: folder.file("tokenizer.json"), atomically: true, encoding: .utf8)
        try config.serialized().write(toFile: folder.file("tokenizer_config.json"), atomically: true, encoding: .utf8)
        let read = try BPETokenizer(metadata: try #require(try HuggingFaceTokenizer.metadata(folder: folder.path)))
        #expect(read.encodesLike(original) && read.chatTemplate == original.chatTemplate && read.eos == original.eos)
        for pre in BPETokenizer.PreTokenizer.allCases {
            let name = ["gpt2": "gpt2", "digitsThenGPT2": "smollm", "llama3": "llama-bpe", "qwen2": "qwen2"][pre.rawValue]!
            let entries = metadata.entries.map { $0.key == "tokenizer.ggml.pre" ? (key: $0.key, value: GGUFValue.string(name)) : $0 }
            let (json, _) = try HuggingFaceTokenizer.files(metadata: GGUFMetadata(path: "test", entries: entries))
            try json.serialized().write(toFile: folder.file("tokenizer.json"), atomically: true, encoding: .utf8)
            #expect(try BPETokenizer(metadata: try #require(try HuggingFaceTokenizer.metadata(folder: folder.path))).preTokenizer == pre)
        }
    }

    @Test func whatShrinkCannotRunIsNamed() throws {
        func reason(_ json: String) -> String {
            do { _ = try Self.metadata(json); return "" } catch { return "\(error)" }
        }
        #expect(reason(#"{"model": {"type": "Unigram", "vocab": []}}"#).contains("model.type"))
        #expect(reason(#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 2}, "merges": []}, "pre_tokenizer": \#(Self.byteLevel)}"#)
            .contains("id 1 has no token"))
        #expect(reason(#"{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Whitespace"}}"#)
            .contains("pre_tokenizer"))
        #expect(reason(#"{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}, "pre_tokenizer": \#(Self.byteLevel)}"#)
            .contains("model.merges[0]"))
        #expect(reason("not json").contains("tokenizer.json"))
    }
}
