// Guided generation on SmolLM2 (the shipped Q4_1 GGUF): `--prompts` chat prompts asking for a
// vocabulary card (25 words × German, French, Spanish, Italian, in turn), each answered twice in
// one run, interleaved: held to `VocabularyCard`'s schema, and unconstrained (the same prompt,
// greedy, the same token budget). Prints the schema's compile time, how many guided answers are
// valid JSON and decode into the type, and decode speed (tokens after the first / time from the
// first token to the last, summed over prompts) with and without the constraint, and their ratio.
//   swift run -c release GuidedBenchmark [--prompts 100] [--threads 1] [--max-tokens 128]
import Foundation
import ShrinkModels
import ShrinkTestSupport

func usageError(_ message: String) -> Never {
    FileHandle.standardError.write(Data("GuidedBenchmark: \(message)\nusage: swift run -c release GuidedBenchmark [--prompts n] [--threads n] [--max-tokens n]\n".utf8))
    exit(2)
}

var settings = ["--prompts": 100, "--threads": 1, "--max-tokens": 128]
var arguments = Array(CommandLine.arguments.dropFirst())
while let flag = arguments.first {
    arguments.removeFirst()
    guard settings[flag] != nil else { usageError("unknown option \(flag)") }
    guard let text = arguments.first, let value = Int(text), value > 0 else { usageError("\(flag) needs a positive whole number") }
    arguments.removeFirst()
    settings[flag] = value
}
let (promptCount, threads, maximumTokens) = (settings["--prompts"]!, settings["--threads"]!, settings["--max-tokens"]!)

let words = ["house", "tree", "to run", "fast", "cat", "beautiful", "to eat", "always", "water", "book", "to sleep", "slowly", "friend",
             "city", "to write", "happy", "bread", "often", "window", "to sing", "cold", "mountain", "to read", "never", "garden"]
let languages = ["German", "French", "Spanish", "Italian"]
let prompts = (0..<promptCount).map { index in
    "Make a \(languages[index % languages.count]) vocabulary card for the English word \"\(words[(index / languages.count) % words.count])\" as JSON."
}

let model = TestModels.cacheDirectory + "/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
let (files, architecture) = try ModelArchitectures.open(weightsPath: model, configPath: nil)
guard let decoder = try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: threads)) as? LlamaDecoder,
      let tokenizer = decoder.tokenizer else { usageError("\(model) is not a decoder with a tokenizer (scripts/fetch-models.py smollm2)") }
let compileStart = Date()
let constraint = TokenConstraint(schema: VocabularyCard.generationSchema, tokenizer: tokenizer)
let compileSeconds = Date().timeIntervalSince(compileStart)

/// One answer: its text, tokens generated, and seconds from the first token to the last.
func answer(_ prompt: String, constraint: TokenConstraint?) throws -> (text: String, tokens: Int, seconds: Double) {
    let session = try LanguageModelSession(model: decoder, capacity: 512)
    var text = "", first: Date?, last = Date(), tokens = 0
    try session.respond(to: prompt, constraint: constraint, options: GenerationOptions(maximumTokens: maximumTokens)) { token in
        last = Date()
        if first == nil { first = last }
        text += token.text
        tokens += 1
        return true
    }
    return (text, tokens, last.timeIntervalSince(first ?? last))
}

var valid = 0, decoded = 0
var guided = (tokens: 0, seconds: 0.0), free = (tokens: 0, seconds: 0.0)
for prompt in prompts {
    let held = try answer(prompt, constraint: constraint)
    let loose = try answer(prompt, constraint: nil)
    if (try? JSONSerialization.jsonObject(with: Data(held.text.utf8))) != nil {
        valid += 1
    } else {
        FileHandle.standardError.write(Data("not JSON (\(held.tokens) tokens) for \(prompt): \(held.text)\n".utf8))
    }
    if (try? JSONDecoder().decode(VocabularyCard.self, from: Data(held.text.utf8))) != nil { decoded += 1 }
    guided.tokens += max(held.tokens - 1, 0)
    guided.seconds += held.seconds
    free.tokens += max(loose.tokens - 1, 0)
    free.seconds += loose.seconds
}
let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?.split(separator: "\n").first { $0.hasPrefix("model name") }?
    .split(separator: ":").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
let guidedRate = Double(guided.tokens) / max(guided.seconds, 1e-9), freeRate = Double(free.tokens) / max(free.seconds, 1e-9)
print("CPU: \(cpu), \(threads) thread(s); SmolLM2 Q4_1; \(prompts.count) prompts, at most \(maximumTokens) tokens, greedy")
print("schema: \(constraint.stateCount) automaton states, compiled in \(String(format: "%.2f", compileSeconds)) s; shortest value \(constraint.minimumTokens) tokens")
print("guided answers: \(valid) / \(prompts.count) valid JSON, \(decoded) / \(prompts.count) decode into VocabularyCard")
print(String(format: "decode: guided %.1f tokens/s (%d tokens), unconstrained %.1f tokens/s (%d tokens), guided / unconstrained %.3f",
             guidedRate, guided.tokens, freeRate, free.tokens, guidedRate / freeRate))
