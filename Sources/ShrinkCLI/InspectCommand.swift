import Foundation
import Shrink
import ShrinkModels

/// `shrink inspect`: parameters, bytes and precision of a model at a glance.
enum InspectCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "inspect",
        summary: "Show a model's parameters and bytes, its storage types and op types, and its tensors by layer.",
        arguments: [RuntimeArguments.modelArgument],
        options: [OptionSpec(name: "--json", valueName: nil, help: "Print the inspection as JSON instead of tables."),
                  OptionSpec(name: "--kernels", valueName: nil,
                             help: "Build the runtime and show, per linear layer, the kernel it runs, the weights as that kernel reads them, and how far they are from the stored ones."),
                  RuntimeArguments.activationsOption, RuntimeArguments.baseOption])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        let location = try ModelLocation.resolve(arguments.positionals.first ?? ModelRegistry.defaultEntry.alias)
        if arguments.flag("--kernels") {
            let activations = try RuntimeArguments.activations(arguments, command: spec.name)
            let (runtime, _) = try RuntimeArguments.runtime(arguments, location: location, options: RuntimeOptions(activations: activations))
            console.print(arguments.flag("--json") ? try json(runtime.linearExecutions) : renderKernels(runtime.linearExecutions))
            return 0
        }
        let inspection = try ModelInspection.inspect(location)
        if arguments.flag("--json") {
            console.print(try json(inspection))
        } else {
            console.print(render(inspection))
        }
        return 0
    }

    static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// One row per linear layer: its kernel, the weights as the kernel reads them, and the largest
    /// difference from a stored weight ("exact" when none).
    static func renderKernels(_ layers: [LinearLayerExecution]) -> String {
        TextTable.render(header: ["linear layer", "kernel", "weights as computed", "max weight error"],
                         rows: layers.map {
                             [$0.name, $0.execution.kernel, $0.execution.weights,
                              $0.execution.maximumWeightError == 0 ? "exact" : String(format: "%.2e", $0.execution.maximumWeightError)]
                         }, rightAligned: [3])
    }

    static func render(_ inspection: ModelInspection) -> String {
        var lines = [
            "Model:        \(inspection.path)",
            "Format:       \(inspection.format)" + (inspection.architecture.map { " (architecture: \($0))" } ?? ""),
            "Parameters:   \(TextTable.grouped(inspection.parameters))",
            "Tensor bytes: \(TextTable.grouped(inspection.bytes)) (\(TextTable.byteSize(inspection.bytes))); file \(TextTable.grouped(inspection.fileBytes)) bytes",
            "", "Storage:",
            TextTable.render(header: ["storage", "tensors", "parameters", "bytes", "share", "bits/weight"],
                             rows: inspection.storage.map {
                                 [$0.storage, String($0.tensors), TextTable.grouped($0.parameters), TextTable.grouped($0.bytes),
                                  TextTable.percent($0.share), TextTable.fixed($0.bitsPerWeight, digits: 2)]
                             }, rightAligned: [1, 2, 3, 4, 5]),
            "", "Op types (by count):",
            TextTable.render(header: ["op type", "ops", "tensors", "parameters", "bytes", "share"],
                             rows: inspection.opTypes.map {
                                 [$0.opType.rawValue, String($0.ops), String($0.tensors), TextTable.grouped($0.parameters),
                                  TextTable.grouped($0.bytes), TextTable.percent($0.share)]
                             }, rightAligned: [1, 2, 3, 4, 5]),
        ]
        if !inspection.functions.isEmpty {
            lines += ["", "Functions:"] + inspection.functions.map { "  " + $0.signature }
        }
        if !inspection.metadata.isEmpty {
            lines += ["", "Metadata:"]
            for (key, text) in inspection.metadata.sorted(by: { $0.key < $1.key }) {
                let value = text.replacingOccurrences(of: "\n", with: "\\n")
                lines.append("  \(key) = " + (value.count > 100 ? value.prefix(97) + "..." : value))
            }
        }
        lines += ["", "Tensors by layer:"]
        for layer in inspection.layers {
            lines.append("  \(layer.name)  (\(TextTable.grouped(layer.parameters)) parameters, \(TextTable.byteSize(layer.bytes)))")
            lines.append(TextTable.render(header: ["tensor", "op type", "storage", "shape", "parameters", "bits/weight"],
                                          rows: layer.tensors.map {
                                              [$0.name, $0.kind ?? $0.opType.rawValue, $0.storage, "[" + $0.shape.map(String.init).joined(separator: ", ") + "]",
                                               TextTable.grouped($0.parameters), TextTable.fixed($0.bitsPerWeight, digits: 2)]
                                          }, rightAligned: [4, 5], indent: "    "))
        }
        return lines.joined(separator: "\n")
    }
}
