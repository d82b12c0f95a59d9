// Llama-family models decoded by Shrink and by llama.cpp's `llama-bench` builds in one run,
// interleaved (per round: Shrink, then each peer, for every pair of files): prompt processing
// (`--prompt` tokens from an empty cache, logits of the last) and decode (`--decode` tokens one at a
// time from an empty cache), tokens/s, median of `--rounds` rounds, at each thread count; then
// decode's bytes read per token (every linear layer's packed weight and one embedding row) ×
// tokens/s as a fraction of the read bandwidth: right before each decode run a probe streams as
// many bytes as the run will (sustained GB/s, on the same threads), each run is set against its
// own probe, and the median and range of those per-run fractions are shown (on a shared host the
// bandwidth drifts from run to run). The machine's peak, the fastest single pass of the probe, is
// printed first for reference.
//
// Pairs (`--pair label=shrink-file,peer-file`, repeatable; default the shipped SmolLM2 Q4_1 GGUF for
// both) put a file Shrink runs next to the file the peers run (Shrink's 8-bit recipe against
// llama.cpp's Q8_0, say). Peers (`--peer name=llama-bench`, repeatable; default the builds of
// `../shared/peers/llama.cpp/build.sh` found in its cache, mainline and ik; `--peer none`: Shrink only). Before timing, every
// peer's `llama-perplexity` (next to its llama-bench) and Shrink score each file's first
// `--check-chunks` windows of 512 tokens of wikitext-2 test: a peer more than 10 % above Shrink's
// perplexity of the same pair computes wrongly there, and its speeds are shown in brackets and
// left out of the ratios. `--json <file>` writes every figure.
//   swift run -c release DecoderBenchmark [--pair label=a,b]... [--peer name=path]... [--threads 1,2]
//       [--rounds 3] [--prompt 128] [--decode 64] [--check-chunks 4] [--json out.json]
import Foundation
import ShrinkEvaluation
import ShrinkKernels
import ShrinkModels
import ShrinkTestSupport

func usageError(_ message: String) -> Never {
    FileHandle.standardError.write(Data("DecoderBenchmark: \(message)\n".utf8))
    exit(2)
}

struct Pair {
    let label: String
    let shrinkFile: String
    let peerFile: String
}

struct Peer {
    let name: String
    let bench: String
    var perplexityTool: String { (bench as NSString).deletingLastPathComponent + "/llama-perplexity" }
}

let shipped = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
let peerCache = NSHomeDirectory() + "/.cache/shrink-peers/llama.cpp"
var pairs: [Pair] = []
var peers: [Peer] = []
var threadCounts = [1, 2]
var rounds = 3
var promptLength = 128
var decodeLength = 64
var checkChunks = 4
var jsonPath: String?
var usePeers = true
var arguments = Array(CommandLine.arguments.dropFirst())
while let flag = arguments.first {
    arguments.removeFirst()
    guard let value = arguments.first else { usageError("\(flag) needs a value") }
    arguments.removeFirst()
    switch flag {
    case "--pair":
        let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
        let files = parts.count == 2 ? parts[1].split(separator: ",").map(String.init) : []
        guard parts.count == 2, files.count == 2 else { usageError("--pair expects label=shrink-file,peer-file, got '\(value)'") }
        pairs.append(Pair(label: parts[0], shrinkFile: files[0], peerFile: files[1]))
    case "--peer" where value == "none": usePeers = false
    case "--peer":
        let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, FileManager.default.isExecutableFile(atPath: parts[1]) else { usageError("--peer expects name=llama-bench binary, got '\(value)'") }
        peers.append(Peer(name: parts[0], bench: parts[1]))
    case "--threads": threadCounts = value.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
    case "--rounds": rounds = max(1, Int(value) ?? 3)
    case "--prompt": promptLength = max(1, Int(value) ?? 128)
    case "--decode": decodeLength = max(1, Int(value) ?? 64)
    case "--check-chunks": checkChunks = max(0, Int(value) ?? 4)
    case "--json": jsonPath = value
    default: usageError("unknown option \(flag)")
    }
}
if pairs.isEmpty { pairs = [Pair(label: "Q4_1", shrinkFile: shipped, peerFile: shipped)] }
if peers.isEmpty && usePeers {
    for (name, folder) in [("llama.cpp", "llama_cpp_python-0.3.36/vendor/llama.cpp"), ("ik_llama.cpp", "ik_llama_cpp_python-0.1.5/vendor/ik_llama.cpp")] {
        let bench = "\(peerCache)/\(folder)/build/bin/llama-bench"
        if FileManager.default.isExecutableFile(atPath: bench) { peers.append(Peer(name: name, bench: bench)) }
    }
}

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

