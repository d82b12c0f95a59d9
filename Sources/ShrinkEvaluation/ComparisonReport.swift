import Foundation
import ShrinkIO

/// The files `shrink compare` writes (`report.json`, `.csv`, `.md`, `pareto.svg`) and the table it
/// prints, from a list of configuration reports.
public struct ComparisonReport: Sendable {
    public var task: String
    public var accuracyMetric: String
    public var accuracyDirection: MetricDirection
    public var driftMetrics: [String]
    public var workloads: [LatencyWorkload]
    public var configurations: [ConfigurationReport]

    public init(task: String, accuracyMetric: String, accuracyDirection: MetricDirection, driftMetrics: [String], workloads: [LatencyWorkload],
                configurations: [ConfigurationReport]) {
        self.task = task
        self.accuracyMetric = accuracyMetric
        self.accuracyDirection = accuracyDirection
        self.driftMetrics = driftMetrics
        self.workloads = workloads
        self.configurations = configurations
    }

    /// The report of `configurations` measured on `task`.
    public init(task: any EvaluationTask, configurations: [ConfigurationReport]) {
        self.init(task: task.name, accuracyMetric: task.accuracyMetric, accuracyDirection: task.accuracyDirection, driftMetrics: task.driftMetrics,
                  workloads: task.latencyWorkloads, configurations: configurations)
    }

    /// The latency keys of every workload, in report order, with their decimals.
    var latencyColumns: [(key: String, digits: Int)] {
        workloads.flatMap { workload -> [(key: String, digits: Int)] in
            switch workload.kind {
            case .latency: [(workload.key, 3), (workload.name + "_p90_ms", 3), (workload.name + "_speedup", 2)]
            case .throughput: [(workload.key, 1), (workload.name + "_speedup", 2)]
            }
        }
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
        let columns = latencyColumns
        let header: [String] = ["name", "bytes", "bits_per_weight", "compressed_bits_per_weight"] + metricColumns + columns.map(\.key) + ["compress_seconds"]
        let body: [[String]] = configurations.map { item in
            let sizes: [String] = [item.name, String(item.bytes), Self.number(item.bitsPerWeight, 3), item.compressedBitsPerWeight.map { Self.number($0, 3) } ?? ""]
            let metrics: [String] = metricColumns.map { item.metrics[$0].map { Self.number($0, $0.magnitude < 1.5 && $0 != 0 ? 5 : 2) } ?? "" }
            let latency: [String] = columns.map { Self.number(item.latency[$0.key] ?? .nan, $0.digits) }
            return sizes + metrics + latency + [Self.number(item.compressSeconds, 2)]
        }
        return [header] + body
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
        let timed: [String] = workloads.flatMap { [$0.column, $0.column.split(separator: " ").first.map { "\($0) ×" } ?? "×"] }
        let header: [String] = ["configuration", "MB", "bits/w", accuracyMetric, "drop"] + driftMetrics + timed + ["compress s"]
        let body: [[String]] = configurations.map { item -> [String] in
            let sizes: [String] = [item.name, Self.number(Double(item.bytes) / 1e6, 2), Self.number(item.bitsPerWeight, 2),
                                   Self.number(item.metrics[accuracyMetric] ?? .nan, 2), Self.number(item.metrics[accuracyMetric + "_drop"] ?? .nan, 2)]
            let drift: [String] = driftMetrics.map { Self.number(item.metrics[$0] ?? .nan, 5) }
            let latency: [String] = workloads.flatMap { workload -> [String] in
                let digits = if case .latency = workload.kind { 2 } else { 0 }
                return [Self.number(item.latency[workload.key] ?? .nan, digits), Self.number(item.latency[workload.name + "_speedup"] ?? .nan, 2)]
            }
            return sizes + drift + latency + [Self.number(item.compressSeconds, 2)]
        }
        let all: [[String]] = [header] + body
        let widths = header.indices.map { column in all.map { $0[column].count }.max()! }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == 0 ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - cell.count) + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }

    /// Indices of the configurations on the Pareto front: no other is at most as large and at
    /// least as accurate (by the metric's direction) with one of the two strictly better.
    public func paretoFront() -> [Int] {
        let worst: Double = accuracyDirection == .higherIsBetter ? -.infinity : .infinity
        let points = configurations.map { (size: Double($0.bytes), accuracy: $0.metrics[accuracyMetric] ?? worst) }
        let direction = accuracyDirection
        return points.indices.filter { index in
            !points.indices.contains { other in
                other != index && points[other].size <= points[index].size && direction.atLeastAsGood(points[other].accuracy, as: points[index].accuracy)
                    && (points[other].size < points[index].size || points[other].accuracy != points[index].accuracy)
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
