import Foundation
import Testing
import ShrinkTestSupport

/// The same model, recipe and calibration data give byte-identical files on 1 and on 2 threads and
/// run after run (GPTQ with act order and integer block multipliers, a palette by GPTQ per 16
/// channels, a Hadamard rotation with its seed), and a compressed model's embeddings are
/// byte-identical run after run at a fixed thread count.
@Suite struct DeterminismTests {
    @Test func compressionAndEmbeddingsRepeatExactly() throws {
        let folder = TemporaryDirectory()
        let calibration = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("data/calibration/minilm-calibration.txt").path
        let recipe = folder.file("recipe.json")
        try """
        {"op_type": {"linear": {"quantize": {"bits": 4, "mode": "affine", "signed": false, "granularity": "per_block", "block_size": 32,
                                             "scale_dtype": "u8", "method": "gptq", "damping": 0.01, "act_order": true}},
                     "attention.q": {"palettize": {"bits": 4, "granularity": "per_grouped_channel", "group_size": 16, "lut_dtype": "int8", "method": "gptq"}},
                     "mlp.down": {"rotate": {"seed": 3}, "quantize": {"bits": 4, "mode": "symmetric", "granularity": "per_channel"}}},
         "calibration": {"data": "\(calibration)", "limit": 64}, "weight_threshold": 2048}
        """.write(toFile: recipe, atomically: true, encoding: .utf8)
        var files: [Data] = []
        for (index, threads) in ["1", "2", "2"].enumerated() {
            let output = folder.file("compressed-\(index).safetensors")
            let result = run(["compress", "--model", "minilm", "--recipe", recipe, "--output", output, "--threads", threads])
            #expect(result.code == 0, "\(result.errors)")
            files.append(try Data(contentsOf: URL(fileURLWithPath: output)))
        }
        #expect(files[0].count > 1_000_000 && files[0] == files[1] && files[1] == files[2])

        let sentences = folder.file("sentences.txt")
        try ["A man is playing a guitar.", "Weights, as stored, are computed.", "東京の天気は晴れ。", String(repeating: "long ", count: 200)]
            .joined(separator: "\n").write(toFile: sentences, atomically: true, encoding: .utf8)
        var embeddings: [Data] = []
        for index in 0..<2 {
            let output = folder.file("embeddings-\(index).safetensors")
            let result = run(["embed", "--model", folder.file("compressed-0.safetensors"), "--base", TestModels.miniLM, "--input", sentences,
                              "--output", output, "--threads", "2"])
            #expect(result.code == 0, "\(result.errors)")
            embeddings.append(try Data(contentsOf: URL(fileURLWithPath: output)))
        }
        #expect(embeddings[0] == embeddings[1])
    }
}
