import Foundation
import ShrinkCore
import ShrinkIO
import ShrinkKernels

/// Rows of an embedding table read from its stored bytes (F32, F16, BF16 or any encoding): only
/// the rows asked for are decoded, through the vector row decoders of `PackedLinear`.
public struct EmbeddingTable: Sendable {
    public let rows: Int
    public let columns: Int
    private let table: PackedLinear

    init(encoded table: EncodedTensor, kernels: KernelVariant) {
        self.table = PackedLinear(weight: table, bias: nil, threads: 1, variant: kernels)
        rows = table.shape[0]
        columns = table.shape[1]
    }

    /// Writes row `row` to `target[0..<columns]`.
    public func gather(row: Int, into target: UnsafeMutablePointer<Float>) {
        precondition(row >= 0 && row < rows)
        table.decodeWeightRow(row, into: target)
    }

    /// Adds row `row` to `target[0..<columns]`, decoding it into `scratch` (`columns` floats) first.
    public func add(row: Int, into target: UnsafeMutablePointer<Float>, scratch: UnsafeMutablePointer<Float>) {
        gather(row: row, into: scratch)
        for column in 0..<columns { target[column] += scratch[column] }
    }
}

/// The weights of a model (any `TensorStore`), handed out as the runtime pieces that execute
/// them: dense fp32 weights through BLAS, encoded weights through their kernels, without decoding
/// whole encoded tensors.
/// A linear layer of a runtime and what it runs.
public struct LinearLayerExecution: Sendable, Equatable, Codable {
    /// The op (`encoder.layer.0.attention.self.query`).
    public let name: String
    public let execution: LinearExecution
}

public final class WeightSource: @unchecked Sendable {
    public let store: any TensorStore
    public var path: String { store.path }

    /// Threads each encoded linear layer splits its output rows over.
    public let threads: Int
    /// The precision encoded linear layers compute in.
    public let activations: ActivationPrecision
    /// The float kernels everything built from this source runs.
    public let kernels: KernelVariant
    /// The integer kernels of layers computing with int8 activations.
    public let integerKernels: IntegerKernelVariant

    /// Sees the inputs of every linear layer built from this source (calibration).
    let observer: (any LinearInputObserver)?
    /// Where the layers built from this source keep their repacked weights (in huge pages).
    let arena = WeightArena()
    /// Every linear layer built from this source so far, in order.
    public private(set) var linearExecutions: [LinearLayerExecution] = []

    /// What became of the specialization cache for this load.
    public enum SpecializationOutcome: Equatable, Sendable {
        /// No cache asked for, or no layer with panels to cache.
        case unused
        /// The layers' panels were mapped from the cache's entry.
        case mapped
        /// The panels were repacked and an entry written (`rebuilt`: over a stale or corrupt one).
        case written(rebuilt: Bool)
        /// The panels were repacked and no entry written (`reason`: none asked for, or the write failed).
        case repacked(reason: String)
    }

    public private(set) var specializationOutcome = SpecializationOutcome.unused
    /// The cache, the model's key in it, and the entry this load maps, if any.
    private var specialization: (cache: SpecializationCache, key: String, entry: SpecializedPanels?, stale: Bool)?
    /// The panels repacked by this load, by tensor, for a new entry.
    private var repacked: [(name: String, weight: SpecializedWeight)] = []

    /// Serves the tensors of `store`; encoded layers will use `options.threads` threads and compute
    /// in `options.activations` precision; `options.observer`, if any, sees every linear layer's inputs.
    public init(store: any TensorStore, options: RuntimeOptions) {
        self.store = store
        observer = options.observer
        threads = options.threads
        activations = options.activations
        kernels = options.kernels
        integerKernels = options.integerKernels
        if let cache = options.specialization,
           let key = try? cache.key(modelPath: store.path, variant: options.integerKernels, activations: options.activations,
                                    remembers: cache.createsEntries) {
            let path = cache.entryPath(key: key)
            let exists = FileManager.default.fileExists(atPath: path)
            let entry = exists ? try? SpecializedPanels(path: path, key: key) : nil
            specialization = (cache, key, entry, exists && entry == nil)
            if entry != nil { specializationOutcome = .mapped }
        }
    }

    /// Writes the cache entry of this load's repacked panels when the cache creates entries or
    /// the entry found was stale or corrupt; a failed write leaves the load as it is
    /// (`specializationOutcome` says why). Call once every layer is built.
    public func saveSpecialization() {
        guard let specialization, specialization.entry == nil, !repacked.isEmpty else { return }
        guard specialization.cache.createsEntries || specialization.stale else {
            specializationOutcome = .repacked(reason: "no entry, and the cache only maps existing ones")
            return
        }
        do {
            try SpecializedPanels.write(repacked, key: specialization.key, to: specialization.cache.entryPath(key: specialization.key))
            specializationOutcome = .written(rebuilt: specialization.stale)
        } catch {
            specializationOutcome = .repacked(reason: "\(error)")
        }
        repacked = []
    }