/// Runs `tool` with `arguments`; its standard output and standard error.
func execute(_ tool: String, _ arguments: [String]) -> (output: Data, errors: String, status: Int32) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: tool)
    process.arguments = arguments
    let output = Pipe(), errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    do { try process.run() } catch { usageError("cannot run \(tool): \(error)") }
    nonisolated(unsafe) var errorData = Data()
    let reader = Thread { errorData = errors.fileHandleForReading.readDataToEndOfFile() }
    reader.start()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    while !reader.isFinished { usleep(1000) }
    return (data, String(decoding: errorData, as: UTF8.self), process.terminationStatus)
}

/// llama-bench's tokens/s for one test (`-p n -n 0` or `-p 0 -n n`), one repetition.
func peerRate(_ peer: Peer, file: String, threads: Int, prompt: Int, decode: Int) -> Double {
    let result = execute(peer.bench, ["-m", file, "-p", "\(prompt)", "-n", "\(decode)", "-t", "\(threads)", "-r", "1", "-o", "json"])
    guard let rows = try? JSONSerialization.jsonObject(with: result.output) as? [[String: Any]], let rate = rows.first?["avg_ts"] as? Double else {
        usageError("\(peer.name) printed no avg_ts for \(file) (exit \(result.status))")
    }
    return rate
}

/// The peer's perplexity of `file` over the first `checkChunks` windows of wikitext-2 test.
@MainActor func peerPerplexity(_ peer: Peer, file: String) -> Double? {
    let result = execute(peer.perplexityTool, ["-m", file, "-f", Perplexity.defaultText, "-c", "512", "--chunks", "\(checkChunks)", "-t", "2"])
    let text = result.errors + String(decoding: result.output, as: UTF8.self)
    // Mainline prints `Final estimate: PPL = x +/- y`, ik_llama.cpp `Final estimate: PPL over n chunks for n_ctx=512 = x +/- y`.
    guard let line = text.split(separator: "\n").first(where: { $0.contains("Final estimate: PPL") }),
          let value = line.components(separatedBy: " = ").last?.split(separator: " ").first else { return nil }
    return Double(value)
}

func decoder(_ file: String, threads: Int) throws -> LlamaDecoder {
    let (files, architecture) = try ModelArchitectures.open(weightsPath: file, configPath: nil)
    guard let family = architecture as? any LlamaFamilyArchitecture else { usageError("\(file) is not a Llama-family model") }
    return try family.makeDecoder(files: files, options: RuntimeOptions(threads: threads))
}

print("CPU: \((try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?.split(separator: "\n").first { $0.hasPrefix("model name") }.map { String($0.split(separator: ":")[1]).trimmingCharacters(in: .whitespaces) } ?? "unknown"), \(ProcessInfo.processInfo.activeProcessorCount) cores")
for peer in peers { print("Peer \(peer.name): \(peer.bench)") }
for pair in pairs { print("Pair \(pair.label): Shrink \(pair.shrinkFile), peers \(pair.peerFile)") }

