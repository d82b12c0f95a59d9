import ShrinkCore

/// One tensor as a store holds it: plain values, or a `WeightEncoding` with its parts.
public enum StoredTensor: Sendable {
    case dense(DenseTensor)
    case encoded(EncodedTensor)

    /// Drops the resident pages of the tensor's mapped bytes (`TensorStorage.releasePages`), after
    /// a pass that read it once.
    public func releasePages() {
        switch self {
        case .dense(let tensor): tensor.storage.releasePages()
        case .encoded(let tensor): tensor.parts.values.forEach { $0.storage.releasePages() }
        }
    }

    /// The logical (decoded) shape.
    public var shape: [Int] {
        switch self {
        case .dense(let tensor): tensor.shape
        case .encoded(let tensor): tensor.shape
        }
    }

    /// The dtype the values had before any compression.
    public var sourceDType: DType {
        switch self {
        case .dense(let tensor): tensor.dtype
        case .encoded(let tensor): tensor.sourceDType
        }
    }

    /// Bytes as stored.
    public var byteCount: Int {
        switch self {
        case .dense(let tensor): tensor.byteCount
        case .encoded(let tensor): tensor.byteCount
        }
    }

    /// How the values are stored: the dtype, or the encoding's summary.
    public var storage: String {
        switch self {
        case .dense(let tensor): tensor.dtype.rawValue
        case .encoded(let tensor): tensor.encoding.summary
        }
    }

    /// The reference decoding to floats, row-major.
    public func decodedFloats() -> [Float] {
        switch self {
        case .dense(let tensor): tensor.floats()
        case .encoded(let tensor): tensor.decode()
        }
    }

    /// The tensor's name, dtype and shape.
    public func descriptor(name: String) -> TensorDescriptor {
        TensorDescriptor(name: name, dtype: sourceDType, shape: shape)
    }
}

/// Where a runtime, the compression pipeline or `inspect` gets a model's tensors from, whatever
/// the file: safetensors (plain or Shrink's compressed container), GGUF, or memory (tests).
///
/// A store hands out tensors as stored, without decoding: dense tensors view their bytes in
/// place (memory-mapped files are read only when touched) and encoded tensors keep their parts.
public protocol TensorStore: Sendable {
    /// The file the tensors come from (used in error messages), or a label for in-memory stores.
    var path: String { get }
    /// A short name of the format (`safetensors`, `shrink compressed safetensors`, `gguf v3`…).
    var formatName: String { get }
    /// Every tensor's name, in file order.
    var names: [String] { get }
    /// String metadata of the file (safetensors `__metadata__`; GGUF scalars and string arrays as text).
    var metadata: [String: String] { get }
    /// The tensor named `name`, or nil when the store has none.
    func tensor(named name: String) -> StoredTensor?
    /// Bytes of the whole file (tensor data and headers).
    var fileBytes: Int { get }
    /// Every tensor's name, source dtype and logical shape, in file order.
    var descriptors: [TensorDescriptor] { get }
    /// How tensor `name` is stored in the file (a dtype, an encoding's summary, a GGUF type name)
    /// and its bytes there, without re-laying it.
    func storage(of name: String) -> (summary: String, bytes: Int)?
}

extension TensorStore {
    public var descriptors: [TensorDescriptor] {
        names.compactMap { name in tensor(named: name)?.descriptor(name: name) }
    }

    public func storage(of name: String) -> (summary: String, bytes: Int)? {
        tensor(named: name).map { ($0.storage, $0.byteCount) }
    }

    /// The tensor named `name`.
    /// - Throws: `ShrinkIOError.tensorNotFound` naming the file and tensor.
    public func require(_ name: String) throws(ShrinkIOError) -> StoredTensor {
        guard let tensor = tensor(named: name) else { throw .tensorNotFound(path: path, tensor: name) }
        return tensor
    }
}

/// Tensors held in memory, in the order given (tests, and models built by code).
public struct InMemoryTensorStore: TensorStore {
    public let path: String
    public let formatName = "memory"
    public let names: [String]
    public let metadata: [String: String]
    private let tensors: [String: StoredTensor]

