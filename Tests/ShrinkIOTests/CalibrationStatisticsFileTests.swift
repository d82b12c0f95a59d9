import Foundation
import Testing
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// Calibration statistics files: what is written reads back equal, ops with the same inputs share
/// tensors, and every malformed file or value is refused naming the file and the key or tensor.
@Suite struct CalibrationStatisticsFileTests {
    let folder = TemporaryDirectory()
    let provenance = CalibrationProvenance(model: "model.safetensors", modelSHA256: String(repeating: "ab", count: 32),
                                           data: "calibration.txt", dataSHA256: String(repeating: "cd", count: 32), lines: 3)

    /// Statistics of `rows` random rows of width `width`, accumulated as the recorder does.
    func statistics(width: Int, rows: Int, seed: UInt64) -> LayerInputStatistics {
        var generator = SplitMix64(seed: seed)
        let inputs = generator.floats(rows * width, in: -2...2)
        var product = [Float](repeating: 0, count: width * width)
        for r in 0..<rows { for i in 0..<width { for j in 0..<width { product[i * width + j] += inputs[r * width + i] * inputs[r * width + j] } } }
        var statistics = LayerInputStatistics(width: width)
        inputs.withUnsafeBufferPointer { x in product.withUnsafeBufferPointer { statistics.add(rows: x, count: rows, product: $0) } }
        return statistics
    }

    @Test func roundTripSharesEqualInputsAndKeepsProvenance() throws {
        let query = statistics(width: 8, rows: 5, seed: 1)
        let written = ["l.query": query, "l.key": query, "l.value": query, "l.down": statistics(width: 12, rows: 7, seed: 2)]
        let path = folder.file("stats.safetensors")
        try CalibrationStatisticsFile.write(written, provenance: provenance, to: path)
        let file = try CalibrationStatisticsFile(path: path)
        #expect(file.provenance == provenance)
        #expect(Set(file.layers.keys) == Set(written.keys))
        #expect(Set(file.layers.values.map(\.tensors)) == ["l.down", "l.key"])
        for (op, expected) in written { #expect(try file.statistics(of: op) == expected) }
        #expect(try SafetensorsFile(path: path).entries.count == 6)
    }

    /// Blocks appended in any order write the bytes one write of everything does, and leave no
    /// file but the destination; an op appended twice is refused.
    @Test func blockByBlockAppendsWriteWhatOneWriteDoes() throws {
        let shared = statistics(width: 8, rows: 5, seed: 3)
        let first = ["b.0.query": shared, "b.0.key": shared, "b.0.down": statistics(width: 12, rows: 5, seed: 4)]
        let second = ["b.1.query": statistics(width: 8, rows: 5, seed: 5), "b.1.down": statistics(width: 12, rows: 5, seed: 6)]
        let whole = folder.file("whole.safetensors"), streamed = folder.file("streamed.safetensors")
        try CalibrationStatisticsFile.write(first.merging(second) { a, _ in a }, provenance: provenance, to: whole)
        let writer = try CalibrationStatisticsWriter(path: streamed)
        try writer.append(second)
        try writer.append(first)
        #expect(throws: ShrinkIOError.writeFailed(path: streamed, reason: "statistics of 'b.1.down' came twice")) {
            try writer.append(["b.1.down": second["b.1.down"]!])
        }
        try writer.finish(provenance: provenance)
        #expect(try Data(contentsOf: URL(fileURLWithPath: streamed)) == (try Data(contentsOf: URL(fileURLWithPath: whole))))
        #expect(folder.contents == ["streamed.safetensors", "whole.safetensors"])
        #expect(Set(try CalibrationStatisticsFile(path: streamed).layers.values.map(\.tensors)) == ["b.0.down", "b.0.key", "b.1.down", "b.1.query"])
    }

    /// Statistics spilled block by block read back as appended, from several threads at once, and
    /// leave no file behind; an op never appended reads as nil.
    @Test func spilledStatisticsReadBackWhatWasAppended() async throws {
        let shared = statistics(width: 8, rows: 5, seed: 7)
        let blocks = [["s.0.query": shared, "s.0.key": shared, "s.0.down": statistics(width: 12, rows: 5, seed: 8)],
                      ["s.1.query": statistics(width: 8, rows: 3, seed: 9)]]
        let spilled = try SpilledCalibrationStatistics(nextTo: folder.file("compressed.safetensors"))
        for block in blocks { try spilled.append(block) }
        #expect(spilled.ops == ["s.0.query", "s.0.key", "s.0.down", "s.1.query"])
        let expected = blocks.reduce(into: [:]) { $0.merge($1) { a, _ in a } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (op, value) in expected {
                group.addTask {
                    let correlation = try spilled.correlation(of: op)
                    #expect(correlation == value.correlation)
                }
            }
            try await group.waitForAll()
        }
        #expect(try spilled.correlation(of: "s.1.down") == nil)
        #expect(folder.contents.isEmpty)
    }

    @Test func absoluteStatisticsArePerChannel() {
        var statistics = LayerInputStatistics(width: 2)
        let inputs: [Float] = [1, -4, -3, 2]
        let product: [Float] = [10, -10, -10, 20]
        inputs.withUnsafeBufferPointer { x in product.withUnsafeBufferPointer { statistics.add(rows: x, count: 2, product: $0) } }
        #expect(statistics.absoluteSums == [4, 6])
        #expect(statistics.meanAbsolute == [2, 3])
        #expect(statistics.absoluteMaxima == [3, 4])
        #expect(statistics.rows == 2 && statistics.correlation.matrix == [10, -10, -10, 20])
    }

