import CShrinkKernels
import Foundation
import ShrinkCore

/// In-place GELU over `count` values, split over the workers.
public struct GELUJob: ParallelJob {
    public static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: GELUJob.self).pointee.run(worker: worker, of: workers) } }
    let values: UnsafeMutablePointer<Float>
    let count: Int
    let kernel: KernelVariant

    public init(values: UnsafeMutablePointer<Float>, count: Int, kernel: KernelVariant) {
        self.values = values
        self.count = count
        self.kernel = kernel
    }

    public func run(worker: Int, of workers: Int) {
        let range = Parallel.range(worker: worker, of: workers, count: count)
        kernel.gelu(values + range.lowerBound, range.count)
    }
}

extension KernelVariant {
    /// SwiGLU in place: `gate[i] = silu(gate[i]) · up[i]` with `silu(x) = x / (1 + e^(−x))`,
    /// the Llama feed-forward's gating. The Swift twin uses the C library's `expf`; the AVX-512
    /// kernel a polynomial exp (`shrink_swiglu_f32`, relative error about 2e-7); AVX2 runs the twin.
    public func swiGLU(gate: UnsafeMutablePointer<Float>, up: UnsafePointer<Float>, _ n: Int) {
        switch self {
        case .avx512: shrink_swiglu_f32(gate, up, n)
        case .swift, .avx2:
            for i in 0..<n {
                let x = gate[i]
                gate[i] = x / (1 + expf(-x)) * up[i]
            }
        }
    }
}

/// In-place SwiGLU (`KernelVariant.swiGLU`) over `count` values, split over the workers.
public struct SwiGLUJob: ParallelJob {
    public static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: SwiGLUJob.self).pointee.run(worker: worker, of: workers) } }
    let gate: UnsafeMutablePointer<Float>
    let up: UnsafePointer<Float>
    let count: Int
    let kernel: KernelVariant

    public init(gate: UnsafeMutablePointer<Float>, up: UnsafePointer<Float>, count: Int, kernel: KernelVariant) {
        self.gate = gate
        self.up = up
        self.count = count
        self.kernel = kernel
    }

    public func run(worker: Int, of workers: Int) {
        let range = Parallel.range(worker: worker, of: workers, count: count)
        kernel.swiGLU(gate: gate + range.lowerBound, up: up + range.lowerBound, range.count)
    }
}