    /// - Precondition: names are unique.
    public init(label: String = "<memory>", tensors: [(name: String, tensor: StoredTensor)], metadata: [String: String] = [:]) {
        path = label
        names = tensors.map(\.name)
        self.tensors = Dictionary(uniqueKeysWithValues: tensors.map { ($0.name, $0.tensor) })
        self.metadata = metadata
    }

    public func tensor(named name: String) -> StoredTensor? { tensors[name] }

    public var fileBytes: Int { tensors.values.reduce(0) { $0 + $1.byteCount } }
}

/// A store with some of its tensors replaced by encoded tensors held in memory: the model as a
/// compressed file of it would hold it, without writing one (what a sensitivity scan evaluates).
public struct OverlayTensorStore: TensorStore {
    public let base: any TensorStore
    private let replacements: [String: EncodedTensor]

    /// - Throws: `ShrinkIOError.tensorNotFound` for a replacement the base does not hold, `.invalidShape` for one
    ///   whose shape differs from the tensor it replaces.
    public init(base: any TensorStore, replacing tensors: [EncodedTensor]) throws(ShrinkIOError) {
        var replacements: [String: EncodedTensor] = [:]
        for tensor in tensors {
            guard let original = base.tensor(named: tensor.name) else { throw .tensorNotFound(path: base.path, tensor: tensor.name) }
            guard original.shape == tensor.shape else {
                throw .invalidShape(path: base.path, tensor: tensor.name, reason: "a replacement of shape \(tensor.shape) for shape \(original.shape)")
            }
            replacements[tensor.name] = tensor
        }
        self.base = base
        self.replacements = replacements
    }

    public var path: String { base.path }
    public var formatName: String { "\(base.formatName), \(replacements.count) tensors replaced in memory" }
    public var names: [String] { base.names }
    public var metadata: [String: String] { base.metadata }
    public var fileBytes: Int { base.fileBytes }

    public func tensor(named name: String) -> StoredTensor? { replacements[name].map(StoredTensor.encoded) ?? base.tensor(named: name) }
}

/// A safetensors file: plain (every tensor dense) or Shrink's compressed container (encoded
/// tensors rebuilt from their `name#part` entries, see `CompressedModel`).
public struct SafetensorsStore: TensorStore {
    public let path: String
    public let formatName: String
    public let names: [String]
    public let metadata: [String: String]
    public let fileBytes: Int
    private let tensors: [String: StoredTensor]

    /// Opens and validates `path` (memory-mapped; tensor data is not read).
    /// - Throws: `ShrinkIOError` naming the file and the header entry, metadata key or tensor.
    public init(path: String) throws(ShrinkIOError) {
        try self.init(file: try SafetensorsFile(path: path))
    }

    /// The store of an already opened (and validated) file.
    /// - Throws: `ShrinkIOError` naming the metadata key or tensor of a malformed compressed container.
    public init(file: SafetensorsFile) throws(ShrinkIOError) {
        let model = try CompressedModel(file: file)
        path = file.path
        formatName = CompressedModel.isCompressed(file) ? "shrink compressed safetensors" : "safetensors"
        fileBytes = file.fileSize
        metadata = model.metadata
        var tensors: [String: StoredTensor] = [:]
        for (name, tensor) in model.denseTensors { tensors[name] = .dense(tensor) }
        for tensor in model.encodedTensors { tensors[tensor.name] = .encoded(tensor) }
        self.tensors = tensors
        names = model.denseTensors.map(\.name) + model.encodedTensors.map(\.name)
    }

    public func tensor(named name: String) -> StoredTensor? { tensors[name] }
}

/// Opens any model file Shrink reads, by its first bytes.
public enum TensorStores {
    /// The store for the file at `path`: safetensors (plain or compressed) or GGUF.
    /// - Throws: `ShrinkIOError` naming the file and what is wrong with it.
    public static func open(path: String) throws(ShrinkIOError) -> any TensorStore {
        switch try ModelFileFormat.detect(path: path) {
        case .safetensors: return try SafetensorsStore(path: path)
        case .gguf: return try GGUFStore(path: path)
        }
    }
}
