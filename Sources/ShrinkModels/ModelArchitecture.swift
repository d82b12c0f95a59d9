import Foundation
import ShrinkCore
import ShrinkIO
import ShrinkKernels

/// Where an architecture reads its hyper-parameters: a Hugging Face `config.json` or a GGUF
/// file's metadata.
public enum ModelConfiguration: Sendable {
    case huggingFace(path: String, JSONValue)
    /// GGUF metadata: from a `.gguf` file, or carried by a compressed container made from one.
    case gguf(GGUFMetadata)

    /// The file the configuration came from (for error messages).
    public var path: String {
        switch self {
        case .huggingFace(let path, _): path
        case .gguf(let metadata): metadata.path
        }
    }

    /// The architecture it names: `model_type`, or GGUF's `general.architecture`.
    public var architectureName: String? {
        switch self {
        case .huggingFace(_, let root): root.objectValue?.first { $0.key == "model_type" }?.value.stringValue
        case .gguf(let metadata): metadata.value("general.architecture")?.stringValue
        }
    }

    /// Reads `config.json` at `path`.
    public static func huggingFace(path: String) throws(ModelError) -> ModelConfiguration {
        .huggingFace(path: path, try jsonObject(path: path))
    }

    /// The JSON object in the file at `path`.
    /// - Throws: `ModelError.invalidFile` when it cannot be read, is not JSON or not an object.
    static func jsonObject(path: String) throws(ModelError) -> JSONValue {
        guard let data = FileManager.default.contents(atPath: path) else { throw .invalidFile(path: path, reason: "cannot read") }
        let root: JSONValue
        do {
            root = try data.withUnsafeBytes { bytes in Result { () throws(JSONParseError) in try JSONValue.parse(bytes) } }.get()
        } catch {
            throw .invalidFile(path: path, reason: "invalid JSON: \(error)")
        }
        guard root.objectValue != nil else { throw .invalidFile(path: path, reason: "expected a JSON object") }
        return root
    }
}

/// One tensor an architecture reads (or knows and leaves alone).
public struct ArchitectureTensor: Sendable, Equatable {
    /// The name as stored.
    public let name: String
    /// The expected logical shape, row-major (a linear weight is `[out, in]`).
    public let shape: [Int]
    /// The op type recipes name it by (`attention.q`, `mlp.down`, `embedding`, `norm`, `output`…).
    public let opType: String
    /// The block index, nil outside the repeated blocks.
    public let layer: Int?
    /// Whether a model must have it (biases of some variants, a pooler the runtime skips, a tied
    /// output projection are optional).
    public let required: Bool

    public init(name: String, shape: [Int], opType: String, layer: Int?, required: Bool = true) {
        self.name = name
        self.shape = shape
        self.opType = opType
        self.layer = layer
        self.required = required
    }
}

/// How a runtime built from an architecture computes.
public struct RuntimeOptions: Sendable {
    /// Threads each layer splits its work over.
    public var threads: Int
    /// The precision compressed linear layers compute in.
    public var activations: ActivationPrecision
    public var kernels: KernelVariant
    public var integerKernels: IntegerKernelVariant
    /// Sees the inputs of every linear layer the runtime runs (calibration).
    public var observer: (any LinearInputObserver)?
    /// Where the repacked integer panels of int8 layers are kept between loads (nil: repacked every load).
    public var specialization: SpecializationCache?

    public init(threads: Int = ProcessInfo.processInfo.activeProcessorCount, activations: ActivationPrecision = .int8,
                kernels: KernelVariant = .best, integerKernels: IntegerKernelVariant = .best, observer: (any LinearInputObserver)? = nil,
                specialization: SpecializationCache? = nil) {
        self.threads = threads
        self.activations = activations
        self.kernels = kernels
        self.integerKernels = integerKernels
        self.observer = observer
        self.specialization = specialization
    }
}

/// The files a model is made of: its tensors, its configuration, and the folder that holds
/// side files (a vocabulary, a pooling config) when there is one.
public struct ModelFiles: Sendable {
    public let store: any TensorStore
    public let configuration: ModelConfiguration
    public let folder: String?

    public init(store: any TensorStore, configuration: ModelConfiguration, folder: String?) {
        self.store = store
        self.configuration = configuration
        self.folder = folder
    }

