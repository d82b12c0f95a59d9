import Foundation
import Testing
import ShrinkEvaluation
import ShrinkTestSupport

/// `shrink compare`, `merge` and `gate` on the real MiniLM over a few STS-B pairs. Needs the model.
@Suite(.serialized) struct CompareCommandTests {
    static let recipes = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("recipes")
    static func recipe(_ name: String) -> String { recipes.appendingPathComponent(name + ".json").path }

    @Test func compareWritesEveryReportAndShardsMergeToTheSameConfigurations() throws {
        let folder = TemporaryDirectory()
        let common = ["--model", TestModels.miniLM, "--limit", "16", "--rounds", "1", "--recipes", Self.recipe("minilm-int8-channel"),
                      Self.recipe("minilm-palette-4bit")]
        let full = run(["compare"] + common + ["--output", folder.file("full")])
        #expect(full.code == 0, "\(full.errors)")
        #expect(full.output.contains("minilm-palette-4bit") && full.output.contains("baseline"))
        // Not a terminal: one plain progress line per step, with the time left after the first.
        let progress = full.errors.split(separator: "\n").filter { $0.hasPrefix("[") }
        #expect(progress.first?.hasPrefix("[1/") == true && progress.count >= 5 && progress.last!.contains("s left"), "\(full.errors)")
        for file in ["report.json", "report.csv", "report.md", "pareto.svg"] {
            #expect(FileManager.default.fileExists(atPath: folder.file("full/" + file)), "missing \(file)")
        }
        let names = try ComparisonReport.configurations(fromJSON: folder.file("full/report.json")).map(\.name)
        #expect(names == ["baseline", "minilm-int8-channel", "minilm-palette-4bit"])
        for shard in ["1/2", "2/2"] {
            let result = run(["compare"] + common + ["--shard", shard, "--output", folder.file("shard" + shard.prefix(1))])
            #expect(result.code == 0, "\(result.errors)")
        }
        #expect(try ComparisonReport.configurations(fromJSON: folder.file("shard1/report.json")).map(\.name) == ["baseline", "minilm-palette-4bit"])
        let merged = run(["merge", "--reports", folder.file("shard1/report.json"), folder.file("shard2/report.json"), "--output", folder.file("merged")])
        #expect(merged.code == 0, "\(merged.errors)")
        #expect(try ComparisonReport.configurations(fromJSON: folder.file("merged/report.json")).map(\.name).sorted() == names.sorted())
    }

