import ShrinkCore
import ShrinkIO

/// The hyper-parameters of a Llama-family decoder (Llama, SmolLM, Qwen3), from GGUF metadata
/// (`<arch>.block_count`, …) or a Hugging Face `config.json` (`num_hidden_layers`, …).
public struct LlamaConfig: Sendable, Equatable {
    public var hiddenSize: Int
    public var layers: Int
    public var heads: Int
    public var keyValueHeads: Int
    /// Floats per attention head (`<arch>.attention.key_length`, `head_dim`; default hidden / heads).
    public var headDimension: Int
    public var intermediateSize: Int
    public var vocabularySize: Int
    public var contextLength: Int
    public var rmsNormEpsilon: Float
    public var ropeTheta: Float
    /// Whether tensors carry GGUF names (`blk.0.attn_q.weight`) or Hugging Face ones
    /// (`model.layers.0.self_attn.q_proj.weight`).
    public var ggufNames: Bool

    /// Decodes the configuration of architecture `architecture` (`llama`, `qwen3`).
    /// - Throws: `ModelError.invalidFile` naming the file and the key that is missing or out of range.
    public init(configuration: ModelConfiguration, architecture: String) throws(ModelError) {
        let reader: ConfigNumbers
        switch configuration {
        case .gguf(let metadata):
            reader = ConfigNumbers(path: metadata.path, prefix: architecture + ".") { key in
                metadata.value(key).map { ($0.integerValue, $0.doubleValue, $0.summary) }
            }
        case .huggingFace(let path, let root):
            let pairs = root.objectValue ?? []
            reader = ConfigNumbers(path: path, prefix: "") { key in
                guard let value = pairs.first(where: { $0.key == key })?.value, value != .null else { return nil }
                return (value.integerValue, value.doubleValue, value.kindName)
            }
        }
        let gguf = reader.prefix != ""
        ggufNames = gguf
        func key(_ ggufKey: String, _ huggingFaceKey: String) -> String { gguf ? ggufKey : huggingFaceKey }
        hiddenSize = try reader.integer(key("embedding_length", "hidden_size"))
        layers = try reader.integer(key("block_count", "num_hidden_layers"))
        heads = try reader.integer(key("attention.head_count", "num_attention_heads"))
        keyValueHeads = try reader.integer(key("attention.head_count_kv", "num_key_value_heads"), default: heads)
        headDimension = try reader.integer(key("attention.key_length", "head_dim"), default: hiddenSize / heads)
        intermediateSize = try reader.integer(key("feed_forward_length", "intermediate_size"))
        var counted: Int?
        if case .gguf(let metadata) = configuration { counted = metadata.value("tokenizer.ggml.tokens")?.arrayValue?.count }
        vocabularySize = try reader.integer("vocab_size", default: counted)
        contextLength = try reader.integer(key("context_length", "max_position_embeddings"), default: 2048)
        rmsNormEpsilon = try reader.real(key("attention.layer_norm_rms_epsilon", "rms_norm_eps"), default: gguf ? 1e-5 : 1e-6)
        ropeTheta = try reader.real(key("rope.freq_base", "rope_theta"), default: 10000)
        guard heads % keyValueHeads == 0 else {
            throw .invalidFile(path: configuration.path, reason: "\(heads) attention heads are not a multiple of \(keyValueHeads) key/value heads")
        }
    }
}

/// Positive numbers read from a configuration by key (`prefix` + key), with defaults.
struct ConfigNumbers {
    let path: String
    let prefix: String
    /// The value of a full key as (integer, real, a description for errors), nil when absent.
    let lookup: (String) -> (integer: Int?, real: Double?, shown: String)?

    func integer(_ key: String, default fallback: Int? = nil) throws(ModelError) -> Int {
        guard let value = lookup(prefix + key) else {
            guard let fallback else { throw .invalidFile(path: path, reason: "\(prefix + key) is missing") }
            return fallback
        }
        guard let number = value.integer, number > 0 else {
            throw .invalidFile(path: path, reason: "\(prefix + key) must be a positive integer, found \(value.shown)")
        }
        return number
    }

    func real(_ key: String, default fallback: Double) throws(ModelError) -> Float {
        guard let value = lookup(prefix + key) else { return Float(fallback) }
        guard let number = value.real, number > 0, number.isFinite else {
            throw .invalidFile(path: path, reason: "\(prefix + key) must be a positive number, found \(value.shown)")
        }
        return Float(number)
    }
}

/// Tensor naming and table of the Llama family; `perHeadNorms` adds Qwen3's RMSNorm of each
/// query and key head.
struct LlamaTensorTable {
    let config: LlamaConfig
    let perHeadNorms: Bool

    static let opTypes = ["embedding", "output", "norm", "norm.attention_head", "attention.q", "attention.k", "attention.v",
                          "attention.output", "mlp.gate", "mlp.up", "mlp.down", "buffer"]

