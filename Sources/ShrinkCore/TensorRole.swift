/// What kind of operation a weight tensor feeds.
public enum OpType: String, Codable, CaseIterable, Sendable, Comparable {
    /// A matrix multiplication `x · Wᵀ (+ b)` (2-D weight).
    case linear
    /// A row look-up table (token, position or type embeddings).
    case embedding
    /// A normalization's scale and shift (LayerNorm, RMSNorm).
    case norm
    /// A convolution (weight of rank 3 or more).
    case conv
    /// A non-trainable integer tensor stored with the weights (for example position ids).
    case buffer
    /// Anything else.
    case other

    public static func < (lhs: OpType, rhs: OpType) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// A tensor's place in a model: the module (op) it belongs to, that op's type and the layer.
public struct TensorRole: Sendable, Equatable {
    /// The tensor's full name, e.g. `encoder.layer.0.attention.self.query.weight`.
    public let name: String
    /// The op the tensor belongs to: the name without its parameter suffix
    /// (`encoder.layer.0.attention.self.query`).
    public let op: String
    /// The op's type.
    public let opType: OpType
    /// The layer: the name up to a block index (`encoder.layer.0`, `model.layers.3`, `blk.5`), or the
    /// op's parent for tensors outside numbered blocks (`embeddings`, `pooler`).
    public let layer: String
    /// The op type the model's architecture names it by (`attention.q`, `mlp.down`…), when the
    /// architecture is known.
    public let kind: String?

    public init(name: String, op: String, opType: OpType, layer: String, kind: String? = nil) {
        self.name = name
        self.op = op
        self.opType = opType
        self.layer = layer
        self.kind = kind
    }
}

/// A tensor's name, dtype and shape: all that is needed to place it in a model.
public struct TensorDescriptor: Sendable {
    public let name: String
    public let dtype: DType
    public let shape: [Int]

    public init(name: String, dtype: DType, shape: [Int]) {
        self.name = name
        self.dtype = dtype
        self.shape = shape
    }
}
