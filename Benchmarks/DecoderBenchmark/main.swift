// A Llama-family GGUF file decoded by Shrink and by llama.cpp's `llama-bench` in one run,
// interleaved: prompt processing (`--prompt` tokens from an empty cache, logits of the last) and
// decode (`--decode` tokens one at a time from an empty cache, logits of each), tokens/s, median of
// `--rounds` rounds, at each thread count; then decode's bytes read per token (every linear
// layer's packed weight and one embedding row) × tokens/s against the read bandwidth measured here.
// Peers: `--llama-bench <binary>` (default `$SHRINK_LLAMA_BENCH`, else the cache of
// `../shared/peers/llama.cpp/build.sh`); `--peer-name` labels it (mainline, ik). Without a peer
// binary only Shrink runs.
//   swift run -c release DecoderBenchmark [--model file.gguf] [--threads 1,2] [--rounds 5]
//                                         [--prompt 128] [--decode 64] [--llama-bench path] [--peer-name name]
import Foundation
import ShrinkKernels
import ShrinkModels
import ShrinkTestSupport

func usageError(_ message: String) -> Never {
    FileHandle.standardError.write(Data("DecoderBenchmark: \(message)\n".utf8))
    exit(2)
}

var model = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
var threadCounts = [1, 2]
var rounds = 5
var promptLength = 128
var decodeLength = 64
var peer: String? = ProcessInfo.processInfo.environment["SHRINK_LLAMA_BENCH"]
    ?? [NSHomeDirectory() + "/.cache/shrink-peers/llama.cpp/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-bench"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
var peerName = "llama.cpp"
var arguments = Array(CommandLine.arguments.dropFirst())
while let flag = arguments.first {
    arguments.removeFirst()
    guard let value = arguments.first else { usageError("\(flag) needs a value") }
    arguments.removeFirst()
    switch flag {
    case "--model": model = value
    case "--threads": threadCounts = value.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
    case "--rounds": rounds = max(1, Int(value) ?? 5)
    case "--prompt": promptLength = max(1, Int(value) ?? 128)
    case "--decode": decodeLength = max(1, Int(value) ?? 64)
    case "--llama-bench": peer = value
    case "--peer-name": peerName = value
    default: usageError("unknown option \(flag)")
    }
}

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

/// llama-bench's tokens/s for one test (`-p n -n 0` or `-p 0 -n n`), one repetition.
@MainActor func peerRate(threads: Int, prompt: Int, decode: Int) -> Double? {
    guard let peer else { return nil }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: peer)
    process.arguments = ["-m", model, "-p", "\(prompt)", "-n", "\(decode)", "-t", "\(threads)", "-r", "1", "-o", "json"]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { usageError("cannot run \(peer): \(error)") }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard let rows = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]], let rate = rows.first?["avg_ts"] as? Double else {
        usageError("\(peer) printed no avg_ts (exit \(process.terminationStatus))")
    }
    return rate
}

let (files, architecture) = try ModelArchitectures.open(weightsPath: model, configPath: nil)
guard let family = architecture as? any LlamaFamilyArchitecture else { usageError("\(model) is not a Llama-family model") }
print("Model: \(model)")
print("Peer: \(peer.map { "\(peerName) \($0)" } ?? "none")")
var bandwidth: [Int: Double] = [:]
for threads in threadCounts {
    bandwidth[threads] = MemoryBandwidth.read(threads: threads)
    print(String(format: "read bandwidth, %d thread(s): %.1f GB/s (%@)", threads, bandwidth[threads]!, MemoryBandwidth.method as NSString))
}
print("")
print("threads  test        Shrink tok/s  \(peerName.padding(toLength: 12, withPad: " ", startingAt: 0)) ratio   decode bytes/token × tok/s of read bw")
for threads in threadCounts {
    let decoder = try family.makeDecoder(files: files, options: RuntimeOptions(threads: threads))
    let vocabulary = Int32(decoder.config.vocabularySize)
    var generator = SeededGenerator(seed: 7)
    let prompt = (0..<promptLength).map { _ in Int32.random(in: 0..<vocabulary, using: &generator) }
    let state = decoder.makeState(capacity: max(promptLength, decodeLength), batch: promptLength)
    var samples: [String: [Double]] = [:]
    var sink: Float = 0
    func runPrompt() throws -> Double {
        state.reset()
        let start = now()
        try decoder.evaluate(prompt, state: state, logitRows: (promptLength - 1)..<promptLength) { _, logits in sink += logits[0] }
        return Double(promptLength) / (now() - start)
    }
    func runDecode() throws -> Double {
        state.reset()
        var token = prompt[0]
        let start = now()
        for _ in 0..<decodeLength {
            try decoder.evaluate([token], state: state, logitRows: 0..<1) { _, logits in
                var best = 0
                for index in 1..<logits.count where logits[index] > logits[best] { best = index }
                token = Int32(best)
            }
        }
        return Double(decodeLength) / (now() - start)
    }
    _ = try runPrompt()
    _ = try runDecode()
    for _ in 0..<rounds {
        samples["prompt", default: []].append(try runPrompt())
        if let rate = peerRate(threads: threads, prompt: promptLength, decode: 0) { samples["peer prompt", default: []].append(rate) }
        samples["decode", default: []].append(try runDecode())
        if let rate = peerRate(threads: threads, prompt: 0, decode: decodeLength) { samples["peer decode", default: []].append(rate) }
    }
    for (test, label) in [("prompt", "pp\(promptLength)"), ("decode", "tg\(decodeLength)")] {
        let mine = median(samples[test]!)
        let theirs = samples["peer " + test].map(median)
        let ratio = theirs.map { String(format: "%5.2f×", mine / $0) } ?? "    —"
        let streamed = test == "decode"
            ? String(format: "%.1f MB × %.0f = %.1f GB/s, %.2f", Double(decoder.streamedBytesPerToken) / 1e6, mine,
                     Double(decoder.streamedBytesPerToken) * mine / 1e9, Double(decoder.streamedBytesPerToken) * mine / 1e9 / bandwidth[threads]!)
            : ""
        let peerColumn = (theirs.map { String(format: "%.1f", $0) } ?? "—").padding(toLength: 12, withPad: " ", startingAt: 0)
        print(String(format: "%7d  %@ %12.1f  %@ %@   %@", threads, label.padding(toLength: 10, withPad: " ", startingAt: 0) as NSString, mine,
                     peerColumn as NSString, ratio as NSString, streamed as NSString))
    }
    if sink.isNaN { print("(NaN logits)") }
}
