import Foundation
import Testing
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// Another tool can read the compressed container from its documentation alone: a numpy decoder
/// written from docs/FORMAT.md decodes every tensor bit for bit like Shrink's
/// `decompress`. Needs python3 with safetensors and numpy (the test command installs them).
@Suite struct ContainerCrossCheckTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/compressed_crosscheck.py").path

    static func pythonDecodes(_ compressed: String, like dense: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, compressed, dense]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(errorText)")
        return text
    }

    @Test func everyEncodingDecodesInNumpyFromTheDocumentedLayout() throws {
        let folder = TemporaryDirectory()
        var generator = SeededGenerator(seed: 11)
        let configs: [(String, String)] = [
            ("int3 per-tensor", #"{"quantize": {"bits": 3, "granularity": "per_tensor", "scale_dtype": "f32"}}"#),
            ("uint5 affine axis 1", #"{"quantize": {"bits": 5, "mode": "affine", "signed": false, "granularity": "per_channel", "axis": 1}}"#),
            ("int6 affine blocks of 5", #"{"quantize": {"bits": 6, "mode": "affine", "granularity": "per_block", "block_size": 5}}"#),
            ("uint4 blocks of 8 integer scales", #"{"quantize": {"bits": 4, "mode": "affine", "signed": false, "granularity": "per_block", "block_size": 8, "scale_dtype": "u8"}}"#),
            ("2:4 + int3 blocks integer scales", #"{"prune": {"mode": "n_m", "n": 2, "m": 4}, "quantize": {"bits": 3, "granularity": "per_block", "block_size": 6, "scale_dtype": "u8"}}"#),
            ("palette 3 grouped", #"{"palettize": {"bits": 3, "granularity": "per_grouped_channel", "group_size": 4}}"#),
            ("palette 6 axis 1 int8 LUT", #"{"palettize": {"bits": 6, "granularity": "per_grouped_channel", "channel_axis": 1, "group_size": 8, "lut_dtype": "int8"}}"#),
            ("palette 2 vector 4 scaled", #"{"palettize": {"bits": 2, "cluster_dim": 4, "per_channel_scale": true, "lut_dtype": "f32"}}"#),
            ("palette 1 uniform", #"{"palettize": {"bits": 1, "mode": "uniform"}}"#),
            ("magnitude + int4", #"{"prune": {"mode": "magnitude", "target_sparsity": 0.4}, "quantize": {"bits": 4, "granularity": "per_block", "block_size": 8}}"#),
            ("2:4 + palette grouped", #"{"prune": {"mode": "n_m", "n": 2, "m": 4}, "palettize": {"bits": 4, "granularity": "per_grouped_channel", "group_size": 2}}"#),
            ("blocks only", #"{"prune": {"mode": "block", "block_size": 4, "target_sparsity": 0.5}}"#),
            ("rotated uint4 blocks of 8", #"{"rotate": {"seed": 5, "block": "largest"}, "quantize": {"bits": 4, "mode": "affine", "signed": false, "granularity": "per_block", "block_size": 8}}"#),
            ("rotated palette 3", #"{"rotate": {"block": "largest"}, "palettize": {"bits": 3, "lut_dtype": "int8"}}"#),
        ]
        var tensors: [(name: String, tensor: DenseTensor)] = []
        var entries: [String] = []
        for (index, (_, config)) in configs.enumerated() {
            let dtype: DType = [.f32, .f16, .bf16][index % 3]
            tensors.append(("layers.\(index).proj.weight", try DenseTensor(converting: generator.floats(16 * 24), to: dtype, shape: [16, 24])))
            entries.append(#""layers.\#(index).proj.weight": \#(config)"#)
        }
        tensors.append(("layers.0.proj.bias", try DenseTensor(converting: generator.floats(16), shape: [16])))
        let model = folder.file("model.safetensors")
        try SafetensorsWriter.write(tensors, to: model)
        let recipe = folder.file("recipe.json")
        try Data("{\"op_name\": {\(entries.joined(separator: ", "))}}".utf8).write(to: URL(fileURLWithPath: recipe))
        let compressed = folder.file("small.safetensors"), dense = folder.file("dense.safetensors")
        let result = run(["compress", "--model", model, "--recipe", recipe, "--output", compressed])
        #expect(result.code == 0, "\(result.errors)")
        #expect(run(["decompress", "--input", compressed, "--output", dense]).code == 0)
        let report = try Self.pythonDecodes(compressed, like: dense)
        #expect(report.contains(#""tensors": \#(configs.count + 1), "encoded": \#(configs.count), "mismatches": []"#), "\(report)")
    }

    @Test func shippedMixedRecipeDecodesInNumpy() throws {
        let folder = TemporaryDirectory()
        let recipes = CompressCommandTests.recipesFolder
        for recipe in ["minilm-mixed", "minilm-prune50-palette4"] {
            let compressed = folder.file("\(recipe).safetensors"), dense = folder.file("\(recipe)-dense.safetensors")
            #expect(run(["compress", "--model", TestModels.miniLM, "--recipe", "\(recipes)/\(recipe).json", "--output", compressed]).code == 0)
            #expect(run(["decompress", "--input", compressed, "--output", dense]).code == 0)
            let report = try Self.pythonDecodes(compressed, like: dense)
            #expect(report.contains(#""mismatches": []"#), "\(recipe): \(report)")
        }
    }
}
