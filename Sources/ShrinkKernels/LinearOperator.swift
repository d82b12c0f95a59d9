import Dispatch
import Foundation
import ShrinkCore

/// A linear layer `y = x · Wᵀ + b` over `rows` input rows, whatever the weight's encoding.
public protocol LinearOperator: Sendable {
    var inFeatures: Int { get }
    var outFeatures: Int { get }
    /// The kernel this layer runs and the weights it multiplies.
    var execution: LinearExecution { get }
    /// Computes `rows × outFeatures` outputs from `rows × inFeatures` inputs (row-major).
    func forward(_ x: [Float], rows: Int, into y: inout [Float])
    /// True when each output row depends on its own input row alone, bit for bit, whatever other
    /// rows a call holds and however many threads it runs on: a batch may then run split into parts
    /// on several threads at once (`forward` is safe to call concurrently on every layer).
    var rowsAreIndependent: Bool { get }
}

extension LinearOperator {
    /// False unless a layer says otherwise (a BLAS product may sum a row in another order at another batch size).
    public var rowsAreIndependent: Bool { false }
}

/// What a linear layer runs: its kernel, the form its weights take there, and how far those may
/// be from the stored weights (0: the stored weights exactly).
public struct LinearExecution: Sendable, Equatable, Codable {
    /// The kernel and its variant (`int8 × u8 codes, avx512vnni`).
    public let kernel: String
    /// The weights as the kernel reads them (`4-bit LUT indices → 16-bit codes (two planes)`).
    public let weights: String
    /// The largest difference between a weight the kernel multiplies and the stored one.
    public let maximumWeightError: Float

    public init(kernel: String, weights: String, maximumWeightError: Float = 0) {
        self.kernel = kernel
        self.weights = weights
        self.maximumWeightError = maximumWeightError
    }
}

/// The default least work (multiply-adds) worth handing to another thread. The worker pool's
/// hand-off costs about a microsecond; on the development VM MiniLM at batch 1 with 2 threads ran
/// at 0.89 ms per sentence with 256 K, 1.0 ms with 64 K and 1.24 ms with 4 M.
public let defaultMinimumWorkPerThread = 1 << 18

/// How many of `threads` threads `work` multiply-adds over `outFeatures` rows should use.
func workerCount(threads: Int, work: Int, outFeatures: Int, minimumWork: Int) -> Int {
    max(1, min(threads, outFeatures, minimumWork > 0 ? work / minimumWork : threads))
}

/// An fp32 weight, packed at load in panels of 16 output channels (`shrink_gemm_f32_panels`;
/// threads split the panels). On MiniLM this ran faster than OpenBLAS `sgemm` at batch 32
/// (334 against 271 sentences/s on one thread) and about twice as fast as the earlier 4×4 tiles at
/// batch 1, so the row-major weight is not kept.
public final class DenseLinear: LinearOperator, @unchecked Sendable {
    public let inFeatures: Int
    public let outFeatures: Int
    public let threads: Int
    public let variant: KernelVariant
    /// Least multiply-adds per thread before work is split (0: always split, for tests).
    public let minimumWorkPerThread: Int
    let bias: [Float]?
    /// The weights in panels of 16 channels, 64-byte aligned: panel `p` holds rows `16p ..< 16p + 16`
    /// (zeros past `outFeatures`), column by column.
    let panels: UnsafeMutablePointer<Float>
    let panelCount: Int
    /// The arena that owns `panels` when they are not this operator's own (a mapped cache entry).
    private let panelOwner: WeightArena?

    /// `weights` is `outFeatures × inFeatures`, row-major.
    public convenience init(weights: [Float], bias: [Float]?, outFeatures: Int, inFeatures: Int,
                            threads: Int = ProcessInfo.processInfo.activeProcessorCount, variant: KernelVariant = .best,
                            minimumWorkPerThread: Int = defaultMinimumWorkPerThread) {
        precondition(weights.count == outFeatures * inFeatures && (bias?.count ?? outFeatures) == outFeatures && threads >= 1)
        let count = max(1, (outFeatures + 15) / 16 * inFeatures * 16)
        let panels = UnsafeMutableRawPointer.allocate(byteCount: count * 4, alignment: 64).bindMemory(to: Float.self, capacity: count)
        panels.initialize(repeating: 0, count: count)
        for row in 0..<outFeatures {
            let panel = panels + (row / 16) * inFeatures * 16 + row % 16
            for column in 0..<inFeatures { panel[column * 16] = weights[row * inFeatures + column] }
        }
        self.init(panels: panels, owner: nil, bias: bias, outFeatures: outFeatures, inFeatures: inFeatures, threads: threads,
                  variant: variant, minimumWorkPerThread: minimumWorkPerThread)
    }

