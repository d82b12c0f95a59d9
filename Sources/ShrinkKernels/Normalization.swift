import Foundation
import ShrinkCore

/// LayerNorm scale and shift: `y = (x − mean) / sqrt(var + ε) · γ + β` per row.
public struct LayerNormWeights: Sendable {
    public let gamma: [Float]
    public let beta: [Float]
    public let kernel: KernelVariant

    public init(gamma: [Float], beta: [Float], kernel: KernelVariant) {
        precondition(gamma.count == beta.count)
        self.gamma = gamma
        self.beta = beta
        self.kernel = kernel
    }

    /// `values = LayerNorm(values + residual)` row by row (`residual` optional), rows split over threads.
    public func apply(_ values: inout [Float], adding residual: [Float]? = nil, rows: Int, epsilon: Float, threads: Int) {
        let size = gamma.count
        let extra = residual ?? []
        gamma.withUnsafeBufferPointer { g in
            beta.withUnsafeBufferPointer { b in
                extra.withUnsafeBufferPointer { r in
                    values.withUnsafeMutableBufferPointer { buffer in
                        WorkerPool.shared.run(Parallel.workers(rows, threads: threads, minimumPerThread: 64),
                                              LayerNormJob(values: buffer.baseAddress!, residual: residual == nil ? nil : r.baseAddress, rows: rows,
                                                           size: size, gamma: g.baseAddress!, beta: b.baseAddress!, epsilon: epsilon,
                                                           kernel: kernel))
                    }
                }
            }
        }
    }
}

/// `values = LayerNorm(values + residual)` over `rows` rows, split over the workers.
struct LayerNormJob: ParallelJob {
    static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: LayerNormJob.self).pointee.run(worker: worker, of: workers) } }
    let values: UnsafeMutablePointer<Float>
    let residual: UnsafePointer<Float>?
    let rows, size: Int
    let gamma, beta: UnsafePointer<Float>
    let epsilon: Float
    let kernel: KernelVariant

    func run(worker: Int, of workers: Int) {
        let range = Parallel.range(worker: worker, of: workers, count: rows)
        kernel.addLayerNorm(values + range.lowerBound * size, residual: residual.map { $0 + range.lowerBound * size },
                                        rows: range.count, size, gamma: gamma, beta: beta, epsilon: epsilon)
    }
}

/// RMSNorm weights: `y = x / sqrt(mean(x²) + ε) · w` per row (Llama's block and output norms,
/// Qwen3's per-head query and key norms with rows of one head each).
public struct RMSNormWeights: Sendable {
    public let weight: [Float]
    public let epsilon: Float

    public init(weight: [Float], epsilon: Float) {
        self.weight = weight
        self.epsilon = epsilon
    }

    /// Normalizes `rows` rows of `weight.count` floats at `values` in place.
    public func apply(_ values: UnsafeMutablePointer<Float>, rows: Int) {
        weight.withUnsafeBufferPointer { w in KernelVariant.rmsNorm(values, rows: rows, w.count, weight: w.baseAddress!, epsilon: epsilon) }
    }

    /// Normalizes row `row` of `input` into `output` (`weight.count` floats each).
    public func apply(_ input: UnsafePointer<Float>, into output: UnsafeMutablePointer<Float>) {
        output.update(from: input, count: weight.count)
        apply(output, rows: 1)
    }
}

extension KernelVariant {
    /// Per row of `n` floats, in place: `x · w / sqrt(Σx² / n + ε)`, the sum of squares in `Double`
    /// (as ggml's `rms_norm` sums), `n` multiply-adds and one square root per row. One Swift
    /// implementation serves every variant.
    public static func rmsNorm(_ x: UnsafeMutablePointer<Float>, rows: Int, _ n: Int, weight: UnsafePointer<Float>, epsilon: Float) {
        for row in 0..<rows {
            let line = x + row * n
            var squares = 0.0
            for i in 0..<n { squares += Double(line[i] * line[i]) }
            let scale = 1 / (Float(squares / Double(n)) + epsilon).squareRoot()
            for i in 0..<n { line[i] = line[i] * scale * weight[i] }
        }
    }
}
