import Foundation

/// One STS Benchmark pair: two sentences and their gold similarity (0–5).
public struct STSPair: Sendable, Equatable {
    public let first: String
    public let second: String
    public let score: Double

    public init(first: String, second: String, score: Double) {
        self.first = first
        self.second = second
        self.score = score
    }
}

/// Errors reading an evaluation dataset, naming the file and line.
public enum DatasetError: Error, CustomStringConvertible, Equatable {
    case cannotRead(path: String, reason: String)
    case invalidLine(path: String, line: Int, reason: String)
    case empty(path: String)

    public var description: String {
        switch self {
        case .cannotRead(let path, let reason): "\(path): \(reason)"
        case .invalidLine(let path, let line, let reason): "\(path):\(line): \(reason)"
        case .empty(let path): "\(path): no pairs"
        }
    }
}

/// The STS Benchmark's tab-separated files: genre, file, year, id, score, sentence 1, sentence 2
/// (further fields ignored).
public enum STSBenchmark {
    /// The test split shipped with the project (`data/stsb/sts-test.csv`, 1,379 pairs; licenses in
    /// `data/stsb/LICENSE.txt`).
    public static var defaultTestSplit: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("data/stsb/sts-test.csv").path
    }

    /// Reads every pair of `path`.
    public static func load(path: String) throws(DatasetError) -> [STSPair] {
        guard let data = FileManager.default.contents(atPath: path) else { throw .cannotRead(path: path, reason: "cannot read the file") }
        guard let text = String(data: data, encoding: .utf8) else { throw .cannotRead(path: path, reason: "not UTF-8 text") }
        var pairs: [STSPair] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.hasSuffix("\r") ? line.dropLast() : line
            if trimmed.isEmpty { continue }
            let fields = trimmed.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count >= 7 else {
                throw .invalidLine(path: path, line: index + 1, reason: "expected at least 7 tab-separated fields, found \(fields.count)")
            }
            guard let score = Double(fields[4]), score.isFinite else {
                throw .invalidLine(path: path, line: index + 1, reason: "score '\(fields[4])' is not a number")
            }
            pairs.append(STSPair(first: String(fields[5]), second: String(fields[6]), score: score))
        }
        guard !pairs.isEmpty else { throw .empty(path: path) }
        return pairs
    }
}

/// Rank correlation.
public enum RankCorrelation {
    /// Ranks from 0, ties sharing their mean rank.
    public static func ranks(_ values: [Double]) -> [Double] {
        let order = values.indices.sorted { values[$0] < values[$1] }
        var ranks = [Double](repeating: 0, count: values.count)
        var start = 0
        while start < order.count {
            var end = start + 1
            while end < order.count && values[order[end]] == values[order[start]] { end += 1 }
            let mean = Double(start + end - 1) / 2
            for position in start..<end { ranks[order[position]] = mean }
            start = end
        }
        return ranks
    }

    /// Pearson correlation; NaN unless `a` and `b` hold the same number (≥ 1) of values.
    public static func pearson(_ a: [Double], _ b: [Double]) -> Double {
        guard a.count == b.count && !a.isEmpty else { return .nan }
        let meanA = a.reduce(0, +) / Double(a.count), meanB = b.reduce(0, +) / Double(b.count)
        var covariance = 0.0, varianceA = 0.0, varianceB = 0.0
        for (x, y) in zip(a, b) {
            covariance += (x - meanA) * (y - meanB)
            varianceA += (x - meanA) * (x - meanA)
            varianceB += (y - meanB) * (y - meanB)
        }
        return covariance / (varianceA * varianceB).squareRoot()
    }

    /// Spearman correlation: Pearson's over ranks (ties averaged).
    public static func spearman(_ a: [Double], _ b: [Double]) -> Double { pearson(ranks(a), ranks(b)) }
}
