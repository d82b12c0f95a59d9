import Dispatch
import Foundation
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkKernels
import ShrinkModels

/// What compressing one tensor did.
public struct TensorCompressionReport: Codable, Sendable {
    public let name: String
    /// `WeightEncoding.summary` of the result.
    public let encoding: String
    /// The recipe key path that chose the config.
    public let rule: String
    public let elements: Int
    public let bytesBefore: Int
    public let bytesAfter: Int
    public let bitsPerWeight: Double
    /// Weight signal-to-noise ratio in dB; `nil` when the encoding is exact.
    public let snrDecibels: Double?
    public let seconds: Double
}

/// The outcome of `ModelCompressor.compress`.
public struct CompressionSummary: Codable, Sendable {
    public let source: String
    public let output: String
    public let recipe: String
    /// Tensor bytes of the source and of the output.
    public let bytesBefore: Int
    public let bytesAfter: Int
    public let elements: Int
    public let compressedElements: Int
    public let compressedBytesBefore: Int
    public let compressedBytesAfter: Int
    public let tensors: [TensorCompressionReport]
    /// Tensors left as they were, with the reason.
    public let kept: [String: String]
    /// Whether a rotation of the residual stream was folded into the weights, and where.
    public let residualRotation: String?
    /// What end-to-end tuning did, when the recipe tunes.
    public let tuning: TuningSummary?
    public let seconds: Double

    /// `bytesBefore / bytesAfter`.
    public var ratio: Double { Double(bytesBefore) / Double(max(bytesAfter, 1)) }
    /// Bits per weight over the compressed tensors only.
    public var compressedBitsPerWeight: Double { Double(compressedBytesAfter * 8) / Double(max(compressedElements, 1)) }
    /// Bits per weight over every tensor of the model.
    public var overallBitsPerWeight: Double { Double(bytesAfter * 8) / Double(max(elements, 1)) }
    /// Mean weight SNR (dB) over compressed tensors with a finite SNR.
    public var meanSNRDecibels: Double? {
        let values = tensors.compactMap(\.snrDecibels)
        return values.isEmpty ? nil : values.reduce(0, +) / Double(values.count)
    }
}

/// The compression pipeline: read a model, resolve a recipe, compress every planned tensor,
/// write the compressed container atomically (nothing is written when any step fails).
public enum ModelCompressor {
    /// What `encode` produced: the tensors the recipe compresses, in memory, with their reports;
    /// the source store; the tensors kept with the reason; the source file's SHA-256.
    public struct EncodedModel: Sendable {
        public let store: any TensorStore
        public let tensors: [EncodedTensor]
        public let reports: [TensorCompressionReport]
        public let kept: [String: String]
        public let sourceDigest: String
        /// The rotation of the residual stream folded into the tensors, whose reading norms the
        /// output must store as ones (`FoldedResidualRotation`), nil when none is.
        public let residualRotation: FoldedResidualRotation?
        /// What folding did, for the summary; nil when the recipe folds nothing.
        public let residualRotationNote: String?
    }

