// all-MiniLM-L6-v2 end to end: sentences per second at batch 1 (the first 200 reference
// sentences, one at a time) and batch 32 (1,024 STS-B test sentences sorted by length), with 1
// and 2 threads, for fp32 and compressed recipes, measured interleaved (A B C A B C …) after a
// warm-up so machine drift hits all alike; fidelity is the mean and minimum cosine to the fp32
// embeddings of the same sentences; also the time to load each model (map + repack). Needs the
// model (scripts/fetch-models.py minilm).
// Compressed models run with int8 activations (the default); `--f32-activations` adds each
// recipe again with fp32 activations.
//   swift run -c release EncoderBenchmark [--rounds n] [--f32-activations]
import Dispatch
import Foundation
import Shrink
import ShrinkCompression
import ShrinkKernels
import ShrinkModels

let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
let modelFolder = ModelRegistry.directory(of: ModelRegistry.defaultEntry)
var rounds = 3
if let flag = CommandLine.arguments.firstIndex(of: "--rounds"), flag + 1 < CommandLine.arguments.count {
    rounds = Int(CommandLine.arguments[flag + 1]) ?? rounds
}
let recipes = ["minilm-int8-channel", "minilm-int4-block32", "minilm-palette-4bit", "minilm-prune50-palette4"]

let scratch = NSTemporaryDirectory() + "shrink-encoder-benchmark-" + UUID().uuidString
try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: scratch) }
let precisions: [ActivationPrecision] = CommandLine.arguments.contains("--f32-activations") ? [.int8, .float32] : [.int8]
var files = [("fp32", modelFolder + "/model.safetensors", ActivationPrecision.float32)]
for recipe in recipes {
    let output = scratch + "/\(recipe).safetensors"
    _ = try ModelCompressor.compress(model: try ModelLocation.resolve(modelFolder),
                                     recipe: try Recipe.load(path: root.appendingPathComponent("recipes/\(recipe).json").path), output: output)
    for precision in precisions { files.append((recipe + (precision == .int8 ? "" : " (f32 act.)"), output, precision)) }
}

let tokenizer = try WordPieceTokenizer(vocabularyFile: modelFolder + "/vocab.txt")
let config = try BertConfig(path: modelFolder + "/config.json")
let sentences = try String(contentsOf: root.appendingPathComponent("Tests/Fixtures/minilm-reference/sentences.txt"), encoding: .utf8)
    .split(separator: "\n").map(String.init)
let latencyInputs = sentences.prefix(200).map(tokenizer.encode)
let stsRows = try String(contentsOf: root.appendingPathComponent("data/stsb/sts-test.csv"), encoding: .utf8)
    .split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false) }
let batchInputs = Array(stsRows.flatMap { [String($0[5]), String($0[6])] }.prefix(1024).map(tokenizer.encode).sorted { $0.count < $1.count })
let batches = stride(from: 0, to: batchInputs.count, by: 32).map { Array(batchInputs[$0..<min($0 + 32, batchInputs.count)]) }

print("BLAS: \(BLASLibrary.summary); kernels: \(KernelVariant.best.rawValue), integer kernels: \(IntegerKernelVariant.best.rawValue)")
print("batch 1: \(latencyInputs.count) sentences, mean \(latencyInputs.reduce(0) { $0 + $1.count } / latencyInputs.count) tokens; batch 32: \(batchInputs.count) sentences")

// Load: memory-map the file and build the encoder (repacking every compressed layer), median of 5.
print("")
print("load (map + repack)        ms")
for (name, path, precision) in files {
    var times: [Double] = []
    for _ in 0..<5 {
        let start = DispatchTime.now().uptimeNanoseconds
        _ = try BertEncoder(config: config, pooling: try SentencePooling(folder: modelFolder),
                            source: try WeightSource(path: path, threads: 2, activations: precision))
        times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }
    print(String(format: "  %-24@ %6.1f", name as NSString, times.sorted()[2]))
}

for threads in [1, 2] {
    BLASLibrary.setThreadCount(threads)
    let pooling = try SentencePooling(folder: modelFolder)
    let encoders = try files.map { ($0.0, try BertEncoder(config: config, pooling: pooling, source: try WeightSource(path: $0.1, threads: threads, activations: $0.2))) }
    let reference = encoders[0].1.embed(Array(latencyInputs.prefix(50)).map { $0 }).map { $0 }
    var latency = [String: [Double]](), throughput = [String: [Double]]()
    for (name, encoder) in encoders { _ = encoder.embed([latencyInputs[0]]); _ = encoder.embed(batches[0]); _ = name }
    for _ in 0..<rounds {
        for (name, encoder) in encoders {
            var start = DispatchTime.now().uptimeNanoseconds
            for input in latencyInputs { _ = encoder.embed([input]) }
            latency[name, default: []].append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6 / Double(latencyInputs.count))
            start = DispatchTime.now().uptimeNanoseconds
            for batch in batches { _ = encoder.embed(batch) }
            throughput[name, default: []].append(Double(batchInputs.count) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9))
        }
    }
    print("")
    print("threads \(threads)                 batch 1 ms/sentence   ×fp32    batch 32 sentences/s   ×fp32   mean cos   min cos")
    let fp32Latency = latency["fp32"]!.sorted()[rounds / 2], fp32Throughput = throughput["fp32"]!.sorted()[rounds / 2]
    for (name, encoder) in encoders {
        let ms = latency[name]!.sorted()[rounds / 2], rate = throughput[name]!.sorted()[rounds / 2]
        let cosines = zip(encoder.embed(Array(latencyInputs.prefix(50))), reference).map { pair in zip(pair.0, pair.1).reduce(Float(0)) { $0 + $1.0 * $1.1 } }
        print(String(format: "  %-24@ %12.3f  %9.2f  %18.1f  %9.2f  %9.5f %9.5f", name as NSString, ms, fp32Latency / ms, rate, rate / fp32Throughput,
                     cosines.reduce(0, +) / Float(cosines.count), cosines.min()!))
    }
}
