import Dispatch
import Foundation
import ShrinkCore

/// A linear layer whose activations are quantized to int8 (per row, per block of 32 inputs) and
/// multiplied with u8 weight codes by integer dot products (`Int8PanelWeights`). Threads split the
/// panels of 16 output channels; each output is computed the same way whatever the thread count.
///
/// Against exact arithmetic on the stored weights, each product `x · w` is off by at most
/// `|w| · s/2` where `s` is the scale of `x`'s block (plus, for palettes, `|x|` times half the LUT
/// grid's step): see `errorBound` in the tests.
public final class Int8ActivationLinear: LinearOperator, @unchecked Sendable {
    public let inFeatures: Int
    public let outFeatures: Int
    public let threads: Int
    public let variant: IntegerKernelVariant
    /// Least multiply-adds per thread before work is split (0: always split).
    public let minimumWorkPerThread: Int
    public let weights: Int8PanelWeights
    /// The bias, owned, so that a forward pass needs no array access closures.
    let biasValues: UnsafeMutablePointer<Float>?
    let scratch = ScratchBuffer()

    public init(weights: Int8PanelWeights, bias: [Float]?, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
                variant: IntegerKernelVariant = .best, minimumWorkPerThread: Int = defaultMinimumWorkPerThread) {
        precondition((bias?.count ?? weights.rows) == weights.rows && threads >= 1)
        self.weights = weights
        biasValues = bias.map { values in
            let pointer = UnsafeMutablePointer<Float>.allocate(capacity: values.count)
            pointer.initialize(from: values, count: values.count)
            return pointer
        }
        self.threads = threads
        self.variant = variant
        self.minimumWorkPerThread = minimumWorkPerThread
        inFeatures = weights.columns
        outFeatures = weights.rows
    }

    deinit { biasValues?.deallocate() }

    public func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        precondition(x.count >= rows * inFeatures && y.count >= rows * outFeatures)
        let kpad = weights.paddedColumns, blocks = kpad / 32
        let panels = weights.panels
        let workers = workerCount(threads: threads, work: rows * outFeatures * inFeatures, outFeatures: panels, minimumWork: minimumWorkPerThread)
        // Quantized rows, then per row and block a scale, a sum and an integer sum, in the reused scratch.
        scratch.withBytes(rows * kpad + 12 * rows * blocks) { bytes in
            let quantized = bytes.bindMemory(to: Int8.self, capacity: rows * kpad)
            let scales = (bytes + rows * kpad).bindMemory(to: Float.self, capacity: 2 * rows * blocks)
            let sums = scales + rows * blocks
            let integerSums = (bytes + rows * kpad + 8 * rows * blocks).bindMemory(to: Int32.self, capacity: rows * blocks)
            x.withUnsafeBufferPointer { input in
                // Rows are quantized independently: split over the same workers when there are enough.
                WorkerPool.shared.run(rows >= 8 * workers ? workers : 1,
                                      QuantizeJob(layer: self, x: input.baseAddress!, rows: rows, quantized: quantized, scales: scales,
                                                  sums: sums, integerSums: integerSums))
            }
            y.withUnsafeMutableBufferPointer { output in
                WorkerPool.shared.run(workers, GemmJob(layer: self, quantized: quantized, scales: scales, sums: sums, integerSums: integerSums,
                                                       rows: rows, y: output.baseAddress!))
            }
        }
    }

    /// Quantizes a forward pass's input rows, split over the workers.
    struct QuantizeJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: QuantizeJob.self).pointee.run(worker: worker, of: workers) } }
        let layer: Int8ActivationLinear
        let x: UnsafePointer<Float>
        let rows: Int
        let quantized: UnsafeMutablePointer<Int8>
        let scales, sums: UnsafeMutablePointer<Float>
        let integerSums: UnsafeMutablePointer<Int32>

        func run(worker: Int, of workers: Int) {
            let part = Parallel.range(worker: worker, of: workers, count: rows)
            let kpad = layer.weights.paddedColumns, blocks = kpad / 32, first = part.lowerBound
            layer.variant.quantizeRows(x + first * layer.inFeatures, rows: part.count, k: layer.inFeatures, ldx: layer.inFeatures, kpad: kpad,
                                       into: quantized + first * kpad, scales: scales + first * blocks, sums: sums + first * blocks,
                                       integerSums: integerSums + first * blocks)
        }
    }

    /// Multiplies the quantized rows with the weight's panels, split over the workers.
    struct GemmJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: GemmJob.self).pointee.run(worker: worker, of: workers) } }
        let layer: Int8ActivationLinear
        let quantized: UnsafeMutablePointer<Int8>
        let scales, sums: UnsafeMutablePointer<Float>
        let integerSums: UnsafeMutablePointer<Int32>
        let rows: Int
        let y: UnsafeMutablePointer<Float>

        func run(worker: Int, of workers: Int) {
            layer.variant.gemm(layer.weights, panels: Parallel.range(worker: worker, of: workers, count: layer.weights.panels), xq: quantized,
                               xScales: scales, xSums: sums, xIntegerSums: integerSums, rows: rows, y: y, ldy: layer.outFeatures,
                               bias: layer.biasValues.map { UnsafePointer($0) })
        }
    }
}
