import Foundation
import Testing
import ShrinkCompression
import ShrinkEvaluation
import ShrinkTestSupport

/// The budgeted choice against brute force over every combination, its refusals, and the recipe it
/// writes.
@Suite struct BitBudgetSearchTests {
    /// Four layers, three candidates each, losses and sizes of different shapes.
    static func report() -> SensitivityReport {
        let sizes = [("a", 1000), ("b", 4000), ("c", 2500), ("d", 600)]
        let candidates = [("two", 2, 0.9), ("four", 4, 0.2), ("eight", 8, 0.01)]
        var layers: [LayerSensitivity] = []
        for (layerIndex, (layer, elements)) in sizes.enumerated() {
            for (candidate, bits, loss) in candidates {
                let weight = Double((layerIndex * 7) % 5 + 1) / 3
                layers.append(LayerSensitivity(layer: layer, candidate: candidate, elements: elements, bytes: elements * bits / 8 + 10,
                                               metrics: [:], loss: loss * weight, config: #"{"quantize": {"bits": \#(bits)}}"#))
            }
        }
        return SensitivityReport(model: "m", task: "stsb", data: nil, limit: nil, base: nil, accuracyMetric: "spearman", lossMetric: "1 - mean_cosine",
                                 baseline: ["spearman": 90],
                                 candidates: candidates.map { .init(name: $0.0, recipe: "\($0.0).json", calibrationData: nil, calibrationLimit: nil) },
                                 layers: layers)
    }

    @Test(arguments: [2065, 2500, 3000, 4500, 6000, 9000])
    func theChoiceIsTheBestWithinTheBudget(budget: Int) throws {
        let report = Self.report()
        let chosen = try BitBudgetSearch.choose(report, budgetBytes: budget)
        #expect(chosen.map(\.layer) == ["a", "b", "c", "d"])
        #expect(chosen.reduce(0) { $0 + $1.bytes } <= budget)
        var best = Double.infinity
        for combination in 0..<81 {
            let picks = (0..<4).map { layer in report.layers[layer * 3 + (combination / [1, 3, 9, 27][layer]) % 3] }
            if picks.reduce(0, { $0 + $1.bytes }) <= budget { best = min(best, picks.reduce(0) { $0 + $1.loss }) }
        }
        #expect(abs(chosen.reduce(0) { $0 + $1.loss } - best) < 1e-12, "budget \(budget)")
    }

    /// Coarse units (sizes rounded up to them) may give up the optimum but never the budget.
    @Test(arguments: [50, 300, 1000])
    func coarseUnitsKeepTheBudget(resolution: Int) throws {
        for budget in stride(from: 2400, through: 9000, by: 700) {
            let chosen = try BitBudgetSearch.choose(Self.report(), budgetBytes: budget, resolution: resolution)
            #expect(chosen.reduce(0) { $0 + $1.bytes } <= budget)
        }
        #expect(throws: BitBudgetSearch.Failure.tooCoarse(budget: 2400, unit: 1200)) {
            try BitBudgetSearch.choose(Self.report(), budgetBytes: 2400, resolution: 2)
        }
    }

    @Test func aBudgetBelowTheSmallestChoicesIsRefused() {
        #expect(throws: BitBudgetSearch.Failure.overBudget(budget: 1000, needed: 2065)) {
            try BitBudgetSearch.choose(Self.report(), budgetBytes: 1000)
        }
    }

    @Test func theRecipeNamesEveryLayerWithItsConfig() throws {
        let report = Self.report()
        let chosen = try BitBudgetSearch.choose(report, budgetBytes: 4500)
        let text = try BitBudgetSearch.recipe(chosen, report: report)
        let recipe = try Recipe.parse(Data(text.utf8), file: "searched.json")
        #expect(recipe.opName.map(\.pattern) == ["a", "b", "c", "d"])
        for (entry, layer) in zip(recipe.opName, chosen) { #expect(entry.config?.quantize?.bits == Int(layer.candidate == "two" ? 2 : layer.candidate == "four" ? 4 : 8)) }
        #expect(recipe.calibration == nil)
        #expect(BitBudgetSearch.elements(report) == 8100)
    }

    /// A report that is not JSON, or JSON of another shape, is refused naming the file; a written
    /// report reads back equal.
    @Test func malformedReportsAreRefusedNamingTheFile() throws {
        let folder = TemporaryDirectory()
        for (name, text) in [("garbage.json", "{ not json"), ("other.json", #"{"model": "m", "layers": 3}"#), ("empty.json", "")] {
            let path = folder.file(name)
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            do {
                _ = try SensitivityReport.read(path: path)
                Issue.record("\(name): accepted a malformed report")
            } catch {
                #expect("\(error)".hasPrefix("\(path): not a shrink sensitivity report"), "\(error)")
            }
        }
        let path = folder.file("report.json")
        try Self.report().json().write(to: URL(fileURLWithPath: path))
        let read = try SensitivityReport.read(path: path)
        #expect(read.layers.count == Self.report().layers.count && read.uniqueLayers == Self.report().uniqueLayers)
    }
}