    /// Opens `path` (any format `TensorStores.open` reads, memory-mapped) with the given options
    /// (default: all cores, int8 activations, the fastest kernels this CPU runs).
    public convenience init(path: String, threads: Int = ProcessInfo.processInfo.activeProcessorCount, activations: ActivationPrecision = .int8,
                            kernels: KernelVariant = .best, integerKernels: IntegerKernelVariant = .best,
                            observer: (any LinearInputObserver)? = nil) throws {
        self.init(store: try TensorStores.open(path: path),
                  options: RuntimeOptions(threads: threads, activations: activations, kernels: kernels, integerKernels: integerKernels, observer: observer))
    }

    /// The dense tensor `name`, nil when absent; an encoded one is an error naming it.
    func denseTensor(_ name: String) throws(ModelError) -> DenseTensor? {
        switch store.tensor(named: name) {
        case nil: return nil
        case .dense(let tensor): return tensor
        case .encoded: throw .invalidWeight(tensor: name, reason: "must not be compressed")
        }
    }

    /// The encoded tensor `name`, nil when absent or dense.
    func encodedTensor(_ name: String) -> EncodedTensor? {
        if case .encoded(let tensor) = store.tensor(named: name) { return tensor }
        return nil
    }

    func floats(_ name: String, shape: [Int]) throws(ModelError) -> [Float] {
        guard let tensor = try denseTensor(name) else { throw .invalidWeight(tensor: name, reason: "missing from \(path)") }
        guard tensor.shape == shape, tensor.dtype.isFloatingPoint else {
            throw .invalidWeight(tensor: name, reason: "is \(tensor.dtype.rawValue) \(Shape.describe(tensor.shape)), expected a float \(Shape.describe(shape))")
        }
        let values = tensor.floats()
        if let bad = values.firstIndex(where: { !$0.isFinite }) {
            throw .invalidWeight(tensor: name, reason: "element \(bad) is \(values[bad])")
        }
        return values
    }

    func checkShape(_ tensor: EncodedTensor, _ shape: [Int]) throws(ModelError) {
        guard tensor.shape == shape else {
            throw .invalidWeight(tensor: tensor.name, reason: "has shape \(Shape.describe(tensor.shape)), expected \(Shape.describe(shape))")
        }
    }

    /// The linear op `name` (`name.weight` `[out, in]`, optional `name.bias` `[out]`).
    func linear(_ name: String, out: Int, in inputs: Int) throws(ModelError) -> any LinearOperator {
        let base = try plainLinear(name, out: out, in: inputs)
        linearExecutions.append(LinearLayerExecution(name: name, execution: base.execution))
        return observer.map { ObservedLinear(base: base, name: name, observer: $0) } ?? base
    }

    func plainLinear(_ name: String, out: Int, in inputs: Int) throws(ModelError) -> any LinearOperator {
        let bias = try denseTensor(name + ".bias") == nil ? nil : try floats(name + ".bias", shape: [out])
        // A cache entry holds the panels of this file's own (content-keyed) tensors, so the tensor is
        // not decoded for them; a rotated weight's panels hold `W'`, its rotation's signs are read from the file.
        if let entry = specialization?.entry, let restored = entry.panels(for: name + ".weight"), restored.rows == out, restored.columns == inputs {
            let base = Int8ActivationLinear(weights: restored, bias: bias, threads: threads, variant: integerKernels)
            guard entry.rotated.contains(name + ".weight") else { return base }
            if let rotation = encodedTensor(name + ".weight")?.inputRotation?.rotation { return RotatedLinear(base: base, rotation: rotation, variant: kernels) }
        }
        if let weight = encodedTensor(name + ".weight") {
            try checkShape(weight, [out, inputs])
            let built = activations.linear(weight: weight, bias: bias, threads: threads, kernels: kernels, integerKernels: integerKernels, arena: arena)
            if specialization != nil {
                if let integer = built as? Int8ActivationLinear {
                    repacked.append((weight.name, .int8(integer.weights, rotated: false)))
                } else if let integer = (built as? RotatedLinear)?.base as? Int8ActivationLinear {
                    repacked.append((weight.name, .int8(integer.weights, rotated: true)))
                }
            }
            return built
        }
        if let tensor = try denseTensor(name + ".weight"), tensor.dtype == .f16 || tensor.dtype == .bf16 {
            return try halfPrecisionLinear(name + ".weight", tensor, out: out, in: inputs, bias: bias)
        }
        if let restored = specialization?.entry?.floatLinear(for: name + ".weight", rows: out, columns: inputs, bias: bias, threads: threads, variant: kernels) {
            return restored
        }
        let linear = DenseLinear(weights: try floats(name + ".weight", shape: [out, inputs]), bias: bias, outFeatures: out, inFeatures: inputs,
                                 threads: threads, variant: kernels)
        if specialization != nil { repacked.append((name + ".weight", .float32(linear))) }
        return linear
    }

