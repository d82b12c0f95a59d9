import Shrink

/// `shrink export`: write a model in a format another runtime loads.
enum ExportCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "export",
        summary: "Write a compressed model in a format another runtime loads (GGUF for llama.cpp), each tensor in a type that holds it exactly.",
        arguments: [],
        options: [
            OptionSpec(name: "--format", valueName: "gguf", help: "The format to write. Required; gguf is the one supported."),
            OptionSpec(name: "--input", valueName: "file", help: "The model: a compressed file made from a GGUF model, or a GGUF file. Required."),
            OptionSpec(name: "--output", valueName: "file", help: "Where to write the exported model. Required."),
        ])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        guard let format = arguments.value("--format") else { throw UsageError(command: spec.name, message: "missing option --format <gguf>") }
        guard format == "gguf" else { throw UsageError(command: spec.name, message: "unknown format '\(format)' (expected gguf)") }
        guard let input = arguments.value("--input") else { throw UsageError(command: spec.name, message: "missing option --input <file>") }
        guard let output = arguments.value("--output") else { throw UsageError(command: spec.name, message: "missing option --output <file>") }
        let summary = try ModelExport.gguf(input: input, output: output)
        let types = summary.tensorsPerType.map { "\($0.count) \($0.type)" }.joined(separator: ", ")
        console.print("Wrote \(output)")
        console.print("  tensors: \(types); metadata entries: \(summary.metadataCount); bytes: \(TextTable.grouped(summary.fileBytes))")
        return 0
    }
}
