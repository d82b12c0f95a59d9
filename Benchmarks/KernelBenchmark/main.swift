// GEMV (1 row) and GEMM (32 rows) per weight encoding (the passes' and GGUF's block types) against
// fp32 BLAS on the same shape, in one run, with the machine's read bandwidth measured here too. Each encoding runs with int8
// activations (integer dot products on the repacked codes, `Int8ActivationLinear`) and with fp32
// activations (`PackedLinear`); GB/s counts the bytes each kernel reads (its repacked weight).
// Enough distinct copies of each weight are cycled through (≥ 256 MiB) that GEMV streams weights
// from memory.
// Configurations are measured interleaved (each round runs every one in turn; the median round
// is reported).
// `--working-set n` cycles through n MiB of copies instead of 256: e.g. 8 keeps the weights in
// the L3 cache but not in L2, as a small model's layers are when a forward pass runs through them
// (MiniLM's shapes at a sentence's ~9 rows), and 0 keeps one copy, hot in L2. Far less noisy than a
// whole model on a shared machine.
// `--integer-kernels avx2,avx512vnni` measures the int8-activation path with each named variant
// this CPU can run (default: the best one), e.g. the AVX2 path of CPUs without VNNI.
// `--encodings palette,uint2` keeps the encodings whose names contain one of the words (fp32 BLAS
// always runs: the ratios are against it).
// `--attention 9/3/64,16/16/128` measures causal attention instead (heads/key-value heads/head size:
// a prompt of `--prompt` rows, default 512, and one decoded row after it), every kernel variant
// against the Swift twin (`benchmarkAttention`).
//   swift run -c release KernelBenchmark [--threads 1,2] [--shapes 4096x4096,...] [--rows 1,32]
//                                        [--activations int8,f32] [--integer-kernels a,b] [--rounds n] [--working-set MiB]
//                                        [--encodings word,...] [--attention h/kv/d,... [--prompt n]]
import Dispatch
import Foundation
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkKernels
import ShrinkTestSupport

/// Says what is wrong with the command line on standard error and exits with status 2.
func usageError(_ message: String) -> Never {
    FileHandle.standardError.write(Data("KernelBenchmark: \(message)\n".utf8))
    exit(2)
}

