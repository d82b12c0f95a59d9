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
            OptionSpec(name: "--model", valueName: "path", help: "GGUF file, compressed container, Hugging Face folder (config.json, model.safetensors, tokenizer.json) or known name (default: smollm2)."),
            OptionSpec(name: "--text", valueName: "file", help: "UTF-8 text, tokenized whole (default: data/wikitext-2/test.txt)."),
            OptionSpec(name: "--ctx", valueName: "n", help: "Tokens per window (default 512)."),
            OptionSpec(name: "--chunks", valueName: "n", help: "Windows to score (default: all the text holds)."),
            OptionSpec(name: "--threads", valueName: "n", help: "Threads (default: all cores)."),
            OptionSpec(name: "--kl-base", valueName: "file", help: "Save this model's log-probabilities of the scored rows (the base of a KL-divergence run; 2 bytes per vocabulary entry and row)."),
            OptionSpec(name: "--kl-divergence", valueName: "file", help: "Report KL-divergence (mean, 99th percentile) and same-top-token rate against a --kl-base file of the same text, ctx and chunks."),
            RuntimeArguments.activationsOption,
            OptionSpec(name: "--json", valueName: nil, help: "Print the result as JSON."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        let context = try arguments.positiveInteger("--ctx", default: 512, command: spec.name)
        guard context >= 4 else { throw UsageError(command: spec.name, message: "--ctx must be at least 4") }
        let chunks = arguments.value("--chunks") == nil ? nil : try arguments.positiveInteger("--chunks", default: 1, command: spec.name)
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let textPath = arguments.value("--text") ?? Perplexity.defaultText
        let activations = try RuntimeArguments.activations(arguments, command: spec.name)
        let (decoder, modelPath) = try openDecoder(arguments.value("--model"), options: RuntimeOptions(threads: threads, activations: activations,
                                                                                                 specialization: SpecializationCache(createsEntries: false)))
        guard let tokenizer = decoder.tokenizer else {
            throw ModelError.notRunnable(architecture: decoder.architecture, reason: "perplexity needs a tokenizer (a GGUF file's, or tokenizer.json next to config.json)")
        }
        let text = try readText(textPath)
        let tokens = tokenizer.encode(text)
        guard tokens.count >= context else { throw Perplexity.Failure.tooShort(tokens: tokens.count, context: context) }
        let total = Perplexity.chunkCount(tokens: tokens.count, context: context, chunks: chunks)
        let header = LogProbabilityFile.Header(
            vocabulary: decoder.config.vocabularySize, context: context, chunks: total, rowsPerChunk: context - 1 - context / 2,
            tokens: Perplexity.windows(tokens, context: context, chunks: total, bos: tokenizer.addsBOS ? tokenizer.bos : nil))
        let base = try arguments.value("--kl-divergence").map { path in
            let reader = try LogProbabilityFile.Reader(path: path)
            guard reader.header == header else {
                throw LogProbabilityFile.Failure.mismatch(path: path, reason: "vocabulary, ctx, chunks or tokens differ from this run's")
            }
            return reader
        }
        let writer = try arguments.value("--kl-base").map { try LogProbabilityFile.Writer(path: $0, header: header) }
        var divergence = KLDivergenceAccumulator()
        var baseRow = [Float](repeating: 0, count: header.vocabulary)
        var writeError: Error?
        let progress = console.progress(total: total)
        progress.begin("chunk 1")
        let result: Perplexity.Result
        do {
            result = try Perplexity.measure(decoder: decoder, tokens: tokens, context: context, chunks: chunks, observe: { row, logits in
                if let writer, writeError == nil {
                    do { try writer.append(logits) } catch { writeError = error }
                }
                if let base {
                    baseRow.withUnsafeMutableBufferPointer { target in
                        base.logProbabilities(row: row, into: target.baseAddress!)
                        divergence.add(base: UnsafeBufferPointer(target), logits: logits)
                    }
                }
            }, progress: { chunk, running in
                progress.end()
                if chunk < total { progress.begin("chunk \(chunk + 1), PPL so far \(TextTable.fixed(running, digits: 4))") }
            })
            if let writeError { throw writeError }
            try writer?.finish()
        } catch {
            writer?.abandon()
            throw error
        }
        progress.finish()
        if arguments.flag("--json") {
            var object: [String: Any] = ["model": modelPath, "text": textPath, "ctx": context, "chunks": result.chunks,
                                         "scored_tokens": result.scoredTokens, "perplexity": result.perplexity,
                                         "uncertainty": result.uncertainty, "mean_nll": result.meanNLL, "seconds": result.seconds,
                                         "threads": threads]
            if base != nil {
                object["kld_mean"] = divergence.mean
                object["kld_p99"] = divergence.percentile(0.99)
                object["same_top_token"] = divergence.sameTopRate
            }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            console.print(String(decoding: data, as: UTF8.self))
        } else {
            console.print("Model:  \(modelPath)")
            console.print("Text:   \(textPath) (\(tokens.count) tokens)")
            console.print("PPL = \(TextTable.fixed(result.perplexity, digits: 4)) ± \(TextTable.fixed(result.uncertainty, digits: 4)) "
                          + "over \(result.chunks) chunks of \(context) (\(result.scoredTokens) tokens scored, "
                          + "\(TextTable.fixed(Double(result.chunks * context) / max(result.seconds, 1e-9), digits: 1)) tokens/s)")
            if base != nil {
                console.print("KLD mean \(TextTable.fixed(divergence.mean, digits: 5)), 99th percentile \(TextTable.fixed(divergence.percentile(0.99), digits: 4)), "
                              + "same top token \(TextTable.fixed(100 * divergence.sameTopRate, digits: 2)) %")
            }
            if let path = arguments.value("--kl-base") { console.print("Saved the base log-probabilities to \(path)") }
        }
        return 0
    }

    /// The decoder of a model argument (default: the smollm2 alias) and its weights path.
    static func openDecoder(_ argument: String?, options: RuntimeOptions) throws -> (LlamaDecoder, String) {
        let location = try ModelLocation.resolve(argument ?? "smollm2")
        let (files, architecture) = try ModelArchitectures.open(weightsPath: location.weightsPath, configPath: location.configPath)
        guard let family = architecture as? any LlamaFamilyArchitecture else {
            throw ModelError.wrongCapability(architecture: type(of: architecture).name, needed: "next-token logits")
        }
        return (try family.makeDecoder(files: files, options: options), location.weightsPath)
    }

    static func readText(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else { throw ShrinkIOError.cannotOpen(path: path, reason: "cannot read the text") }
        guard let text = String(data: data, encoding: .utf8) else { throw ShrinkIOError.cannotOpen(path: path, reason: "not UTF-8 text") }
        return text
    }
}
