// Model load with and without the specialization cache, in one run, interleaved: per round and
// model a cold load (every layer repacked, no cache) and a warm one (panels mapped from a cache
// entry written before the first round, in a temporary folder); median seconds of `--rounds`
// rounds and warm / cold. Also checks that both loads compute the same outputs, bit for bit
// (a decoder's logits, an encoder's embeddings). Default models: SmolLM2-135M (Q4_1 GGUF, int8
// panels) and all-MiniLM-L6-v2 (F32 safetensors, fp32 panels).
//   swift run -c release LoadBenchmark [--rounds 7] [--model path.gguf | --model folder-with-config.json]
import Foundation
import ShrinkModels
import ShrinkTestSupport

var rounds = 7
var models = [TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf", TestModels.miniLM]
var arguments = Array(CommandLine.arguments.dropFirst())
while arguments.count >= 2 {
    let (flag, value) = (arguments.removeFirst(), arguments.removeFirst())
    switch flag {
    case "--rounds": rounds = max(1, Int(value) ?? rounds)
    case "--model": models = [value]
    default: FileHandle.standardError.write(Data("LoadBenchmark: unknown option \(flag)\n".utf8)); exit(2)
    }
}
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("shrink-load-\(getpid())").path
defer { try? FileManager.default.removeItem(atPath: folder) }
let cache = SpecializationCache(directory: folder)

/// A folder stands for its `model.safetensors` and `config.json`.
func files(_ model: String) -> (weights: String, config: String?) {
    var isFolder: ObjCBool = false
    guard FileManager.default.fileExists(atPath: model, isDirectory: &isFolder), isFolder.boolValue else { return (model, nil) }
    return (model + "/model.safetensors", model + "/config.json")
}

/// Loads `model` (with `cache`, or none) and returns its runtime with the seconds the load took.
func load(_ model: String, _ cache: SpecializationCache?) throws -> (any ModelRuntime, Double) {
    let start = Date()
    let (weights, config) = files(model)
    let (files, architecture) = try ModelArchitectures.open(weightsPath: weights, configPath: config)
    let runtime = try architecture.makeRuntime(files: files, options: RuntimeOptions(specialization: cache))
    return (runtime, Date().timeIntervalSince(start))
}

func outcome(_ runtime: any ModelRuntime) -> WeightSource.SpecializationOutcome {
    (runtime as? LlamaDecoder)?.specializationOutcome ?? (runtime as? SentenceEncoder)?.specializationOutcome ?? .unused
}

/// A decoder's logits of eight tokens, or an encoder's embeddings of two sentences.
func outputs(_ runtime: any ModelRuntime) throws -> [Float] {
    if let encoder = runtime as? SentenceEncoder {
        return try encoder.embed(["A man is playing a guitar.", "Specialization caches keep repacked panels."].map(encoder.tokenize)).flatMap { $0 }
    }
    guard let decoder = runtime as? LlamaDecoder else { throw ModelError.wrongCapability(architecture: "\(type(of: runtime))", needed: "a decoder or an encoder") }
    var values: [Float] = []
    try decoder.evaluate([1, 2, 3, 4, 5, 6, 7, 8], state: decoder.makeState(capacity: 16), logitRows: 0..<8) { _, row in values += row }
    return values
}

let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?.split(separator: "\n").first { $0.hasPrefix("model name") }?
    .split(separator: ":").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
print("CPU: \(cpu); \(rounds) rounds")
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
for model in models {
    _ = try load(model, cache)
    var cold: [Double] = [], warm: [Double] = []
    var same = true
    for _ in 0..<rounds {
        let (plain, c) = try load(model, nil)
        let (mapped, w) = try load(model, cache)
        guard outcome(mapped) == .mapped else { fatalError("the warm load of \(model) did not map its entry: \(outcome(mapped))") }
        cold.append(c)
        warm.append(w)
        same = try same && outputs(plain) == outputs(mapped)
    }
    print(String(format: "%@: cold %.3f s (repacked), warm %.3f s (mapped), warm / cold %.3f; outputs identical: %@",
                 (files(model).weights as NSString).lastPathComponent, median(cold), median(warm), median(warm) / median(cold), same ? "yes" : "NO"))
}