var threadCounts = [1, 2]
var shapes = [(384, 384), (1536, 384), (384, 1536), (4096, 4096)]
var rowCounts = [1, 32]
var precisions = ActivationPrecision.allCases
var integerVariants = [IntegerKernelVariant.best]
var rounds = 5
var workingSetMiB = 256
var encodingFilter: [String] = []
var attentionLayouts: [(heads: Int, keyValueHeads: Int, headSize: Int)] = []
var promptRows = 512
var arguments = Array(CommandLine.arguments.dropFirst())
while let flag = arguments.first {
    arguments.removeFirst()
    if flag == "--help" {
        print("""
            usage: swift run -c release KernelBenchmark [--threads 1,2] [--shapes 4096x4096,...] [--rows 1,32]
                     [--activations int8,f32] [--integer-kernels a,b] [--rounds n] [--working-set MiB] [--encodings word,...]
                     [--attention h/kv/d,... [--prompt n]]
            """)
        exit(0)
    }
    guard let value = arguments.first else { usageError("\(flag) needs a value (--help lists the options)") }
    arguments.removeFirst()
    switch flag {
    case "--threads": threadCounts = value.split(separator: ",").compactMap { Int($0) }
    case "--rows": rowCounts = value.split(separator: ",").compactMap { Int($0) }
    case "--activations": precisions = value.split(separator: ",").compactMap { ActivationPrecision(rawValue: String($0)) }
    case "--rounds":
        guard let count = Int(value), count >= 1 else { usageError("--rounds takes a positive whole number, not \(value)") }
        rounds = count
    case "--working-set":
        guard let mebibytes = Int(value), mebibytes >= 0 else { usageError("--working-set takes MiB as a whole number ≥ 0, not \(value)") }
        workingSetMiB = mebibytes
    case "--integer-kernels":
        integerVariants = value.split(separator: ",").map { name in
            guard let variant = IntegerKernelVariant(rawValue: String(name)), IntegerKernelVariant.available.contains(variant) else {
                usageError("\(name) is not an integer kernel this CPU runs: \(IntegerKernelVariant.available.map(\.rawValue))")
            }
            return variant
        }
    case "--encodings": encodingFilter = value.split(separator: ",").map(String.init)
    case "--attention":
        attentionLayouts = value.split(separator: ",").map { item in
            let parts = item.split(separator: "/").compactMap { Int($0) }
            guard parts.count == 3, parts.allSatisfy({ $0 > 0 }), parts[0] % parts[1] == 0 else {
                usageError("--attention takes heads/key-value heads/head size (heads a multiple of key-value heads), not \(item)")
            }
            return (parts[0], parts[1], parts[2])
        }
    case "--prompt":
        guard let count = Int(value), count >= 1 else { usageError("--prompt takes a positive whole number, not \(value)") }
        promptRows = count
    case "--shapes":
        shapes = value.split(separator: ",").compactMap { item in
            let parts = item.split(separator: "x").compactMap { Int($0) }
            return parts.count == 2 ? (parts[0], parts[1]) : nil
        }
    default: usageError("unknown option \(flag)")
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

if !attentionLayouts.isEmpty {
    print("kernels: \(KernelVariant.available.map(\.rawValue)); \(ProcessInfo.processInfo.activeProcessorCount) threads")
    for layout in attentionLayouts { benchmarkAttention(layout: layout, prompt: promptRows, threadCounts: threadCounts, rounds: rounds) }
    exit(0)
}

/// 2:4 pruning, then a 4-bit palette with `lut` entries.
func prunedPalette(lut: DType) -> OpCompressionConfig {
    var config = EncodingCatalog.palettize(4, lut: lut)
    config.prune = .nOfM(n: 2, m: 4)
    return config
}
func rotated(_ config: OpCompressionConfig) -> OpCompressionConfig {
    var config = config
    config.rotate = RotationConfig()
    return config
}
// Palettes with int8 LUTs run on 8-bit codes; with f16 LUTs on 16-bit codes in two planes. Rotated
// weights run as the runtime builds them (`ActivationPrecision.linear`): their inputs' Hadamard
// transform, then their base's kernel.
let encodings: [(String, OpCompressionConfig)] = [
    ("int8 per-channel", EncodingCatalog.quantize(8, symmetric: true, .perChannel(axis: 0))),
    ("uint4 affine block 32", EncodingCatalog.quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 32))),
    ("uint4 block 32 int scales", EncodingCatalog.quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 32), scale: .u8)),
    ("uint4 block 64 int scales", EncodingCatalog.quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 64), scale: .u8)),
    ("palette 4-bit int8 LUT", EncodingCatalog.palettize(4, lut: .i8)),
    ("palette 6-bit int8 LUT", EncodingCatalog.palettize(6, lut: .i8)),
    ("palette 8-bit int8 LUT", EncodingCatalog.palettize(8, lut: .i8)),
    ("palette 3-bit int8 LUT", EncodingCatalog.palettize(3, lut: .i8)),
    ("palette 2-bit int8 LUT", EncodingCatalog.palettize(2, lut: .i8)),
    ("uint2 affine block 32", EncodingCatalog.quantize(2, symmetric: false, signed: false, .perBlock(blockSize: 32))),
    ("uint2 block 32 int scales", EncodingCatalog.quantize(2, symmetric: false, signed: false, .perBlock(blockSize: 32), scale: .u8)),
    ("uint3 block 32 int scales", EncodingCatalog.quantize(3, symmetric: false, signed: false, .perBlock(blockSize: 32), scale: .u8)),
    ("uint3 block 128 int scales", EncodingCatalog.quantize(3, symmetric: false, signed: false, .perBlock(blockSize: 128), scale: .u8)),
    ("2:4 + palette 4-bit int8 LUT", prunedPalette(lut: .i8)),
    ("palette 4-bit f16 LUT", EncodingCatalog.palettize(4)),
    ("palette 2-bit f16 LUT", EncodingCatalog.palettize(2)),
    ("2:4 + palette 4-bit f16 LUT", prunedPalette(lut: .f16)),
    ("rotated uint4 block 32 int scales", rotated(EncodingCatalog.quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 32), scale: .u8))),
    ("rotated palette 4-bit int8 LUT", rotated(EncodingCatalog.palettize(4, lut: .i8))),
]
/// Vector palettes with int8 LUTs as (name, index bits, vector size, channels per LUT or nil for one
/// per tensor), built from random entries and indices: their speed does not depend on the values,
/// and vector k-means over a 4096×11008 weight would take minutes.
let vectorPalettes: [(String, Int, Int, Int?)] = [
    ("vector palette 2×4-bit per 16 ch int8 LUT", 4, 2, 16), ("vector palette 4×8-bit int8 LUT", 8, 4, nil),
    ("vector palette 2×6-bit int8 LUT", 6, 2, nil), ("vector palette 2×8-bit int8 LUT", 8, 2, nil),
]