    @Test func nothingToWriteLeavesNoFile() {
        let path = folder.file("empty.safetensors")
        #expect(throws: ShrinkIOError.writeFailed(path: path, reason: "no layer saw any calibration input")) {
            try CalibrationStatisticsFile.write([:], provenance: provenance, to: path)
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// A file of `tensors` with metadata `json` under the statistics key (none when nil).
    func file(_ tensors: [(name: String, tensor: DenseTensor)], json: String?) throws -> String {
        let path = folder.file("bad-\(UUID().uuidString).safetensors")
        try SafetensorsWriter.write(tensors, metadata: json.map { [CalibrationStatisticsFile.metadataKey: $0] } ?? [:], to: path)
        return path
    }

    func json(format: Int = 1, layers: String = #"{"op": {"rows": 4, "tensors": "op"}}"#) -> String {
        #"{"format": \#(format), "model": "m", "model_sha256": "00", "data": "d", "data_sha256": "11", "lines": 2, "layers": \#(layers)}"#
    }

    func tensors(_ correlation: [Double] = [2, 1, 1, 3], shape: [Int] = [2, 2], sums: [Double] = [1, 2], maxima: [Float] = [1, 1]) throws -> [(name: String, tensor: DenseTensor)] {
        [("op.input_correlation", try DenseTensor(doubles: correlation, shape: shape)),
         ("op.input_abs_sum", try DenseTensor(doubles: sums, shape: [sums.count])),
         ("op.input_abs_max", try DenseTensor(converting: maxima, shape: [maxima.count]))]
    }

    func expectError(_ path: String, _ expected: ShrinkIOError, reading op: String? = nil) {
        do {
            let file = try CalibrationStatisticsFile(path: path)
            if let op { _ = try file.statistics(of: op) }
            Issue.record("accepted a bad statistics file")
        } catch {
            #expect(error == expected)
            #expect(error.description.hasPrefix(path))
        }
    }

    @Test func malformedFilesAreRefusedNamingTheKeyOrTensor() throws {
        let key = CalibrationStatisticsFile.metadataKey
        let plain = try file(try tensors(), json: nil)
        expectError(plain, .unsupportedFormat(path: plain, reason: "not a calibration statistics file: no '\(key)' metadata (write one with shrink calibrate)"))
        let future = try file(try tensors(), json: json(format: 2))
        expectError(future, .unsupportedFormat(path: future, reason: "calibration statistics format 2; this build reads format 1"))
        let notJSON = try file(try tensors(), json: "{")
        do { _ = try CalibrationStatisticsFile(path: notJSON); Issue.record("accepted metadata that is not JSON") } catch {
            guard case .invalidMetadata(notJSON, key, _) = error else { Issue.record("wrong error \(error)"); return }
        }
        let noRows = try file(try tensors(), json: json(layers: #"{"op": {"tensors": "op"}}"#))
        expectError(noRows, .invalidMetadata(path: noRows, key: "\(key).layers.op.rows", reason: "missing or not a whole number ≥ 1"))
        let missing = try file(Array(try tensors().prefix(2)), json: json())
        expectError(missing, .tensorNotFound(path: missing, tensor: "op.input_abs_max"))
        let wrongDType = try file([("op.input_correlation", try DenseTensor(converting: [2, 1, 1, 3], shape: [2, 2]))] + Array(try tensors().dropFirst()), json: json())
        expectError(wrongDType, .invalidEntry(path: wrongDType, tensor: "op.input_correlation", reason: "is F32 [2, 2]; expected F64 of rank 2"))
        let notSquare = try file(try tensors([1, 2, 3, 4, 5, 6], shape: [2, 3]), json: json())
        expectError(notSquare, .invalidShape(path: notSquare, tensor: "op.input_correlation", reason: "[2, 3] is not square"))
        let shortSums = try file(try tensors(sums: [1]), json: json())
        expectError(shortSums, .invalidShape(path: shortSums, tensor: "op.input_abs_sum", reason: "[1], where the correlation is 2 wide"))
        let truncated = folder.file("truncated.safetensors")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try file(try tensors(), json: json())))
        try bytes.prefix(bytes.count - 3).write(to: URL(fileURLWithPath: truncated))
        do { _ = try CalibrationStatisticsFile(path: truncated); Issue.record("accepted a truncated file") } catch {
            #expect(error.description.hasPrefix(truncated))
        }
    }

    @Test func badValuesAreRefusedWhenRead() throws {
        let nan = try file(try tensors([2, .nan, .nan, 3]), json: json())
        expectError(nan, .invalidEntry(path: nan, tensor: "op.input_correlation", reason: "element 1 is nan, not finite"), reading: "op")
        let asymmetric = try file(try tensors([2, 1, 0.5, 3]), json: json())
        expectError(asymmetric, .invalidEntry(path: asymmetric, tensor: "op.input_correlation", reason: "not symmetric at [1, 0]"), reading: "op")
        let negative = try file(try tensors([-2, 1, 1, 3]), json: json())
        expectError(negative, .invalidEntry(path: negative, tensor: "op.input_correlation", reason: "diagonal element 0 is negative"), reading: "op")
        let badMaximum = try file(try tensors(maxima: [1, .infinity]), json: json())
        expectError(badMaximum, .invalidEntry(path: badMaximum, tensor: "op.input_abs_max", reason: "element 1 is inf, not a finite value ≥ 0"), reading: "op")
        let good = try CalibrationStatisticsFile(path: try file(try tensors(), json: json()))
        #expect(throws: ShrinkIOError.tensorNotFound(path: good.path, tensor: "other (no calibration statistics for this layer)")) { try good.statistics(of: "other") }
    }
}