    @Test func compareRejectsBadInput() throws {
        let folder = TemporaryDirectory()
        let missing = run(["compare", "--recipes", folder.file("nope.json"), "--output", folder.file("out")])
        #expect(missing.code == 2 && missing.errors.contains("nope.json"))
        #expect(!FileManager.default.fileExists(atPath: folder.file("out/report.json")))
        #expect(run(["compare", "--output", folder.file("out")]).code == 2)
        let shard = run(["compare", "--recipes", Self.recipe("minilm-int8-channel"), "--output", folder.file("out"), "--shard", "3/2"])
        #expect(shard.code == 2 && shard.errors.contains("--shard"))
        #expect(run(["compare", "--recipes", Self.recipe("minilm-int8-channel"), "--output", folder.file("out"), "--task", "glue"]).code == 2)
        // Two recipes with one file name would give two configurations one name.
        try FileManager.default.createDirectory(atPath: folder.file("other"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.recipe("minilm-int8-channel"), toPath: folder.file("other/minilm-int8-channel.json"))
        let twins = run(["compare", "--model", TestModels.miniLM, "--limit", "4", "--recipes", Self.recipe("minilm-int8-channel"),
                         folder.file("other/minilm-int8-channel.json"), "--output", folder.file("out")])
        #expect(twins.code == 2 && twins.errors.contains("two configurations are named 'minilm-int8-channel'"), "\(twins.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("out/report.json")))
        // Merge: a file that is not a report, and an unknown task.
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: folder.file("bad.json")))
        let merge = run(["merge", "--reports", folder.file("bad.json"), "--output", folder.file("merged")])
        #expect(merge.code == 2 && merge.errors.contains(folder.file("bad.json")) && merge.errors.contains("not a shrink compare report"), "\(merge.errors)")
        #expect(run(["merge", "--reports", folder.file("bad.json"), "--output", folder.file("merged"), "--task", "glue"]).code == 2)
        #expect(!FileManager.default.fileExists(atPath: folder.file("merged/report.json")))
    }

    @Test func gateExitCodes() throws {
        let folder = TemporaryDirectory()
        let base = ["gate", "--model", TestModels.miniLM, "--limit", "24"]
        let holds = run(base + ["--recipe", Self.recipe("minilm-int8-channel"), "--max-drop", "1", "--min-mean-cosine", "0.99"])
        #expect(holds.code == 0 && holds.output.contains("gate holds"), "\(holds.errors)")
        let fails = run(base + ["--recipe", Self.recipe("minilm-palette-2bit"), "--max-drop", "0.5"])
        #expect(fails.code == 1, "\(fails.output) \(fails.errors)")
        #expect(fails.errors.split(separator: "\n").count == 1 && fails.errors.contains("exceeds 0.500") && fails.errors.contains("lowest-SNR layers"))
        #expect(run(base + ["--recipe", folder.file("missing.json"), "--max-drop", "1"]).code == 2)
        #expect(run(base + ["--recipe", Self.recipe("minilm-int8-channel")]).code == 2, "no threshold")
        #expect(run(base + ["--recipe", Self.recipe("minilm-int8-channel"), "--max-drop", "x"]).code == 2)
        #expect(run(base + ["--max-drop", "1"]).code == 2, "neither --recipe nor --compressed")
        // An already compressed file instead of a recipe.
        let compressed = folder.file("int8.safetensors")
        #expect(run(["compress", "--model", TestModels.miniLM, "--recipe", Self.recipe("minilm-int8-channel"), "--output", compressed]).code == 0)
        let file = run(base + ["--compressed", compressed, "--max-drop", "1", "--min-cosine", "0.99"])
        #expect(file.code == 0 && file.output.contains("gate holds"), "\(file.errors)")
        #expect(run(base + ["--compressed", compressed, "--recipe", Self.recipe("minilm-int8-channel"), "--max-drop", "1"]).code == 2)
        let bad = folder.file("bad.csv")
        try Data("a\tb\n".utf8).write(to: URL(fileURLWithPath: bad))
        let badData = run(base + ["--recipe", Self.recipe("minilm-int8-channel"), "--max-drop", "1", "--data", bad])
        #expect(badData.code == 2 && badData.errors.contains("bad.csv:1"))
    }
}

/// `shrink compare` and `gate` on the perplexity task: SmolLM2's shipped Q4_1 file as the
/// baseline, one window of 512 tokens. Needs the model.
@Suite(.serialized) struct DecoderCompareCommandTests {
    @Test func compareReportsPerplexityKLDivergenceAndTokensPerSecond() throws {
        let folder = TemporaryDirectory()
        let result = run(["compare", "--task", "perplexity", "--limit", "1", "--rounds", "1", "--threads", "2",
                          "--recipes", CompareCommandTests.recipe("smollm2-int8-channel"), "--output", folder.file("out")])
        #expect(result.code == 0, "\(result.errors)")
        #expect(result.output.contains("mean_kld") && result.output.contains("pp128 /s") && result.output.contains("tg64 /s"), "\(result.output)")
        let configurations = try ComparisonReport.configurations(fromJSON: folder.file("out/report.json"))
        #expect(configurations.map(\.name) == ["baseline", "smollm2-int8-channel"])
        let baseline = configurations[0], int8 = configurations[1]
        #expect(baseline.metrics["mean_kld"]! < 1e-6 && baseline.metrics["same_top"] == 1 && baseline.metrics["perplexity_drop"] == 0, "\(baseline.metrics)")
        #expect(baseline.metrics["scored_tokens"] == 255 && (10...40).contains(baseline.metrics["perplexity"] ?? 0), "\(baseline.metrics)")
        let kld = try #require(int8.metrics["mean_kld"]), drop = try #require(int8.metrics["perplexity_drop"])
        #expect(kld > 0 && kld < 0.02 && abs(drop) < 0.3 && int8.metrics["same_top"]! > 0.9, "\(int8.metrics)")
        #expect(int8.metrics["p99_kld"]! >= kld)
        for key in ["prompt_tokens_per_second", "decode_tokens_per_second", "prompt_speedup", "decode_speedup"] {
            #expect((int8.latency[key] ?? 0) > 0, "\(key): \(int8.latency)")
        }
        #expect((7.9...8.2).contains(int8.compressedBitsPerWeight ?? 0) && int8.bytes > baseline.bytes)
        #expect(int8.worstLayers.count == 5 && int8.worstLayers.allSatisfy { $0.snrDecibels > 30 }, "\(int8.worstLayers)")
    }