    /// (GGUF name, Hugging Face name) of each per-layer op.
    static let layerOps: [(gguf: String, huggingFace: String)] = [
        ("attn_norm", "input_layernorm"), ("attn_q", "self_attn.q_proj"), ("attn_k", "self_attn.k_proj"), ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"), ("ffn_norm", "post_attention_layernorm"), ("ffn_gate", "mlp.gate_proj"),
        ("ffn_up", "mlp.up_proj"), ("ffn_down", "mlp.down_proj"), ("attn_q_norm", "self_attn.q_norm"), ("attn_k_norm", "self_attn.k_norm"),
    ]

    func op(_ layer: Int, _ index: Int) -> String {
        let names = Self.layerOps[index]
        return config.ggufNames ? "blk.\(layer).\(names.gguf)" : "model.layers.\(layer).\(names.huggingFace)"
    }

    var linearOpIndices: [Int] { [1, 2, 3, 4, 6, 7, 8] }

    /// The token embedding, final norm and output projection tensors.
    var globalNames: (embedding: String, norm: String, output: String) {
        config.ggufNames ? ("token_embd.weight", "output_norm.weight", "output.weight")
                         : ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight")
    }

    var tensors: [ArchitectureTensor] {
        let c = config
        let hidden = c.hiddenSize, queries = c.heads * c.headDimension, keys = c.keyValueHeads * c.headDimension
        let global = globalNames
        var table = [ArchitectureTensor(name: global.embedding, shape: [c.vocabularySize, hidden], opType: "embedding", layer: nil)]
        let shapes: [(shape: [Int], opType: String)] = [
            ([hidden], "norm"), ([queries, hidden], "attention.q"), ([keys, hidden], "attention.k"), ([keys, hidden], "attention.v"),
            ([hidden, queries], "attention.output"), ([hidden], "norm"), ([c.intermediateSize, hidden], "mlp.gate"),
            ([c.intermediateSize, hidden], "mlp.up"), ([hidden, c.intermediateSize], "mlp.down"),
            ([c.headDimension], "norm.attention_head"), ([c.headDimension], "norm.attention_head"),
        ]
        for layer in 0..<c.layers {
            for (index, entry) in shapes.enumerated() where index < 9 || perHeadNorms {
                table.append(ArchitectureTensor(name: op(layer, index) + ".weight", shape: entry.shape, opType: entry.opType, layer: layer))
            }
        }
        table.append(ArchitectureTensor(name: global.norm, shape: [hidden], opType: "norm", layer: nil))
        table.append(ArchitectureTensor(name: global.output, shape: [c.vocabularySize, hidden], opType: "output", layer: nil, required: false))
        if c.ggufNames {
            table.append(ArchitectureTensor(name: "rope_freqs.weight", shape: [c.headDimension / 2], opType: "buffer", layer: nil, required: false))
        }
        return table
    }

    var observationPoints: [String] {
        (0..<config.layers).flatMap { layer in linearOpIndices.map { op(layer, $0) } }
    }

    /// Per layer, the attention norm read by q/k/v and the feed-forward norm read by gate/up;
    /// the attention output and down projections write.
    var residualStream: ResidualStream {
        let layers = 0..<config.layers
        func weight(_ layer: Int, _ index: Int) -> String { op(layer, index) + ".weight" }
        return ResidualStream(
            width: config.hiddenSize,
            readers: layers.flatMap { layer in
                [ResidualStream.Reader(norm: weight(layer, 0), linears: [1, 2, 3].map { weight(layer, $0) }),
                 ResidualStream.Reader(norm: weight(layer, 5), linears: [6, 7].map { weight(layer, $0) })]
            },
            writers: layers.flatMap { layer in [weight(layer, 4), weight(layer, 8)] })
    }
}

/// The Llama family: one layout, named per architecture; adapters differ in their registry name
/// and in whether each query and key head has its own RMSNorm.
public protocol LlamaFamilyArchitecture: ModelArchitecture {
    /// Qwen3's RMSNorm of each query and key head before rotary positions.
    static var perHeadNorms: Bool { get }
    var config: LlamaConfig { get }
}

extension LlamaFamilyArchitecture {
    public static var opTypes: [String] { LlamaTensorTable.opTypes }
    var table: LlamaTensorTable { LlamaTensorTable(config: config, perHeadNorms: Self.perHeadNorms) }
    public var tensorTable: [ArchitectureTensor] { table.tensors }
    public var observationPoints: [String] { table.observationPoints }
    public var residualStream: ResidualStream? { table.residualStream }
    public var functions: [FunctionDescriptor] { LlamaDecoder.functions(config) }

    public func makeRuntime(files: ModelFiles, options: RuntimeOptions) throws -> any ModelRuntime {
        try makeDecoder(files: files, options: options)
    }