    /// The same files with `tensors` in place of the stored ones (itself when there are none).
    /// - Throws: `ShrinkIOError` naming a tensor the store lacks or whose shape differs.
    public func replacing(_ tensors: [EncodedTensor]) throws(ShrinkIOError) -> ModelFiles {
        tensors.isEmpty ? self : ModelFiles(store: try OverlayTensorStore(base: store, replacing: tensors), configuration: configuration, folder: folder)
    }
}

/// A model ready to run, whatever its architecture. Capabilities are protocols that refine this
/// one (`SentenceEmbeddingRuntime`); a task asks for the one it needs.
public protocol ModelRuntime: AnyObject, Sendable {
    /// Every linear layer, in order, with the kernel it runs and how exactly that computes its
    /// stored weight.
    var linearExecutions: [LinearLayerExecution] { get }
    /// Runs every text through the model once, what calibration observes, one block at a time:
    /// all texts through block 0 (and the embeddings before it), then all through block 1, and so
    /// on, calling `blockFinished(b)` once no later work reaches an op of block `b`. Every op sees
    /// the inputs a text-by-text run would give it, bit for bit; between blocks the texts' hidden
    /// states are kept (tokens × hidden floats), by decoders in a spill file next to `spillNextTo`
    /// when given (encoders, run in batches of 32 texts, keep theirs in memory). Texts that the
    /// tokenizer makes longer than the model takes are cut to its longest input. With `resume`,
    /// a decoder keeps its hidden states in that checkpoint's file instead, synchronized before
    /// each `blockFinished`, and starts at its first block (earlier blocks do not run again).
    /// - Throws: `ModelError.notRunnable` for `resume` on a runtime that cannot resume (encoders).
    func run(calibrationTexts texts: [String], spillNextTo: String?, resume: CalibrationResumePoint?, blockFinished: (Int) throws -> Void) throws
    /// The entry points `call` runs, as the architecture's `functions` describes them.
    var functions: [FunctionDescriptor] { get }
    /// A state for the stateful functions (a decoder's key/value cache of `capacity` positions,
    /// capped at the model's context), nil when the runtime has none.
    func makeFunctionState(capacity: Int) -> (any FunctionState)?
    /// Runs function `name` on `inputs` (by input name), with `state` for a stateful function
    /// (which it advances). Safe to call from several threads at once with distinct states.
    /// - Throws: `FunctionCallError` naming the function and the input at fault; nothing runs then.
    func call(_ name: String, _ inputs: [String: FunctionValue], state: (any FunctionState)?) throws(FunctionCallError) -> [String: FunctionValue]
}

/// An architecture: one adapter that reads its configuration, names every tensor it expects with
/// its op type, builds its runtime over any `TensorStore`, and says where calibration observes.
/// Nothing else in the pipeline names a model.
public protocol ModelArchitecture: Sendable {
    /// The registry key (`bert`, `llama`, `qwen3`).
    static var name: String { get }
    /// Every op type its tensors can have (what recipes may name under `op_type`).
    static var opTypes: [String] { get }
    /// Decodes and validates the hyper-parameters.
    /// - Throws: `ModelError.invalidFile` naming the file and key.
    init(configuration: ModelConfiguration) throws(ModelError)
    /// Every tensor the architecture knows, in a stable order.
    var tensorTable: [ArchitectureTensor] { get }
    /// The linear ops (names without `.weight`) whose inputs calibration records.
    var observationPoints: [String] { get }
    /// Builds the runtime over `files` (checked against `tensorTable` first).
    func makeRuntime(files: ModelFiles, options: RuntimeOptions) throws -> any ModelRuntime
    /// The functions its runtimes expose (`ModelRuntime.call`), known from the configuration alone.
    var functions: [FunctionDescriptor] { get }
    /// The residual stream's readers and writers when a rotation of it can be folded into the
    /// weights (a pre-RMSNorm transformer whose runtime applies `FoldedResidualRotation`), else nil.
    var residualStream: ResidualStream? { get }
    /// Tensor `name` as a Hugging Face checkpoint of this architecture names and lays it out, nil
    /// for a tensor such checkpoints do not have.
    func huggingFaceTensor(_ name: String) -> HuggingFaceTensor?
    /// The `config.json` of a Hugging Face checkpoint of this model (whose tensors are
    /// `tensorNames`, in this model's naming), made from `configuration`.
    func huggingFaceConfig(_ configuration: ModelConfiguration, tensorNames: Set<String>) -> [(key: String, value: JSONValue)]
}

