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
}
