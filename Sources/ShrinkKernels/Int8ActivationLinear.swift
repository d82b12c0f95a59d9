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
    let bias: [Float]?

    public init(weights: Int8PanelWeights, bias: [Float]?, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
                variant: IntegerKernelVariant = .best, minimumWorkPerThread: Int = defaultMinimumWorkPerThread) {
        precondition((bias?.count ?? weights.rows) == weights.rows && threads >= 1)
        self.weights = weights
        self.bias = bias
        self.threads = threads
        self.variant = variant
        self.minimumWorkPerThread = minimumWorkPerThread
        inFeatures = weights.columns
        outFeatures = weights.rows
    }

    public func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        precondition(x.count >= rows * inFeatures && y.count >= rows * outFeatures)
        let kpad = weights.paddedColumns, blocks = kpad / 32
        let quantized = UnsafeMutablePointer<Int8>.allocate(capacity: rows * kpad)
        let scales = UnsafeMutablePointer<Float>.allocate(capacity: rows * blocks * 2)
        defer { quantized.deallocate(); scales.deallocate() }
        let panels = weights.panels
        let workers = workerCount(threads: threads, work: rows * outFeatures * inFeatures, outFeatures: panels, minimumWork: minimumWorkPerThread)
        // Rows are quantized independently: split over the same workers when there are enough.
        x.withUnsafeBufferPointer { input in
            nonisolated(unsafe) let (source, target, rowScales) = (input.baseAddress!, quantized, scales)
            let quantizers = rows >= 8 * workers ? workers : 1
            let quantize: @Sendable (Int) -> Void = { worker in
                let first = rows * worker / quantizers, count = rows * (worker + 1) / quantizers - first
                self.variant.quantizeRows(source + first * self.inFeatures, rows: count, k: self.inFeatures, ldx: self.inFeatures, kpad: kpad,
                                          into: target + first * kpad, scales: rowScales + first * blocks, sums: rowScales + (rows + first) * blocks)
            }
            if quantizers == 1 { quantize(0) } else { WorkerPool.shared.run(quantizers, quantize) }
        }
        nonisolated(unsafe) let (xq, xScales) = (UnsafePointer(quantized), UnsafePointer(scales))
        y.withUnsafeMutableBufferPointer { output in
            nonisolated(unsafe) let out = output.baseAddress!
            let run: (UnsafePointer<Float>?) -> Void = { biasPointer in
                nonisolated(unsafe) let bias = biasPointer
                let work: @Sendable (Int) -> Void = { worker in
                    let range = (panels * worker / workers)..<(panels * (worker + 1) / workers)
                    self.variant.gemm(self.weights, panels: range, xq: xq, xScales: xScales, xSums: xScales + rows * blocks, rows: rows,
                                      y: out, ldy: self.outFeatures, bias: bias)
                }
                if workers == 1 { work(0) } else { WorkerPool.shared.run(workers, work) }
            }
            if let bias {
                bias.withUnsafeBufferPointer { b in
                    nonisolated(unsafe) let pointer = b.baseAddress!
                    run(pointer)
                }
            } else {
                run(nil)
            }
        }
    }
}
