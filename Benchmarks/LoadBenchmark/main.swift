// Model load with and without the specialization cache, in one run, interleaved: per round a cold
// load (every int8 layer repacked, no cache) and a warm one (panels mapped from a cache entry
// written before the first round, in a temporary folder); median seconds of `--rounds` rounds
// and warm / cold. Also checks that both loads give the same logits, bit for bit.
//   swift run -c release LoadBenchmark [--rounds 7] [--model path.gguf]
import Foundation
import ShrinkModels
import ShrinkTestSupport

var rounds = 7
var modelPath = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
var arguments = Array(CommandLine.arguments.dropFirst())
while arguments.count >= 2 {
    let (flag, value) = (arguments.removeFirst(), arguments.removeFirst())
    switch flag {
    case "--rounds": rounds = max(1, Int(value) ?? rounds)
    case "--model": modelPath = value
    default: FileHandle.standardError.write(Data("LoadBenchmark: unknown option \(flag)\n".utf8)); exit(2)
    }
}
let model = modelPath
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("shrink-load-\(getpid())").path
defer { try? FileManager.default.removeItem(atPath: folder) }
let cache = SpecializationCache(directory: folder)

/// Loads the model (with `cache`, or none) and returns it with the seconds the load took.
@MainActor func load(_ cache: SpecializationCache?) throws -> (LlamaDecoder, Double) {
    let start = Date()
    let (files, architecture) = try ModelArchitectures.open(weightsPath: model, configPath: nil)
    guard let family = architecture as? any LlamaFamilyArchitecture else { throw ModelError.wrongCapability(architecture: type(of: architecture).name, needed: "a decoder") }
    let decoder = try family.makeDecoder(files: files, options: RuntimeOptions(specialization: cache))
    return (decoder, Date().timeIntervalSince(start))
}

func logits(_ decoder: LlamaDecoder) throws -> [Float] {
    var values: [Float] = []
    try decoder.evaluate([1, 2, 3, 4, 5, 6, 7, 8], state: decoder.makeState(capacity: 16), logitRows: 0..<8) { _, row in values += row }
    return values
}

_ = try load(cache)
var cold: [Double] = [], warm: [Double] = []
var same = true
for _ in 0..<rounds {
    let (plain, c) = try load(nil)
    let (mapped, w) = try load(cache)
    guard mapped.specializationOutcome == .mapped else { fatalError("the warm load did not map its entry: \(mapped.specializationOutcome)") }
    cold.append(c)
    warm.append(w)
    same = try same && logits(plain) == logits(mapped)
}
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?.split(separator: "\n").first { $0.hasPrefix("model name") }?
    .split(separator: ":").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
print("CPU: \(cpu); \((model as NSString).lastPathComponent); \(rounds) rounds")
print(String(format: "load: cold %.3f s (repacked), warm %.3f s (mapped), warm / cold %.3f; logits identical: %@",
             median(cold), median(warm), median(warm) / median(cold), same ? "yes" : "NO"))
