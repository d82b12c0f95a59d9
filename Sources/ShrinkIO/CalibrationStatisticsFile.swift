import ShrinkCore

/// Where calibration statistics came from: the model file they were recorded on and the text run
/// through it.
public struct CalibrationProvenance: Sendable, Equatable {
    /// The weights file's name (no folder) and the SHA-256 of its bytes.
    public let model: String
    public let modelSHA256: String
    /// The calibration text file as given, the SHA-256 of its bytes, and how many lines ran.
    public let data: String
    public let dataSHA256: String
    public let lines: Int

    public init(model: String, modelSHA256: String, data: String, dataSHA256: String, lines: Int) {
        self.model = model
        self.modelSHA256 = modelSHA256
        self.data = data
        self.dataSHA256 = dataSHA256
        self.lines = lines
    }
}

/// A calibration statistics file (`shrink calibrate`; layout in docs/FORMAT.md): a safetensors
/// file holding, per linear op, `Σ xᵀx` (`<op>.input_correlation`, F64 `[n, n]`), `Σ |x_j|`
/// (`<op>.input_abs_sum`, F64 `[n]`) and `max |x_j|` (`<op>.input_abs_max`, F32 `[n]`), and in its
/// metadata key `shrink.calibration` the provenance and, per op, its row count and the prefix of
/// its three tensors (ops that saw the same inputs, such as query, key and value, share one set).
///
/// Opening checks the layout of every op; `statistics(of:)` reads one op's tensors from the
/// memory-mapped file and checks their values, so a reader holds only the layers it asks for.
public struct CalibrationStatisticsFile: Sendable {
    /// The metadata key, and the format number this build writes and reads.
    public static let metadataKey = "shrink.calibration"
    public static let format = 1

    public let path: String
    public let provenance: CalibrationProvenance
    /// Op name → (row count, tensor prefix).
    public let layers: [String: (rows: Int, tensors: String)]
    let file: SafetensorsFile

    /// Opens and checks the file at `path`.
    /// - Throws: `ShrinkIOError` naming the file and the key or tensor at fault: not a statistics
    ///   file, a format this build does not read, a missing field, an op whose tensors are missing or
    ///   have the wrong dtype or shape.
    public init(path: String) throws(ShrinkIOError) {
        let file = try SafetensorsFile(path: path)
        guard let text = file.metadata[Self.metadataKey] else {
            throw .unsupportedFormat(path: path, reason: "not a calibration statistics file: no '\(Self.metadataKey)' metadata (write one with shrink calibrate)")
        }
        let key = Self.metadataKey
        let json: JSONValue
        do { json = try JSONValue.parse(text) } catch { throw .invalidMetadata(path: path, key: key, reason: "not JSON: \(error)") }
        guard let object = json.objectValue else { throw .invalidMetadata(path: path, key: key, reason: "not a JSON object") }
        func field(_ name: String) -> JSONValue? { object.first { $0.key == name }?.value }
        func string(_ name: String) throws(ShrinkIOError) -> String {
            guard let value = field(name)?.stringValue else { throw .invalidMetadata(path: path, key: "\(key).\(name)", reason: "missing or not a string") }
            return value
        }
        func count(_ value: JSONValue?, _ keyPath: String) throws(ShrinkIOError) -> Int {
            guard let value = value?.integerValue, value >= 1 else { throw .invalidMetadata(path: path, key: keyPath, reason: "missing or not a whole number ≥ 1") }
            return value
        }
        let format = try count(field("format"), "\(key).format")
        guard format == Self.format else {
            throw .unsupportedFormat(path: path, reason: "calibration statistics format \(format); this build reads format \(Self.format)")
        }
        provenance = CalibrationProvenance(model: try string("model"), modelSHA256: try string("model_sha256"), data: try string("data"),
                                           dataSHA256: try string("data_sha256"), lines: try count(field("lines"), "\(key).lines"))
        guard let entries = field("layers")?.objectValue, !entries.isEmpty else {
            throw .invalidMetadata(path: path, key: "\(key).layers", reason: "missing, empty or not an object")
        }
        var layers: [String: (rows: Int, tensors: String)] = [:]
        for (op, value) in entries {
            let keyPath = "\(key).layers.\(op)"
            guard let entry = value.objectValue, let prefix = entry.first(where: { $0.key == "tensors" })?.value.stringValue else {
                throw .invalidMetadata(path: path, key: keyPath, reason: "needs \"rows\" and \"tensors\"")
            }
            let rows = try count(entry.first { $0.key == "rows" }?.value, "\(keyPath).rows")
            let correlation = try Self.entry(file, "\(prefix).input_correlation", .f64, rank: 2)
            let width = correlation.shape[0]
            guard width >= 1, correlation.shape == [width, width] else {
                throw .invalidShape(path: path, tensor: correlation.name, reason: "\(correlation.shape) is not square")
            }
            for (suffix, dtype) in [("input_abs_sum", DType.f64), ("input_abs_max", .f32)] {
                let vector = try Self.entry(file, "\(prefix).\(suffix)", dtype, rank: 1)
                guard vector.shape == [width] else {
                    throw .invalidShape(path: path, tensor: vector.name, reason: "\(vector.shape), where the correlation is \(width) wide")
                }
            }
            layers[op] = (rows, prefix)
        }
        self.path = path
        self.file = file
        self.layers = layers
    }

