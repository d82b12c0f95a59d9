// The fp32 baseline: memory read bandwidth and the system BLAS's sgemv / sgemm on the shapes of
// MiniLM and of a 7B-class model, measured in one run. Build and run in release:
//   swift run -c release BlasBenchmark
import Dispatch
import Foundation
import ShrinkKernels
import ShrinkTestSupport

struct Timing {
    let seconds: [Double]
    var best: Double { seconds.min()! }
    var median: Double { seconds.sorted()[seconds.count / 2] }
}

func measure(repetitions: Int, warmUp: Int = 2, _ body: () -> Void) -> Timing {
    for _ in 0..<warmUp { body() }
    var seconds: [Double] = []
    for _ in 0..<repetitions {
        let start = DispatchTime.now().uptimeNanoseconds
        body()
        seconds.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
    return Timing(seconds: seconds)
}

func randomMatrix(_ count: Int, seed: UInt64) -> [Float] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Float(Int32(truncatingIfNeeded: state >> 33)) / Float(Int32.max)
    }
}

/// Read bandwidth: sums a 256 MiB array with `threads` threads, best of several passes.
func maxRelativeError(_ values: [Float], _ reference: [Float]) -> Double {
    let scale = Double(reference.map { abs($0) }.max() ?? 1)
    return zip(values, reference).map { Double(abs($0 - $1)) }.max()! / max(scale, 1e-30)
}

print("BLAS: \(BLASLibrary.summary)")
print("OPENBLAS_NUM_THREADS=\(ProcessInfo.processInfo.environment["OPENBLAS_NUM_THREADS"] ?? "unset")")
let bandwidth1 = MemoryBandwidth.read(threads: 1)
let bandwidth2 = MemoryBandwidth.read(threads: 2)
print("Read bandwidth (256 MiB): 1 thread \(String(format: "%.1f", bandwidth1)) GB/s, 2 threads \(String(format: "%.1f", bandwidth2)) GB/s")
print("")
print("kernel  shape (out×in)   rows  median ms   GFLOP/s  weight GB/s  of 1-thread read bw  max rel. error")

let shapes = [(384, 384), (1536, 384), (384, 1536), (4096, 4096)]
for (outFeatures, inFeatures) in shapes {
    // Enough distinct matrices to cover 256 MiB, so GEMV streams weights from memory.
    let matrixBytes = outFeatures * inFeatures * 4
    let copies = max(1, (256 << 20) / matrixBytes)
    let weights = (0..<min(copies, 64)).map { randomMatrix(outFeatures * inFeatures, seed: UInt64($0 + 1)) }
    for rows in [1, 32] {
        let x = randomMatrix(rows * inFeatures, seed: 99)
        var output = [Float](repeating: 0, count: rows * outFeatures)
        var reference = output
        var next = 0
        let timing = measure(repetitions: rows == 1 ? 40 : 10) {
            weights[next].withUnsafeBufferPointer { w in
                DenseMatmul.blas(x: x, rows: rows, weights: w.baseAddress!, outFeatures: outFeatures,
                                 inFeatures: inFeatures, bias: nil, output: &output)
            }
            next = (next + 1) % weights.count
        }
        let last = (next + weights.count - 1) % weights.count
        DenseMatmul.blas(x: x, rows: rows, weights: weights[last], outFeatures: outFeatures, inFeatures: inFeatures,
                         bias: nil, output: &output)
        DenseMatmul.reference(x: x, rows: rows, weights: weights[last], outFeatures: outFeatures, inFeatures: inFeatures,
                              bias: nil, output: &reference)
        let seconds = timing.median
        let gflops = 2.0 * Double(rows * outFeatures * inFeatures) / seconds / 1e9
        let gbps = Double(matrixBytes) / seconds / 1e9
        print(String(format: "%@  %5d×%-5d  %10d  %9.3f  %8.2f  %11.2f  %19.2f  %14.2e",
                     rows == 1 ? "sgemv" : "sgemm", outFeatures, inFeatures, rows, seconds * 1e3, gflops, gbps,
                     gbps / bandwidth1, maxRelativeError(output, reference)))
    }
}