    /// Compresses the tensors `recipe` plans for the model at `model` in memory, using `threads`
    /// workers (one tensor each, longest first, calibrated ones only while their correlations fit
    /// `quadraticBudget` together); nothing is written. `progress` is called once per compressed
    /// tensor, in completion order. `calibrationCache` shares calibration runs between
    /// compressions of one model. A recipe with `fold_rotations` has its readers' rotation folded
    /// into the weights (`ResidualRotationFolding`); the result then needs the reading norms as
    /// ones and `residualRotation` in the metadata, which `compress` writes.
    ///
    /// With a `spill` file each tensor's parts move there as soon as it is encoded, and the returned
    /// tensors view the spill file's mapping: memory then holds the tensors being encoded (one per
    /// thread), never the encoded model, whose pages a writer releases as it goes.
    public static func encode(model: ModelLocation, recipe: Recipe, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
                              calibrationCache: CalibrationCache? = nil, spill: SpillFile? = nil, checkpoint: String? = nil,
                              progress: @Sendable (TensorCompressionReport) -> Void = { _ in }) throws -> EncodedModel {
        let (store, configuration, plan) = try plan(model: model, recipe: recipe)

        var tasks: [(index: Int, config: OpCompressionConfig, rule: String)] = []
        var kept: [String: String] = [:]
        for (index, entry) in plan.entries.enumerated() {
            switch entry.decision {
            case .compress(let config, let rule): tasks.append((index, config, rule))
            case .keep(let reason): kept[entry.tensor.name] = reason
            }
        }
        let folding = recipe.foldRotations ? try ResidualRotationFolding.plan(
            architecture: configuration.flatMap { try? ModelArchitectures.architecture(for: $0) }, store: store,
            configs: Dictionary(uniqueKeysWithValues: tasks.map { (plan.entries[$0.index].tensor.name, $0.config) }), file: recipe.file) : nil
        // Longest first, so that the last tensors to finish are short ones and both threads stay busy.
        let planned = tasks.sorted { estimatedCost(plan.entries[$0.index].tensor, $0.config) > estimatedCost(plan.entries[$1.index].tensor, $1.config) }
        let sourceDigest = try SHA256.hexDigest(ofFile: model.weightsPath)
        let correlations = try calibrate(model: model, modelDigest: sourceDigest, recipe: recipe,
                                         weights: planned.filter { $0.config.isCalibrated }.map { plan.entries[$0.index].tensor.name },
                                         threads: threads, cache: calibrationCache, spillNextTo: spill?.path, checkpoint: checkpoint)
        // Tensors run in parallel, one per thread, their correlations within the budget; their BLAS
        // calls take one thread each.
        let workingSets = planned.map { encodingWorkingSet(shape: plan.entries[$0.index].tensor.shape, config: $0.config, sourceBytes: 0) }
        @Sendable func encodeTask(_ task: (index: Int, config: OpCompressionConfig, rule: String)) throws -> (FinishedTensor, TensorCompressionReport) {
            let name = plan.entries[task.index].tensor.name
            let tensorStart = DispatchTime.now()
            var (tensor, config, correlation) = (try denseSource(store, name), task.config, try correlations(String(name.dropLast(".weight".count))))
            if let folding { (tensor, config, correlation) = try folding.folded(name, tensor: tensor, config: config, correlation: correlation) }
            var rule = task.rule
            if config.isCalibrated, correlation == nil {
                config.quantize?.method = .roundToNearest
                config.palettize?.method = .roundToNearest
                rule += " (no calibration input reaches this layer: rounded to nearest)"
            }
            let encoded = try WeightCompressor.encode(name: name, tensor: tensor, config: config, correlation: consume correlation)
            let snr = WeightError.snr(original: tensor, encoded: encoded)
            let report = TensorCompressionReport(
                name: name, encoding: encoded.encoding.summary, rule: rule, elements: encoded.elementCount,
                bytesBefore: tensor.byteCount, bytesAfter: encoded.byteCount, bitsPerWeight: encoded.bitsPerWeight,
                snrDecibels: snr.isFinite ? snr : nil, seconds: seconds(since: tensorStart))
            // The source was read once: its pages leave memory, so a model larger than memory streams through.
            store.tensor(named: name)?.releasePages()
            let finished: FinishedTensor = try spill.map { .spilled(try SpilledEncodedTensor(encoded, into: $0)) } ?? .held(encoded)
            progress(report)
            return (finished, report)
        }
        let results = try BLASThreading.singleThreaded {
            try Parallel.map(planned.count, threads: threads, shares: workingSets.map(\.quadratic), budget: quadraticBudget(workingSets)) { taskIndex in
                let finished = try encodeTask(planned[taskIndex])
                // Streaming, the tensor's freed temporaries leave memory too, not only its source's pages.
                if spill != nil { Heap.releaseFreeMemory() }
                return finished
            }
        }
        let mapping = try spill?.map()
        let order = planned.indices.sorted { planned[$0].index < planned[$1].index }
        let tensors = try order.map { index throws -> EncodedTensor in
            switch results[index].0 {
            case .held(let tensor): return tensor
            case .spilled(let spilled): return try spilled.tensor(in: spill!, mapping: mapping!)
            }
        }
        return EncodedModel(store: store, tensors: tensors, reports: order.map { results[$0].1 }, kept: kept,
                            sourceDigest: sourceDigest, residualRotation: folding?.fold, residualRotationNote: folding?.summary)
    }

    /// The model's tensor store (a GGUF file or an uncompressed safetensors file), its
    /// architecture's configuration, and what `recipe` does with each of its tensors.
    /// - Throws: `ShrinkIOError.unsupportedFormat` for an already compressed model; the store's and
    ///   the plan's errors.
    static func plan(model: ModelLocation, recipe: Recipe) throws -> (store: any TensorStore, configuration: ModelConfiguration?, plan: CompressionPlan) {
        let store: any TensorStore
        if try ModelFileFormat.detect(path: model.weightsPath) == .gguf {
            store = try GGUFStore(path: model.weightsPath)
        } else {
            let file = try SafetensorsFile(path: model.weightsPath)
            if CompressedModel.isCompressed(file) {
                throw ShrinkIOError.unsupportedFormat(path: model.weightsPath, reason: "the model is already compressed; decompress it first")
            }
            store = try SafetensorsStore(file: file)
        }
        let configuration = try ModelArchitectures.configuration(of: store, configPath: model.configPath)
        let roles = ModelArchitectures.roles(of: store, configuration: configuration)
        return (store, configuration, try CompressionPlan.resolve(recipe, tensors: store.descriptors, roles: roles))
    }

