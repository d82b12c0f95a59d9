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

    /// The F64 tensor `name`, each element checked finite; the copied pages of the mapped file are
    /// released, so reading a large file layer by layer keeps one layer resident.
    func doubles(_ name: String) throws(ShrinkIOError) -> [Double] {
        let tensor = try file.tensor(named: name)
        defer { tensor.storage.releasePages() }
        let bytes = tensor.bytes
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

    /// Writes `statistics` (op name → statistics) with `provenance` to `path`, atomically
    /// (`CalibrationStatisticsWriter` with one block).
    /// - Throws: `ShrinkIOError.writeFailed` when there is nothing to write or the file system refuses.
    public static func write(_ statistics: [String: LayerInputStatistics], provenance: CalibrationProvenance, to path: String) throws(ShrinkIOError) {
        let writer = try CalibrationStatisticsWriter(path: path)
        try writer.append(statistics)
        try writer.finish(provenance: provenance)
    }
}

/// Calibration statistics kept block by block in a spill file (created next to a destination and
/// never named, so nothing of it outlives the process) instead of memory: `append` moves a finished
/// block's tensors there and keeps only each op's row count and where its tensors went;
/// `correlation(of:)` reads one op's input correlation back. Ops of one `append` with equal
/// statistics share one set of tensors, owned by the first of them in name order. Memory: the
/// statistics of one `append`, then one correlation per reader. Appends come from one thread;
/// reads, after the last append, from any.
public final class SpilledCalibrationStatistics: @unchecked Sendable {
    public let spill: SpillFile
    /// Op name → (row count, owner op).
    private(set) var layers: [String: (rows: Int, owner: String)] = [:]
    /// Owner op → (input width, offset of its tensors in the spill: correlation, sums, maxima).
    private(set) var owners: [String: (width: Int, offset: Int)] = [:]

    /// An empty store whose spill file lies in `path`'s folder.
    /// - Throws: `ShrinkIOError.writeFailed` when the folder does not take new files.
    public init(nextTo path: String) throws(ShrinkIOError) {
        spill = try SpillFile(nextTo: path)
    }

    /// A store over `spill` whose bytes hold the statistics that `index` (a store's `index`) lists:
    /// one that a checkpoint kept. Appends continue after them.
    /// - Throws: `ShrinkIOError.invalidHeader` when `index` is malformed or lists bytes `spill` lacks.
    public init(spill: SpillFile, index: JSONValue) throws(ShrinkIOError) {
        self.spill = spill
        func pairs(_ key: String) throws(ShrinkIOError) -> [(String, Int, JSONValue)] {
            guard let entries = index.member(key)?.objectValue else { throw .invalidHeader(path: spill.path, reason: "checkpoint index: no '\(key)' object") }
            var result: [(String, Int, JSONValue)] = []
            for (name, value) in entries {
                guard let pair = value.arrayValue, pair.count == 2, let first = pair[0].integerValue, first >= 0 else {
                    throw .invalidHeader(path: spill.path, reason: "checkpoint index: '\(key).\(name)' is not a pair")
                }
                result.append((name, first, pair[1]))
            }
            return result
        }
        for (op, rows, owner) in try pairs("ops") {
            guard let owner = owner.stringValue else { throw .invalidHeader(path: spill.path, reason: "checkpoint index: 'ops.\(op)' names no owner") }
            layers[op] = (rows, owner)
        }
        for (op, width, offset) in try pairs("owners") {
            let bytes = 8 * width * width + 12 * width
            guard width > 0, let offset = offset.integerValue, offset >= 0, offset + bytes <= spill.size else {
                throw .invalidHeader(path: spill.path, reason: "checkpoint index: 'owners.\(op)' lies outside the file")
            }
            owners[op] = (width, offset)
        }
        if let orphan = layers.first(where: { owners[$0.value.owner] == nil }) {
            throw .invalidHeader(path: spill.path, reason: "checkpoint index: '\(orphan.key)' reads the statistics of '\(orphan.value.owner)', which are not listed")
        }
    }

    /// What `init(spill:index:)` reads: each op's row count and owner, each owner's width and offset.
    public var index: JSONValue {
        .object([
            (key: "ops", value: .object(layers.sorted { $0.key < $1.key }.map { (key: $0.key, value: .array([.number(String($0.value.rows)), .string($0.value.owner)])) })),
            (key: "owners", value: .object(owners.sorted { $0.key < $1.key }.map {
                (key: $0.key, value: .array([.number(String($0.value.width)), .number(String($0.value.offset))]))
            })),
        ])
    }

    /// The ops appended so far.
    public var ops: Set<String> { Set(layers.keys) }

    /// Stores `statistics` (op name → statistics; names not appended before).
    /// - Throws: `ShrinkIOError.writeFailed` for an op appended twice or when the file system refuses.
    public func append(_ statistics: [String: LayerInputStatistics]) throws(ShrinkIOError) {
        var appended: [(op: String, value: LayerInputStatistics)] = []
        for (op, value) in statistics.sorted(by: { $0.key < $1.key }) {
            guard layers[op] == nil else { throw .writeFailed(path: spill.path, reason: "statistics of '\(op)' came twice") }
            let owner = appended.first { $0.value.width == value.width && $0.value == value }?.op ?? op
            layers[op] = (value.rows, owner)
            guard owner == op else { continue }
            appended.append((op, value))
            owners[op] = (value.width, spill.size)
            #if _endian(little)
            // The stored form (little-endian f64, f64, f32) is the values' own memory: no copy of the correlation's 8·width² bytes.
            try Self.append(value.correlation.matrix, to: spill)
            try Self.append(value.absoluteSums, to: spill)
            try Self.append(value.absoluteMaxima, to: spill)
            #else
            for part in 0..<3 { try spill.append(try CalibrationStatisticsWriter.tensor(part, of: value, name: op, path: spill.path).bytes) }
            #endif
        }
    }

