import Foundation
import Shrink
import ShrinkIO
import ShrinkCore
import ShrinkModels

/// `shrink generate`: text from a language model, streamed to standard output as tokens arrive.
enum GenerateCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "generate",
        summary: "Generate text with a language model, streamed as it is produced; prompt and decode speed on standard error.",
        arguments: [],
        options: [
            OptionSpec(name: "--model", valueName: "path", help: "GGUF file, compressed container, Hugging Face folder (config.json, model.safetensors, tokenizer.json) or known name (default: smollm2)."),
            OptionSpec(name: "--prompt", valueName: "text", help: "The prompt. Required."),
            OptionSpec(name: "--chat", valueName: nil, help: "Wrap the prompt in the model's chat template (ChatML) as one user turn."),
            OptionSpec(name: "--schema", valueName: "file", help: "A JSON schema (docs/CLI.md): answer the prompt, as a chat turn, with a JSON value of it; only the JSON goes to standard output."),
            OptionSpec(name: "--max-tokens", valueName: "n", help: "Most tokens to generate (default 128)."),
            OptionSpec(name: "--temperature", valueName: "t", help: "0 for greedy decoding (default 0)."),
            OptionSpec(name: "--top-p", valueName: "p", help: "Nucleus sampling mass in (0, 1] (default 1)."),
            OptionSpec(name: "--seed", valueName: "n", help: "Seed of the sampler (default 0)."),
            OptionSpec(name: "--threads", valueName: "n", help: "Threads (default: all cores)."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        guard let prompt = arguments.value("--prompt") else { throw UsageError(command: spec.name, message: "missing option --prompt <text>") }
        let maxTokens = try arguments.positiveInteger("--max-tokens", default: 128, command: spec.name)
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let temperature = try number("--temperature", arguments, default: 0) { $0 >= 0 }
        let topP = try number("--top-p", arguments, default: 1) { $0 > 0 && $0 <= 1 }
        guard let seed = UInt64(arguments.value("--seed") ?? "0") else {
            throw UsageError(command: spec.name, message: "--seed takes a whole number ≥ 0, not '\(arguments.value("--seed")!)'")
        }
        let (decoder, _) = try PerplexityCommand.openDecoder(arguments.value("--model"), options: RuntimeOptions(threads: threads, specialization: SpecializationCache(createsEntries: false)))
        guard let tokenizer = decoder.tokenizer else {
            throw ModelError.notRunnable(architecture: decoder.architecture, reason: "generation needs a tokenizer (a GGUF file's, or tokenizer.json next to config.json)")
        }
        let options = GenerationOptions(maximumTokens: maxTokens, temperature: Float(temperature), topP: Float(topP), seed: seed)
        if arguments.flag("--chat") || arguments.value("--schema") != nil {
            return try chat(prompt, decoder: decoder, tokenizer: tokenizer, schema: arguments.value("--schema"), options: options, threads: threads,
                            console: console)
        }
        let tokens = tokenizer.encode(prompt)
        guard !tokens.isEmpty else { throw UsageError(command: spec.name, message: "--prompt is empty") }
        let capacity = min(decoder.config.contextLength, tokens.count + maxTokens)
        guard tokens.count < capacity else {
            throw UsageError(command: spec.name, message: "the prompt's \(tokens.count) tokens fill the model's context of \(decoder.config.contextLength)")
        }
        let state = decoder.makeState(capacity: capacity, batch: min(tokens.count, 512))
        var sampler = try TokenSampler(temperature: Float(temperature), topP: Float(topP), seed: seed)
        var stream = UTF8Stream()
        var next: Int32 = 0
        let promptStart = Date()
        try decoder.evaluate(tokens, state: state, logitRows: (tokens.count - 1)..<tokens.count) { _, logits in next = sampler.next(logits) }
        let promptSeconds = Date().timeIntervalSince(promptStart)
        var generated = 0
        let decodeStart = Date()
        while !tokenizer.endOfGeneration.contains(next) {
            console.stream(stream.append(tokenizer.bytes(of: next)))
            generated += 1
            guard generated < maxTokens, state.position < capacity else { break }
            try decoder.evaluate([next], state: state, logitRows: 0..<1) { _, logits in next = sampler.next(logits) }
        }
        console.stream(stream.finish())
        console.print("")
        let decodeSeconds = Date().timeIntervalSince(decodeStart)
        console.printError("prompt: \(tokens.count) tokens, \(rate(tokens.count, promptSeconds)) tokens/s; "
                           + "decode: \(generated) tokens, \(rate(max(generated - 1, 0), decodeSeconds)) tokens/s (\(threads) threads)")
        return 0
    }

    /// One chat turn through `LanguageModelSession`, held to the schema at `schemaPath` when given.
    static func chat(_ prompt: String, decoder: LlamaDecoder, tokenizer: BPETokenizer, schema schemaPath: String?, options: GenerationOptions,
                     threads: Int, console: Console) throws -> Int32 {
        let session = try LanguageModelSession(model: decoder, capacity: min(decoder.config.contextLength, 4096))
        var constraint: TokenConstraint?
        if let schemaPath {
            let text = try PerplexityCommand.readText(schemaPath)
            let json: JSONValue
            do { json = try JSONValue.parse(text) } catch { throw ModelError.invalidFile(path: schemaPath, reason: "invalid JSON: \(error)") }
            let compileStart = Date()
            constraint = TokenConstraint(schema: try JSONSchema(json: json, path: schemaPath), tokenizer: tokenizer)
            console.printError("schema: \(constraint?.stateCount ?? 0) states compiled in \(TextTable.fixed(Date().timeIntervalSince(compileStart), digits: 2)) s")
        }
        let start = Date()
        try session.respond(to: prompt, constraint: constraint, options: options) { token in
            console.stream(token.text)
            return true
        }
        console.print("")
        let statistics = session.lastResponse
        console.printError("prompt: \(statistics?.evaluatedPromptTokens ?? 0) tokens; generated \(statistics?.generatedTokens ?? 0) tokens in "
                           + "\(TextTable.fixed(Date().timeIntervalSince(start), digits: 2)) s (\(threads) threads)")
        return 0
    }

    static func rate(_ count: Int, _ seconds: Double) -> String { TextTable.fixed(Double(count) / max(seconds, 1e-9), digits: 1) }

    static func number(_ name: String, _ arguments: ParsedArguments, default fallback: Double, valid: (Double) -> Bool) throws -> Double {
        guard let text = arguments.value(name) else { return fallback }
        guard let value = Double(text), value.isFinite, valid(value) else {
            throw UsageError(command: spec.name, message: "\(name) is out of range: '\(text)'")
        }
        return value
    }
}