// Perplexity check: Shrink's of each pair's file, and each peer's of its file.
var validity: [String: Bool] = [:]
var checks: [[String: Any]] = []
if checkChunks > 0 {
    print("\nPerplexity over the first \(checkChunks) windows of 512 tokens (wikitext-2 test):")
    for pair in pairs {
        let model = try decoder(pair.shrinkFile, threads: 2)
        let tokens = model.tokenizer!.encode(try String(contentsOfFile: Perplexity.defaultText, encoding: .utf8))
        let mine = try Perplexity.measure(decoder: model, tokens: tokens, context: 512, chunks: checkChunks).perplexity
        var line = String(format: "  %@: Shrink %.4f", pair.label, mine)
        var entry: [String: Any] = ["pair": pair.label, "shrink": mine]
        for peer in peers {
            let theirs = peerPerplexity(peer, file: pair.peerFile)
            let valid = theirs.map { $0 <= mine * 1.1 } ?? false
            validity["\(pair.label) \(peer.name)"] = valid
            entry[peer.name] = theirs ?? NSNull()
            line += String(format: ", %@ %@%@", peer.name, theirs.map { String(format: "%.4f", $0) } ?? "failed", valid ? "" : " (wrong: speeds left out)")
        }
        checks.append(entry)
        print(line)
    }
} else {
    for pair in pairs { for peer in peers { validity["\(pair.label) \(peer.name)"] = true } }
}

let probe = ReadProbe()
var bandwidth: [Int: Double] = [:], roundBandwidths: [Int: Double] = [:]
for threads in threadCounts {
    bandwidth[threads] = probe.fastest(threads: threads, passes: 5)
    print(String(format: "peak read bandwidth, %d thread(s): %.1f GB/s (%@, fastest of 5 passes over 256 MiB)", threads, bandwidth[threads]!,
                 MemoryBandwidth.method as NSString))
}

