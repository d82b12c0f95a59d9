import Foundation
import Testing
import ShrinkIO
import ShrinkTestSupport

/// Needs the model: scripts/fetch-models.py minilm.
@Suite struct EmbedCommandTests {
    @Test func writesOneUnitEmbeddingPerLine() throws {
        let folder = TemporaryDirectory()
        let input = folder.file("in.txt"), output = folder.file("out.safetensors")
        try Data("A girl is styling her hair.\r\n\nCafé naïve résumé\n".utf8).write(to: URL(fileURLWithPath: input))
        let result = run(["embed", "--model", TestModels.miniLM, "--input", input, "--output", output, "--batch-size", "2", "--threads", "1"])
        #expect(result.code == 0, "\(result.errors)")
        let tensor = try SafetensorsFile(path: output).tensor(named: "embeddings")
        try #require(tensor.shape == [3, 384] && tensor.dtype == .f32, "\(tensor.shape)")
        let values = tensor.floats()
        for row in 0..<3 {
            let norm = (0..<384).reduce(Float(0)) { $0 + values[row * 384 + $1] * values[row * 384 + $1] }
            #expect(abs(norm - 1) < 1e-4, "row \(row) has squared norm \(norm)")
        }
    }

    @Test func badArgumentsAndFilesExitWithTwo() throws {
        let folder = TemporaryDirectory()
        let output = folder.file("out.safetensors")
        #expect(run(["embed", "--model", TestModels.miniLM, "--input", folder.file("missing.txt"), "--output", output]).code == 2)
        #expect(run(["embed", "--model", TestModels.miniLM, "--output", output]).errors.contains("missing option --input"))
        #expect(run(["embed", "--input", "x", "--output", output, "--batch-size", "0"]).code == 2)
        let precision = run(["embed", "--model", TestModels.miniLM, "--input", "x", "--output", output, "--activations", "int4"])
        #expect(precision.code == 2 && precision.errors.contains("--activations must be int8 or f32, not 'int4'"), "\(precision.errors)")
        #expect(run(["embed", "--model", TestModels.miniLM, "--base", folder.path, "--input", "x", "--output", output]).errors.contains("config.json"))
        // A vocabulary larger than the embedding table is an error, not a crash.
        try FileManager.default.copyItem(atPath: TestModels.miniLM + "/config.json", toPath: folder.file("config.json"))
        let vocabulary = try String(contentsOfFile: TestModels.miniLM + "/vocab.txt", encoding: .utf8) + "extra1\nextra2\n"
        try vocabulary.write(toFile: folder.file("vocab.txt"), atomically: true, encoding: .utf8)
        let input = folder.file("in.txt")
        try "extra2".write(toFile: input, atomically: true, encoding: .utf8)
        let mismatch = run(["embed", "--model", TestModels.miniLM, "--base", folder.path, "--input", input, "--output", output])
        #expect(mismatch.code == 2 && mismatch.errors.contains("token id 30523 has no row in the 30522-row word embedding table"), "\(mismatch.errors)")
        #expect(!FileManager.default.fileExists(atPath: output))
    }
}