    @Test func gateBoundsDriftMetricsBothWays() throws {
        let base = ["gate", "--task", "perplexity", "--limit", "1", "--threads", "2", "--recipe", CompareCommandTests.recipe("smollm2-int4-block32")]
        let holds = run(base + ["--max-drop", "10", "--max", "mean_kld=0.8", "--min", "same_top=0.5"])
        #expect(holds.code == 0 && holds.output.contains("perplexity gate holds") && holds.output.contains("mean_kld"), "\(holds.errors)")
        let fails = run(base + ["--max", "mean_kld=0.05", "p99_kld=0.2", "--min", "same_top=0.99"])
        #expect(fails.code == 1, "\(fails.output) \(fails.errors)")
        #expect(fails.errors.contains("mean_kld") && fails.errors.contains("exceeds 0.05000") && fails.errors.contains("p99_kld"), "\(fails.errors)")
        #expect(fails.errors.contains("same_top") && fails.errors.contains("is below 0.99000") && fails.errors.contains("lowest-SNR layers: blk."))
        let unknown = run(base + ["--max", "mean_cosine=2"])
        #expect(unknown.code == 1 && unknown.errors.contains("mean_cosine is not a metric of perplexity"), "\(unknown.errors)")
        #expect(run(base + ["--max", "mean_kld"]).code == 2)
        #expect(run(base + ["--min", "same_top=high"]).code == 2)
    }

    /// What the perplexity task cannot use: a model without next-token logits, a text shorter
    /// than one window, a text that is not UTF-8. Each a one-line error (exit 2), no report.
    @Test func perplexityTaskRejectsBadInput() throws {
        let folder = TemporaryDirectory()
        let recipe = CompareCommandTests.recipe("smollm2-int8-channel")
        let encoder = run(["compare", "--task", "perplexity", "--model", TestModels.miniLM, "--limit", "1", "--recipes",
                           CompareCommandTests.recipe("minilm-int8-channel"), "--output", folder.file("out")])
        #expect(encoder.code == 2 && encoder.errors.contains("next-token logits"), "\(encoder.errors)")
        try Data("A few words only.\n".utf8).write(to: URL(fileURLWithPath: folder.file("short.txt")))
        let short = run(["gate", "--task", "perplexity", "--data", folder.file("short.txt"), "--recipe", recipe, "--max-drop", "1"])
        #expect(short.code == 2 && short.errors.contains("short.txt") && short.errors.contains("fewer than one context of 512"), "\(short.errors)")
        try Data([0xff, 0xfe, 0x00, 0x41]).write(to: URL(fileURLWithPath: folder.file("binary.txt")))
        let binary = run(["compare", "--task", "perplexity", "--data", folder.file("binary.txt"), "--recipes", recipe, "--output", folder.file("out")])
        #expect(binary.code == 2 && binary.errors.contains("binary.txt") && binary.errors.contains("not UTF-8"), "\(binary.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("out/report.json")))
    }
}