    /// An encoded tensor in memory, or moved to a spill file.
    private enum FinishedTensor: Sendable {
        case held(EncodedTensor)
        case spilled(SpilledEncodedTensor)
    }

    /// A tensor's relative encoding time: its element count, times `1 + inputs / 256` for a
    /// calibrated (GPTQ) config, whose sweep and Cholesky factorisation grow with the inputs (on
    /// MiniLM, 75 ns per weight rounded to nearest, 200 and 560 ns for GPTQ over 384 and 1,536 inputs).
    static func estimatedCost(_ tensor: TensorDescriptor, _ config: OpCompressionConfig) -> Double {
        let elements = Double(tensor.shape.reduce(1, *))
        return config.isCalibrated ? elements * (1 + Double(tensor.shape.last ?? 1) / 256) : elements
    }

    /// Compresses the model at `model` with `recipe` into `output` (`encode`, then end-to-end
    /// tuning when the recipe has `tune`, then the container written atomically). Source tensors
    /// are read from the mapped file one at a time, their pages dropped once encoded; encoded
    /// tensors go to a spill file next to `output` as they finish, and are copied into the output
    /// in file order, their pages dropped once written. Peak memory: the tensors being encoded
    /// (one per thread, with their working buffers) and one tensor being written; tuning holds
    /// the model it tunes. With `checkpoint` (a folder), a calibrated recipe that runs its
    /// calibration data keeps that run's progress there (`CalibrationCheckpoint`, decoders only): a
    /// compression that stops continues the calibration after its last finished block when run
    /// again with the same folder, and writes the same bytes. The folder goes once `output` is written.
    public static func compress(model: ModelLocation, recipe: Recipe, output: String, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
                                calibrationCache: CalibrationCache? = nil, checkpoint: String? = nil,
                                progress: @Sendable (TensorCompressionReport) -> Void = { _ in }) throws -> CompressionSummary {
        let start = DispatchTime.now()
        // Tuning's model and text are checked before the encoding they would follow.
        let tuningInputs = try recipe.tuning.map { try EndToEndTuning.inputs(model: model, config: $0, recipeFile: recipe.file) }
        // Encoded tensors wait in a spill file next to the output, not in memory.
        let spill = try SpillFile(nextTo: output)
        let encodedModel = try encode(model: model, recipe: recipe, threads: threads, calibrationCache: calibrationCache, spill: spill,
                                      checkpoint: checkpoint, progress: progress)
        let store = encodedModel.store, kept = encodedModel.kept, sourceDigest = encodedModel.sourceDigest
        var encodedTensors = encodedModel.tensors
        var tunedDense: [String: DenseTensor] = [:]
        var tuning: TuningSummary?
        if let config = recipe.tuning, let tuningInputs {
            let tuned = try EndToEndTuning.tune(tuningInputs, store: store, encoded: encodedTensors, config: config, threads: threads)
            (encodedTensors, tunedDense, tuning) = (tuned.tensors, tuned.dense, tuned.summary)
        }
        // Tensors the recipe keeps stay as stored: dense ones dense, a GGUF file's block types in
        // their encoding.
        let encodedNames = Set(encodedModel.tensors.map(\.name))
        var dense: [(name: String, tensor: DenseTensor)] = []
        var keptEncoded: [EncodedTensor] = []
        let absorbed = encodedModel.residualRotation?.norms ?? []
        for name in store.names where !encodedNames.contains(name) {
            switch store.tensor(named: name) {
            case .some(let norm) where absorbed.contains(name):
                dense.append((name, try DenseTensor(converting: [Float](repeating: 1, count: norm.shape.reduce(1, *)), shape: norm.shape)))
            case .dense(let tensor): dense.append((name, tunedDense[name] ?? tensor))
            case .encoded(let tensor): keptEncoded.append(tensor)
            case nil: throw ShrinkIOError.tensorNotFound(path: store.path, tensor: name)
            }
        }
        var metadata = store.metadata
        if let gguf = store as? GGUFStore {
            // The decoder's configuration and tokenizer come from the GGUF metadata, kept typed.
            metadata = [GGUFMetadata.containerKey: GGUFMetadata(file: gguf.file).json]
        }
        metadata["shrink.recipe"] = recipe.canonicalJSON
        metadata["shrink.recipe_name"] = recipe.name
        metadata["shrink.source"] = (model.weightsPath as NSString).lastPathComponent
        metadata["shrink.source_sha256"] = sourceDigest
        if let fold = encodedModel.residualRotation { metadata[FoldedResidualRotation.metadataKey] = fold.metadataValue }
        let encoded = encodedTensors + keptEncoded
        try CompressedModel(denseTensors: dense, encodedTensors: encoded, metadata: metadata).write(to: output)
        if let checkpoint { CalibrationCheckpoint.remove(folder: checkpoint) }

        // Tuned tensors' SNR against the source, recomputed (their bytes are as encoded).
        let reports = try zip(encodedModel.reports, encodedTensors).map { report, tensor in
            guard tuning != nil, tensor.parts["lut"] != nil else { return report }
            let snr = WeightError.snr(original: try denseSource(store, tensor.name), encoded: tensor)
            return TensorCompressionReport(name: report.name, encoding: report.encoding, rule: report.rule, elements: report.elements,
                                           bytesBefore: report.bytesBefore, bytesAfter: tensor.byteCount, bitsPerWeight: tensor.bitsPerWeight,
                                           snrDecibels: snr.isFinite ? snr : nil, seconds: report.seconds)
        }
        let keptBytes = dense.reduce(0) { $0 + $1.tensor.byteCount } + keptEncoded.reduce(0) { $0 + $1.byteCount }
        let sourceBytes = store.names.reduce(0) { total, name in total + (store.storage(of: name)?.bytes ?? 0) }
        return CompressionSummary(
            source: model.weightsPath, output: output, recipe: recipe.name,
            bytesBefore: sourceBytes,
            bytesAfter: keptBytes + reports.reduce(0) { $0 + $1.bytesAfter },
            elements: store.descriptors.reduce(0) { $0 + $1.shape.reduce(1, *) },
            compressedElements: reports.reduce(0) { $0 + $1.elements },
            compressedBytesBefore: reports.reduce(0) { $0 + $1.bytesBefore },
            compressedBytesAfter: reports.reduce(0) { $0 + $1.bytesAfter },
            tensors: reports, kept: kept, residualRotation: encodedModel.residualRotationNote, tuning: tuning,
            seconds: seconds(since: start))
    }

