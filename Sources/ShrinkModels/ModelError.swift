/// Errors loading or running a model, naming the file or tensor.
public enum ModelError: Error, Equatable, CustomStringConvertible {
    /// A model file (vocabulary, config) is unusable.
    case invalidFile(path: String, reason: String)
    /// A weight the architecture needs is missing or has the wrong shape.
    case invalidWeight(tensor: String, reason: String)

    public var description: String {
        switch self {
        case .invalidFile(let path, let reason): "\(path): \(reason)"
        case .invalidWeight(let tensor, let reason): "tensor '\(tensor)': \(reason)"
        }
    }
}
