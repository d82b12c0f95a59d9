import Foundation
import Testing
import ShrinkEvaluation
import ShrinkTestSupport

/// The KL-divergence base file: round trip within its quantization bound, typed errors for what is
/// not such a file, and the divergence itself against closed forms.
@Suite struct LogProbabilityFileTests {
    @Test func roundTripsWithinTheQuantizationBound() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("base.klp")
        let header = LogProbabilityFile.Header(vocabulary: 5, context: 8, chunks: 1, rowsPerChunk: 2, tokens: [1, 2, 3, 4, 5, 6, 7, -1])
        let rows: [[Float]] = [[0, 1, 2, 3, 4], [10, -50, 0, 0, 1]]
        let writer = try LogProbabilityFile.Writer(path: path, header: header)
        for row in rows { try row.withUnsafeBufferPointer { try writer.append($0) } }
        #expect(!FileManager.default.fileExists(atPath: path))
        try writer.finish()
        let reader = try LogProbabilityFile.Reader(path: path)
        #expect(reader.header == header && reader.rows == 2)
        var values = [Float](repeating: 0, count: 5)
        for (index, row) in rows.enumerated() {
            let total = row.reduce(0.0) { $0 + exp(Double($1)) }
            values.withUnsafeMutableBufferPointer { reader.logProbabilities(row: index, into: $0.baseAddress!) }
            for (value, logit) in zip(values, row) {
                let expected = max(Double(logit) - log(total), -30)
                #expect(abs(Double(value) - expected) <= 30.0 / 131070 + 1e-5, "row \(index): \(value) against \(expected)")
            }
        }
    }

    @Test func whatIsNotABaseFileIsATypedError() throws {
        let folder = TemporaryDirectory()
        let short = folder.file("short.klp")
        _ = FileManager.default.createFile(atPath: short, contents: Data("SHRKLP01".utf8))
        let other = folder.file("other.klp")
        _ = FileManager.default.createFile(atPath: other, contents: Data(repeating: 7, count: 100))
        for (path, message) in [(short, "not a Shrink log-probability file"), (other, "not a Shrink log-probability file"),
                                (folder.file("none.klp"), "cannot read")] {
            #expect { _ = try LogProbabilityFile.Reader(path: path) } throws: { "\($0)".contains(message) && "\($0)".contains(path) }
        }
        let path = folder.file("cut.klp")
        let writer = try LogProbabilityFile.Writer(path: path, header: .init(vocabulary: 3, context: 4, chunks: 1, rowsPerChunk: 2, tokens: [1, 2, 3, 4]))
        try [Float](repeating: 0, count: 3).withUnsafeBufferPointer { try writer.append($0) }
        try writer.finish()
        #expect { _ = try LogProbabilityFile.Reader(path: path) } throws: { "\($0)".contains("holds 1 rows, its header says 2") }
        let abandoned = try LogProbabilityFile.Writer(path: folder.file("gone.klp"), header: .init(vocabulary: 3, context: 4, chunks: 1, rowsPerChunk: 1, tokens: []))
        abandoned.abandon()
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["cut.klp", "other.klp", "short.klp"])
    }

    @Test func divergenceMatchesClosedForms() {
        var accumulator = KLDivergenceAccumulator()
        // P = (0.5, 0.5), Q = (0.8, 0.2): KL = 0.5 log(0.5/0.8) + 0.5 log(0.5/0.2).
        let base: [Float] = [log(0.5), log(0.5)], logits: [Float] = [log(0.8), log(0.2)]
        base.withUnsafeBufferPointer { b in logits.withUnsafeBufferPointer { accumulator.add(base: b, logits: $0) } }
        base.withUnsafeBufferPointer { b in accumulator.add(base: b, logits: b) }
        #expect(abs(accumulator.values[0] - (0.5 * log(0.5 / 0.8) + 0.5 * log(0.5 / 0.2))) < 1e-6)
        #expect(abs(accumulator.values[1]) < 1e-7 && accumulator.sameTopRate == 1)
        #expect(accumulator.percentile(0.99) == accumulator.values[0] && accumulator.percentile(0.5) == accumulator.values[1])
    }
}
