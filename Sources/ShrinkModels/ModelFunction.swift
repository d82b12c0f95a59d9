/// The scalar type of a function's input or output.
public enum ScalarType: String, Codable, Sendable, Equatable {
    case int32
    case float32
}

/// One input or output of a model function: its name, scalar type and shape, `nil` marking a
/// dimension fixed only by the call (a sequence's length).
public struct TensorSignature: Codable, Sendable, Equatable {
    public let name: String
    public let scalarType: ScalarType
    public let shape: [Int?]

    public init(name: String, scalarType: ScalarType, shape: [Int?]) {
        self.name = name
        self.scalarType = scalarType
        self.shape = shape
    }

    /// `name: float32[?, 384]`.
    public var description: String {
        "\(name): \(scalarType.rawValue)[" + shape.map { $0.map(String.init) ?? "?" }.joined(separator: ", ") + "]"
    }

    /// Whether `shape` fits: the same rank, every fixed dimension equal, every dynamic one at least 1.
    public func accepts(_ shape: [Int]) -> Bool {
        shape.count == self.shape.count && zip(shape, self.shape).allSatisfy { actual, expected in expected.map { $0 == actual } ?? (actual >= 1) }
    }
}

/// An entry point of a model runtime: what it is called, what it takes and gives, and whether it
/// reads and advances a `FunctionState` (a decoder's key/value cache).
public struct FunctionDescriptor: Codable, Sendable, Equatable {
    public let name: String
    public let inputs: [TensorSignature]
    public let outputs: [TensorSignature]
    /// Whether a call needs the state `ModelRuntime.makeFunctionState()` gives.
    public let stateful: Bool

    public init(name: String, inputs: [TensorSignature], outputs: [TensorSignature], stateful: Bool = false) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.stateful = stateful
    }

    /// `prefill(tokens: int32[?], state) -> (logits: float32[49152])`.
    public var signature: String {
        let arguments = inputs.map(\.description) + (stateful ? ["state"] : [])
        return "\(name)(\(arguments.joined(separator: ", "))) -> (\(outputs.map(\.description).joined(separator: ", ")))"
    }
}

/// A value passed to or returned by a model function: row-major scalars and their shape.
public enum FunctionValue: Sendable, Equatable {
    case int32([Int32], shape: [Int])
    case float32([Float], shape: [Int])

    public var scalarType: ScalarType {
        switch self {
        case .int32: .int32
        case .float32: .float32
        }
    }

    public var shape: [Int] {
        switch self {
        case .int32(_, let shape), .float32(_, let shape): shape
        }
    }

    var count: Int {
        switch self {
        case .int32(let values, _): values.count
        case .float32(let values, _): values.count
        }
    }

    /// The values of an `int32` value, nil for another type.
    public var int32Values: [Int32]? {
        guard case .int32(let values, _) = self else { return nil }
        return values
    }

    /// The values of a `float32` value, nil for another type.
    public var float32Values: [Float]? {
        guard case .float32(let values, _) = self else { return nil }
        return values
    }
}

/// What a decoder's stateful functions read and advance; opaque to callers, made by
/// `ModelRuntime.makeFunctionState()`.
public protocol FunctionState: AnyObject {}

/// Why a call to a model function did not run, naming the function and the input.
public enum FunctionCallError: Error, Equatable, CustomStringConvertible {
    case unknownFunction(name: String, available: [String])
    case missingInput(function: String, input: String)
    case unexpectedInput(function: String, input: String)
    case wrongScalarType(function: String, input: String, expected: ScalarType, actual: ScalarType)
    /// A shape of another rank, a fixed dimension that differs, an empty dynamic one, or values
    /// whose count is not the shape's.
    case wrongShape(function: String, input: String, expected: String, actual: [Int], count: Int)
    /// A stateful function called without a state, or with one another runtime made.
    case wrongState(function: String, reason: String)
    /// The input fits the signature but not the model (a token id outside the vocabulary, more
    /// positions than the cache holds).
    case invalidValue(function: String, input: String, reason: String)

    public var description: String {
        switch self {
        case .unknownFunction(let name, let available): "no function '\(name)' (this model has \(available.joined(separator: ", ")))"
        case .missingInput(let function, let input): "\(function): missing input '\(input)'"
        case .unexpectedInput(let function, let input): "\(function): no input named '\(input)'"
        case .wrongScalarType(let function, let input, let expected, let actual):
            "\(function): input '\(input)' is \(actual.rawValue), expected \(expected.rawValue)"
        case .wrongShape(let function, let input, let expected, let actual, let count):
            "\(function): input '\(input)' has shape [\(actual.map(String.init).joined(separator: ", "))] with \(count) values, expected \(expected)"
        case .wrongState(let function, let reason): "\(function): \(reason)"
        case .invalidValue(let function, let input, let reason): "\(function): input '\(input)': \(reason)"
        }
    }
}

extension FunctionDescriptor {
    /// Checks `inputs` against the signature: every input present, none other, each of its
    /// scalar type, with a shape the signature accepts and as many values as the shape holds.
    /// - Throws: `FunctionCallError` naming the first input at fault (in signature order).
    public func validate(_ inputs: [String: FunctionValue]) throws(FunctionCallError) {
        for expected in self.inputs {
            guard let value = inputs[expected.name] else { throw .missingInput(function: name, input: expected.name) }
            guard value.scalarType == expected.scalarType else {
                throw .wrongScalarType(function: name, input: expected.name, expected: expected.scalarType, actual: value.scalarType)
            }
            let elements = value.shape.reduce(1) { $0.multipliedReportingOverflow(by: max($1, 0)).partialValue }
            guard expected.accepts(value.shape), value.shape.allSatisfy({ $0 >= 0 }), elements == value.count else {
                throw .wrongShape(function: name, input: expected.name, expected: expected.description, actual: value.shape, count: value.count)
            }
        }
        if let extra = inputs.keys.sorted().first(where: { key in !self.inputs.contains { $0.name == key } }) {
            throw .unexpectedInput(function: name, input: extra)
        }
    }
}

extension Array where Element == FunctionDescriptor {
    /// The function named `name`.
    /// - Throws: `FunctionCallError.unknownFunction` listing the names there are.
    func named(_ name: String) throws(FunctionCallError) -> FunctionDescriptor {
        guard let function = first(where: { $0.name == name }) else { throw .unknownFunction(name: name, available: map(\.name)) }
        return function
    }
}
