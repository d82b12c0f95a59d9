import Foundation
import Testing
import Shrink
import ShrinkCLI
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// Captures what a command prints.
final class CapturedConsole: @unchecked Sendable {
    private let lock = NSLock()
    private var outputLines: [String] = []
    private var errorLines: [String] = []

    var console: Console {
        Console(output: { line in self.lock.withLock { self.outputLines.append(line) } },
                error: { line in self.lock.withLock { self.errorLines.append(line) } })
    }
    var output: String { lock.withLock { outputLines.joined(separator: "\n") } }
    var errors: String { lock.withLock { errorLines.joined(separator: "\n") } }
}

func run(_ arguments: [String]) -> (code: Int32, output: String, errors: String) {
    let captured = CapturedConsole()
    let code = ShrinkCommandLine.run(arguments, console: captured.console)
    return (code, captured.output, captured.errors)
}

@Suite struct CommandLineTests {
    @Test func helpListsEveryCommand() {
        let result = run(["--help"])
        #expect(result.code == 0)
        #expect(result.output.contains("Usage: shrink <command>") && result.output.contains("inspect"))
        let version = run(["--version"])
        #expect(version.code == 0 && version.output == "shrink \(ShrinkVersion.current)")
    }

    @Test func commandHelpDescribesEveryOption() {
        for arguments in [["inspect", "--help"], ["help", "inspect"]] {
            let result = run(arguments)
            #expect(result.code == 0)
            #expect(result.output.contains("--json") && result.output.contains("--help") && result.output.contains("<model>"))
        }
    }

    @Test func unknownCommandSaysWhatWasExpected() {
        let result = run(["inspcet"])
        #expect(result.code == 2)
        #expect(result.errors == "shrink: unknown command 'inspcet'; expected one of inspect, specialize, compress, decompress, export, embed, perplexity, generate, tokenize, compare, merge, gate, calibrate, sensitivity, search (see 'shrink --help')")
        #expect(run([]).code == 2)
    }

    @Test func unknownOptionSaysWhatWasExpected() {
        let result = run(["inspect", "--jsn"])
        #expect(result.code == 2)
        #expect(result.errors == "shrink inspect: unknown option '--jsn'; expected one of --json, --kernels, --activations, --base, --help (see 'shrink inspect --help')")
        #expect(run(["inspect", "--json=yes"]).code == 2)
        #expect(run(["inspect", "a", "b"]).code == 2)
    }

    @Test func badModelFilesExitWithOneReadableLine() throws {
        let folder = TemporaryDirectory()
        let missing = folder.file("missing.safetensors")
        let result = run(["inspect", missing])
        #expect(result.code == 2)
        #expect(result.errors == "shrink inspect: error: \(missing): cannot open: no such file or folder")

        let truncated = folder.file("truncated.safetensors")
        try Data([0x10, 0, 0, 0, 0, 0, 0, 0, 0x7B]).write(to: URL(fileURLWithPath: truncated))
        let second = run(["inspect", truncated])
        #expect(second.code == 2)
        #expect(second.errors == "shrink inspect: error: \(truncated): truncated: the header needs 24 bytes but the file has 9")
        #expect(!second.errors.contains("\n") && second.output.isEmpty)
    }

    @Test func inspectsASmallModelAsTextAndJSON() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("tiny.safetensors")
        try SafetensorsWriter.write([
            ("layers.0.proj.weight", try .init(converting: [Float](repeating: 1, count: 12), to: .f16, shape: [3, 4])),
            ("layers.0.proj.bias", try .init(converting: [1, 2, 3], shape: [3])),
            ("layers.1.norm.weight", try .init(converting: [1, 2, 3], shape: [3])),
            ("embed.weight", try .init(converting: [Float](repeating: 0, count: 8), to: .bf16, shape: [4, 2])),
        ], to: path)
        let text = run(["inspect", path])
        #expect(text.code == 0)
        #expect(text.output.contains("Parameters:   26"))
        #expect(text.output.contains("layers.0.proj.weight") && text.output.contains("[3, 4]"))

        let json = run(["inspect", "--json", path])
        #expect(json.code == 0)
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let inspection = try decoder.decode(ModelInspection.self, from: Data(json.output.utf8))
        #expect(inspection.parameters == 26 && inspection.bytes == 24 + 12 + 12 + 16)
        #expect(inspection.opTypes.map(\.opType.rawValue) == ["linear", "embedding", "norm"])
        #expect(inspection.opTypes.first?.ops == 1 && inspection.opTypes.first?.tensors == 2)
        #expect(inspection.layers.map(\.name) == ["embed", "layers.0", "layers.1"])
        #expect(inspection.storage.map(\.storage) == ["F16", "F32", "BF16"])  // Ties in bytes sort by name.
    }
}

/// Needs the real model: `scripts/fetch-models.py minilm` (the test command runs it).
@Suite struct MiniLMInspectionTests {
    @Test func reportsTheParameterCountOfAllMiniLML6v2() throws {
        let text = run(["inspect", TestModels.miniLM])
        #expect(text.code == 0, "\(text.errors)")
        #expect(text.output.contains("Parameters:   22,713,728"))

        let json = run(["inspect", "--json", TestModels.miniLM])
        let root = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any]
        #expect(root?["parameters"] as? Int == 22_713_728)
        #expect(root?["architecture"] as? String == "bert")
        let opTypes = (root?["op_types"] as? [[String: Any]])?.compactMap { $0["op_type"] as? String }
        #expect(opTypes == ["linear", "norm", "embedding", "buffer"])
        #expect((root?["layers"] as? [[String: Any]])?.count == 8)
    }
}
