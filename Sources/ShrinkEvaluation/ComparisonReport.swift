import Foundation
import ShrinkIO

/// The files `shrink compare` writes (`report.json`, `.csv`, `.md`, `pareto.svg`) and the table it
/// prints, from a list of configuration reports.
public struct ComparisonReport: Sendable {
    public var task: String
    public var accuracyMetric: String
    public var driftMetrics: [String]
    public var configurations: [ConfigurationReport]

    public init(task: String, accuracyMetric: String, driftMetrics: [String], configurations: [ConfigurationReport]) {
        self.task = task
        self.accuracyMetric = accuracyMetric
        self.driftMetrics = driftMetrics
        self.configurations = configurations
    }

    /// The metric columns, in order.
    var metricColumns: [String] { [accuracyMetric, accuracyMetric + "_drop"] + driftMetrics }

    /// `report.json`: the list of configurations.
    public func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return String(decoding: try encoder.encode(configurations), as: UTF8.self) + "\n"
    }

    /// Reads a `report.json` (for `shrink merge`).
    public static func configurations(fromJSON path: String) throws -> [ConfigurationReport] {
        guard let data = FileManager.default.contents(atPath: path) else { throw DatasetError.cannotRead(path: path, reason: "cannot read the file") }
        do {
            let decoder = JSONDecoder()
            decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
            return try decoder.decode([ConfigurationReport].self, from: data)
        } catch {
            throw DatasetError.cannotRead(path: path, reason: "not a shrink compare report: \(error)")
        }
    }

    /// Rows of cells: a header, then one row per configuration.
    func rows() -> [[String]] {
        let header = ["name", "bytes", "bits_per_weight", "compressed_bits_per_weight"] + metricColumns
            + ["batch1_median_ms", "batch1_p90_ms", "batch1_speedup", "batch32_sentences_per_second", "batch32_speedup", "compress_seconds"]
        return [header] + configurations.map { item in
            [item.name, String(item.bytes), Self.number(item.bitsPerWeight, 3), item.compressedBitsPerWeight.map { Self.number($0, 3) } ?? ""]
                + metricColumns.map { item.metrics[$0].map { Self.number($0, $0.magnitude < 1.5 && $0 != 0 ? 5 : 2) } ?? "" }
                + [Self.number(item.latency.batch1MedianMs, 3), Self.number(item.latency.batch1P90Ms, 3), Self.number(item.latency.batch1Speedup, 2),
                   Self.number(item.latency.batch32SentencesPerSecond, 1), Self.number(item.latency.batch32Speedup, 2),
                   Self.number(item.compressSeconds, 2)]
        }
    }

    static func number(_ value: Double, _ digits: Int) -> String { value.isFinite ? String(format: "%.\(digits)f", value) : "nan" }

    /// `report.csv` (RFC 4180 quoting where needed).
    public func csv() -> String {
        rows().map { $0.map(Self.csvField).joined(separator: ",") }.joined(separator: "\n") + "\n"
    }

    static func csvField(_ text: String) -> String {
        text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) ? "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : text
    }

    /// `report.md`: the table and each configuration's worst layers.
    public func markdown() -> String {
        let table = rows()
        var lines = ["# Shrink comparison: \(task)", "", "| " + table[0].joined(separator: " | ") + " |",
                     "|" + String(repeating: " --- |", count: table[0].count)]
        lines += table.dropFirst().map { "| " + $0.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |" }
        lines += ["", "Lowest weight SNR per configuration (the layers compression hurt most):", ""]
        for item in configurations where !item.worstLayers.isEmpty {
            lines.append("- **\(item.name)**: " + item.worstLayers.map { "`\($0.name)` \(String(format: "%.1f", $0.snrDecibels)) dB" }.joined(separator: ", "))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The terminal table: aligned columns, fewer of them.
    public func table() -> String {
        let header = ["configuration", "MB", "bits/w", accuracyMetric, "drop"] + driftMetrics + ["b1 ms", "b1 ×", "b32 /s", "b32 ×", "compress s"]
        let body = configurations.map { item -> [String] in
            [item.name, Self.number(Double(item.bytes) / 1e6, 2), Self.number(item.bitsPerWeight, 2),
             Self.number(item.metrics[accuracyMetric] ?? .nan, 2), Self.number(item.metrics[accuracyMetric + "_drop"] ?? .nan, 2)]
                + driftMetrics.map { Self.number(item.metrics[$0] ?? .nan, 5) }
                + [Self.number(item.latency.batch1MedianMs, 2), Self.number(item.latency.batch1Speedup, 2),
                   Self.number(item.latency.batch32SentencesPerSecond, 0), Self.number(item.latency.batch32Speedup, 2),
                   Self.number(item.compressSeconds, 2)]
        }
        let all = [header] + body
        let widths = header.indices.map { column in all.map { $0[column].count }.max()! }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == 0 ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - cell.count) + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }

    /// Indices of the configurations on the Pareto front: no other is at most as large and at
    /// least as accurate with one of the two strictly better.
    public func paretoFront() -> [Int] {
        let points = configurations.map { (size: Double($0.bytes), accuracy: $0.metrics[accuracyMetric] ?? -.infinity) }
        return points.indices.filter { index in
            !points.indices.contains { other in
                other != index && points[other].size <= points[index].size && points[other].accuracy >= points[index].accuracy
                    && (points[other].size < points[index].size || points[other].accuracy > points[index].accuracy)
            }
        }
    }

    /// Writes the four report files into `folder` (each atomically).
    public func write(to folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for (name, text) in [("report.json", try json()), ("report.csv", csv()), ("report.md", markdown()), ("pareto.svg", ParetoPlot(report: self).svg())] {
            let file = try AtomicFile(path: (folder as NSString).appendingPathComponent(name))
            try file.write(text)
            try file.commit()
        }
    }
}
