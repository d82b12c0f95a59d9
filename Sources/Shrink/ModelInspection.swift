import ShrinkCore
import ShrinkIO
import ShrinkModels

/// A model at a glance: parameters and bytes, their split by storage dtype and by op type, and
/// every tensor grouped by layer. Encoded as JSON with snake_case keys by `shrink inspect --json`.
public struct ModelInspection: Codable, Sendable {
    /// Bytes and parameters of one storage type (a dtype, or an encoding in a compressed model).
    public struct StorageShare: Codable, Sendable {
        public let storage: String
        public let tensors: Int
        public let parameters: Int
        public let bytes: Int
        /// Fraction of all tensor bytes, 0…1.
        public let share: Double
        public var bitsPerWeight: Double { Double(bytes * 8) / Double(max(parameters, 1)) }
    }

    /// Totals for one op type; `ops` counts modules (a linear layer's weight and bias are one op).
    public struct OpTypeShare: Codable, Sendable {
        public let opType: OpType
        public let ops: Int
        public let tensors: Int
        public let parameters: Int
        public let bytes: Int
        public let share: Double
    }

    /// One tensor as stored: `storage` is its dtype, its encoding when compressed, or its ggml type.
    public struct TensorSummary: Codable, Sendable {
        public let name: String
        public let op: String
        public let opType: OpType
        /// The op type its architecture names it by (`attention.q`, `mlp.down`…), when known.
        public let kind: String?
        public let storage: String
        public let shape: [Int]
        public let parameters: Int
        public let bytes: Int
        public let bitsPerWeight: Double
    }

    /// The tensors of one layer.
    public struct LayerSummary: Codable, Sendable {
        public let name: String
        public let parameters: Int
        public let bytes: Int
        public let tensors: [TensorSummary]
    }

    public let path: String
    public let format: String
    /// `model_type` from `config.json` or GGUF's `general.architecture`, when the model has one.
    public let architecture: String?
    /// File metadata (safetensors `__metadata__`, GGUF key-value pairs as one line each).
    public let metadata: [String: String]
    public let parameters: Int
    /// Bytes of tensor data (excluding the file header).
    public let bytes: Int
    public let fileBytes: Int
    public let storage: [StorageShare]
    public let opTypes: [OpTypeShare]
    public let layers: [LayerSummary]
    /// The functions a runtime of the model exposes (`ModelRuntime.call`), empty when its
    /// configuration names no registered architecture.
    public let functions: [FunctionDescriptor]

    /// Inspects the model at `location` (any format `TensorStores.open` reads) without reading its
    /// tensor data. Tensors get their op types from the model's architecture adapter when its
    /// configuration names a registered one, else from their names (`ModelAnatomy`).
    public static func inspect(_ location: ModelLocation) throws -> ModelInspection {
        let store = try TensorStores.open(path: location.weightsPath)
        let configuration = try ModelArchitectures.configuration(of: store, configPath: location.configPath)
        let descriptors = store.descriptors
        let roles = Dictionary(uniqueKeysWithValues: ModelArchitectures.roles(of: store, configuration: configuration).map { ($0.name, $0) })
        let tensors = descriptors.map { descriptor in
            let stored = store.storage(of: descriptor.name)!
            let role = roles[descriptor.name]!
            let parameters = descriptor.shape.reduce(1, *)
            return TensorSummary(name: descriptor.name, op: role.op, opType: role.opType, kind: role.kind, storage: stored.summary,
                                 shape: descriptor.shape, parameters: parameters, bytes: stored.bytes,
                                 bitsPerWeight: Double(stored.bytes * 8) / Double(max(parameters, 1)))
        }
        let functions = configuration.flatMap { try? ModelArchitectures.architecture(for: $0).functions } ?? []
        return summarize(path: location.weightsPath, format: store.formatName, architecture: configuration?.architectureName,
                         metadata: store.metadata, fileBytes: store.fileBytes, tensors: tensors,
                         layerOf: roles.mapValues(\.layer), functions: functions)
    }

    static func summarize(path: String, format: String, architecture: String?, metadata: [String: String], fileBytes: Int,
                          tensors: [TensorSummary], layerOf: [String: String], functions: [FunctionDescriptor]) -> ModelInspection {
        let totalBytes = tensors.reduce(0) { $0 + $1.bytes }
        func share(_ bytes: Int) -> Double { totalBytes == 0 ? 0 : Double(bytes) / Double(totalBytes) }

        let storage = Dictionary(grouping: tensors, by: \.storage).map { name, group in
            let bytes = group.reduce(0) { $0 + $1.bytes }
            return StorageShare(storage: name, tensors: group.count, parameters: group.reduce(0) { $0 + $1.parameters },
                                bytes: bytes, share: share(bytes))
        }.sorted { ($0.bytes, $1.storage) > ($1.bytes, $0.storage) }

        let opTypes = Dictionary(grouping: tensors, by: \.opType).map { type, group in
            let bytes = group.reduce(0) { $0 + $1.bytes }
            return OpTypeShare(opType: type, ops: Set(group.map(\.op)).count, tensors: group.count,
                               parameters: group.reduce(0) { $0 + $1.parameters }, bytes: bytes, share: share(bytes))
        }.sorted { ($0.ops, $1.opType) > ($1.ops, $0.opType) }

        let layers = Dictionary(grouping: tensors) { layerOf[$0.name] ?? $0.op }.map { name, group in
            LayerSummary(name: name, parameters: group.reduce(0) { $0 + $1.parameters }, bytes: group.reduce(0) { $0 + $1.bytes },
                         tensors: group.sorted { ModelAnatomy.naturalOrder($0.name, $1.name) })
        }.sorted { ModelAnatomy.naturalOrder($0.name, $1.name) }

        return ModelInspection(path: path, format: format, architecture: architecture, metadata: metadata,
                               parameters: tensors.reduce(0) { $0 + $1.parameters }, bytes: totalBytes,
                               fileBytes: fileBytes, storage: storage, opTypes: opTypes, layers: layers, functions: functions)
    }
}
