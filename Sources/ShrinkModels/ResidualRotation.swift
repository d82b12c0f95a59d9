import ShrinkCore

/// How a pre-norm transformer reads and writes its residual stream `x` (one row of `width`
/// floats per token): each reader is an RMSNorm whose output feeds some linear layers, each
/// writer a linear layer whose output is added to `x`. This is what lets a rotation of the stream
/// be folded into the weights (`FoldedResidualRotation`); BERT's post-LayerNorm stream has no
/// such description, since LayerNorm subtracts the mean, which a rotation does not commute with.
public struct ResidualStream: Sendable, Equatable {
    /// An RMSNorm weight (`γ`) and the linear weights that read its output.
    public struct Reader: Sendable, Equatable {
        public let norm: String
        public let linears: [String]

        public init(norm: String, linears: [String]) {
            self.norm = norm
            self.linears = linears
        }
    }

    public let width: Int
    public let readers: [Reader]
    /// Linear weights (`[width, inputs]`) whose outputs are added to the stream.
    public let writers: [String]

    public init(width: Int, readers: [Reader], writers: [String]) {
        self.width = width
        self.readers = readers
        self.writers = writers
    }
}

/// A rotation `Q` of the residual stream folded into the weights around it (QuaRot's computational
/// invariance): the model computes on `x' = Q·x`. Since `RMSNorm(Q·x) = Q·RMSNorm(x)` for any
/// orthogonal `Q`, with `D = diag(γ)` a reading norm's scale
/// - each reading linear stores `W·D·Qᵀ` and the norm's scale becomes 1,
/// - each writing linear stores `Q·W`,
/// - the runtime rotates every token's embedding on entry (`x' = Q·e`) and un-rotates the stream
///   before the final norm, so the token embedding and the output projection stay as they are.
/// The outputs equal the unrotated model's up to float rounding. Stored in a container's metadata
/// under `metadataKey` as JSON: `size`, `block_size`, `signs` (the packed sign bits of
/// `HadamardRotation`, hex), `readers` (each reading linear weight → its norm weight), `writers`.
public struct FoldedResidualRotation: Sendable, Equatable {
    public static let metadataKey = "shrink.residual_rotation"

    public let rotation: HadamardRotation
    /// Each reading linear weight and the norm weight whose scale it absorbed.
    public let readers: [String: String]
    public let writers: Set<String>

    public init(rotation: HadamardRotation, stream: ResidualStream) {
        precondition(rotation.size == stream.width)
        self.rotation = rotation
        var readers: [String: String] = [:]
        for reader in stream.readers { for linear in reader.linears { readers[linear] = reader.norm } }
        self.readers = readers
        writers = Set(stream.writers)
    }

    /// The norm weights whose scale the readers absorbed (stored as ones).
    public var norms: Set<String> { Set(readers.values) }

    /// Whether this fold covers exactly the readers and writers of `stream`.
    public func covers(_ stream: ResidualStream) -> Bool {
        self == FoldedResidualRotation(rotation: rotation, stream: stream)
    }

