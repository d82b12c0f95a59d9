import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkIO
import ShrinkEvaluation
import ShrinkKernels
import ShrinkModels
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
    /// one calibration run per calibration set; then `check(recipe, compressed file)`.
    static func checkGates(_ shipped: [String], model: ModelLocation, base: String,
                           check: (String, String) throws -> Void = { _, _ in }) throws {
        var baselines: [String: TaskEvaluation] = [:]
        let calibrationCache = CalibrationCache()
        for recipe in shipped {
            let gate = try RecipeGate.load(path: RecipeGate.path(forRecipe: recipe))
            let task = try EvaluationTasks.make(name: gate.task, data: nil, base: base, limit: gate.limit)
            let key = "\(gate.task) \(gate.limit ?? 0)"
            if baselines[key] == nil { baselines[key] = try task.evaluateBaseline(try task.load(weights: model.weightsPath, threads: 2)) }
            let folder = TemporaryDirectory()
            let weights = folder.file("compressed.safetensors")
            _ = try ModelCompressor.compress(model: model, recipe: try Recipe.load(path: recipe), output: weights, threads: 2,
                                             calibrationCache: calibrationCache)
            let outcome = try ShrinkExpect.accuracy(model: model, .compressed(weights), task: task, thresholds: gate.thresholds,
                                                    baseline: baselines[key]!)
            #expect(outcome.metrics[task.accuracyMetric] != nil && outcome.worstLayers.count == 5, "\(recipe): \(outcome.message)")
            try check(recipe, weights)
        }
    }

    /// Every shipped MiniLM recipe holds its gate, and with int8 activations (the default runtime)
    /// every linear layer multiplies exactly its stored weights on 8-bit codes, and embeddings of
    /// the first 256 sentences of the STS-B test split lose at most 0.001 of mean cosine to fp32
    /// against the fp32-activation path of the same file.
    @Test func everyMiniLMRecipeHoldsItsGateAndRunsItsStoredWeights() throws {
        let shipped = try Self.shippedRecipes("minilm-")
        #expect(shipped.count >= 9)
        let base = TestModels.miniLM
        let task = try #require(try EvaluationTasks.make(name: "stsb", data: nil, base: base, limit: 128) as? STSTask)
        let sentences = task.pairs.flatMap { [$0.first, $0.second] }
        func embeddings(_ weights: String, _ activations: ActivationPrecision) throws -> [[Float]] {
            let (files, architecture) = try ModelArchitectures.open(weightsPath: weights, configPath: base + "/config.json", folder: base)
            let runtime = try #require(try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: 2, activations: activations))
                as? any SentenceEmbeddingRuntime)
            if activations == .int8 {
                for layer in runtime.linearExecutions {
                    #expect(layer.execution.maximumWeightError == 0 && !layer.execution.weights.contains("two planes"),
                            "\(weights): \(layer.name) runs \(layer.execution.weights) on \(layer.execution.kernel)")
                }
            }
            return try runtime.embed(sentences.map(runtime.tokenize))
        }
        let reference = try embeddings(base + "/model.safetensors", .float32)
        func meanCosine(_ values: [[Float]]) -> Double {
            zip(values, reference).reduce(0.0) { sum, pair in
                let (a, b) = pair
                let dot = zip(a, b).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
                let norms = a.reduce(0.0) { $0 + Double($1) * Double($1) } * b.reduce(0.0) { $0 + Double($1) * Double($1) }
                return sum + dot / norms.squareRoot()
            } / Double(values.count)
        }
        try Self.checkGates(shipped, model: try ModelLocation.resolve(base), base: base) { recipe, weights in
            let (integer, float) = (meanCosine(try embeddings(weights, .int8)), meanCosine(try embeddings(weights, .float32)))
            #expect(float - integer <= 0.001, "\(recipe): mean cosine \(integer) with int8 activations, \(float) with fp32")
        }
    }

    /// Every shipped SmolLM2 recipe holds its gate; every one whose encodings GGUF holds exactly
    /// exports to GGUF, and llama.cpp's `llama-perplexity` (built by `scripts/build-llama-cpp.sh`)
    /// measures that file within 0.5 % of Shrink's perplexity on it (8 windows of 512 tokens of
    /// wikitext-2 test; the two round activations differently).
    @Test func everySmolLM2RecipeHoldsItsGateAndExactGGUFExportsRunInLlamaCpp() throws {
        let shipped = try Self.shippedRecipes("smollm2-")
        #expect(shipped.count >= 5)
        for recipe in shipped { #expect(try RecipeGate.load(path: RecipeGate.path(forRecipe: recipe)).task == "perplexity", "\(recipe)") }
        let llamaPerplexity = try Self.llamaPerplexityBinary()
        let task = try EvaluationTasks.make(name: "perplexity", data: nil, base: TestModels.miniLM, limit: 8)
        var exported: [String] = []
        try Self.checkGates(shipped, model: try ModelLocation.resolve("smollm2"), base: TestModels.miniLM) { recipe, weights in
            let folder = TemporaryDirectory()
            let gguf = folder.file("exported.gguf")
            do {
                _ = try ModelExport.gguf(input: weights, output: gguf)
            } catch ShrinkIOError.notExportable {
                return
            }
            exported.append(recipe)
            let shrink = try #require(try task.evaluateBaseline(try task.load(weights: gguf, threads: 2)).metrics["perplexity"])
            let llama = try Self.llamaPerplexity(llamaPerplexity, model: gguf, chunks: 8)
            #expect(abs(llama - shrink) / shrink < 0.005, "\(recipe): llama.cpp \(llama), Shrink \(shrink) on the exported file")
        }
        #expect(exported.map { ($0 as NSString).lastPathComponent } == ["smollm2-q4_0-gptq.json"])
    }

    /// The `llama-perplexity` binary, built (or found in its cache) by `scripts/build-llama-cpp.sh`.
    static func llamaPerplexityBinary() throws -> String {
        let process = Process()
        process.executableURL = recipes.deletingLastPathComponent().appendingPathComponent("scripts/build-llama-cpp.sh")
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let path = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0 && FileManager.default.isExecutableFile(atPath: path), "scripts/build-llama-cpp.sh failed")
        return path
    }

    /// llama.cpp's perplexity of `model` over the first `chunks` windows of 512 tokens of wikitext-2 test.
    static func llamaPerplexity(_ binary: String, model: String, chunks: Int) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        let text = recipes.deletingLastPathComponent().appendingPathComponent("data/wikitext-2/test.txt").path
        process.arguments = ["-m", model, "-f", text, "-c", "512", "--chunks", String(chunks), "-t", "2"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let log = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let line = try #require(log.split(separator: "\n").first { $0.contains("Final estimate: PPL = ") }, "llama-perplexity printed no estimate: \(log.suffix(2000))")
        let number = line.split(separator: "=")[1].split(separator: "+")[0].trimmingCharacters(in: .whitespaces)
        return try #require(Double(number))
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