/// A `[rows, columns]` palette of `vector`-wide int8 entries, `bits`-bit indices, one LUT per
/// `groupSize` output channels (or per tensor), every entry and index drawn at random.
func randomVectorPalette(rows: Int, columns: Int, bits: Int, vector: Int, groupSize: Int?, generator: inout SeededGenerator) throws -> EncodedTensor {
    let groups = groupSize.map { (rows + $0 - 1) / $0 } ?? 1, entries = 1 << bits
    let indices = (0..<(rows * columns / vector)).map { _ in UInt8(Int.random(in: 0..<entries, using: &generator)) }
    let lut = (0..<(groups * entries * vector)).map { _ in UInt8(truncatingIfNeeded: Int.random(in: -127...127, using: &generator)) }
    let encoding = PaletteEncoding(bits: bits, granularity: groupSize.map { .perGroupedChannel(axis: 0, groupSize: $0) } ?? .perTensor,
                                   vectorSize: vector, lutDType: .i8, perChannelScale: false)
    let packed = PackedBits.pack(indices, bits: bits)
    return try EncodedTensor(name: "w", shape: [rows, columns], sourceDType: .f32, encoding: .palette(encoding), parts: [
        "indices": try DenseTensor(dtype: .u8, shape: [packed.count], bytes: packed),
        "lut": try DenseTensor(dtype: .i8, shape: [groups, entries, vector], bytes: lut),
        "lut_scales": try DenseTensor(converting: [Float](repeating: 1e-3, count: groups), shape: [groups]),
    ])
}
let ggmlTypes: [GGMLType] = [.q8_0, .q4_0, .q4_1, .q5_0, .q5_1, .q2_K, .q3_K, .q4_K, .q5_K, .q6_K, .iq4_NL, .iq4_XS]

print(workingSetMiB == 0 ? "Working set: one copy of each weight" : "Working set: copies of each weight cycled through, > \(workingSetMiB) MiB")
print("BLAS: \(BLASLibrary.summary); kernels: \(KernelVariant.best.rawValue), integer kernels: \(IntegerKernelVariant.best.rawValue)")
var bandwidth: [Int: Double] = [:]
for threads in threadCounts {
    bandwidth[threads] = MemoryBandwidth.read(threads: threads)
    print(String(format: "read bandwidth, %d thread(s): %.1f GB/s (%@)", threads, bandwidth[threads]!, MemoryBandwidth.method as NSString))
}
// Fork-join hand-off: an empty job on 2 threads through the worker pool and through Dispatch.
let handOffs = 2000
var start = now()
for _ in 0..<handOffs { WorkerPool.shared.run(2) { _ in } }
let poolMicroseconds = (now() - start) / Double(handOffs) * 1e6
start = now()
for _ in 0..<handOffs { DispatchQueue.concurrentPerform(iterations: 2) { _ in } }
print(String(format: "hand-off of an empty 2-thread job: worker pool %.1f µs, DispatchQueue.concurrentPerform %.1f µs",
             poolMicroseconds, (now() - start) / Double(handOffs) * 1e6))
