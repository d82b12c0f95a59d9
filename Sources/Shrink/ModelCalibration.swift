import Dispatch
import Foundation
import ShrinkCore
import ShrinkIO
import ShrinkModels

/// What `ModelCalibration.record` wrote.
public struct CalibrationRecordSummary: Sendable {
    public let output: String
    /// Linear ops with statistics, and the distinct input sets among them (ops that read the same
    /// input share one).
    public let layers: Int
    public let distinctInputs: Int
    /// Calibration lines run, and the fewest and most input rows an op saw.
    public let lines: Int
    public let rows: ClosedRange<Int>
    public let bytes: Int
    public let seconds: Double
}

/// Records calibration statistics (`LayerInputStatistics` of every linear op the architecture
/// observes) once, into a file that compress, sensitivity and search read with `--stats`.
public enum ModelCalibration {
    /// Runs the first `limit` non-blank lines of `data` through the uncompressed model at `model`,
    /// block by block, and writes the statistics of every observed linear op to `output`
    /// atomically; each block's statistics go to the file's spill as the block finishes, and a
    /// decoder's hidden states between blocks to a spill file next to `output`, so memory holds one
    /// block's statistics, not the whole model's statistics nor every text's hidden states.
    /// - Throws: `ModelError` for unreadable data or a model that cannot run; `ShrinkIOError` when
    ///   no op saw input or the file cannot be written (nothing is left at `output`).
    public static func record(model: ModelLocation, data: String, limit: Int, output: String,
                              threads: Int = ProcessInfo.processInfo.activeProcessorCount) throws -> CalibrationRecordSummary {
        let start = DispatchTime.now()
        let (files, architecture) = try ModelCompressor.openForCalibration(model)
        let lines = try Calibration.lines(data, limit: limit)
        let writer = try CalibrationStatisticsWriter(path: output)
        var rows: [Int] = []
        try Calibration.streamInputStatistics(files: files, architecture: architecture, dataPath: data, limit: limit,
                                              layers: Set(architecture.observationPoints), threads: threads, spillNextTo: output) { block in
            rows += block.values.map(\.rows)
            try writer.append(block)
        }
        let provenance = CalibrationProvenance(
            model: (model.weightsPath as NSString).lastPathComponent, modelSHA256: try SHA256.hexDigest(ofFile: model.weightsPath),
            data: data, dataSHA256: try SHA256.hexDigest(ofFile: data), lines: lines.count)
        try writer.finish(provenance: provenance)
        let written = try CalibrationStatisticsFile(path: output)
        let bytes = (try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int) ?? 0
        return CalibrationRecordSummary(output: output, layers: written.layers.count, distinctInputs: Set(written.layers.values.map(\.tensors)).count,
                                        lines: lines.count, rows: rows.min()!...rows.max()!, bytes: bytes,
                                        seconds: Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9)
    }
}