    static func entry(_ file: SafetensorsFile, _ name: String, _ dtype: DType, rank: Int) throws(ShrinkIOError) -> SafetensorsEntry {
        guard let entry = file.entry(named: name) else { throw .tensorNotFound(path: file.path, tensor: name) }
        guard entry.dtype == dtype, entry.shape.count == rank else {
            throw .invalidEntry(path: file.path, tensor: name, reason: "is \(entry.dtype.rawValue) \(entry.shape); expected \(dtype.rawValue) of rank \(rank)")
        }
        return entry
    }

    /// The statistics of op `layer`.
    /// - Throws: `.tensorNotFound` when the file has no such op; `.invalidEntry` naming the tensor
    ///   when a value is not finite, a correlation is not symmetric or has a negative diagonal, a
    ///   sum is negative, or a maximum is negative.
    public func statistics(of layer: String) throws(ShrinkIOError) -> LayerInputStatistics {
        guard let (rows, prefix) = layers[layer] else { throw .tensorNotFound(path: path, tensor: "\(layer) (no calibration statistics for this layer)") }
        let correlationName = "\(prefix).input_correlation"
        let matrix = try doubles(correlationName)
        let width = Int(Double(matrix.count).squareRoot().rounded())
        for i in 0..<width {
            guard matrix[i * width + i] >= 0 else { throw .invalidEntry(path: path, tensor: correlationName, reason: "diagonal element \(i) is negative") }
            for j in 0..<i where matrix[i * width + j] != matrix[j * width + i] {
                throw .invalidEntry(path: path, tensor: correlationName, reason: "not symmetric at [\(i), \(j)]")
            }
        }
        let sums = try doubles("\(prefix).input_abs_sum")
        if let bad = sums.firstIndex(where: { $0 < 0 }) { throw .invalidEntry(path: path, tensor: "\(prefix).input_abs_sum", reason: "element \(bad) is negative") }
        let maximaName = "\(prefix).input_abs_max"
        let maxima = try file.tensor(named: maximaName).floats()
        if let bad = maxima.firstIndex(where: { !$0.isFinite || $0 < 0 }) {
            throw .invalidEntry(path: path, tensor: maximaName, reason: "element \(bad) is \(maxima[bad]), not a finite value ≥ 0")
        }
        let correlation = InputCorrelation(size: width, matrix: matrix, rows: rows)
        return LayerInputStatistics(correlation: correlation, absoluteSums: sums, absoluteMaxima: maxima)
    }

    /// The F64 tensor `name`, each element checked finite.
    func doubles(_ name: String) throws(ShrinkIOError) -> [Double] {
        let bytes = try file.tensor(named: name).bytes
        let values = [Double](unsafeUninitializedCapacity: bytes.count / 8) { buffer, initialized in
            for index in 0..<buffer.count {
                buffer[index] = Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 8 * index, as: UInt64.self)))
            }
            initialized = buffer.count
        }
        if let bad = values.firstIndex(where: { !$0.isFinite }) {
            throw .invalidEntry(path: path, tensor: name, reason: "element \(bad) is \(values[bad]), not finite")
        }
        return values
    }

    /// Writes `statistics` (op name → statistics) with `provenance` to `path`, atomically. Ops with
    /// equal statistics share one set of tensors, named after the first op in name order. Tensors
    /// are produced and written one at a time.
    /// - Throws: `ShrinkIOError.writeFailed` when there is nothing to write or the file system refuses.
    public static func write(_ statistics: [String: LayerInputStatistics], provenance: CalibrationProvenance, to path: String) throws(ShrinkIOError) {
        guard !statistics.isEmpty else { throw .writeFailed(path: path, reason: "no layer saw any calibration input") }
        var owners: [String] = []
        var layerEntries: [(key: String, value: JSONValue)] = []
        for op in statistics.keys.sorted() {
            let value = statistics[op]!
            let owner = owners.first { statistics[$0]!.width == value.width && statistics[$0]! == value } ?? op
            if owner == op { owners.append(op) }
            layerEntries.append((key: op, value: .object([(key: "rows", value: .number(String(value.rows))), (key: "tensors", value: .string(owner))])))
        }
        let header: JSONValue = .object([
            (key: "format", value: .number(String(format))),
            (key: "model", value: .string(provenance.model)),
            (key: "model_sha256", value: .string(provenance.modelSHA256)),
            (key: "data", value: .string(provenance.data)),
            (key: "data_sha256", value: .string(provenance.dataSHA256)),
            (key: "lines", value: .number(String(provenance.lines))),
            (key: "layers", value: .object(layerEntries)),
        ])
        let layout = owners.flatMap { op in
            let width = statistics[op]!.width
            return [TensorDescriptor(name: "\(op).input_correlation", dtype: .f64, shape: [width, width]),
                    TensorDescriptor(name: "\(op).input_abs_sum", dtype: .f64, shape: [width]),
                    TensorDescriptor(name: "\(op).input_abs_max", dtype: .f32, shape: [width])]
        }
        try SafetensorsWriter.write(layout, metadata: [metadataKey: header.serialized()], to: path) { index throws(ShrinkIOError) in
            let value = statistics[owners[index / 3]]!
            do {
                switch index % 3 {
                case 0: return try DenseTensor(doubles: value.correlation.matrix, shape: layout[index].shape)
                case 1: return try DenseTensor(doubles: value.absoluteSums, shape: layout[index].shape)
                default: return try DenseTensor(converting: value.absoluteMaxima, shape: layout[index].shape)
                }
            } catch {
                throw .writeFailed(path: path, reason: "tensor '\(layout[index].name)': \(error)")
            }
        }
    }
}
