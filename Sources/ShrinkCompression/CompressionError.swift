import ShrinkCore

/// Errors of recipes and compression passes, each naming the recipe file and key path, or the tensor.
public enum CompressionError: Error, Equatable, CustomStringConvertible {
    /// The recipe cannot be read or parsed.
    case unreadableRecipe(file: String, reason: String)
    /// A recipe value is missing, unknown or out of range; `keyPath` like `op_type.linear.palettize.bits`.
    case invalidRecipe(file: String, keyPath: String, reason: String)
    /// A recipe entry does not fit the model (a pattern matching nothing, a group size that does
    /// not divide a dimension).
    case recipeMismatch(file: String, keyPath: String, reason: String)
    /// A weight holds NaN or infinity.
    case nonFiniteWeight(tensor: String, index: Int, value: Float)
    /// A weight cannot be compressed as asked.
    case invalidWeight(tensor: String, reason: String)

    public var description: String {
        switch self {
        case .unreadableRecipe(let file, let reason): "\(file): cannot read recipe: \(reason)"
        case .invalidRecipe(let file, let keyPath, let reason): keyPath.isEmpty ? "\(file): \(reason)" : "\(file): \(keyPath): \(reason)"
        case .recipeMismatch(let file, let keyPath, let reason): "\(file): \(keyPath): \(reason)"
        case .nonFiniteWeight(let tensor, let index, let value): "tensor '\(tensor)': element \(index) is \(value); weights must be finite"
        case .invalidWeight(let tensor, let reason): "tensor '\(tensor)': \(reason)"
        }
    }
}

extension DenseTensor {
    /// A stored part of the encoding of `tensor`: the tensor `build` makes, or
    /// `CompressionError.invalidWeight` naming `tensor` when the part's shape or dtype cannot
    /// hold its values.
    static func part(of tensor: String, _ build: () throws(ShrinkCoreError) -> DenseTensor) throws(CompressionError) -> DenseTensor {
        do { return try build() } catch { throw .invalidWeight(tensor: tensor, reason: error.description) }
    }
}