print("")
print("shape (out×in)  rows  thr  encoding (activations)                    bits/w   median ms  weight GB/s  of read bw  vs fp32 BLAS (×faster)")

/// One measured configuration: `run(call)` does one product with the `call`-th copy of its weight.
struct Case {
    let label: String
    let bitsPerWeight: Double
    let bytes: Int
    let run: (Int) -> Void
}

for (outFeatures, inFeatures) in shapes {
    var generator = SeededGenerator(seed: UInt64(outFeatures * 7 + inFeatures))
    let dense = generator.floats(outFeatures * inFeatures, in: -0.1...0.1)
    let denseTensor = try DenseTensor(converting: dense, shape: [outFeatures, inFeatures])
    // Distinct copies of each weight, more than the working set in all (by default 256 MiB, so that
    // GEMV streams from memory).
    let copiesFor = { (bytes: Int) in workingSetMiB == 0 ? 1 : max(1, (workingSetMiB << 20) / max(bytes, 1) + 1) }
    let denseCopies = (0..<copiesFor(dense.count * 4)).map { _ in dense.map { $0 } }
    var prepared: [(name: String, encoded: EncodedTensor, packed: [EncodedTensor], panels: [Int8PanelWeights])] = []
    let kept = { (name: String) in encodingFilter.isEmpty || encodingFilter.contains { name.contains($0) } }
    var sources: [(String, EncodedTensor)] = try encodings.filter { kept($0.0) }.map { name, config in
        (name, try WeightCompressor.encode(name: "w", tensor: denseTensor, config: config, threads: 2))
    }
    for (name, bits, vector, groupSize) in vectorPalettes where kept(name) {
        sources.append((name, try randomVectorPalette(rows: outFeatures, columns: inFeatures, bits: bits, vector: vector, groupSize: groupSize,
                                                      generator: &generator)))
    }
    // GGUF block types as a GGUF file stores them (random valid blocks), where the row length fits their blocks.
    for type in ggmlTypes where inFeatures % type.blockLength == 0 && kept("GGUF " + type.name) {
        sources.append(("GGUF " + type.name, try GGMLBlocks.tensor(type, rows: outFeatures, columns: inFeatures, generator: &generator)))
    }
    for (name, encoded) in sources {
        let fresh = {
            try! EncodedTensor(name: "w", shape: encoded.shape, sourceDType: .f32, encoding: encoded.encoding,
                               parts: encoded.parts.mapValues { $0.copied() })
        }
        let rotated = encoded.inputRotation != nil
        let packed = precisions.contains(.float32) || rotated ? (0..<copiesFor(encoded.byteCount)).map { _ in fresh() } : []
        var panels: [Int8PanelWeights] = []
        if precisions.contains(.int8), !rotated, let first = Int8PanelWeights(weight: encoded) {
            panels = [first] + (1..<copiesFor(first.byteCount)).map { _ in Int8PanelWeights(weight: fresh())! }
        }
        prepared.append((name, encoded, packed, panels))
    }
    for rows in rowCounts {
        let x = generator.floats(rows * inFeatures)
        for threads in threadCounts {
            var output = [Float](repeating: 0, count: rows * outFeatures)
            var cases = [Case(label: "fp32 BLAS", bitsPerWeight: 32, bytes: dense.count * 4) { call in
                denseCopies[call % denseCopies.count].withUnsafeBufferPointer { w in
                    DenseMatmul.blas(x: x, rows: rows, weights: w.baseAddress!, outFeatures: outFeatures, inFeatures: inFeatures,
                                     bias: nil, output: &output, threads: threads)
                }
            }]
            for (name, encoded, packed, panels) in prepared {
                var expected = [Float](repeating: 0, count: outFeatures)
                ReferenceEncodedLinear(weight: encoded, bias: nil).forward(x, rows: 1, into: &expected)
                let scale = expected.map(abs).max()!
                for (precision, variant) in precisions.flatMap({ p in p == .int8 ? integerVariants.map { (p, $0) } : [(p, nil)] }) {
                    let operators: [any LinearOperator] = if encoded.inputRotation != nil {
                        packed.map { precision.linear(weight: $0, bias: nil, threads: threads, integerKernels: variant ?? .best) }
                    } else if let variant {
                        panels.map { Int8ActivationLinear(weights: $0, bias: nil, threads: threads, variant: variant) }
                    } else {
                        packed.map { PackedLinear(weight: $0, bias: nil, threads: threads) }
                    }
                    guard let first = operators.first else { continue }
                    var result = [Float](repeating: 0, count: rows * outFeatures)
                    first.forward(x, rows: rows, into: &result)
                    let error = zip(result.prefix(outFeatures), expected).map { abs($0 - $1) }.max()! / scale
                    precondition(error < 0.05, "\(name): result differs from the reference by \(error) of its largest output")
                    let bytes = precision == .int8 && !panels.isEmpty ? panels[0].byteCount : encoded.byteCount
                    let suffix = variant.map { integerVariants.count > 1 ? " \($0.rawValue)" : "" } ?? ""
                    cases.append(Case(label: "\(name) (\(precision.rawValue)\(suffix))", bitsPerWeight: encoded.bitsPerWeight, bytes: bytes) { call in
                        operators[call % operators.count].forward(x, rows: rows, into: &result)
                    })
                }
            }
            // Interleaved: every round runs each case in turn, so machine drift hits all alike. The
            // fp32-activation cases (OpenBLAS on a transient decode) are measured in a pass of
            // their own after the others: right after OpenBLAS calls, its spinning threads slowed
            // the 2-thread integer cases up to 2×.
            var times = [[Double]](repeating: [], count: cases.count)
            let passes = [cases.indices.filter { !cases[$0].label.hasSuffix("(f32)") }, cases.indices.filter { cases[$0].label.hasSuffix("(f32)") }]
            for pass in passes {
                for round in 0..<rounds {
                    for index in pass {
                        // Enough calls for ~50 M multiply-adds (small shapes), at least 20 (GEMV) or 4.
                        let calls = max(rows == 1 ? 20 : 4, min(200, 50_000_000 / (outFeatures * inFeatures * rows)))
                        times[index].append(median(repetitions: calls, warmUp: round == 0 ? 3 : 1) { call in cases[index].run(call) })
                        // OpenBLAS's threads spin for a while after a call: let them go to sleep
                        // before the next case needs the cores.
                        if index == 0 { Thread.sleep(forTimeInterval: 0.3) }
                    }
                }
            }
            let baseline = times[0].sorted()[rounds / 2]
            for (index, item) in cases.enumerated() {
                let seconds = times[index].sorted()[rounds / 2]
                let gbps = Double(item.bytes) / seconds / 1e9
                print(String(format: "%5d×%-5d    %4d  %3d  %@ %7.2f  %9.4f  %11.2f  %10.2f  %8.2f", outFeatures, inFeatures, rows, threads,
                             item.label.padding(toLength: 40, withPad: " ", startingAt: 0) as NSString, item.bitsPerWeight, seconds * 1e3, gbps, gbps / bandwidth[threads]!, baseline / seconds))
            }
        }
    }
}
