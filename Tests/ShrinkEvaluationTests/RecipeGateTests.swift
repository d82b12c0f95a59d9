import Foundation
import Testing
import Shrink
import ShrinkEvaluation
import ShrinkTestSupport
import ShrinkTesting

/// Every shipped recipe against the threshold recorded next to it (`recipes/gates/<recipe>.json`),
/// so a regression in any pass fails the suite: MiniLM's on the first 300 pairs of the STS-B test
/// split, SmolLM2's on the first 8 windows of 512 tokens of wikitext-2 test (perplexity and
/// KL-divergence against the shipped Q4_1 model; the subsets the gate files name, to keep CI
/// short). Needs the models: scripts/fetch-models.py.
@Suite(.serialized) struct RecipeGateTests {
    static let recipes = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("recipes")

    /// The shipped recipes whose names start with `prefix`.
    static func shippedRecipes(_ prefix: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: recipes.path).filter { $0.hasPrefix(prefix) && $0.hasSuffix(".json") }.sorted()
            .map { recipes.appendingPathComponent($0).path }
    }

    /// Checks every recipe of `shipped` against its gate file, one baseline per task and limit and
    /// one calibration run per calibration set.
    static func checkGates(_ shipped: [String], model: ModelLocation, base: String) throws {
        var baselines: [String: TaskEvaluation] = [:]
        let calibrationCache = CalibrationCache()
        for recipe in shipped {
            let gate = try RecipeGate.load(path: RecipeGate.path(forRecipe: recipe))
            let task = try EvaluationTasks.make(name: gate.task, data: nil, base: base, limit: gate.limit)
            let key = "\(gate.task) \(gate.limit ?? 0)"
            if baselines[key] == nil { baselines[key] = try task.evaluateBaseline(try task.load(weights: model.weightsPath, threads: 2)) }
            let outcome = try ShrinkExpect.accuracy(model: model, .recipe(recipe), task: task, thresholds: gate.thresholds, baseline: baselines[key]!,
                                                    calibrationCache: calibrationCache)
            #expect(outcome.metrics[task.accuracyMetric] != nil && outcome.worstLayers.count == 5, "\(recipe): \(outcome.message)")
        }
    }

    @Test func everyMiniLMRecipeHoldsItsGate() throws {
        let shipped = try Self.shippedRecipes("minilm-")
        #expect(shipped.count >= 9)
        try Self.checkGates(shipped, model: try ModelLocation.resolve(TestModels.miniLM), base: TestModels.miniLM)
    }

    @Test func everySmolLM2RecipeHoldsItsGate() throws {
        let shipped = try Self.shippedRecipes("smollm2-")
        #expect(shipped.count >= 5)
        for recipe in shipped { #expect(try RecipeGate.load(path: RecipeGate.path(forRecipe: recipe)).task == "perplexity", "\(recipe)") }
        try Self.checkGates(shipped, model: try ModelLocation.resolve("smollm2"), base: TestModels.miniLM)
    }

    @Test func malformedGateFilesNameTheFile() throws {
        let folder = TemporaryDirectory()
        for (name, text) in [("notjson.json", "{"), ("notask.json", #"{"max_drop": 1}"#), ("badlimit.json", #"{"task": "stsb", "limit": "all"}"#)] {
            try Data(text.utf8).write(to: URL(fileURLWithPath: folder.file(name)))
            #expect(throws: DatasetError.self) { try RecipeGate.load(path: folder.file(name)) }
            do {
                _ = try RecipeGate.load(path: folder.file(name))
            } catch {
                #expect("\(error)".hasPrefix(folder.file(name) + ": not a gate file"), "\(error)")
            }
        }
        #expect(RecipeGate.path(forRecipe: "recipes/minilm-int8-channel.json") == "recipes/gates/minilm-int8-channel.json")
        let gate = try RecipeGate.load(path: RecipeGate.path(forRecipe: Self.recipes.appendingPathComponent("minilm-int8-channel.json").path))
        #expect(gate.task == "stsb" && gate.limit == 300 && gate.thresholds.maxDrop == 0.3 && gate.thresholds.minimums == ["mean_cosine": 0.998])
    }

    @Test func aFailingGateSaysHowFarAndWhere() throws {
        let model = try ModelLocation.resolve(TestModels.miniLM)
        let task = try EvaluationTasks.make(name: "stsb", data: nil, base: TestModels.miniLM, limit: 40)
        let recipe = Self.recipes.appendingPathComponent("minilm-palette-2bit.json").path
        var outcome: GateOutcome?
        withKnownIssue("2-bit palettes lose far more than 1 point of Spearman") {
            outcome = try ShrinkExpect.accuracy(model: model, .recipe(recipe), task: task,
                                                thresholds: AccuracyThresholds(maxSpearmanDrop: 1, minMeanCosine: 0.99))
        }
        let message = try #require(outcome).message
        #expect(message.contains("spearman drop") && message.contains("exceeds 1.000"), "\(message)")
        #expect(message.contains("mean_cosine") && message.contains("is below 0.99000"), "\(message)")
        #expect(message.contains("lowest-SNR layers: "), "\(message)")
        #expect(outcome!.worstLayers.first.map { $0.snrDecibels < 10 } == true)
    }
}