/// Where a tensor goes in a Hugging Face checkpoint: its name there and, when its rows are in
/// another order there, `rowOrder` (row `i` of the checkpoint's tensor is row `rowOrder[i]` here).
public struct HuggingFaceTensor: Sendable, Equatable {
    public let name: String
    public let rowOrder: [Int]?

    public init(name: String, rowOrder: [Int]? = nil) {
        self.name = name
        self.rowOrder = rowOrder
    }
}

extension ModelArchitecture {
    public var residualStream: ResidualStream? { nil }

    /// Hugging Face names, unchanged rows (configurations read from a `config.json` are already
    /// in that convention).
    public func huggingFaceTensor(_ name: String) -> HuggingFaceTensor? { HuggingFaceTensor(name: name) }

    /// The configuration's own `config.json` object; empty for a GGUF configuration.
    public func huggingFaceConfig(_ configuration: ModelConfiguration, tensorNames: Set<String>) -> [(key: String, value: JSONValue)] {
        guard case .huggingFace(_, let root) = configuration else { return [] }
        return root.objectValue ?? []
    }

    /// Checks `store` against the tensor table: every required tensor present, none unknown,
    /// every shape as expected.
    /// - Throws: `ModelError.invalidWeight` naming the first tensor at fault and the file.
    public func validate(_ store: any TensorStore) throws(ModelError) {
        let table = Dictionary(uniqueKeysWithValues: tensorTable.map { ($0.name, $0) })
        for name in store.names where table[name] == nil {
            throw .invalidWeight(tensor: name, reason: "in \(store.path) is not a tensor of a \(Self.name) model with this configuration")
        }
        // Shapes from the descriptors: nothing is decoded to check them.
        let stored = Dictionary(store.descriptors.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for expected in tensorTable {
            guard let tensor = stored[expected.name] else {
                if expected.required { throw .invalidWeight(tensor: expected.name, reason: "missing from \(store.path)") }
                continue
            }
            guard tensor.shape == expected.shape else {
                throw .invalidWeight(tensor: expected.name,
                                     reason: "has shape \(Shape.describe(tensor.shape)) in \(store.path), expected \(Shape.describe(expected.shape))")
            }
        }
    }

    /// The role of every tensor of the table that `store` holds, for recipes and `inspect`.
    public func roles(in store: any TensorStore) -> [TensorRole] {
        let table = tensorTable
        // An op's coarse type follows its weight (a linear layer's bias is linear too).
        var weightShapes: [String: [Int]] = [:]
        for entry in table where entry.name.hasSuffix(".weight") { weightShapes[ModelAnatomy.opName(of: entry.name)] = entry.shape }
        let present = Set(store.names)
        return table.filter { present.contains($0.name) }.map { entry in
            let op = ModelAnatomy.opName(of: entry.name)
            return TensorRole(name: entry.name, op: op, opType: ArchitectureOpTypes.coarse(entry.opType, shape: weightShapes[op] ?? entry.shape),
                              layer: ModelAnatomy.layer(of: op), kind: entry.opType)
        }
    }
}

/// The op types architectures name their tensors by, and the coarse `OpType` each falls under.
public enum ArchitectureOpTypes {
    /// Every op type an architecture in the registry uses.
    public static var all: Set<String> {
        Set(ModelArchitectures.all.flatMap { $0.opTypes })
    }

    /// `embedding` and `output` are row tables, norms are norms, everything else with a 2-D
    /// weight is linear.
    static func coarse(_ opType: String, shape: [Int]) -> OpType {
        if opType == "embedding" || opType.hasPrefix("embedding.") { return .embedding }
        if opType.hasSuffix("norm") || opType.hasPrefix("norm") { return .norm }
        if opType == "buffer" { return .buffer }
        return shape.count == 2 ? .linear : .other
    }
}

/// The registry of architectures: one literal table.
public enum ModelArchitectures {
    public static let all: [any ModelArchitecture.Type] = [BertArchitecture.self, LlamaArchitecture.self, Qwen3Architecture.self]