    /// The operator over panels as `storedPanels` gave them, in memory `owner` keeps alive (such as
    /// a mapped cache entry); nil unless `panels` holds exactly `panelBytes(outFeatures:inFeatures:)`
    /// bytes, 64-byte aligned.
    public convenience init?(restoring panels: UnsafeMutableRawBufferPointer, owner: WeightArena, bias: [Float]?, outFeatures: Int, inFeatures: Int,
                             threads: Int = ProcessInfo.processInfo.activeProcessorCount, variant: KernelVariant = .best,
                             minimumWorkPerThread: Int = defaultMinimumWorkPerThread) {
        guard outFeatures > 0, inFeatures > 0, threads >= 1, (bias?.count ?? outFeatures) == outFeatures,
              panels.count == Self.panelBytes(outFeatures: outFeatures, inFeatures: inFeatures),
              let base = panels.baseAddress, Int(bitPattern: base) % 64 == 0 else { return nil }
        self.init(panels: base.bindMemory(to: Float.self, capacity: panels.count / 4), owner: owner, bias: bias, outFeatures: outFeatures,
                  inFeatures: inFeatures, threads: threads, variant: variant, minimumWorkPerThread: minimumWorkPerThread)
    }

    /// Over `panels`, freed with the operator when `owner` is nil.
    private init(panels: UnsafeMutablePointer<Float>, owner: WeightArena?, bias: [Float]?, outFeatures: Int, inFeatures: Int, threads: Int,
                 variant: KernelVariant, minimumWorkPerThread: Int) {
        self.panels = panels
        panelOwner = owner
        panelCount = (outFeatures + 15) / 16
        self.bias = bias
        self.outFeatures = outFeatures
        self.inFeatures = inFeatures
        self.threads = threads
        self.variant = variant
        self.minimumWorkPerThread = minimumWorkPerThread
    }

    /// Bytes of the panels of an `outFeatures × inFeatures` weight.
    public static func panelBytes(outFeatures: Int, inFeatures: Int) -> Int { (outFeatures + 15) / 16 * inFeatures * 16 * 4 }

    /// The panels' bytes, as `init(restoring:owner:…)` takes them back.
    public var storedPanels: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: panels, count: Self.panelBytes(outFeatures: outFeatures, inFeatures: inFeatures))
    }

    deinit { if panelOwner == nil { UnsafeMutableRawPointer(panels).deallocate() } }

    public var execution: LinearExecution { LinearExecution(kernel: "fp32 panels, \(variant.rawValue)", weights: "f32") }

    public func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        precondition(x.count >= rows * inFeatures && y.count >= rows * outFeatures)
        let workers = workerCount(threads: threads, work: rows * outFeatures * inFeatures, outFeatures: panelCount,
                                  minimumWork: minimumWorkPerThread)
        let empty: [Float] = []
        (bias ?? empty).withUnsafeBufferPointer { b in
            x.withUnsafeBufferPointer { input in
                y.withUnsafeMutableBufferPointer { output in
                    WorkerPool.shared.run(workers, PanelJob(layer: self, x: input.baseAddress!, rows: rows, y: output.baseAddress!,
                                                            bias: bias == nil ? nil : b.baseAddress))
                }
            }
        }
    }

    /// One forward pass's panels, split over the workers.
    struct PanelJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: PanelJob.self).pointee.run(worker: worker, of: workers) } }
        let layer: DenseLinear
        let x: UnsafePointer<Float>
        let rows: Int
        let y: UnsafeMutablePointer<Float>
        let bias: UnsafePointer<Float>?

        func run(worker: Int, of workers: Int) {
            layer.variant.gemmPanels(layer.panels, n: layer.outFeatures, k: layer.inFeatures,
                                     panels: Parallel.range(worker: worker, of: workers, count: layer.panelCount), x, rows: rows,
                                     ldx: layer.inFeatures, y, ldy: layer.outFeatures, bias: bias)
        }
    }
}

/// The scalar reference for any encoded weight: each output row of the weight is decoded (into a
/// row-sized scratch buffer, never the whole matrix) and dotted with every input row, accumulating
/// in `Double`. Correct for every encoding; the optimized kernels are tested against it.
public final class ReferenceEncodedLinear: LinearOperator, @unchecked Sendable {
    public let inFeatures: Int
    public let outFeatures: Int
    let reader: EncodedTensorReader
    let bias: [Float]?

