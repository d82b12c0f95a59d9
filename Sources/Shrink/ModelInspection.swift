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

    /// One tensor as stored: `storage` is its dtype, or its encoding when compressed.
    public struct TensorSummary: Codable, Sendable {
        public let name: String
        public let op: String
        public let opType: OpType
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
    /// `model_type` from `config.json`, when the model has one.
    public let architecture: String?
    public let parameters: Int
    /// Bytes of tensor data (excluding the file header).
    public let bytes: Int
    public let fileBytes: Int
    public let storage: [StorageShare]
    public let opTypes: [OpTypeShare]
    public let layers: [LayerSummary]

    /// Inspects the model at `location` without reading its tensor data.
    public static func inspect(_ location: ModelLocation) throws(ShrinkIOError) -> ModelInspection {
        let path = location.weightsPath
        if try ModelFileFormat.detect(path: path) == .gguf {
            throw .unsupportedFormat(path: path, reason: "GGUF models are not readable yet; Shrink reads safetensors")
        }
        let file = try SafetensorsFile(path: path)
        let config = try location.configPath.map { (configPath) throws(ShrinkIOError) in try ModelConfig(path: configPath) }
        let model = try CompressedModel(file: file)
        // (descriptor, storage, bytes) for every logical tensor: dense ones as stored, encoded ones by encoding.
        let stored = model.denseTensors.map { (TensorDescriptor(name: $0.name, dtype: $0.tensor.dtype, shape: $0.tensor.shape),
                                                $0.tensor.dtype.rawValue, $0.tensor.byteCount) }
            + model.encodedTensors.map { (TensorDescriptor(name: $0.name, dtype: $0.sourceDType, shape: $0.shape), $0.encoding.summary, $0.byteCount) }
        let roles = ModelAnatomy.roles(of: stored.map(\.0))
        let tensors = zip(stored, roles).map { item, role in
            let parameters = item.0.shape.reduce(1, *)
            return TensorSummary(name: item.0.name, op: role.op, opType: role.opType, storage: item.1, shape: item.0.shape,
                                 parameters: parameters, bytes: item.2, bitsPerWeight: Double(item.2 * 8) / Double(max(parameters, 1)))
        }
        let format = CompressedModel.isCompressed(file) ? "shrink compressed safetensors" : "safetensors"
        return summarize(path: path, format: format, architecture: config?.modelType,
                         fileBytes: file.fileSize, tensors: tensors, layerOf: Dictionary(uniqueKeysWithValues: roles.map { ($0.name, $0.layer) }))
    }

    static func summarize(path: String, format: String, architecture: String?, fileBytes: Int,
                          tensors: [TensorSummary], layerOf: [String: String]) -> ModelInspection {
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

        return ModelInspection(path: path, format: format, architecture: architecture,
                               parameters: tensors.reduce(0) { $0 + $1.parameters }, bytes: totalBytes,
                               fileBytes: fileBytes, storage: storage, opTypes: opTypes, layers: layers)
    }
}
