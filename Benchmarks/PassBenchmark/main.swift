// Times each compression pass over the 36 encoder linear layers of all-MiniLM-L6-v2 (release
// build, 2 worker threads, one layer per worker) and prints elements per second and the mean
// relative squared weight error; then compares optimal 1-D k-means with Lloyd + k-means++ on
// every layer. Needs the model: scripts/fetch-models.py minilm.
//   swift run -c release PassBenchmark [--only <pass name part>] [model folder]
import Dispatch
import Foundation
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

var arguments = Array(CommandLine.arguments.dropFirst())
/// `--only <text>` runs only the passes whose name contains the text (and skips the k-means table).
var only: String?
if let flag = arguments.firstIndex(of: "--only"), flag + 1 < arguments.count {
    only = arguments[flag + 1]
    arguments.removeSubrange(flag...(flag + 1))
}
let folder = arguments.first
    ?? (ProcessInfo.processInfo.environment["SHRINK_MODELS_DIR"] ?? NSHomeDirectory() + "/.cache/shrink/models") + "/all-MiniLM-L6-v2"
let file = try SafetensorsFile(path: folder + "/model.safetensors")
let layers = file.entries.filter { $0.name.hasPrefix("encoder.layer.") && $0.name.hasSuffix(".weight") && $0.shape.count == 2 }
    .map { ($0.name, file.tensor(for: $0).copied()) }
let originals = layers.map { $0.1.floats() }
let elements = originals.reduce(0) { $0 + $1.count }
let threads = 2
print("Model: \(folder), \(layers.count) encoder linear layers, \(elements) weights; \(threads) threads, one layer per thread")

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

func palette(_ bits: Int, grouped: Int? = nil) -> OpCompressionConfig {
    EncodingCatalog.palettize(bits, .kmeans, grouped.map { .perGroupedChannel(axis: 0, groupSize: $0) } ?? .perTensor)
}

func quantize(_ bits: Int, _ granularity: QuantizationGranularity, symmetric: Bool, clip: Bool = false) -> OpCompressionConfig {
    EncodingCatalog.quantize(bits, symmetric: symmetric, signed: symmetric, granularity, clip: clip)
}

var prunedPalette = palette(4)
prunedPalette.prune = .nOfM(n: 2, m: 4)

/// (name, config, Core ML tools 9.0 anchor "seconds (relative MSE)" measured on the same layers, target seconds)
let passes: [(String, OpCompressionConfig, String, Double?)] = [
    ("palette 4-bit k-means per-tensor", palette(4), "2.7 s (0.014)", 0.5),
    ("palette 4-bit k-means grouped 16", palette(4, grouped: 16), "13.9 s (0.012)", 2),
    ("palette 8-bit k-means per-tensor", palette(8), "11.0 s", 2),
    ("int4 affine per-block 32", quantize(4, .perBlock(blockSize: 32), symmetric: false), "0.76 s", 0.1),
    ("int4 symmetric per-block 32", quantize(4, .perBlock(blockSize: 32), symmetric: true), "", 0.1),
    ("int8 symmetric per-channel", quantize(8, .perChannel(axis: 0), symmetric: true), "", nil),
    ("int4 per-block 32 + clip search", quantize(4, .perBlock(blockSize: 32), symmetric: true, clip: true), "", nil),
    ("palette 2-bit k-means per-tensor", palette(2), "", nil),
    ("palette 6-bit k-means per-tensor", palette(6), "", nil),
    ("2:4 prune + palette 4-bit", prunedPalette, "", nil),
]

print("")
print("pass                                  median s   best s   Melem/s   mean rel. sq. error   Core ML tools 9.0   target")
for (name, config, anchor, target) in passes where only.map({ name.contains($0) }) ?? true {
    var times: [Double] = []
    var errors: [Double] = []
    for run in 0..<4 {
        var encoded: [EncodedTensor] = []
        let time = try seconds {
            encoded = try Parallel.map(layers.count, threads: threads) { index in
                try WeightCompressor.encode(name: layers[index].0, tensor: layers[index].1, config: config)
            }
        }
        if run == 0 {
            errors = zip(encoded, originals).map { WeightError.relativeSquaredError(original: $1, decoded: $0.decode()) }
        } else {
            times.append(time)
        }
    }
    let median = times.sorted()[times.count / 2]
    let meanError = errors.reduce(0, +) / Double(errors.count)
    let verdict = target.map { median <= $0 ? "≤ \($0) s: met" : "≤ \($0) s: MISSED" } ?? ""
    print(String(format: "%-36@  %8.3f  %7.3f  %8.1f  %20.4f   %-17@  %@", name as NSString, median, times.min()!,
                 Double(elements) / median / 1e6, meanError, anchor as NSString, verdict as NSString))
}

if only != nil { exit(0) }
print("")
print("Optimal 1-D k-means (Shrink) against Lloyd + k-means++ (seed 0), squared error summed per layer")
for bits in [2, 3, 4, 6, 8] {
    var noWorse = 0
    var ratios: [Double] = []
    var rows: [String] = []
    var optimalTime = 0.0, lloydTime = 0.0
    for ((name, _), values) in zip(layers, originals) {
        var optimal: OptimalKMeans1D.Result!
        var lloyd: LloydKMeans.Result!
        optimalTime += seconds { optimal = OptimalKMeans1D.cluster(values, k: 1 << bits) }
        lloydTime += seconds { lloyd = LloydKMeans.cluster(values, dimension: 1, k: 1 << bits, seed: 0) }
        if optimal.squaredError <= lloyd.squaredError * (1 + 1e-12) { noWorse += 1 }
        ratios.append(optimal.squaredError / lloyd.squaredError)
        rows.append(String(format: "  %-48@ %12.6e %12.6e %8.4f", name as NSString, optimal.squaredError, lloyd.squaredError,
                           optimal.squaredError / lloyd.squaredError))
    }
    print(String(format: "%d-bit: optimal ≤ Lloyd on %d of %d layers; error ratio optimal/Lloyd mean %.4f, worst %.4f; time %.2f s vs %.2f s (1 thread)",
                 bits, noWorse, layers.count, ratios.reduce(0, +) / Double(ratios.count), ratios.max()!, optimalTime, lloydTime))
    if bits == 4 || bits == 2 {
        print("  layer                                            optimal SSE   Lloyd++ SSE    ratio")
        rows.forEach { print($0) }
    }
}