    public init(weight: EncodedTensor, bias: [Float]?) {
        precondition(weight.shape.count == 2 && (bias?.count ?? weight.shape[0]) == weight.shape[0])
        reader = EncodedTensorReader(weight)
        self.bias = bias
        outFeatures = weight.shape[0]
        inFeatures = weight.shape[1]
    }

    public var execution: LinearExecution { LinearExecution(kernel: "reference (f64 sums)", weights: "decoded rows") }

    public func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        var row = [Float](repeating: 0, count: inFeatures)
        for output in 0..<outFeatures {
            row.withUnsafeMutableBufferPointer { reader.decode(flatRange: (output * inFeatures)..<((output + 1) * inFeatures), into: $0.baseAddress!) }
            for input in 0..<rows {
                var sum = Double(bias?[output] ?? 0)
                for index in 0..<inFeatures { sum += Double(x[input * inFeatures + index]) * Double(row[index]) }
                y[input * outFeatures + output] = Float(sum)
            }
        }
    }
}

/// The precision compressed linear layers compute in; their weights stay as stored either way.
public enum ActivationPrecision: String, CaseIterable, Sendable {
    /// Activations stay fp32 and weights are decoded to fp32 on the fly (`PackedLinear`).
    case float32 = "f32"
    /// Activations are quantized to int8 per row and per block of 32 inputs and multiplied with
    /// the weight codes by integer dot products (`Int8ActivationLinear`), for every encoding the
    /// integer path covers (`Int8PanelWeights`); other layers stay fp32.
    case int8

    /// The operator for an encoded weight in this precision, running `kernels` (fp32 path) or
    /// `integerKernels` (int8 path, its repacked weight carved from `arena`).
    public func linear(weight: EncodedTensor, bias: [Float]?, threads: Int, kernels: KernelVariant = .best,
                       integerKernels: IntegerKernelVariant = .best, arena: WeightArena = WeightArena(chunkBytes: 0)) -> any LinearOperator {
        if let (rotated, rotation) = weight.inputRotation {
            return RotatedLinear(base: linear(weight: rotated, bias: bias, threads: threads, kernels: kernels, integerKernels: integerKernels,
                                              arena: arena), rotation: rotation, variant: kernels)
        }
        if self == .int8, let panels = Int8PanelWeights(weight: weight, arena: arena) {
            return Int8ActivationLinear(weights: panels, bias: bias, threads: threads, variant: integerKernels)
        }
        return PackedLinear(weight: weight, bias: bias, threads: threads, variant: kernels)
    }
}

/// A layer whose weight is stored rotated, `W = W' · R` (`WeightEncoding.rotated`): each input row
/// is rotated, `x' = R · x` (`HadamardRotation.rotate`, in fp32, by `variant`'s kernel), and `base`
/// multiplies it by the stored `W'` as it would any weight of that encoding.
public final class RotatedLinear: LinearOperator, @unchecked Sendable {
    public let base: any LinearOperator
    public let rotation: HadamardRotation
    public let variant: KernelVariant
    private let rotatedInputs = KeptFloats()

    public init(base: any LinearOperator, rotation: HadamardRotation, variant: KernelVariant = .best) {
        precondition(base.inFeatures == rotation.size)
        self.base = base
        self.rotation = rotation
        self.variant = variant
    }

    public var inFeatures: Int { base.inFeatures }
    public var outFeatures: Int { base.outFeatures }
    public var rowsAreIndependent: Bool { base.rowsAreIndependent }

    public var execution: LinearExecution {
        let block = rotation.blockSize == rotation.size ? "" : " in \(rotation.size / rotation.blockSize) blocks"
        let factors = [String](repeating: "12", count: rotation.twelves) + (rotation.powerOfTwo > 1 ? [String(rotation.powerOfTwo)] : [])
        return LinearExecution(kernel: "hadamard \(factors.joined(separator: "·"))\(block) + \(base.execution.kernel)",
                               weights: base.execution.weights, maximumWeightError: base.execution.maximumWeightError)
    }

    public func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        withRotatedInput(x, rows: rows) { base.forward($0, rows: rows, into: &y) }
    }

    /// Runs `body` with `R · x_r` for each of the first `rows` rows of `x`, in an array kept
    /// between calls (so a steady-state pass does not allocate), possibly longer than `rows` rows.
    func withRotatedInput<Result>(_ x: [Float], rows: Int, _ body: ([Float]) -> Result) -> Result {
        precondition(x.count >= rows * inFeatures)
        return rotatedInputs.with(rows * inFeatures) { rotated in
            rotated.withUnsafeMutableBufferPointer { target in
                x.withUnsafeBufferPointer { variant.rotate(rotation, from: $0.baseAddress!, into: target.baseAddress!, rows: rows) }
            }
            return body(rotated)
        }
    }
}
