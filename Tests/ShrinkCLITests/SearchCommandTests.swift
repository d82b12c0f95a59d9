import Foundation
import Testing
import ShrinkCompression
import ShrinkEvaluation
import ShrinkTestSupport

/// `shrink sensitivity` then `shrink search` on the real MiniLM: two layers, two candidates, a few
/// STS-B pairs. Needs the model.
@Suite(.serialized) struct SearchCommandTests {
    /// Candidates `two.json` (2-bit palettes) and `eight.json` (int8) for the layers `pattern` matches.
    static func candidates(_ folder: TemporaryDirectory, layers pattern: String) throws -> [String] {
        try Data(#"{"op_name": {"\#(pattern)": {"palettize": {"bits": 2}}}}"#.utf8).write(to: URL(fileURLWithPath: folder.file("two.json")))
        try Data(#"{"op_name": {"\#(pattern)": {"quantize": {"bits": 8}}}}"#.utf8).write(to: URL(fileURLWithPath: folder.file("eight.json")))
        return [folder.file("two.json"), folder.file("eight.json")]
    }

    @Test func sensitivityFeedsASearchThatWritesAndVerifiesARecipe() throws {
        let folder = TemporaryDirectory()
        let candidates = try Self.candidates(folder, layers: #"encoder\\.layer\\.0\\.attention\\.self\\.(query|value)"#)
        let sensitivity = run(["sensitivity", "--model", TestModels.miniLM, "--candidates"] + candidates + ["--limit", "8", "--output", folder.file("sensitivity.json")])
        #expect(sensitivity.code == 0, "\(sensitivity.errors)")
        let report = try SensitivityReport.read(path: folder.file("sensitivity.json"))
        #expect(report.lossMetric == "1 - mean_cosine" && report.layers.count == 4 && report.uniqueLayers.count == 2)
        #expect(report.activations == "f32" && report.layers.allSatisfy { $0.tensors == nil })
        for layer in report.uniqueLayers {
            let two = try #require(report.layers.first { $0.layer == layer && $0.candidate == "two" })
            let eight = try #require(report.layers.first { $0.layer == layer && $0.candidate == "eight" })
            #expect(eight.loss >= 0 && eight.loss < two.loss, "\(layer): int8 \(eight.loss), 2-bit \(two.loss)")
            #expect(two.bitsPerWeight < 2.2 && eight.bitsPerWeight > 8 && two.config == #"{"palettize":{"bits":2}}"#)
        }
        // 5.2 bits over the two layers: one at 8 bits, the other at 2.
        let search = run(["search", "--sensitivity", folder.file("sensitivity.json"), "--budget-bpw", "5.2", "--output", folder.file("searched.json")])
        #expect(search.code == 0, "\(search.errors)")
        #expect(search.output.contains("Verified, f32 activations: spearman") && search.output.contains("predicted as the sum"), "\(search.output)")
        #expect(search.output.contains("Verified, int8 activations: spearman"), "\(search.output)")
        let recipe = try Recipe.load(path: folder.file("searched.json"))
        #expect(Set(recipe.opName.map(\.pattern)) == Set(report.uniqueLayers))
        #expect(Set(recipe.opName.compactMap { $0.config?.quantize?.bits ?? $0.config?.palettize?.bits }) == [2, 8])
        let tooSmall = run(["search", "--sensitivity", folder.file("sensitivity.json"), "--budget-bpw", "1", "--output", folder.file("none.json")])
        #expect(tooSmall.code == 2 && tooSmall.errors.contains("below what the smallest candidates need"), "\(tooSmall.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("none.json")))
        #expect(run(["search", "--sensitivity", folder.file("sensitivity.json"), "--output", folder.file("none.json")]).code == 2)
        let missing = run(["search", "--sensitivity", folder.file("nope.json"), "--budget-mb", "1", "--output", folder.file("none.json")])
        #expect(missing.code == 2 && missing.errors.contains("nope.json"))
    }

    /// With `--group-blocks 2`, one kind of tensor over two blocks is one unit: measured once, and
    /// the searched recipe names each of its tensors. A candidate that gives a unit's tensors
    /// different configs, or an unknown precision, is refused naming it.
    @Test func groupedUnitsAreScannedOnceAndSearchedAsOne() throws {
        let folder = TemporaryDirectory()
        let candidates = try Self.candidates(folder, layers: #"encoder\\.layer\\.[01]\\.attention\\.self\\.query"#)
        let sensitivity = run(["sensitivity", "--model", TestModels.miniLM, "--candidates"] + candidates
                               + ["--limit", "8", "--group-blocks", "2", "--activations", "int8", "--output", folder.file("sensitivity.json")])
        #expect(sensitivity.code == 0, "\(sensitivity.errors)")
        let report = try SensitivityReport.read(path: folder.file("sensitivity.json"))
        let tensors = ["encoder.layer.0.attention.self.query.weight", "encoder.layer.1.attention.self.query.weight"]
        #expect(report.activations == "int8" && report.uniqueLayers == ["encoder.layer.0-1.attention.self.query.weight"])
        #expect(report.layers.count == 2 && report.layers.allSatisfy { $0.tensors == tensors && $0.elements == 2 * 384 * 384 })
        let search = run(["search", "--sensitivity", folder.file("sensitivity.json"), "--budget-bpw", "8.1", "--output", folder.file("searched.json")])
        #expect(search.code == 0 && !search.output.contains("f32 activations"), "\(search.errors)")
        let recipe = try Recipe.load(path: folder.file("searched.json"))
        #expect(recipe.opName.map(\.pattern) == tensors && recipe.opName.allSatisfy { $0.config?.quantize?.bits == 8 })

        let mixed = #"{"op_name": {"encoder\\.layer\\.0\\.attention\\.self\\.query": {"quantize": {"bits": 8}}, "encoder\\.layer\\.1\\.attention\\.self\\.query": {"quantize": {"bits": 4}}}}"#
        try Data(mixed.utf8).write(to: URL(fileURLWithPath: folder.file("mixed.json")))
        let refused = run(["sensitivity", "--model", TestModels.miniLM, "--candidates", folder.file("mixed.json"), "--limit", "8", "--group-blocks", "2",
                           "--output", folder.file("none.json")])
        #expect(refused.code == 2 && refused.errors.contains("mixed.json") && refused.errors.contains("different configs"), "\(refused.errors)")
        let precision = run(["sensitivity", "--model", TestModels.miniLM, "--candidates", folder.file("two.json"), "--activations", "f16",
                             "--output", folder.file("none.json")])
        #expect(precision.code == 2 && precision.errors.contains("--activations must be int8 or f32"), "\(precision.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("none.json")))
    }

    /// `shrink calibrate` writes statistics that `compress --stats` reads; bad arguments and a file
    /// that is not statistics exit 2 naming the problem, writing nothing.
    @Test func calibrateWritesStatisticsThatCompressReads() throws {
        let folder = TemporaryDirectory()
        let data = folder.file("calibration.txt")
        try Data("A man is playing a guitar.\nTwo dogs run across the snowy field.\n\nThe stock market fell sharply today.\n".utf8)
            .write(to: URL(fileURLWithPath: data))
        let calibrate = run(["calibrate", "--model", TestModels.miniLM, "--data", data, "--output", folder.file("stats.safetensors")])
        #expect(calibrate.code == 0, "\(calibrate.errors)")
        #expect(calibrate.output.contains("linear ops: 36 (24 distinct inputs), 3 lines") && calibrate.output.contains("peak memory"), "\(calibrate.output)")
        try Data(#"{"calibration": {"data": "\#(data)"}, "op_name": {"encoder\\.layer\\.0\\.attention\\.self\\.query": {"quantize": {"bits": 4, "granularity": "per_block", "block_size": 32, "method": "gptq"}}}}"#.utf8)
            .write(to: URL(fileURLWithPath: folder.file("gptq.json")))
        let compress = run(["compress", "--model", TestModels.miniLM, "--recipe", folder.file("gptq.json"), "--stats", folder.file("stats.safetensors"),
                            "--output", folder.file("out.safetensors")])
        #expect(compress.code == 0, "\(compress.errors)")
        let notStatistics = run(["compress", "--model", TestModels.miniLM, "--recipe", folder.file("gptq.json"), "--stats", folder.file("out.safetensors"),
                                 "--output", folder.file("none.safetensors")])
        #expect(notStatistics.code == 2 && notStatistics.errors.contains("out.safetensors: unsupported format: not a calibration statistics file"), "\(notStatistics.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("none.safetensors")))
        #expect(run(["calibrate", "--model", TestModels.miniLM, "--output", folder.file("none.safetensors")]).code == 2)
        let empty = folder.file("empty.txt")
        try Data("\n \n".utf8).write(to: URL(fileURLWithPath: empty))
        let noLines = run(["calibrate", "--model", TestModels.miniLM, "--data", empty, "--output", folder.file("none.safetensors")])
        #expect(noLines.code == 2 && noLines.errors.contains("holds no calibration lines"), "\(noLines.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("none.safetensors")))
    }
}
