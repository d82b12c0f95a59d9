import Foundation
import Shrink
import ShrinkEvaluation
import ShrinkIO
import ShrinkKernels
import ShrinkModels

/// `shrink perplexity`: a decoder's perplexity on a text, measured as llama.cpp measures it.
enum PerplexityCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "perplexity",
        summary: "Perplexity of a language model on a text file, llama.cpp's method (second half of each window scored).",
        arguments: [],
        options: [
            OptionSpec(name: "--model", valueName: "path", help: "GGUF file, compressed container or known name (default: smollm2)."),
            OptionSpec(name: "--text", valueName: "file", help: "UTF-8 text, tokenized whole (default: data/wikitext-2/test.txt)."),
            OptionSpec(name: "--ctx", valueName: "n", help: "Tokens per window (default 512)."),
            OptionSpec(name: "--chunks", valueName: "n", help: "Windows to score (default: all the text holds)."),
            OptionSpec(name: "--threads", valueName: "n", help: "Threads (default: all cores)."),
            OptionSpec(name: "--json", valueName: nil, help: "Print the result as JSON."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        let context = try arguments.positiveInteger("--ctx", default: 512, command: spec.name)
        guard context >= 4 else { throw UsageError(command: spec.name, message: "--ctx must be at least 4") }
        let chunks = arguments.value("--chunks") == nil ? nil : try arguments.positiveInteger("--chunks", default: 1, command: spec.name)
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let textPath = arguments.value("--text") ?? Perplexity.defaultText
        let (decoder, modelPath) = try openDecoder(arguments.value("--model"), threads: threads)
        guard let tokenizer = decoder.tokenizer else {
            throw ModelError.notRunnable(architecture: decoder.architecture, reason: "perplexity needs the tokenizer of a GGUF file")
        }
        let text = try readText(textPath)
        let tokens = tokenizer.encode(text)
        let total = min(chunks ?? Int.max, tokens.count / context)
        let progress = console.progress(total: total)
        progress.begin("chunk 1")
        let result = try Perplexity.measure(decoder: decoder, tokens: tokens, context: context, chunks: chunks) { chunk, running in
            progress.end()
            if chunk < total { progress.begin("chunk \(chunk + 1), PPL so far \(TextTable.fixed(running, digits: 4))") }
        }
        progress.finish()
        if arguments.flag("--json") {
            let object: [String: Any] = ["model": modelPath, "text": textPath, "ctx": context, "chunks": result.chunks,
                                         "scored_tokens": result.scoredTokens, "perplexity": result.perplexity,
                                         "uncertainty": result.uncertainty, "mean_nll": result.meanNLL, "seconds": result.seconds,
                                         "threads": threads]
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            console.print(String(decoding: data, as: UTF8.self))
        } else {
            console.print("Model:  \(modelPath)")
            console.print("Text:   \(textPath) (\(tokens.count) tokens)")
            console.print("PPL = \(TextTable.fixed(result.perplexity, digits: 4)) ± \(TextTable.fixed(result.uncertainty, digits: 4)) "
                          + "over \(result.chunks) chunks of \(context) (\(result.scoredTokens) tokens scored, "
                          + "\(TextTable.fixed(Double(result.chunks * context) / max(result.seconds, 1e-9), digits: 1)) tokens/s)")
        }
        return 0
    }

    /// The decoder of a model argument (default: the smollm2 alias) and its weights path.
    static func openDecoder(_ argument: String?, threads: Int) throws -> (LlamaDecoder, String) {
        let location = try ModelLocation.resolve(argument ?? "smollm2")
        let (files, architecture) = try ModelArchitectures.open(weightsPath: location.weightsPath, configPath: location.configPath)
        guard let family = architecture as? any LlamaFamilyArchitecture else {
            throw ModelError.wrongCapability(architecture: type(of: architecture).name, needed: "next-token logits")
        }
        return (try family.makeDecoder(files: files, options: RuntimeOptions(threads: threads)), location.weightsPath)
    }

    static func readText(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else { throw ShrinkIOError.cannotOpen(path: path, reason: "cannot read the text") }
        guard let text = String(data: data, encoding: .utf8) else { throw ShrinkIOError.cannotOpen(path: path, reason: "not UTF-8 text") }
        return text
    }
}
