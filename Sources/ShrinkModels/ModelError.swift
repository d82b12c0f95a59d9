/// Errors loading or running a model, naming the file or tensor.
public enum ModelError: Error, Equatable, CustomStringConvertible {
    /// A model file (vocabulary, config) is unusable.
    case invalidFile(path: String, reason: String)
    /// A weight the architecture needs is missing or has the wrong shape.
    case invalidWeight(tensor: String, reason: String)
    /// The architecture is known (its configuration and tensors are read) but cannot run here.
    case notRunnable(architecture: String, reason: String)
    /// A model's runtime lacks what a task needs (a decoder asked for sentence embeddings).
    case wrongCapability(architecture: String, needed: String)
    /// Input `index` of a call cannot run: empty, too long, or a token id outside the vocabulary.
    case invalidInput(index: Int, reason: String)
    /// An argument of a library call is outside its domain (a negative temperature).
    case invalidArgument(name: String, reason: String)

    public var description: String {
        switch self {
        case .invalidFile(let path, let reason): "\(path): \(reason)"
        case .invalidWeight(let tensor, let reason): "tensor '\(tensor)': \(reason)"
        case .notRunnable(let architecture, let reason): "\(architecture) models cannot run: \(reason)"
        case .wrongCapability(let architecture, let needed): "a \(architecture) model does not provide \(needed)"
        case .invalidInput(let index, let reason): "input \(index): \(reason)"
        case .invalidArgument(let name, let reason): "\(name): \(reason)"
        }
    }
}

extension ModelError {
    /// What is wrong with a call's input, without the input's index.
    var inputReason: String {
        if case .invalidInput(_, let reason) = self { return reason }
        if case .notRunnable(_, let reason) = self { return reason }
        return description
    }
}
