import Foundation
import ShrinkCore
import ShrinkIO

/// The BERT sentence encoder (Hugging Face names; all-MiniLM-L6-v2): configuration from
/// `config.json`, vocabulary from `vocab.txt` and pooling from the sentence-transformers files
/// in the model's folder.
///
/// Op types: `embedding` (words), `embedding.position`, `embedding.token_type`, `norm`,
/// `attention.q`, `attention.k`, `attention.v`, `attention.output`, `mlp.up`, `mlp.down`, and
/// `pooler` (present in checkpoints, not run by sentence embeddings), `buffer` (position ids).
public struct BertArchitecture: ModelArchitecture {
    public static let name = "bert"
    public static let opTypes = ["embedding", "embedding.position", "embedding.token_type", "norm", "attention.q", "attention.k",
                                 "attention.v", "attention.output", "mlp.up", "mlp.down", "pooler", "buffer"]
    /// The longest input the runtime takes, in tokens (also capped by the position table).
    public static let longestInput = 256

    public let config: BertConfig

    public init(configuration: ModelConfiguration) throws(ModelError) {
        guard case .huggingFace(let path, let root) = configuration else {
            throw .invalidFile(path: configuration.path, reason: "a BERT model is read from a Hugging Face config.json")
        }
        config = try BertConfig(json: root, path: path)
    }

    public init(config: BertConfig) { self.config = config }

    /// The per-layer linear ops (Hugging Face names), their op types, and whether their output
    /// and input widths are the intermediate size (else the hidden size).
    static let layerLinears: [(name: String, opType: String, wideOutput: Bool, wideInput: Bool)] = [
        ("attention.self.query", "attention.q", false, false),
        ("attention.self.key", "attention.k", false, false),
        ("attention.self.value", "attention.v", false, false),
        ("attention.output.dense", "attention.output", false, false),
        ("intermediate.dense", "mlp.up", true, false),
        ("output.dense", "mlp.down", false, true),
    ]

    public var tensorTable: [ArchitectureTensor] {
        let hidden = config.hiddenSize
        func norm(_ op: String, layer: Int?) -> [ArchitectureTensor] {
            [ArchitectureTensor(name: op + ".weight", shape: [hidden], opType: "norm", layer: layer),
             ArchitectureTensor(name: op + ".bias", shape: [hidden], opType: "norm", layer: layer)]
        }
        func linear(_ op: String, _ opType: String, out: Int, in inputs: Int, layer: Int?, required: Bool = true) -> [ArchitectureTensor] {
            [ArchitectureTensor(name: op + ".weight", shape: [out, inputs], opType: opType, layer: layer, required: required),
             ArchitectureTensor(name: op + ".bias", shape: [out], opType: opType, layer: layer, required: required)]
        }
        var table = [
            ArchitectureTensor(name: "embeddings.word_embeddings.weight", shape: [config.vocabularySize, hidden], opType: "embedding", layer: nil),
            ArchitectureTensor(name: "embeddings.position_embeddings.weight", shape: [config.maxPositions, hidden], opType: "embedding.position", layer: nil),
            ArchitectureTensor(name: "embeddings.token_type_embeddings.weight", shape: [config.typeVocabularySize, hidden],
                               opType: "embedding.token_type", layer: nil),
            ArchitectureTensor(name: "embeddings.position_ids", shape: [1, config.maxPositions], opType: "buffer", layer: nil, required: false),
        ] + norm("embeddings.LayerNorm", layer: nil)
        for layer in 0..<config.layers {
            let prefix = "encoder.layer.\(layer)."
            for op in Self.layerLinears {
                table += linear(prefix + op.name, op.opType, out: op.wideOutput ? config.intermediateSize : hidden,
                                in: op.wideInput ? config.intermediateSize : hidden, layer: layer)
            }
            table += norm(prefix + "attention.output.LayerNorm", layer: layer) + norm(prefix + "output.LayerNorm", layer: layer)
        }
        return table + linear("pooler.dense", "pooler", out: hidden, in: hidden, layer: nil, required: false)
    }

    public var observationPoints: [String] {
        (0..<config.layers).flatMap { layer in Self.layerLinears.map { "encoder.layer.\(layer).\($0.name)" } }
    }

    public func makeRuntime(files: ModelFiles, options: RuntimeOptions) throws -> any ModelRuntime {
        try SentenceEncoder(architecture: self, files: files, options: options)
    }

    /// `embed(input_ids: int32[?]) -> (embedding: float32[hidden])`: one sequence of token ids
    /// (at most `maxPositions` of them) to its pooled sentence embedding.
    public var functions: [FunctionDescriptor] {
        [FunctionDescriptor(name: "embed", inputs: [TensorSignature(name: "input_ids", scalarType: .int32, shape: [nil])],
                            outputs: [TensorSignature(name: "embedding", scalarType: .float32, shape: [config.hiddenSize])])]
    }
}