    /// Appends the memory of `values` to `spill`.
    private static func append<T>(_ values: [T], to spill: SpillFile) throws(ShrinkIOError) {
        _ = try values.withUnsafeBytes { bytes in Result { () throws(ShrinkIOError) in try spill.append(bytes) } }.get()
    }

    /// The input correlation recorded for `op`, nil when none was appended.
    /// - Throws: `ShrinkIOError.writeFailed` when the spill file cannot be read back.
    public func correlation(of op: String) throws(ShrinkIOError) -> InputCorrelation? {
        guard let (rows, owner) = layers[op], let (width, offset) = owners[owner] else { return nil }
        var matrix = [Double](repeating: 0, count: width * width)
        try matrix.withUnsafeMutableBytes { buffer in Result { () throws(ShrinkIOError) in try spill.read(at: offset, into: buffer) } }.get()
        for index in matrix.indices { matrix[index] = Double(bitPattern: UInt64(littleEndian: matrix[index].bitPattern)) }
        return InputCorrelation(size: width, matrix: matrix, rows: rows)
    }
}

/// Writes a calibration statistics file block by block (`SpilledCalibrationStatistics`), so that a
/// caller holds one block's statistics at a time; `finish` writes the file atomically from the
/// spill. The file lists ops and tensors in name order, whatever the order of the appends. Memory:
/// the statistics of one `append`, and one tensor while finishing.
public final class CalibrationStatisticsWriter {
    public let path: String
    private let statistics: SpilledCalibrationStatistics

    /// Prepares to write `path`.
    /// - Throws: `ShrinkIOError.writeFailed` when the spill file cannot be created next to `path`.
    public init(path: String) throws(ShrinkIOError) {
        self.path = path
        statistics = try SpilledCalibrationStatistics(nextTo: path)
    }

    /// Prepares to write `path` from `statistics`, which may hold appended statistics already (a
    /// checkpoint's).
    public init(path: String, statistics: SpilledCalibrationStatistics) {
        self.path = path
        self.statistics = statistics
    }

    /// Stores `statistics` (op name → statistics; names not appended before).
    /// - Throws: `ShrinkIOError.writeFailed` for an op appended twice or when the file system refuses.
    public func append(_ statistics: [String: LayerInputStatistics]) throws(ShrinkIOError) {
        try self.statistics.append(statistics)
    }

    /// Writes the file from what was appended, with `provenance` in its metadata.
    /// - Throws: `ShrinkIOError.writeFailed` when nothing was appended or the file system refuses
    ///   (nothing is left at `path`).
    public func finish(provenance: CalibrationProvenance) throws(ShrinkIOError) {
        let (layers, owners, spill) = (statistics.layers, statistics.owners, statistics.spill)
        guard !layers.isEmpty else { throw .writeFailed(path: path, reason: "no layer saw any calibration input") }
        let layerEntries = layers.sorted { $0.key < $1.key }.map { op, layer in
            (key: op, value: JSONValue.object([(key: "rows", value: .number(String(layer.rows))), (key: "tensors", value: .string(layer.owner))]))
        }
        let header: JSONValue = .object([
            (key: "format", value: .number(String(CalibrationStatisticsFile.format))),
            (key: "model", value: .string(provenance.model)),
            (key: "model_sha256", value: .string(provenance.modelSHA256)),
            (key: "data", value: .string(provenance.data)),
            (key: "data_sha256", value: .string(provenance.dataSHA256)),
            (key: "lines", value: .number(String(provenance.lines))),
            (key: "layers", value: .object(layerEntries)),
        ])
        let sorted = owners.sorted { $0.key < $1.key }
        let layout = sorted.flatMap { op, owner in
            Self.parts.map { TensorDescriptor(name: "\(op).\($0.suffix)", dtype: $0.dtype, shape: $0.rank == 2 ? [owner.width, owner.width] : [owner.width]) }
        }
        try SafetensorsWriter.write(layout, metadata: [CalibrationStatisticsFile.metadataKey: header.serialized()], to: path) { index throws(ShrinkIOError) in
            let (width, offset) = sorted[index / 3].value
            // The owner's tensors follow each other in the spill: correlation, sums, maxima.
            let start = offset + (index % 3 >= 1 ? 8 * width * width : 0) + (index % 3 == 2 ? 8 * width : 0)
            let entry = layout[index]
            let bytes = try spill.read(at: start, count: Shape.byteCount(entry.shape, dtype: entry.dtype)!)
            do { return try DenseTensor(dtype: entry.dtype, shape: entry.shape, bytes: bytes) } catch {
                throw .writeFailed(path: path, reason: "tensor '\(entry.name)': \(error)")
            }
        }
    }

    /// The three tensors of an op: suffix, dtype and rank.
    static let parts: [(suffix: String, dtype: DType, rank: Int)] = [("input_correlation", .f64, 2), ("input_abs_sum", .f64, 1), ("input_abs_max", .f32, 1)]

    static func tensor(_ part: Int, of value: LayerInputStatistics, name: String, path: String) throws(ShrinkIOError) -> DenseTensor {
        do {
            switch part {
            case 0: return try DenseTensor(doubles: value.correlation.matrix, shape: [value.width, value.width])
            case 1: return try DenseTensor(doubles: value.absoluteSums, shape: [value.width])
            default: return try DenseTensor(converting: value.absoluteMaxima, shape: [value.width])
            }
        } catch {
            throw .writeFailed(path: path, reason: "tensor '\(name).\(parts[part].suffix)': \(error)")
        }
    }
}
