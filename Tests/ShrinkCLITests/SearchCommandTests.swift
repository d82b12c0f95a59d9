import Foundation
import Testing
import ShrinkCompression
import ShrinkEvaluation
import ShrinkTestSupport

/// `shrink sensitivity` then `shrink search` on the real MiniLM: two layers, two candidates, a few
/// STS-B pairs. Needs the model.
@Suite(.serialized) struct SearchCommandTests {
    @Test func sensitivityFeedsASearchThatWritesAndVerifiesARecipe() throws {
        let folder = TemporaryDirectory()
        let layers = #"encoder\\.layer\\.0\\.attention\\.self\\.(query|value)"#
        try Data(#"{"op_name": {"\#(layers)": {"palettize": {"bits": 2}}}}"#.utf8).write(to: URL(fileURLWithPath: folder.file("two.json")))
        try Data(#"{"op_name": {"\#(layers)": {"quantize": {"bits": 8}}}}"#.utf8).write(to: URL(fileURLWithPath: folder.file("eight.json")))
        let sensitivity = run(["sensitivity", "--model", TestModels.miniLM, "--candidates", folder.file("two.json"), folder.file("eight.json"),
                               "--limit", "8", "--output", folder.file("sensitivity.json")])
        #expect(sensitivity.code == 0, "\(sensitivity.errors)")
        let report = try SensitivityReport.read(path: folder.file("sensitivity.json"))
        #expect(report.lossMetric == "1 - mean_cosine" && report.layers.count == 4 && report.uniqueLayers.count == 2)
        for layer in report.uniqueLayers {
            let two = try #require(report.layers.first { $0.layer == layer && $0.candidate == "two" })
            let eight = try #require(report.layers.first { $0.layer == layer && $0.candidate == "eight" })
            #expect(eight.loss >= 0 && eight.loss < two.loss, "\(layer): int8 \(eight.loss), 2-bit \(two.loss)")
            #expect(two.bitsPerWeight < 2.2 && eight.bitsPerWeight > 8 && two.config == #"{"palettize":{"bits":2}}"#)
        }
        // 5.2 bits over the two layers: one at 8 bits, the other at 2.
        let search = run(["search", "--sensitivity", folder.file("sensitivity.json"), "--budget-bpw", "5.2", "--output", folder.file("searched.json")])
        #expect(search.code == 0, "\(search.errors)")
        #expect(search.output.contains("Verified: spearman"), "\(search.output)")
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
