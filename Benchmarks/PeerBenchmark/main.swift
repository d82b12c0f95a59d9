// Shrink, ONNX Runtime and OpenVINO side by side on all-MiniLM-L6-v2, in one run, interleaved (each round
// runs every configuration in turn, so machine drift hits all alike), after a warm-up:
// - batch 1: the first 200 reference sentences, pre-tokenized, one at a time (forward, mean
//   pooling, normalization): median ms per sentence;
// - batch 32: 1,024 STS-B test sentences sorted by length: sentences per second;
// - 1 and 2 threads; Shrink fp32 and recipes (default: int8, 4-bit blocks of 32 and of 64 and 4-bit
//   palette, all three by GPTQ, and 2:4-sparse; `--recipes a,b` picks others from recipes/) next to
//   ONNX Runtime fp32 and dynamic int8 (graph built from the same safetensors by
//   Benchmarks/Peers/onnxruntime_minilm.py) and OpenVINO fp32, NNCF's static W8A8 and NNCF's INT4
//   with AWQ, scale estimation and GPTQ (Benchmarks/Peers/openvino_minilm.py; NNCF calibrates on
//   the first 300 lines of data/calibration/minilm-calibration.txt, the recipes' calibration text);
// - fidelity: mean and minimum cosine to the fp32 reference embeddings of all 262 reference
//   sentences;
// - the time to load each model (memory map + repack of every compressed layer).
// Prints a table with ratios to ONNX Runtime's fastest variant and writes the same as JSON.
// Compressed models run with int8 activations; `--f32-activations` adds each recipe again with fp32
// activations.
//   swift run -c release PeerBenchmark [--rounds n] [--output peer-benchmark.json] [--recipes a,b,…] [--f32-activations]
// A peer whose Python packages are missing is left out, with the command that installs them.
import Dispatch
import Foundation
import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkKernels
import ShrinkModels

let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
let modelFolder = ModelRegistry.directory(of: ModelRegistry.defaultEntry)
var rounds = 3
var outputPath = "peer-benchmark.json"
var recipeNames = ["minilm-int8-channel", "minilm-int4-block32-gptq", "minilm-int4-block64-gptq", "minilm-palette-4bit-grouped16-gptq", "minilm-prune50-palette4"]
var precisions: [ActivationPrecision] = [.int8]
let usage = "usage: swift run -c release PeerBenchmark [--rounds n] [--output peer-benchmark.json] [--recipes a,b,…] [--f32-activations]"
/// Says what is wrong with the command line, and the usage, on standard error and exits with status 2.
func usageError(_ message: String) -> Never {
    FileHandle.standardError.write(Data("PeerBenchmark: \(message)\n\(usage)\n".utf8))
    exit(2)
}
var arguments = Array(CommandLine.arguments.dropFirst())
while let flag = arguments.first {
    arguments.removeFirst()
    switch flag {
    case "--help":
        print(usage)
        exit(0)
    case "--f32-activations":
        precisions = [.int8, .float32]
        continue
    case "--rounds", "--output", "--recipes": break
    default: usageError("unknown option \(flag)")
    }
    guard let value = arguments.first else { usageError("\(flag) needs a value") }
    arguments.removeFirst()
    switch flag {
    case "--rounds":
        guard let count = Int(value), count > 0 else { usageError("--rounds needs a positive integer, not '\(value)'") }
        rounds = count
    case "--output": outputPath = value
    default: recipeNames = value.split(separator: ",").map(String.init)
    }
}
let fixtures = root.appendingPathComponent("Tests/Fixtures/minilm-reference")
let scratch = NSTemporaryDirectory() + "shrink-peer-benchmark-" + UUID().uuidString
try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: scratch) }

/// The sentence encoder over the weights at `path`, built through its architecture adapter.
func loadEncoder(_ path: String, threads: Int, activations: ActivationPrecision) throws -> any SentenceEmbeddingRuntime {
    let (files, architecture) = try ModelArchitectures.open(weightsPath: path, configPath: modelFolder + "/config.json", folder: modelFolder)
    guard let encoder = try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: threads, activations: activations))
        as? any SentenceEmbeddingRuntime else { fatalError("\(path) is not a sentence encoder") }
    return encoder
}