/// `shrink tokenize`: the token ids of a text under a model's tokenizer.
enum TokenizeCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "tokenize",
        summary: "Print the token ids of a text file under a model's tokenizer.",
        arguments: [],
        options: [
            OptionSpec(name: "--model", valueName: "path", help: "GGUF file, compressed file made from one, Hugging Face folder with tokenizer.json, or known name (default: smollm2)."),
            OptionSpec(name: "--input", valueName: "file", help: "UTF-8 text, tokenized whole. Required."),
            OptionSpec(name: "--special", valueName: nil, help: "Parse control tokens written in the text (<|im_start|>…)."),
            OptionSpec(name: "--json", valueName: nil, help: "Print a JSON array instead of one id per line."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        guard let input = arguments.value("--input") else { throw UsageError(command: spec.name, message: "missing option --input <file>") }
        let location = try ModelLocation.resolve(arguments.value("--model") ?? "smollm2")
        let store = try TensorStores.open(path: location.weightsPath)
        let tokenizer: BPETokenizer
        if case .gguf(let metadata)? = try ModelArchitectures.configuration(of: store, configPath: location.configPath) {
            tokenizer = try BPETokenizer(metadata: metadata)
        } else if let folder = location.configPath.map({ ($0 as NSString).deletingLastPathComponent }),
                  let metadata = try HuggingFaceTokenizer.metadata(folder: folder) {
            tokenizer = try BPETokenizer(metadata: metadata)
        } else {
            throw ModelError.invalidFile(path: location.weightsPath, reason: "has no tokenizer (GGUF metadata, or tokenizer.json next to config.json)")
        }
        let ids = tokenizer.encode(try PerplexityCommand.readText(input), parseSpecial: arguments.flag("--special"))
        if arguments.flag("--json") {
            console.print("[" + ids.map(String.init).joined(separator: ", ") + "]")
        } else {
            console.print(ids.map(String.init).joined(separator: "\n"))
        }
        return 0
    }
}