    /// The input correlations that calibrated configs need, for the linear weights `weights`
    /// (`….weight`) of the model whose weights have SHA-256 `modelDigest`, by layer name (nil for a
    /// layer no calibration input reaches): read layer by layer, when asked, from the cache's
    /// statistics file when it has one (recorded on that model), else recorded from the recipe's
    /// calibration data run through the uncompressed model: with `spillNextTo` and no cache, block
    /// by block into a spill file in that path's folder and read back layer by layer (memory holds
    /// one block's statistics, then one layer's per reader; a decoder's hidden states between
    /// blocks go to a spill file there too), otherwise all at once in memory. With `checkpoint`
    /// and no cache, the same block by block into that folder (`CalibrationCheckpoint`): a run
    /// that stops continues there after its last finished block.
    static func calibrate(model: ModelLocation, modelDigest: String, recipe: Recipe, weights: [String], threads: Int,
                          cache: CalibrationCache?, spillNextTo: String? = nil, checkpoint: String? = nil) throws -> @Sendable (String) throws -> InputCorrelation? {
        guard !weights.isEmpty else { return { _ in nil } }
        if let bad = weights.first(where: { !$0.hasSuffix(".weight") }) {
            throw CompressionError.invalidWeight(tensor: bad, reason: "only linear layers' weights can be calibrated")
        }
        let layers = Set(weights.map { String($0.dropLast(".weight".count)) })
        if let cache, let statistics = cache.statistics {
            return try cache.recordedCorrelations(statistics, model: model, modelDigest: modelDigest, layers: layers)
        }
        guard let calibration = recipe.calibration else {
            throw CompressionError.invalidRecipe(file: recipe.file, keyPath: "calibration", reason: "calibrated methods need calibration data (or a statistics file: --stats)")
        }
        let (files, architecture) = try openForCalibration(model)
        if cache == nil, let checkpoint {
            let lines = try Calibration.lines(calibration.path, limit: calibration.limit).count
            var resumable = try CalibrationCheckpoint(folder: checkpoint, modelSHA256: modelDigest, dataSHA256: try SHA256.hexDigest(ofFile: calibration.path),
                                                      lines: lines, layers: layers)
            try resumable.stream(files: files, architecture: architecture, data: calibration.path, lines: lines, layers: layers, threads: threads) { _ in }
            let stored = resumable.statistics
            return { try stored.correlation(of: $0) }
        }
        if cache == nil, let spillNextTo {
            let stored = try SpilledCalibrationStatistics(nextTo: spillNextTo)
            try Calibration.streamInputStatistics(files: files, architecture: architecture, dataPath: calibration.path, limit: calibration.limit,
                                                  layers: layers, threads: threads, spillNextTo: spillNextTo) { if !$1.isEmpty { try stored.append($1) } }
            return { try stored.correlation(of: $0) }
        }
        func record(_ layers: Set<String>) throws -> [String: InputCorrelation] {
            try Calibration.inputStatistics(files: files, architecture: architecture, dataPath: calibration.path,
                                            limit: calibration.limit, layers: layers, threads: threads).mapValues(\.correlation)
        }
        let recorded = try cache.map {
            try $0.correlations(model: model, data: calibration.path, limit: calibration.limit, layers: layers,
                                allLayers: Set(architecture.observationPoints), record: record)
        } ?? record(layers)
        return { recorded[$0] }
    }