// Inputs, tokenized once and shared with the peer.
let tokenizer = try loadEncoder(modelFolder + "/model.safetensors", threads: 1, activations: .float32)
let referenceSentences = try String(contentsOf: fixtures.appendingPathComponent("sentences.txt"), encoding: .utf8)
    .split(separator: "\n").map(String.init)
let referenceIDs = referenceSentences.map(tokenizer.tokenize)
let latencyIDs = Array(referenceIDs.prefix(200))
let stsRows = try String(contentsOf: root.appendingPathComponent("data/stsb/sts-test.csv"), encoding: .utf8)
    .split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false) }
let throughputIDs = Array(stsRows.flatMap { [String($0[5]), String($0[6])] }.prefix(1024).map(tokenizer.tokenize).sorted { $0.count < $1.count })
let batches = stride(from: 0, to: throughputIDs.count, by: 32).map { Array(throughputIDs[$0..<min($0 + 32, throughputIDs.count)]) }
let workloadPath = scratch + "/workload.json"
let calibrationIDs = try String(contentsOf: root.appendingPathComponent("data/calibration/minilm-calibration.txt"), encoding: .utf8)
    .split(separator: "\n").prefix(300).map { tokenizer.tokenize(String($0)) }
try JSONSerialization.data(withJSONObject: ["reference": referenceIDs.map { $0.map(Int.init) }, "latency": latencyIDs.map { $0.map(Int.init) },
                                            "throughput": throughputIDs.map { $0.map(Int.init) },
                                            "calibration": calibrationIDs.map { $0.map(Int.init) }]).write(to: URL(fileURLWithPath: workloadPath))
let referenceEmbeddings = try SafetensorsFile(path: fixtures.appendingPathComponent("embeddings.safetensors").path).tensor(named: "embeddings").floats()

/// A peer runtime: a Python process answering one JSON request per line (Benchmarks/Peers).
final class Peer {
    let process = Process()
    let input = Pipe(), output = Pipe()
    var buffer = Data()
    /// The runtime's version as the peer reported it (its ready line's `versionKey`).
    private(set) var version = ""
    /// (row name, variant) of each configuration the peer serves.
    let variants: [(String, String)]

    /// Starts `script` when `python3` imports `modules`; nil otherwise.
    init?(script: String, modules: String, versionKey: String, variants: [(String, String)]) {
        self.variants = variants
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        check.arguments = ["python3", "-c", "import " + modules]
        check.standardError = FileHandle.nullDevice
        guard (try? check.run()) != nil else { return nil }
        check.waitUntilExit()
        guard check.terminationStatus == 0 else { return nil }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, modelFolder, NSTemporaryDirectory() + "shrink-peer-onnx"]
        process.standardInput = input
        process.standardOutput = output
        guard (try? process.run()) != nil else { return nil }
        guard let ready = readLine(), let name = ready[versionKey] as? String else { return nil }
        version = name
    }

    func readLine() -> [String: Any]? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = buffer[buffer.startIndex..<newline]
                buffer.removeSubrange(buffer.startIndex...newline)
                return try? JSONSerialization.jsonObject(with: line) as? [String: Any]
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    func ask(_ request: [String: Any]) -> [String: Any] {
        input.fileHandleForWriting.write(try! JSONSerialization.data(withJSONObject: request) + Data([0x0A]))
        guard let answer = readLine() else {
            FileHandle.standardError.write(Data("PeerBenchmark: the peer \(process.arguments?[1] ?? "") stopped answering (its error is above)\n".utf8))
            exit(1)
        }
        return answer
    }
}