    /// An F16/BF16 weight kept in its 16 bits and widened by the kernels (`PackedLinear`).
    func halfPrecisionLinear(_ name: String, _ tensor: DenseTensor, out: Int, in inputs: Int, bias: [Float]?) throws(ModelError) -> any LinearOperator {
        guard tensor.shape == [out, inputs] else {
            throw .invalidWeight(tensor: name, reason: "is \(tensor.dtype.rawValue) \(Shape.describe(tensor.shape)), expected \(Shape.describe([out, inputs]))")
        }
        return PackedLinear(weight: try storedWeight(name, tensor), bias: bias, threads: threads, variant: kernels)
    }

    /// The F32/F16/BF16 `tensor` as a `.dense` encoded tensor viewing its stored bytes, once every
    /// element was checked finite (unless this load maps a cache entry: the load that wrote it
    /// checked the same bytes). The check reads every page; they are released after it and come
    /// back when used, so a model larger than memory can load (calibration then releases each
    /// layer's pages after running it).
    /// - Throws: `ModelError.invalidWeight` naming the first infinite or NaN element.
    func storedWeight(_ name: String, _ tensor: DenseTensor) throws(ModelError) -> EncodedTensor {
        if specialization?.entry == nil {
            if let bad = Self.firstNonFinite(tensor) { throw .invalidWeight(tensor: name, reason: "element \(bad.index) is \(bad.value)") }
            tensor.storage.releasePages()
        }
        do {
            return try EncodedTensor(name: name, shape: tensor.shape, sourceDType: tensor.dtype, encoding: .dense(tensor.dtype), parts: ["values": tensor])
        } catch {
            throw .invalidWeight(tensor: name, reason: "\(error)")
        }
    }

    /// The first infinite or NaN element of the F32, F16 or BF16 `tensor` (its index and value).
    static func firstNonFinite(_ tensor: DenseTensor) -> (index: Int, value: Float)? {
        let bytes = tensor.bytes
        switch tensor.dtype {
        case .f32:
            // All-ones exponent: Inf or NaN.
            let count = bytes.count / 4
            var index = 0
            while index < count {
                // A branch-free test per block of 1,024 (it vectorizes); only a block with a hit is searched.
                let end = min(count, index + 1024)
                var hit = false
                for at in index..<end { hit = hit || (bytes.loadUnaligned(fromByteOffset: 4 * at, as: UInt32.self) & 0x7F80_0000 == 0x7F80_0000) }
                if hit, let bad = (index..<end).first(where: { bytes.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self) & 0x7F80_0000 == 0x7F80_0000 }) {
                    return (bad, bytes.loadUnaligned(fromByteOffset: 4 * bad, as: Float.self))
                }
                index = end
            }
            return nil
        default:
            let exponent: UInt16 = tensor.dtype == .f16 ? 0x7C00 : 0x7F80
            let bits = (0..<(bytes.count / 2)).lazy.map { bytes.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self) }
            guard let bad = bits.firstIndex(where: { $0 & exponent == exponent }) else { return nil }
            return (bad, tensor.dtype == .f16 ? FloatingPointConversion.float(fromHalfBits: bits[bad]) : FloatingPointConversion.float(fromBFloat16Bits: bits[bad]))
        }
    }

    /// The embedding table `name` with `columns` columns: rows decoded as gathered from the stored
    /// bytes of an encoded, F32, F16 or BF16 table (whose pages stay on disk until read).
    func embedding(_ name: String, columns: Int) throws(ModelError) -> EmbeddingTable {
        if let table = encodedTensor(name) {
            guard table.shape.count == 2, table.shape[1] == columns else {
                throw .invalidWeight(tensor: name, reason: "has shape \(Shape.describe(table.shape)), expected [rows, \(columns)]")
            }
            return EmbeddingTable(encoded: table, kernels: kernels)
        }
        guard let tensor = try denseTensor(name), tensor.shape.count == 2 else { throw .invalidWeight(tensor: name, reason: "missing from \(path)") }
        guard [.f32, .f16, .bf16].contains(tensor.dtype), tensor.shape[1] == columns else {
            throw .invalidWeight(tensor: name, reason: "is \(tensor.dtype.rawValue) \(Shape.describe(tensor.shape)), expected a float [rows, \(columns)]")
        }
        return EmbeddingTable(encoded: try storedWeight(name, tensor), kernels: kernels)
    }

    /// LayerNorm `name` (`name.weight`, `name.bias`).
    func layerNorm(_ name: String, size: Int) throws(ModelError) -> LayerNormWeights {
        LayerNormWeights(gamma: try floats(name + ".weight", shape: [size]), beta: try floats(name + ".bias", shape: [size]), kernel: kernels)
    }
}