    /// The model's files and architecture, for a calibration run.
    /// - Throws: `ShrinkIOError.cannotOpen` when a safetensors model has no config.json to run it by.
    static func openForCalibration(_ model: ModelLocation) throws -> (ModelFiles, any ModelArchitecture) {
        guard model.configPath != nil || (try? ModelFileFormat.detect(path: model.weightsPath)) == .gguf else {
            throw ShrinkIOError.cannotOpen(path: model.weightsPath, reason: "calibration runs the model, which needs its config.json next to the weights")
        }
        return try ModelArchitectures.open(weightsPath: model.weightsPath, configPath: model.configPath)
    }

    /// Writes the dense model any readable file represents (a compressed container, a GGUF file, a
    /// plain safetensors file) as safetensors, names as in the source and shapes row-major with the
    /// input axis last: dense tensors as stored, encoded tensors decoded to their source dtype
    /// (F32, F16 or BF16; F32 for others), GGUF block types decoded to F32. Metadata keeps the
    /// source's keys except Shrink's own and GGUF arrays (vocabularies). A folded residual
    /// rotation is undone (`FoldedResidualRotation.unfold`): the output computes what the
    /// compressed model does, its reading norms' scales in the weights after them.
    public static func decompress(input: String, output: String) throws {
        let store = try TensorStores.open(path: input)
        let fold = try FoldedResidualRotation(metadata: store.metadata, path: input)
        var tensors: [(name: String, tensor: DenseTensor)] = []
        for name in store.names {
            switch store.tensor(named: name)! {
            case .dense(let tensor) where fold?.readers[name] == nil && fold?.writers.contains(name) != true:
                tensors.append((name, tensor))
            case .dense(let tensor):
                var values = tensor.floats()
                try fold?.unfold(name, values: &values, shape: tensor.shape)
                tensors.append((name, try DenseTensor(converting: values, to: tensor.dtype.isFloatingPoint ? tensor.dtype : .f32, shape: tensor.shape)))
            case .encoded(let encoded):
                let dtype: DType = [.f16, .bf16].contains(encoded.sourceDType) ? encoded.sourceDType : .f32
                var values = encoded.decode()
                try fold?.unfold(name, values: &values, shape: encoded.shape)
                tensors.append((name, try DenseTensor(converting: values, to: dtype, shape: encoded.shape)))
            }
        }
        tensors.sort { $0.name < $1.name }
        var metadata = store.metadata.filter { !$0.key.hasPrefix("shrink.") }
        if let gguf = store as? GGUFStore {
            metadata = metadata.filter { gguf.file.value($0.key)?.arrayValue == nil }
        }
        try SafetensorsWriter.write(tensors, metadata: metadata, to: output)
    }

    /// The tensor `name` of `store` as dense values: a GGUF block type decoded exactly (the
    /// decoded model is the base a recipe compresses).
    static func denseSource(_ store: any TensorStore, _ name: String) throws -> DenseTensor {
        switch store.tensor(named: name) {
        case .dense(let tensor): return tensor
        case .encoded(let tensor): return try DenseTensor(converting: tensor.decode(), shape: tensor.shape)
        case nil: throw ShrinkIOError.tensorNotFound(path: store.path, tensor: name)
        }
    }

    static func seconds(since start: DispatchTime) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    }
}