    /// The architecture registered under `name`.
    public static func type(named name: String) -> (any ModelArchitecture.Type)? {
        all.first { $0.name == name }
    }

    /// Reads the configuration named by `configuration` and builds its architecture.
    /// - Throws: `ModelError.invalidFile` when the configuration names no architecture or one not
    ///   in the registry.
    public static func architecture(for configuration: ModelConfiguration) throws(ModelError) -> any ModelArchitecture {
        guard let name = configuration.architectureName else {
            throw .invalidFile(path: configuration.path, reason: "names no architecture (model_type / general.architecture)")
        }
        guard let type = type(named: name) else {
            throw .invalidFile(path: configuration.path,
                               reason: "architecture '\(name)' is not supported (expected one of \(all.map { $0.name }.joined(separator: ", ")))")
        }
        return try type.init(configuration: configuration)
    }

    /// The configuration of the model in `store`: a GGUF file's metadata, else the `config.json`
    /// at `configPath`, else nil.
    public static func configuration(of store: any TensorStore, configPath: String?) throws(ModelError) -> ModelConfiguration? {
        if let gguf = store as? GGUFStore { return .gguf(GGUFMetadata(file: gguf.file)) }
        if let json = store.metadata[GGUFMetadata.containerKey] {
            do {
                return .gguf(try GGUFMetadata(json: json, path: store.path))
            } catch {
                throw .invalidFile(path: store.path, reason: "\(error)")
            }
        }
        return try configPath.map { (path) throws(ModelError) in try ModelConfiguration.huggingFace(path: path) }
    }

    /// The role of every tensor of `store`, in store order: from its architecture's tensor table
    /// when `configuration` names a registered architecture, else from the tensor names
    /// (`ModelAnatomy`, no architecture op types).
    public static func roles(of store: any TensorStore, configuration: ModelConfiguration?) -> [TensorRole] {
        let descriptors = store.descriptors
        var roles = Dictionary(uniqueKeysWithValues: ModelAnatomy.roles(of: descriptors).map { ($0.name, $0) })
        if let configuration, let architecture = try? architecture(for: configuration) {
            for role in architecture.roles(in: store) { roles[role.name] = role }
        }
        return descriptors.map { roles[$0.name]! }
    }

    /// A model's files and architecture: the weights at `weightsPath` (any format Shrink reads),
    /// the configuration from `configPath` (a Hugging Face `config.json`) or, for GGUF, from the
    /// file's metadata; `folder` holds side files (vocabulary, pooling), by default the config's.
    public static func open(weightsPath: String, configPath: String?, folder: String? = nil) throws -> (ModelFiles, any ModelArchitecture) {
        let store = try TensorStores.open(path: weightsPath)
        guard let configuration = try configuration(of: store, configPath: configPath) else {
            throw ModelError.invalidFile(path: weightsPath, reason: "safetensors weights need a config.json next to them (or a --base folder)")
        }
        let files = ModelFiles(store: store, configuration: configuration,
                               folder: folder ?? configPath.map { ($0 as NSString).deletingLastPathComponent })
        return (files, try architecture(for: configuration))
    }
}

/// Where a resumable layer-by-layer calibration run keeps the texts' hidden states between
/// blocks (`hiddenStates`, a named file that outlives the process, two generations), and the
/// first block it runs: 0 for a new run (the file starts empty), `b > 0` to continue a run whose
/// blocks before `b` finished (the file holds the states entering block `b`).
public struct CalibrationResumePoint: Sendable, Equatable {
    public let hiddenStates: String
    public let firstBlock: Int

    public init(hiddenStates: String, firstBlock: Int) {
        self.hiddenStates = hiddenStates
        self.firstBlock = firstBlock
    }
}

extension ModelRuntime {
    /// `run(calibrationTexts:spillNextTo:resume:blockFinished:)` from the first block, not resumable.
    public func run(calibrationTexts texts: [String], spillNextTo: String?, blockFinished: (Int) throws -> Void) throws {
        try run(calibrationTexts: texts, spillNextTo: spillNextTo, resume: nil, blockFinished: blockFinished)
    }
}