let peerScripts = root.appendingPathComponent("Benchmarks/Peers")
var peers: [Peer] = []
if let peer = Peer(script: peerScripts.appendingPathComponent("onnxruntime_minilm.py").path, modules: "onnx, onnxruntime", versionKey: "onnxruntime",
                   variants: [("ONNX Runtime fp32", "fp32"), ("ONNX Runtime int8 (dynamic)", "int8")]) {
    _ = peer.ask(["workload": workloadPath])
    print("ONNX Runtime \(peer.version) (CPU execution provider, graph optimizations on)")
    peers.append(peer)
} else {
    print("ONNX Runtime is not installed (python3 -m pip install -r scripts/requirements-peers.txt): left out.")
}
if let peer = Peer(script: peerScripts.appendingPathComponent("openvino_minilm.py").path, modules: "onnx, openvino, nncf", versionKey: "openvino",
                   variants: [("OpenVINO fp32", "fp32"), ("OpenVINO NNCF W8A8 (static)", "w8a8"), ("OpenVINO NNCF INT4 AWQ+SE+GPTQ", "int4")]) {
    let loaded = peer.ask(["workload": workloadPath])
    let seconds = (loaded["preparation_seconds"] as? [String: Double] ?? [:]).sorted { $0.key < $1.key }
        .map { String(format: "%@ %.1f s", $0.key, $0.value) }.joined(separator: ", ")
    print("OpenVINO \(peer.version) (CPU plugin, one synchronous request, NUM_STREAMS 1); NNCF quantization: \(seconds)")
    peers.append(peer)
} else {
    print("OpenVINO or NNCF is not installed (python3 -m pip install -r scripts/requirements-peers.txt): left out.")
}
print("BLAS: \(BLASLibrary.summary); kernels: \(KernelVariant.best.rawValue), integer kernels: \(IntegerKernelVariant.best.rawValue)")
print("batch 1: \(latencyIDs.count) sentences, mean \(latencyIDs.reduce(0) { $0 + $1.count } / latencyIDs.count) tokens; batch 32: \(throughputIDs.count) sentences")

// Shrink's configurations: fp32 and each recipe (int8 activations; with --f32-activations also fp32 activations).
var files = [("Shrink fp32", modelFolder + "/model.safetensors", ActivationPrecision.float32)]
for recipe in recipeNames {
    let output = scratch + "/\(recipe).safetensors"
    _ = try ModelCompressor.compress(model: try ModelLocation.resolve(modelFolder),
                                     recipe: try Recipe.load(path: root.appendingPathComponent("recipes/\(recipe).json").path), output: output)
    for precision in precisions {
        files.append(("Shrink " + recipe.replacingOccurrences(of: "minilm-", with: "") + (precision == .int8 ? "" : " (f32 act.)"), output, precision))
    }
}

// Load: memory-map the file, check it against the architecture's tensor table, build the encoder (repacking every
// compressed layer) and its tokenizer, median of 5.
print("")
print("load (map + repack)                          ms")
for (name, path, precision) in files {
    var times: [Double] = []
    for _ in 0..<5 {
        let start = DispatchTime.now().uptimeNanoseconds
        _ = try loadEncoder(path, threads: 2, activations: precision)
        times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    }
    print("  " + name.padding(toLength: 40, withPad: " ", startingAt: 0) + String(format: " %6.1f", times.sorted()[2]))
}