    /// GGUF names mapped to Hugging Face ones (`blk.3.attn_q.weight` → `model.layers.3.self_attn.q_proj.weight`,
    /// `token_embd` → `model.embed_tokens`, `output_norm` → `model.norm`, `output` → `lm_head`).
    /// A GGUF Llama file's query and key rows are permuted so that ggml rotates adjacent pairs
    /// (llama.cpp's converter); `rowOrder` undoes that: within each head of `D` rows, checkpoint row
    /// `s · D/2 + i` is GGUF row `2i + s` (Qwen3 files rotate halves and keep their rows).
    public func huggingFaceTensor(_ name: String) -> HuggingFaceTensor? {
        let c = config
        guard c.ggufNames else { return HuggingFaceTensor(name: name) }
        let globals = ["token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"]
        let parts = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if parts.count == 2, let global = globals[parts[0]] { return HuggingFaceTensor(name: global + "." + parts[1]) }
        guard parts.count == 4, parts[0] == "blk", let layer = Int(parts[1]),
              let index = LlamaTensorTable.layerOps.firstIndex(where: { $0.gguf == parts[2] }) else { return nil }
        let renamed = "model.layers.\(layer).\(LlamaTensorTable.layerOps[index].huggingFace).\(parts[3])"
        guard !Self.perHeadNorms, index == 1 || index == 2, parts[3] == "weight" else { return HuggingFaceTensor(name: renamed) }
        let heads = index == 1 ? c.heads : c.keyValueHeads, half = c.headDimension / 2
        let order = (0..<heads).flatMap { head in
            (0..<2).flatMap { s in (0..<half).map { i in head * c.headDimension + 2 * i + s } }
        }
        return HuggingFaceTensor(name: renamed, rowOrder: order)
    }

    /// A Hugging Face Llama/Qwen3 `config.json` with this model's hyper-parameters (the
    /// configuration's own object when it was read from one); embeddings tied unless
    /// `tensorNames` holds an output projection.
    public func huggingFaceConfig(_ configuration: ModelConfiguration, tensorNames: Set<String>) -> [(key: String, value: JSONValue)] {
        if case .huggingFace(_, let root) = configuration { return root.objectValue ?? [] }
        let c = config
        func number(_ value: some BinaryInteger) -> JSONValue { .number(String(value)) }
        let className = Self.name == "qwen3" ? "Qwen3ForCausalLM" : "LlamaForCausalLM"
        return [
            ("architectures", .array([.string(className)])), ("model_type", .string(Self.name)),
            ("hidden_size", number(c.hiddenSize)), ("intermediate_size", number(c.intermediateSize)),
            ("num_hidden_layers", number(c.layers)), ("num_attention_heads", number(c.heads)),
            ("num_key_value_heads", number(c.keyValueHeads)), ("head_dim", number(c.headDimension)),
            ("vocab_size", number(c.vocabularySize)), ("max_position_embeddings", number(c.contextLength)),
            ("rms_norm_eps", .number("\(c.rmsNormEpsilon)")), ("rope_theta", .number("\(c.ropeTheta)")),
            ("hidden_act", .string("silu")), ("attention_bias", .bool(false)), ("mlp_bias", .bool(false)),
            ("tie_word_embeddings", .bool(!tensorNames.contains(table.globalNames.output))),
        ]
    }

    /// The decoder over `files`, its tokenizer from the GGUF metadata, or from the
    /// `tokenizer.json` in the folder of a Hugging Face checkpoint (`HuggingFaceTokenizer`; none
    /// when the folder has none).
    public func makeDecoder(files: ModelFiles, options: RuntimeOptions) throws -> LlamaDecoder {
        try validate(files.store)
        var tokenizer: BPETokenizer?
        switch files.configuration {
        case .gguf(let metadata): tokenizer = try BPETokenizer(metadata: metadata)
        case .huggingFace:
            if let folder = files.folder, let metadata = try HuggingFaceTokenizer.metadata(folder: folder) {
                tokenizer = try BPETokenizer(metadata: metadata)
            }
        }
        let source = WeightSource(store: files.store, options: options)
        let decoder = try LlamaDecoder(config: config, architecture: Self.name, perHeadNorms: Self.perHeadNorms, source: source, tokenizer: tokenizer)
        source.saveSpecialization()
        decoder.specializationOutcome = source.specializationOutcome
        return decoder
    }
}

/// Llama (and SmolLM2, which is a Llama): RMSNorm, rotary positions, grouped-query attention,
/// SwiGLU feed-forward, output projection tied to the token embedding when `output.weight` is absent.
public struct LlamaArchitecture: LlamaFamilyArchitecture {
    public static let name = "llama"
    public static let perHeadNorms = false
    public let config: LlamaConfig

    public init(configuration: ModelConfiguration) throws(ModelError) {
        config = try LlamaConfig(configuration: configuration, architecture: Self.name)
    }
}

/// Qwen3: the Llama layout plus an RMSNorm over each query and key head before rotary positions.
public struct Qwen3Architecture: LlamaFamilyArchitecture {
    public static let name = "qwen3"
    public static let perHeadNorms = true
    public let config: LlamaConfig

    public init(configuration: ModelConfiguration) throws(ModelError) {
        config = try LlamaConfig(configuration: configuration, architecture: Self.name)
    }
}
