// GEMV (1 row) and GEMM (32 rows) per weight encoding against fp32 BLAS on the same shape, in one
// run, with the machine's read bandwidth measured here too. Enough distinct copies of each weight
// are cycled through (≥ 256 MiB, or ≥ 64 copies) that GEMV streams weights from memory.
//   swift run -c release KernelBenchmark [--threads n] [--shapes 4096x4096,...]
import Dispatch
import Foundation
import ShrinkCompression
import ShrinkCore
import ShrinkKernels
import ShrinkTestSupport

var threadCounts = [1, 2]
var shapes = [(384, 384), (1536, 384), (384, 1536), (4096, 4096)]
var arguments = Array(CommandLine.arguments.dropFirst())
while let flag = arguments.first {
    arguments.removeFirst()
    guard let value = arguments.first else { break }
    arguments.removeFirst()
    if flag == "--threads" { threadCounts = value.split(separator: ",").compactMap { Int($0) } }
    if flag == "--shapes" {
        shapes = value.split(separator: ",").compactMap { item in
            let parts = item.split(separator: "x").compactMap { Int($0) }
            return parts.count == 2 ? (parts[0], parts[1]) : nil
        }
    }
}

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

/// Median seconds of `body(i)` over `repetitions` calls after `warmUp` calls; `i` counts calls.
func median(repetitions: Int, warmUp: Int = 3, _ body: (Int) -> Void) -> Double {
    for index in 0..<warmUp { body(index) }
    var times: [Double] = []
    for index in 0..<repetitions {
        let start = now()
        body(warmUp + index)
        times.append(now() - start)
    }
    return times.sorted()[times.count / 2]
}

func readBandwidth(threads: Int) -> Double {
    let count = 256 << 20 / 8
    let buffer = UnsafeMutablePointer<UInt64>.allocate(capacity: count)
    defer { buffer.deallocate() }
    for index in 0..<count { buffer[index] = UInt64(index) }
    nonisolated(unsafe) let source = buffer
    let sums = UnsafeMutablePointer<UInt64>.allocate(capacity: 64)
    defer { sums.deallocate() }
    nonisolated(unsafe) let results = sums
    let seconds = median(repetitions: 5) { _ in
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var a: UInt64 = 0, b: UInt64 = 0
            var index = count * thread / threads
            let end = count * (thread + 1) / threads
            while index + 2 <= end { a &+= source[index]; b &+= source[index + 1]; index += 2 }
            results[thread * 8] = a &+ b
        }
    }
    return Double(count * 8) / seconds / 1e9
}

var prunedPalette = EncodingCatalog.palettize(4)
prunedPalette.prune = .nOfM(n: 2, m: 4)
let encodings: [(String, OpCompressionConfig)] = [
    ("int8 per-channel", EncodingCatalog.quantize(8, symmetric: true, .perChannel(axis: 0))),
    ("uint4 affine block 32", EncodingCatalog.quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 32))),
    ("palette 4-bit", EncodingCatalog.palettize(4)),
    ("palette 8-bit", EncodingCatalog.palettize(8)),
    ("palette 2-bit", EncodingCatalog.palettize(2)),
    ("2:4 + palette 4-bit", prunedPalette),
]

print("BLAS: \(BLASLibrary.summary); kernels: \(KernelVariant.best.rawValue)")
var bandwidth: [Int: Double] = [:]
for threads in threadCounts {
    bandwidth[threads] = readBandwidth(threads: threads)
    print(String(format: "read bandwidth, %d thread(s): %.1f GB/s", threads, bandwidth[threads]!))
}
print("")
print("shape (out×in)  rows  thr  encoding                 bits/w   median ms  weight GB/s  of read bw  vs fp32 BLAS (×faster)")
for (outFeatures, inFeatures) in shapes {
    var generator = SeededGenerator(seed: UInt64(outFeatures * 7 + inFeatures))
    let dense = generator.floats(outFeatures * inFeatures, in: -0.1...0.1)
    let denseTensor = try DenseTensor(converting: dense, shape: [outFeatures, inFeatures])
    let copiesFor = { (bytes: Int) in min(64, max(1, (256 << 20) / max(bytes, 1) + 1)) }
    let denseCopies = (0..<copiesFor(dense.count * 4)).map { _ in dense }
    for rows in [1, 32] {
        let x = generator.floats(rows * inFeatures)
        for threads in threadCounts {
            BLASLibrary.setThreadCount(threads)
            var output = [Float](repeating: 0, count: rows * outFeatures)
            let baseline = median(repetitions: rows == 1 ? 30 : 10) { call in
                let weights = denseCopies[call % denseCopies.count]
                weights.withUnsafeBufferPointer { w in
                    DenseMatmul.blas(x: x, rows: rows, weights: w.baseAddress!, outFeatures: outFeatures, inFeatures: inFeatures,
                                     bias: nil, output: &output)
                }
            }
            print(String(format: "%5d×%-5d    %4d  %3d  %-22@ %7.2f  %9.3f  %11.2f  %10.2f", outFeatures, inFeatures, rows, threads,
                         "fp32 BLAS" as NSString, 32.0, baseline * 1e3, Double(dense.count * 4) / baseline / 1e9,
                         Double(dense.count * 4) / baseline / 1e9 / bandwidth[threads]!))
            for (name, config) in encodings {
                let encoded = try WeightCompressor.encode(name: "w", tensor: denseTensor, config: config, threads: 2)
                // Distinct copies of the parts so that GEMV streams from memory.
                let copies = (0..<copiesFor(encoded.byteCount)).map { _ in
                    PackedLinear(weight: try! EncodedTensor(name: "w", shape: encoded.shape, sourceDType: .f32, encoding: encoded.encoding,
                                                            parts: encoded.parts.mapValues { $0.copied() }),
                                 bias: nil, threads: threads)
                }
                var result = [Float](repeating: 0, count: rows * outFeatures)
                let seconds = median(repetitions: rows == 1 ? 30 : 10) { call in copies[call % copies.count].forward(x, rows: rows, into: &result) }
                var expected = [Float](repeating: 0, count: rows * outFeatures)
                ReferenceEncodedLinear(weight: encoded, bias: nil).forward(x, rows: min(rows, 1), into: &expected)
                let error = zip(result.prefix(outFeatures), expected.prefix(outFeatures)).map { abs($0 - $1) }.max()!
                precondition(error < 1e-2, "\(name): result differs from the reference by \(error)")
                let gbps = Double(encoded.byteCount) / seconds / 1e9
                print(String(format: "%5d×%-5d    %4d  %3d  %-22@ %7.2f  %9.3f  %11.2f  %10.2f  %8.2f", outFeatures, inFeatures, rows, threads,
                             name as NSString, encoded.bitsPerWeight, seconds * 1e3, gbps, gbps / bandwidth[threads]!, baseline / seconds))
            }
        }
    }
}
