import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkModels
import ShrinkTestSupport

/// The architecture registry and its adapters: configurations decoded from `config.json` and
/// GGUF metadata, tensor tables that name every missing, unknown or misshapen tensor, runtimes
/// built from any `TensorStore`.
@Suite struct ModelArchitectureTests {
    static let smolLM2 = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"

    static func miniLM() throws -> (ModelFiles, any ModelArchitecture) {
        try ModelArchitectures.open(weightsPath: TestModels.miniLM + "/model.safetensors", configPath: TestModels.miniLM + "/config.json")
    }

    /// The MiniLM tensors in memory, with `change` applied to the list.
    static func miniLMInMemory(_ change: (inout [(name: String, tensor: StoredTensor)]) -> Void = { _ in }) throws -> InMemoryTensorStore {
        let file = try SafetensorsStore(path: TestModels.miniLM + "/model.safetensors")
        var tensors = file.names.map { (name: $0, tensor: file.tensor(named: $0)!) }
        change(&tensors)
        return InMemoryTensorStore(tensors: tensors)
    }

    @Test func theRegistryIsOneTable() {
        #expect(ModelArchitectures.all.map { $0.name } == ["bert", "llama", "qwen3"])
        #expect(ModelArchitectures.type(named: "qwen3") == Qwen3Architecture.self)
        #expect(ArchitectureOpTypes.all.isSuperset(of: ["attention.q", "attention.k", "attention.v", "attention.output", "mlp.up", "mlp.down",
                                                         "mlp.gate", "embedding", "output", "norm"]))
    }

    @Test func miniLMMatchesTheBertTable() throws {
        let (files, architecture) = try Self.miniLM()
        #expect(type(of: architecture).name == "bert")
        try architecture.validate(files.store)
        #expect(architecture.observationPoints.count == 36)
        let roles = architecture.roles(in: files.store)
        #expect(roles.count == files.store.names.count)
        let query = roles.first { $0.name == "encoder.layer.3.attention.self.query.weight" }
        #expect(query?.kind == "attention.q" && query?.opType == .linear && query?.layer == "encoder.layer.3")
        #expect(roles.first { $0.name == "encoder.layer.0.output.dense.weight" }?.kind == "mlp.down")
        #expect(roles.first { $0.name == "embeddings.word_embeddings.weight" }?.opType == .embedding)
        #expect(roles.first { $0.name == "embeddings.LayerNorm.weight" }?.opType == .norm)
    }

    @Test func missingUnknownAndMisshapenTensorsAreNamed() throws {
        let (_, architecture) = try Self.miniLM()
        let missing = try Self.miniLMInMemory { $0.removeAll { $0.name == "encoder.layer.2.attention.self.key.weight" } }
        #expect(throws: ModelError.invalidWeight(tensor: "encoder.layer.2.attention.self.key.weight", reason: "missing from <memory>")) {
            try architecture.validate(missing)
        }
        let unknown = try Self.miniLMInMemory { tensors in
            tensors.append(("encoder.layer.6.attention.self.key.weight", tensors[0].tensor))
        }
        #expect(throws: ModelError.invalidWeight(tensor: "encoder.layer.6.attention.self.key.weight",
                                                 reason: "in <memory> is not a tensor of a bert model with this configuration")) {
            try architecture.validate(unknown)
        }
        let misshapen = try Self.miniLMInMemory { tensors in
            let index = tensors.firstIndex { $0.name == "encoder.layer.1.intermediate.dense.weight" }!
            let other = tensors.first { $0.name == "encoder.layer.1.attention.self.query.weight" }!.tensor
            tensors[index].tensor = other
        }
        #expect(throws: ModelError.invalidWeight(tensor: "encoder.layer.1.intermediate.dense.weight",
                                                 reason: "has shape [384, 384] in <memory>, expected [1536, 384]")) {
            try architecture.validate(misshapen)
        }
        // The optional pooler and position ids may be absent.
        try architecture.validate(try Self.miniLMInMemory { $0.removeAll { $0.name.hasPrefix("pooler.") || $0.name.hasSuffix("position_ids") } })
    }

    @Test func aRuntimeBuiltFromMemoryEmbedsAsOneBuiltFromTheFile() throws {
        let (files, architecture) = try Self.miniLM()
        let memory = ModelFiles(store: try Self.miniLMInMemory(), configuration: files.configuration, folder: files.folder)
        let options = RuntimeOptions(threads: 2)
        let fromFile = try #require(try architecture.makeRuntime(files: files, options: options) as? any SentenceEmbeddingRuntime)
        let fromMemory = try #require(try architecture.makeRuntime(files: memory, options: options) as? any SentenceEmbeddingRuntime)
        let ids = ["A man is playing a guitar.", "Shrink runs any store."].map(fromFile.tokenize)
        #expect(try fromFile.embed(ids) == fromMemory.embed(ids))
    }

    /// Tensors the compressor encodes in memory, in place of the stored ones, embed as the
    /// container it writes does; a replacement the store lacks, or of another shape, is refused
    /// naming it.
    @Test func tensorsReplacedInMemoryRunAsTheWrittenContainer() throws {
        let folder = TemporaryDirectory()
        let query = "encoder.layer.0.attention.self.query.weight"
        let recipe = try Recipe.parse(Data(#"{"op_name": {"encoder\\.layer\\.[01]\\.attention\\.self\\.query": {"quantize": {"bits": 4, "granularity": "per_block", "block_size": 32}}}}"#.utf8),
                                      file: "r.json")
        let location = try ModelLocation.resolve(TestModels.miniLM)
        let encoded = try ModelCompressor.encode(model: location, recipe: recipe, threads: 2)
        #expect(encoded.tensors.map(\.name).sorted() == [query, "encoder.layer.1.attention.self.query.weight"])
        _ = try ModelCompressor.compress(model: location, recipe: recipe, output: folder.file("c.safetensors"), threads: 2)
        let (files, architecture) = try Self.miniLM()
        let replaced = try files.replacing(encoded.tensors)
        guard case .encoded(let tensor)? = replaced.store.tensor(named: query) else { Issue.record("\(query) is not the encoded replacement"); return }
        let original = try #require(encoded.tensors.first { $0.name == query })
        #expect(tensor.encoding == original.encoding && tensor.decode() == original.decode())
        let options = RuntimeOptions(threads: 2)
        let (written, _) = try ModelArchitectures.open(weightsPath: folder.file("c.safetensors"), configPath: TestModels.miniLM + "/config.json")
        let fromMemory = try #require(try architecture.makeRuntime(files: replaced, options: options) as? any SentenceEmbeddingRuntime)
        let fromFile = try #require(try architecture.makeRuntime(files: written, options: options) as? any SentenceEmbeddingRuntime)
        let stored = try #require(try architecture.makeRuntime(files: files, options: options) as? any SentenceEmbeddingRuntime)
        let ids = ["A man is playing a guitar.", "Shrink runs any store."].map(fromFile.tokenize)
        #expect(try fromMemory.embed(ids) == fromFile.embed(ids) && fromMemory.embed(ids) != stored.embed(ids))

        let renamed = try EncodedTensor(name: "encoder.layer.9.nope.weight", shape: tensor.shape, sourceDType: tensor.sourceDType,
                                        encoding: tensor.encoding, parts: tensor.parts)
        #expect(throws: ShrinkIOError.tensorNotFound(path: files.store.path, tensor: "encoder.layer.9.nope.weight")) { try files.replacing([renamed]) }
        let intermediate = "encoder.layer.0.intermediate.dense.weight"
        let misplaced = try EncodedTensor(name: intermediate, shape: tensor.shape, sourceDType: tensor.sourceDType, encoding: tensor.encoding, parts: tensor.parts)
        #expect(throws: ShrinkIOError.invalidShape(path: files.store.path, tensor: intermediate,
                                                   reason: "a replacement of shape [384, 384] for shape [1536, 384]")) { try files.replacing([misplaced]) }
    }

    @Test func smolLM2ReadsAsALlamaFromItsGGUFMetadata() throws {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: Self.smolLM2, configPath: nil)
        let llama = try #require(architecture as? LlamaArchitecture)
        let config = llama.config
        let sizes: [Int] = [config.hiddenSize, config.layers, config.heads, config.keyValueHeads, config.headDimension, config.intermediateSize,
                            config.vocabularySize, config.contextLength]
        #expect(sizes == [576, 30, 9, 3, 64, 1536, 49152, 8192])
        #expect(config.ropeTheta == 100_000 && config.rmsNormEpsilon == Float(1e-5))
        try llama.validate(files.store)
        #expect(llama.observationPoints.count == 30 * 7)
        let roles = llama.roles(in: files.store)
        #expect(roles.first { $0.name == "blk.4.attn_k.weight" }?.kind == "attention.k")
        #expect(roles.first { $0.name == "blk.4.ffn_gate.weight" }?.kind == "mlp.gate")
        #expect(roles.first { $0.name == "token_embd.weight" }?.opType == .embedding)
        #expect(try llama.makeRuntime(files: files, options: RuntimeOptions()) is LlamaDecoder)
    }

    @Test func qwen3NamesItsPerHeadNormsFromAHuggingFaceConfig() throws {
        let json = #"{"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,"#
            + #" "head_dim": 32, "intermediate_size": 96, "vocab_size": 100, "rms_norm_eps": 1e-6, "rope_theta": 1000000}"#
        let configuration = ModelConfiguration.huggingFace(path: "config.json", try JSONValue.parse(json))
        let qwen3 = try #require(try ModelArchitectures.architecture(for: configuration) as? Qwen3Architecture)
        let table = Dictionary(uniqueKeysWithValues: qwen3.tensorTable.map { ($0.name, $0) })
        #expect(table["model.layers.1.self_attn.q_norm.weight"]?.shape == [32])
        #expect(table["model.layers.1.self_attn.q_proj.weight"]?.shape == [128, 64])
        #expect(table["model.layers.1.self_attn.k_proj.weight"]?.shape == [64, 64])
        #expect(table["model.layers.0.mlp.down_proj.weight"]?.shape == [64, 96])
        #expect(table["lm_head.weight"]?.required == false)
        let llama = try LlamaArchitecture(configuration: configuration)
        #expect(llama.tensorTable.count == qwen3.tensorTable.count - 4)
        let bad = ModelConfiguration.huggingFace(path: "config.json", try JSONValue.parse(#"{"model_type": "qwen3", "hidden_size": 64}"#))
        #expect(throws: ModelError.invalidFile(path: "config.json", reason: "num_hidden_layers is missing")) {
            try ModelArchitectures.architecture(for: bad)
        }
        let unknown = ModelConfiguration.huggingFace(path: "config.json", try JSONValue.parse(#"{"model_type": "gpt2"}"#))
        #expect(throws: ModelError.invalidFile(path: "config.json", reason: "architecture 'gpt2' is not supported (expected one of bert, llama, qwen3)")) {
            try ModelArchitectures.architecture(for: unknown)
        }
    }
}