/// A runtime that turns text into sentence embeddings.
public protocol SentenceEmbeddingRuntime: ModelRuntime {
    /// Floats per embedding.
    var dimension: Int { get }
    /// The token ids of `text`, cut to the longest input the model takes.
    func tokenize(_ text: String) -> [Int32]
    /// The embeddings of token-id sequences (`dimension` floats each).
    /// - Throws: `ModelError.invalidInput` for an empty or over-long sequence or an id outside
    ///   the vocabulary (never for `tokenize`'s output).
    func embed(_ sequences: [[Int32]]) throws(ModelError) -> [[Float]]
    /// Writes the embeddings of `sequences` into `output` (`sequences.count × dimension` floats).
    func embed(_ sequences: [[Int32]], into output: UnsafeMutableBufferPointer<Float>) throws(ModelError)
}

/// A BERT encoder with its WordPiece tokenizer and pooling: the runtime `BertArchitecture` builds.
public final class SentenceEncoder: SentenceEmbeddingRuntime, @unchecked Sendable {
    public let encoder: BertEncoder
    public let tokenizer: WordPieceTokenizer

    /// Builds the encoder over `files.store` (checked against the architecture's tensor table);
    /// the vocabulary and pooling come from `files.folder`.
    /// - Throws: `ModelError` naming the tensor or file at fault.
    public let functions: [FunctionDescriptor]
    /// Whether this load mapped its panels from the specialization cache or wrote them there.
    public let specializationOutcome: WeightSource.SpecializationOutcome

    public init(architecture: BertArchitecture, files: ModelFiles, options: RuntimeOptions) throws {
        guard let folder = files.folder else {
            throw ModelError.invalidFile(path: files.store.path, reason: "a BERT model needs its folder (vocab.txt, pooling config)")
        }
        try architecture.validate(files.store)
        let source = WeightSource(store: files.store, options: options)
        encoder = try BertEncoder(config: architecture.config, pooling: try SentencePooling(folder: folder), source: source)
        source.saveSpecialization()
        specializationOutcome = source.specializationOutcome
        let vocabulary = folder + "/vocab.txt"
        tokenizer = try WordPieceTokenizer(vocabularyFile: vocabulary,
                                           maximumLength: min(BertArchitecture.longestInput, architecture.config.maxPositions))
        try encoder.check(tokenizer, vocabularyFile: vocabulary)
        functions = architecture.functions
    }

    /// Encoders keep no state between calls.
    public func makeFunctionState(capacity: Int) -> (any FunctionState)? { nil }

    public func call(_ name: String, _ inputs: [String: FunctionValue], state: (any FunctionState)?) throws(FunctionCallError) -> [String: FunctionValue] {
        let function = try functions.named(name)
        try function.validate(inputs)
        guard state == nil else { throw .wrongState(function: name, reason: "takes no state") }
        guard let ids = inputs["input_ids"]?.int32Values else { throw .missingInput(function: name, input: "input_ids") }
        do {
            return ["embedding": .float32(try encoder.embed([ids])[0], shape: [dimension])]
        } catch {
            throw .invalidValue(function: name, input: "input_ids", reason: error.inputReason)
        }
    }

    public var dimension: Int { encoder.config.hiddenSize }
    public var linearExecutions: [LinearLayerExecution] { encoder.linearExecutions }
    public func tokenize(_ text: String) -> [Int32] { tokenizer.encode(text) }
    public func embed(_ sequences: [[Int32]]) throws(ModelError) -> [[Float]] { try encoder.embed(sequences) }
    public func embed(_ sequences: [[Int32]], into output: UnsafeMutableBufferPointer<Float>) throws(ModelError) {
        try encoder.embed(sequences, into: output)
    }

    /// Runs the texts in batches of 32 through the encoder layer by layer (`BertEncoder.runLayerByLayer`),
    /// their hidden states in memory.
    public func run(calibrationTexts texts: [String], spillNextTo: String?, resume: CalibrationResumePoint?,
                    blockFinished: (Int) throws -> Void) throws {
        if resume != nil {
            throw ModelError.notRunnable(architecture: "bert", reason: "an encoder's calibration keeps its batches in memory and cannot resume")
        }
        let ids = texts.map(tokenize)
        try encoder.runLayerByLayer(stride(from: 0, to: ids.count, by: 32).map { Array(ids[$0..<min($0 + 32, ids.count)]) },
                                    layerFinished: blockFinished)
    }
}
