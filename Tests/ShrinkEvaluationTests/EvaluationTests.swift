import Foundation
import Testing
import Shrink
import ShrinkEvaluation
import ShrinkTestSupport

@Suite struct RankCorrelationTests {
    @Test func tiesShareTheirMeanRank() {
        #expect(RankCorrelation.ranks([10, 20, 20, 5, 20]) == [1, 3, 3, 0, 3])
    }

    @Test func spearmanMatchesHandComputedValues() {
        #expect(abs(RankCorrelation.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) - 0.8207826816681233) < 1e-12)
        #expect(RankCorrelation.spearman([1, 2, 3], [30, 20, 10]) == -1)
        #expect(abs(RankCorrelation.spearman([1, 2, 3, 4], [1, 3, 2, 4]) - 0.8) < 1e-12)
    }
}

@Suite struct STSBenchmarkTests {
    @Test func readsTheShippedTestSplit() throws {
        let pairs = try STSBenchmark.load(path: STSBenchmark.defaultTestSplit)
        #expect(pairs.count == 1379)
        #expect(pairs[0] == STSPair(first: "A girl is styling her hair.", second: "A girl is brushing her hair.", score: 2.5))
    }

    @Test func badLinesNameTheFileAndLine() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("sts.csv")
        try Data("g\tf\ty\t1\t2.5\ta\tb\ng\tf\ty\t2\tfive\ta\tb\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: DatasetError.invalidLine(path: path, line: 2, reason: "score 'five' is not a number")) { try STSBenchmark.load(path: path) }
        try Data("only\ttwo\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: DatasetError.invalidLine(path: path, line: 1, reason: "expected at least 7 tab-separated fields, found 2")) {
            try STSBenchmark.load(path: path)
        }
        try Data("\n\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: DatasetError.empty(path: path)) { try STSBenchmark.load(path: path) }
        #expect(throws: DatasetError.cannotRead(path: folder.file("missing.csv"), reason: "cannot read the file")) {
            try STSBenchmark.load(path: folder.file("missing.csv"))
        }
    }
}

@Suite struct ComparisonReportTests {
    static func configuration(_ name: String, bytes: Int, spearman: Double) -> ConfigurationReport {
        ConfigurationReport(name: name, recipe: name == "baseline" ? nil : "recipes/\(name).json", bytes: bytes, bitsPerWeight: Double(bytes) / 1e6,
                            compressedBitsPerWeight: nil, metrics: ["spearman": spearman, "spearman_drop": 82 - spearman, "mean_cosine": 0.99, "min_cosine": .nan],
                            latency: ["batch1_median_ms": 1, "batch1_p90_ms": 2, "batch1_speedup": 1, "batch32_sentences_per_second": 1000, "batch32_speedup": 1],
                            compressSeconds: 0.5, worstLayers: [.init(name: "layer, \"odd\"", encoding: "int8", snrDecibels: 40)])
    }

    static let report = ComparisonReport(task: "stsb", accuracyMetric: "spearman", accuracyDirection: .higherIsBetter,
                                         driftMetrics: ["mean_cosine", "min_cosine"], workloads: EvaluationTasks.description(of: "stsb")!.workloads,
                                         configurations: [
        configuration("baseline", bytes: 90, spearman: 82), configuration("a", bytes: 20, spearman: 81.9), configuration("b", bytes: 25, spearman: 81.5),
        configuration("c", bytes: 10, spearman: 70), configuration("d", bytes: 20, spearman: 81.9),
    ])

    @Test func paretoFrontKeepsUndominatedConfigurations() {
        // b is dominated by a (smaller and more accurate); a and d tie, so neither dominates the other.
        #expect(Self.report.paretoFront() == [0, 1, 3, 4])
    }

    @Test func jsonRoundTripsWithNonFiniteValues() throws {
        let folder = TemporaryDirectory()
        try Self.report.write(to: folder.path)
        let read = try ComparisonReport.configurations(fromJSON: folder.file("report.json"))
        #expect(read.count == 5 && read[1].name == "a" && read[1].metrics["min_cosine"]!.isNaN)
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: folder.file("report.json")))) as! [[String: Any]]
        #expect(Set(json[0].keys).isSuperset(of: ["name", "recipe", "bytes", "bits_per_weight", "metrics", "latency", "compress_seconds"]))
        #expect(Set((json[1]["metrics"] as! [String: Any]).keys) == ["spearman", "spearman_drop", "mean_cosine", "min_cosine"])
    }

    @Test func csvQuotesAndMarkdownAndSVGAreWellFormed() throws {
        let csv = Self.report.csv().split(separator: "\n")
        #expect(csv.count == 6 && csv[0].hasPrefix("name,bytes,bits_per_weight"))
        #expect(Self.report.markdown().contains("`layer, \"odd\"` 40.0 dB"))
        let folder = TemporaryDirectory()
        try Self.report.write(to: folder.path)
        // Parsed by Python's XML parser: the labels of the text elements.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import sys, xml.etree.ElementTree as E; print('\\n'.join(t.text or '' for t in E.parse(sys.argv[1]).iter('{http://www.w3.org/2000/svg}text')))",
                             folder.file("pareto.svg")]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let labels = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n").map(String.init)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "pareto.svg is not well-formed XML")
        for name in ["baseline", "a", "b", "c", "d"] { #expect(labels.contains(name), "no label for \(name)") }
    }
}

/// What tasks declare: the direction of their metric (drops and Pareto fronts follow it), their
/// workloads (report keys), and drift streamed against outputs kept chunk by chunk.
@Suite struct TaskDeclarationTests {
    @Test func dropsAndFrontsFollowTheMetricsDirection() {
        #expect(MetricDirection.higherIsBetter.drop(from: 82, to: 81) == 1)
        #expect(MetricDirection.lowerIsBetter.drop(from: 20, to: 21) == 1)
        func configuration(_ name: String, bytes: Int, perplexity: Double) -> ConfigurationReport {
            ConfigurationReport(name: name, recipe: nil, bytes: bytes, bitsPerWeight: 1, compressedBitsPerWeight: nil, metrics: ["perplexity": perplexity],
                                latency: [:], compressSeconds: 0, worstLayers: [])
        }
        let report = ComparisonReport(task: "perplexity", accuracyMetric: "perplexity", accuracyDirection: .lowerIsBetter, driftMetrics: [],
                                      workloads: [LatencyWorkload(name: "decode", kind: .throughput(unit: "tokens"), column: "dec /s")],
                                      configurations: [configuration("base", bytes: 100, perplexity: 19), configuration("q4", bytes: 30, perplexity: 20),
                                                       configuration("worse", bytes: 40, perplexity: 22), configuration("q2", bytes: 20, perplexity: 30)])
        #expect(report.paretoFront() == [0, 1, 3])
        #expect(report.csv().hasPrefix("name,bytes,bits_per_weight,compressed_bits_per_weight,perplexity,perplexity_drop,decode_tokens_per_second,decode_speedup,compress_seconds"))
        #expect(report.table().contains("dec /s") && report.table().contains("dec ×"))
    }

    @Test func referenceOutputsComeBackChunkByChunk() throws {
        let outputs = try TaskOutputs()
        let first: [Float] = [1, 2, 3, 4, 5, 6], second: [Float] = [-1, 0.5]
        try first.withUnsafeBufferPointer { try outputs.consume($0, rows: 3, width: 2) }
        try second.withUnsafeBufferPointer { try outputs.consume($0, rows: 1, width: 2) }
        #expect(outputs.chunks.map(\.rows) == [3, 1])
        #expect(try outputs.chunk(1) == second)
        #expect(try outputs.chunk(0) == first)
    }
}