struct Row: Codable {
    let name: String
    let threads: Int
    let batch1MillisecondsPerSentence: Double
    let batch32SentencesPerSecond: Double
    var batch1RatioToPeer: Double?
    var batch32RatioToPeer: Double?
    let meanCosine: Double
    let minCosine: Double
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

func cosines(_ embeddings: [[Float]]) -> (Double, Double) {
    let values = embeddings.enumerated().map { index, embedding -> Double in
        var dot = 0.0, a = 0.0, b = 0.0
        for (column, value) in embedding.enumerated() {
            let expected = Double(referenceEmbeddings[index * embedding.count + column])
            dot += Double(value) * expected
            a += Double(value) * Double(value)
            b += expected * expected
        }
        return dot / (a * b).squareRoot()
    }
    return (values.reduce(0, +) / Double(values.count), values.min()!)
}

var rows: [Row] = []
for threads in [1, 2] {
    let encoders = try files.map { ($0.0, try loadEncoder($0.1, threads: threads, activations: $0.2)) }
    let peerVariants = peers.flatMap { peer in peer.variants.map { (name: $0.0, variant: $0.1, peer: peer) } }
    var batch1 = [String: [Double]](), throughput = [String: [Double]]()
    // Warm-up.
    for (_, encoder) in encoders { for sequence in latencyIDs.prefix(20) { _ = try encoder.embed([sequence]) }; _ = try encoder.embed(batches[0]) }
    for (_, variant, peer) in peerVariants {
        _ = peer.ask(["variant": variant, "threads": threads, "run": "batch1", "inputs": "latency"])
        _ = peer.ask(["variant": variant, "threads": threads, "run": "batch32", "inputs": "throughput"])
    }
    for _ in 0..<rounds {
        for (name, encoder) in encoders {
            for sequence in latencyIDs {
                let start = DispatchTime.now().uptimeNanoseconds
                _ = try encoder.embed([sequence])
                batch1[name, default: []].append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            }
            let start = DispatchTime.now().uptimeNanoseconds
            for batch in batches { _ = try encoder.embed(batch) }
            throughput[name, default: []].append(Double(throughputIDs.count) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9))
        }
        for (name, variant, peer) in peerVariants {
            let times = peer.ask(["variant": variant, "threads": threads, "run": "batch1", "inputs": "latency"])["milliseconds"] as! [Double]
            batch1[name, default: []] += times
            let seconds = peer.ask(["variant": variant, "threads": threads, "run": "batch32", "inputs": "throughput"])["seconds"] as! Double
            throughput[name, default: []].append(Double(throughputIDs.count) / seconds)
        }
    }
    var threadRows: [Row] = []
    for (name, encoder) in encoders {
        let (mean, minimum) = cosines(try referenceIDs.map { try encoder.embed([$0])[0] })
        threadRows.append(Row(name: name, threads: threads, batch1MillisecondsPerSentence: median(batch1[name]!),
                              batch32SentencesPerSecond: median(throughput[name]!), meanCosine: mean, minCosine: minimum))
    }
    for (name, variant, peer) in peerVariants {
        let fidelity = peer.ask(["variant": variant, "threads": threads, "run": "fidelity", "inputs": "reference",
                                  "reference": fixtures.appendingPathComponent("embeddings.safetensors").path])
        threadRows.append(Row(name: name, threads: threads, batch1MillisecondsPerSentence: median(batch1[name]!),
                              batch32SentencesPerSecond: median(throughput[name]!), meanCosine: fidelity["mean_cosine"] as! Double,
                              minCosine: fidelity["min_cosine"] as! Double))
    }
    let peerRows = threadRows.filter { $0.name.hasPrefix("ONNX") }
    if let fastest = peerRows.map(\.batch1MillisecondsPerSentence).min(), let best = peerRows.map(\.batch32SentencesPerSecond).max() {
        for index in threadRows.indices {
            threadRows[index].batch1RatioToPeer = threadRows[index].batch1MillisecondsPerSentence / fastest
            threadRows[index].batch32RatioToPeer = threadRows[index].batch32SentencesPerSecond / best
        }
    }
    print("")
    print("threads \(threads)                                 batch 1 ms/sentence  ×ORT best time   batch 32 sentences/s  ×ORT best rate   mean cos   min cos")
    for row in threadRows {
        print("  " + row.name.padding(toLength: 40, withPad: " ", startingAt: 0) + String(format: " %10.3f  %14@  %20.1f  %14@  %9.5f %9.5f", row.batch1MillisecondsPerSentence,
                     (row.batch1RatioToPeer.map { String(format: "%.2f", $0) } ?? "-") as NSString, row.batch32SentencesPerSecond,
                     (row.batch32RatioToPeer.map { String(format: "%.2f", $0) } ?? "-") as NSString, row.meanCosine, row.minCosine))
    }
    rows += threadRows
}
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
encoder.keyEncodingStrategy = .convertToSnakeCase
try encoder.encode(rows).write(to: URL(fileURLWithPath: outputPath))
print("")
print("Wrote \(outputPath). Ratios: time over ONNX Runtime's fastest batch-1 variant (< 1: Shrink faster); rate over its best batch-32 rate (> 1: Shrink faster).")
