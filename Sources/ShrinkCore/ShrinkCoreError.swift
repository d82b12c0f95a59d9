/// Errors raised by tensors and their storage. Each case names what went wrong and where.
public enum ShrinkCoreError: Error, Equatable, CustomStringConvertible {
    /// A shape has a negative dimension or more elements than fit in memory.
    case invalidShape([Int])
    /// The bytes given for a tensor do not match its shape and dtype.
    case byteCountMismatch(shape: [Int], dtype: DType, expected: Int, actual: Int)
    /// The values given for a tensor do not match its shape.
    case elementCountMismatch(shape: [Int], expected: Int, actual: Int)
    /// A file could not be opened or mapped; `reason` is the system's message.
    case cannotMap(path: String, reason: String)
    /// An encoded tensor's parts do not match its encoding.
    case invalidEncodedTensor(name: String, reason: String)
    /// A conversion cannot produce this dtype.
    case unsupportedDType(DType, reason: String)

    public var description: String {
        switch self {
        case .invalidShape(let shape):
            "invalid shape \(Shape.describe(shape)): negative dimension or too many elements"
        case .byteCountMismatch(let shape, let dtype, let expected, let actual):
            "shape \(Shape.describe(shape)) of \(dtype.rawValue) needs \(expected) bytes, got \(actual)"
        case .elementCountMismatch(let shape, let expected, let actual):
            "shape \(Shape.describe(shape)) needs \(expected) values, got \(actual)"
        case .cannotMap(let path, let reason):
            "\(path): cannot open: \(reason)"
        case .invalidEncodedTensor(let name, let reason):
            "tensor '\(name)': \(reason)"
        case .unsupportedDType(let dtype, let reason):
            "\(dtype.rawValue): \(reason)"
        }
    }
}