    /// The metadata value (compact JSON, keys sorted so that equal folds write equal bytes).
    public var metadataValue: String {
        let hex = rotation.packedSigns.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        let pairs = readers.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSONValue.string($0.value)) }
        return JSONValue.object([
            ("size", .number(String(rotation.size))), ("block_size", .number(String(rotation.blockSize))), ("signs", .string(hex)),
            ("readers", .object(pairs)), ("writers", .array(writers.sorted().map(JSONValue.string))),
        ]).serialized()
    }

    /// The fold recorded in `metadata`, nil when it records none.
    /// - Throws: `ModelError.invalidFile` naming `path` and the key when the value is malformed.
    public init?(metadata: [String: String], path: String) throws(ModelError) {
        guard let text = metadata[Self.metadataKey] else { return nil }
        func invalid(_ reason: String) -> ModelError { .invalidFile(path: path, reason: "metadata \(Self.metadataKey): \(reason)") }
        let root: JSONValue
        do { root = try JSONValue.parse(text) } catch { throw invalid("invalid JSON: \(error)") }
        guard let pairs = root.objectValue else { throw invalid("expected an object") }
        func value(_ key: String) throws(ModelError) -> JSONValue {
            guard let found = pairs.first(where: { $0.key == key })?.value else { throw invalid("\(key) is missing") }
            return found
        }
        guard let size = try value("size").integerValue, (1...(1 << 20)).contains(size) else { throw invalid("size must be an integer in 1…1048576") }
        guard let blockSize = try value("block_size").integerValue, blockSize > 0 else { throw invalid("block_size must be a positive integer") }
        guard let hex = try value("signs").stringValue, hex.utf8.count == 2 * PackedBits.byteCount(count: size, bits: 1) else {
            throw invalid("signs must be \(2 * PackedBits.byteCount(count: size, bits: 1)) hex digits")
        }
        var bytes: [UInt8] = []
        var digits = hex.utf8.makeIterator()
        while let high = digits.next(), let low = digits.next() {
            guard let h = Self.hexDigit(high), let l = Self.hexDigit(low) else { throw invalid("signs must be hex digits") }
            bytes.append(h << 4 | l)
        }
        guard let rotation = bytes.withUnsafeBytes({ HadamardRotation(size: size, blockSize: blockSize, packedSigns: $0) }) else {
            throw invalid("block_size \(blockSize) is not 12^t · 2^k dividing \(size)")
        }
        guard let readerPairs = try value("readers").objectValue, !readerPairs.isEmpty else { throw invalid("readers must be a non-empty object") }
        var readers: [String: String] = [:]
        for pair in readerPairs {
            guard let norm = pair.value.stringValue else { throw invalid("readers.\(pair.key) must be a norm weight's name") }
            readers[pair.key] = norm
        }
        guard let writerValues = try value("writers").arrayValue else { throw invalid("writers must be an array") }
        var writers: Set<String> = []
        for writer in writerValues {
            guard let name = writer.stringValue else { throw invalid("writers must hold names") }
            writers.insert(name)
        }
        self.rotation = rotation
        self.readers = readers
        self.writers = writers
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// Weight `name` (`[rows, columns]`, row-major) in the rotated basis: a reader's `W·D·Qᵀ`
    /// (each row scaled by `normScale`, then rotated), a writer's `Q·W` (each column rotated);
    /// other weights unchanged. `O(rows · columns · log d)`.
    /// - Throws: `ModelError.invalidWeight` when a reader's inputs, its norm or a writer's outputs
    ///   are not the rotation's width.
    public func fold(_ name: String, values: inout [Float], shape: [Int], normScale: [Float]?) throws(ModelError) {
        try checkWidth(name, shape: shape, normScale: normScale)
        guard shape.count == 2 else { return }
        if readers[name] != nil, let normScale {
            Self.eachRow(&values, columns: shape[1]) { row in
                for index in 0..<shape[1] { row[index] *= normScale[index] }
                rotation.rotate(row)
            }
        } else if writers.contains(name) {
            Self.eachColumn(&values, rows: shape[0], columns: shape[1]) { rotation.rotate($0) }
        }
    }

    /// The inverse of `fold` up to the norm scale: a reader's stored `W'` becomes `W'·Q` (which is
    /// `W·D`, the weight of the model whose reading norms have scale 1), a writer's `Qᵀ·W'`.
    /// - Throws: `ModelError.invalidWeight` as `fold` does.
    public func unfold(_ name: String, values: inout [Float], shape: [Int]) throws(ModelError) {
        try checkWidth(name, shape: shape, normScale: nil)
        guard shape.count == 2 else { return }
        if readers[name] != nil {
            Self.eachRow(&values, columns: shape[1]) { rotation.unrotate($0) }
        } else if writers.contains(name) {
            Self.eachColumn(&values, rows: shape[0], columns: shape[1]) { rotation.unrotate($0) }
        }
    }

    /// A reader must be `[rows, size]` (its norm `size` floats), a writer `[size, columns]`.
    private func checkWidth(_ name: String, shape: [Int], normScale: [Float]?) throws(ModelError) {
        let size = rotation.size
        if readers[name] != nil, shape.count != 2 || shape[1] != size || (normScale.map { $0.count != size } ?? false) {
            throw .invalidWeight(tensor: name, reason: "reads a residual stream of \(size) but has shape \(Shape.describe(shape))")
        }
        if writers.contains(name), shape.count != 2 || shape[0] != size {
            throw .invalidWeight(tensor: name, reason: "writes a residual stream of \(size) but has shape \(Shape.describe(shape))")
        }
    }

    private static func eachRow(_ values: inout [Float], columns: Int, _ body: (UnsafeMutablePointer<Float>) -> Void) {
        values.withUnsafeMutableBufferPointer { buffer in
            for row in 0..<(buffer.count / columns) { body(buffer.baseAddress! + row * columns) }
        }
    }

    private static func eachColumn(_ values: inout [Float], rows: Int, columns: Int, _ body: (UnsafeMutablePointer<Float>) -> Void) {
        var column = [Float](repeating: 0, count: rows)
        values.withUnsafeMutableBufferPointer { buffer in
            column.withUnsafeMutableBufferPointer { c in
                for j in 0..<columns {
                    for i in 0..<rows { c[i] = buffer[i * columns + j] }
                    body(c.baseAddress!)
                    for i in 0..<rows { buffer[i * columns + j] = c[i] }
                }
            }
        }
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
