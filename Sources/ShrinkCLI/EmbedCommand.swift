import Foundation
import Shrink
import ShrinkCore
import ShrinkIO
import ShrinkKernels
import ShrinkModels

/// `shrink embed`: sentence embeddings from a BERT model, dense or compressed.
enum EmbedCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "embed",
        summary: "Embed sentences (one per line) with a sentence encoder, dense or compressed.",
        arguments: [],
        options: [
            OptionSpec(name: "--model", valueName: "path", help: "Model folder, weights file (plain or compressed) or known name (default: minilm)."),
            RuntimeArguments.baseOption,
            OptionSpec(name: "--input", valueName: "file", help: "UTF-8 text, one sentence per line. Required."),
            OptionSpec(name: "--output", valueName: "file", help: "Where to write the tensor 'embeddings' [N, hidden] F32 (.safetensors). Required."),
            OptionSpec(name: "--batch-size", valueName: "n", help: "Sentences per forward pass (default 32)."),
            OptionSpec(name: "--threads", valueName: "n", help: "Threads (default: all cores)."),
            RuntimeArguments.activationsOption,
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        guard let input = arguments.value("--input") else { throw UsageError(command: spec.name, message: "missing option --input <file>") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <file>") }
        let batchSize = try arguments.positiveInteger("--batch-size", default: 32, command: spec.name)
        let threads = try arguments.positiveInteger("--threads", default: ProcessInfo.processInfo.activeProcessorCount, command: spec.name)
        let activations = try RuntimeArguments.activations(arguments, command: spec.name)
        let location = try ModelLocation.resolve(arguments.value("--model") ?? ModelRegistry.defaultEntry.alias)
        let (runtime, architecture) = try RuntimeArguments.runtime(arguments, location: location,
                                                                   options: RuntimeOptions(threads: threads, activations: activations,
                                                                                          specialization: SpecializationCache(createsEntries: false)))
        guard let encoder = runtime as? any SentenceEmbeddingRuntime else {
            throw ModelError.wrongCapability(architecture: type(of: architecture).name, needed: "sentence embeddings")
        }
        guard let data = FileManager.default.contents(atPath: input) else {
            throw ShrinkIOError.cannotOpen(path: input, reason: "cannot read the input")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw ShrinkIOError.cannotOpen(path: input, reason: "not UTF-8 text") }
        // "\r\n" is one Character in Swift, so both line endings are separators here.
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).map(String.init)
        if lines.last == "" { lines.removeLast() }
        let ids = lines.map(encoder.tokenize)
        let hidden = encoder.dimension
        var embeddings = [Float](repeating: 0, count: ids.count * hidden)
        let start = Date()
        try embeddings.withUnsafeMutableBufferPointer { output in
            for batchStart in stride(from: 0, to: ids.count, by: batchSize) {
                let batchEnd = min(batchStart + batchSize, ids.count)
                try encoder.embed(Array(ids[batchStart..<batchEnd]),
                                  into: UnsafeMutableBufferPointer(rebasing: output[(batchStart * hidden)..<(batchEnd * hidden)]))
            }
        }
        let seconds = Date().timeIntervalSince(start)
        try SafetensorsWriter.write([("embeddings", try DenseTensor(converting: embeddings, shape: [ids.count, hidden]))],
                                    metadata: ["model": location.weightsPath], to: output)
        console.print("Wrote \(ids.count) embeddings to \(output) (\(TextTable.fixed(Double(ids.count) / max(seconds, 1e-9), digits: 1)) sentences/s)")
        return 0
    }
}