var results: [[String: Any]] = []
print("")
let peerColumns = peers.map { "\($0.name) tok/s (ratio)".padding(toLength: 28, withPad: " ", startingAt: 0) }.joined(separator: " ")
print("threads  pair        test    Shrink tok/s  \(peerColumns) decode bytes/token × tok/s, of the bw sustained before each run: median (range)")
for threads in threadCounts {
    struct Runner {
        let pair: Pair
        let decoder: LlamaDecoder
        let state: DecoderState
        let prompt: [Int32]
    }
    var runners: [Runner] = []
    for pair in pairs {
        let model = try decoder(pair.shrinkFile, threads: threads)
        var generator = SeededGenerator(seed: 7)
        let vocabulary = Int32(model.config.vocabularySize)
        runners.append(Runner(pair: pair, decoder: model, state: model.makeState(capacity: max(promptLength, decodeLength), batch: promptLength),
                              prompt: (0..<promptLength).map { _ in Int32.random(in: 0..<vocabulary, using: &generator) }))
    }
    var sink: Float = 0
    func runPrompt(_ runner: Runner) throws -> Double {
        runner.state.reset()
        let start = now()
        try runner.decoder.evaluate(runner.prompt, state: runner.state, logitRows: (promptLength - 1)..<promptLength) { _, logits in sink += logits[0] }
        return Double(promptLength) / (now() - start)
    }
    func runDecode(_ runner: Runner) throws -> Double {
        runner.state.reset()
        var token = runner.prompt[0]
        let start = now()
        for _ in 0..<decodeLength {
            try runner.decoder.evaluate([token], state: runner.state, logitRows: 0..<1) { _, logits in
                var best = 0
                for index in 1..<logits.count where logits[index] > logits[best] { best = index }
                token = Int32(best)
            }
        }
        return Double(decodeLength) / (now() - start)
    }
    // samples["<pair> <who> <test>"]
    var samples: [String: [Double]] = [:]
    for runner in runners {
        _ = try runPrompt(runner)
        _ = try runDecode(runner)
    }
    for _ in 0..<rounds {
        for runner in runners {
            let label = runner.pair.label
            samples["\(label) Shrink prompt", default: []].append(try runPrompt(runner))
            for peer in peers {
                samples["\(label) \(peer.name) prompt", default: []].append(peerRate(peer, file: runner.pair.peerFile, threads: threads, prompt: promptLength, decode: 0))
            }
            let streamed = decodeLength * runner.decoder.streamedBytesPerToken
            let sustained = probe.sustained(threads: threads, bytes: streamed)
            let rate = try runDecode(runner)
            samples["\(label) Shrink decode", default: []].append(rate)
            samples["\(label) probe", default: []].append(sustained)
            samples["\(label) fraction", default: []].append(Double(runner.decoder.streamedBytesPerToken) * rate / 1e9 / sustained)
            for peer in peers {
                samples["\(label) \(peer.name) decode", default: []].append(peerRate(peer, file: runner.pair.peerFile, threads: threads, prompt: 0, decode: decodeLength))
            }
        }
    }
    roundBandwidths[threads] = median(runners.flatMap { samples["\($0.pair.label) probe"]! })
    for runner in runners {
        let label = runner.pair.label
        for (test, name) in [("prompt", "pp\(promptLength)"), ("decode", "tg\(decodeLength)")] {
            let mine = median(samples["\(label) Shrink \(test)"]!)
            var entry: [String: Any] = ["threads": threads, "pair": label, "test": name, "shrink_tokens_per_second": mine,
                                        "shrink_file": runner.pair.shrinkFile, "peer_file": runner.pair.peerFile]
            let cells = peers.map { peer -> String in
                let theirs = median(samples["\(label) \(peer.name) \(test)"]!)
                let valid = validity["\(label) \(peer.name)"] ?? false
                entry[peer.name] = ["tokens_per_second": theirs, "valid": valid, "ratio": valid ? mine / theirs : NSNull()] as [String: Any]
                let cell = valid ? String(format: "%.1f (%.2f×)", theirs, mine / theirs) : String(format: "[%.1f] (—)", theirs)
                return cell.padding(toLength: 28, withPad: " ", startingAt: 0)
            }.joined(separator: " ")
            var streamed = ""
            if test == "decode" {
                let bytes = Double(runner.decoder.streamedBytesPerToken)
                let fractions = samples["\(label) fraction"]!, fraction = median(fractions)
                streamed = String(format: "%.1f MB × %.0f = %.1f GB/s, %.2f (%.2f–%.2f)", bytes / 1e6, mine, bytes * mine / 1e9, fraction,
                                  fractions.min()!, fractions.max()!)
                entry["streamed_bytes_per_token"] = bytes
                entry["read_bandwidth_fraction"] = fraction
                entry["read_bandwidth_fractions"] = fractions
                entry["sustained_read_bandwidth_gb_per_second"] = samples["\(label) probe"]!
            }
            results.append(entry)
            print(String(format: "%7d  %@ %@ %12.1f  %@ %@", threads, label.padding(toLength: 11, withPad: " ", startingAt: 0) as NSString,
                         name.padding(toLength: 7, withPad: " ", startingAt: 0) as NSString, mine, cells as NSString, streamed as NSString))
        }
    }
    print(String(format: "        (read bandwidth sustained before the %d-thread decode runs: median %.1f GB/s)", threads, roundBandwidths[threads]!))
    if sink.isNaN { print("(NaN logits)") }
}

if let jsonPath {
    let object: [String: Any] = ["peers": peers.map { ["name": $0.name, "llama_bench": $0.bench] }, "perplexity_checks": checks,
                                 "peak_read_bandwidth_gb_per_second": Dictionary(uniqueKeysWithValues: bandwidth.map { ("\($0.key)", $0.value) }),
                                 "sustained_read_bandwidth_gb_per_second": Dictionary(uniqueKeysWithValues: roundBandwidths.map { ("\($0.key)", $0.value) }),
                                 "rounds": rounds, "results": results]
    try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: jsonPath))
    print("\nWrote \(jsonPath)")
}
