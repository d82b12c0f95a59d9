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
    ///
    /// With `checkpoint` (a folder; decoders only) the spills are that folder's files instead
    /// (`CalibrationCheckpoint`): a run that stops continues, when run again with the same folder,
    /// model, data and limit, after its last finished block, and writes the same bytes as an
    /// uninterrupted run. The folder is removed once `output` is written; after an error it stays.
    /// - Throws: `ModelError` for unreadable data or a model that cannot run (or resume);
    ///   `ShrinkIOError` when no op saw input, the checkpoint belongs to another run, or a file
    ///   cannot be written (nothing is left at `output`).
    public static func record(model: ModelLocation, data: String, limit: Int, output: String, checkpoint folder: String? = nil,
                              threads: Int = ProcessInfo.processInfo.activeProcessorCount) throws -> CalibrationRecordSummary {
        try record(model: model, data: data, limit: limit, output: output, checkpoint: folder, threads: threads) { _ in }
    }

    /// `record`, calling `blockCommitted(b)` after block `b`'s statistics are stored (and, with a
    /// checkpoint, committed); a test stops a run there by throwing.
    package static func record(model: ModelLocation, data: String, limit: Int, output: String, checkpoint folder: String?, threads: Int,
                               blockCommitted: (Int) throws -> Void) throws -> CalibrationRecordSummary {
        let start = DispatchTime.now()
        let (files, architecture) = try ModelCompressor.openForCalibration(model)
        let lines = try Calibration.lines(data, limit: limit)
        let provenance = CalibrationProvenance(
            model: (model.weightsPath as NSString).lastPathComponent, modelSHA256: try SHA256.hexDigest(ofFile: model.weightsPath),
            data: data, dataSHA256: try SHA256.hexDigest(ofFile: data), lines: lines.count)
        let layers = Set(architecture.observationPoints)
        var checkpoint = try folder.map { (folder) throws(ShrinkIOError) in
            try CalibrationCheckpoint(folder: folder, modelSHA256: provenance.modelSHA256, dataSHA256: provenance.dataSHA256, lines: lines.count,
                                      layers: layers)
        }
        let writer = try checkpoint.map { CalibrationStatisticsWriter(path: output, statistics: $0.statistics) } ?? CalibrationStatisticsWriter(path: output)
        if checkpoint != nil {
            try checkpoint!.stream(files: files, architecture: architecture, data: data, lines: lines.count, layers: layers, threads: threads,
                                   blockCommitted: blockCommitted)
        } else {
            try Calibration.streamInputStatistics(files: files, architecture: architecture, dataPath: data, limit: lines.count, layers: layers,
                                                  threads: threads, spillNextTo: output) { block, statistics in
                if !statistics.isEmpty { try writer.append(statistics) }
                try blockCommitted(block)
            }
        }
        try writer.finish(provenance: provenance)
        checkpoint?.remove()
        let written = try CalibrationStatisticsFile(path: output)
        let bytes = (try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int) ?? 0
        let rows = written.layers.values.map(\.rows)
        return CalibrationRecordSummary(output: output, layers: written.layers.count, distinctInputs: Set(written.layers.values.map(\.tensors)).count,
                                        lines: lines.count, rows: (rows.min() ?? 0)...(rows.max() ?? 0), bytes: bytes,
                                        seconds: Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9)
    }

    /// The blocks a checkpoint folder records as finished, nil when it holds no readable progress
    /// record (`record` then starts a new run there, or reports why it cannot).
    public static func finishedBlocks(checkpoint folder: String) -> Int? {
        CalibrationCheckpoint.finishedBlocks(folder: folder)
    }
}
