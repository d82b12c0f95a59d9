import Foundation
import ShrinkCore
import ShrinkIO
import ShrinkModels

/// The folder of a resumable calibration run (`ModelCalibration.record` and `ModelCompressor.compress` with a checkpoint):
/// - `hidden-states.f32`: the texts' hidden states between blocks, two generations
///   (`CalibrationResumePoint`);
/// - `statistics.bin`: the finished blocks' statistics (`SpilledCalibrationStatistics`);
/// - `progress.json`: which run the folder belongs to (the model's and the data's SHA-256, the line
///   count and the SHA-256 of the recorded ops' names), the blocks finished, and the statistics' byte count and index. It is replaced
///   atomically after each block, once both other files are on the storage device.
///
/// So a run that stops, however it stops (an error, SIGKILL, a power cut), continues from its last
/// finished block: statistics appended after that block are cut off, and the hidden states'
/// generation entering the next block is complete, as the other generation was the one written.
struct CalibrationCheckpoint {
    static let format = 1
    let folder: String
    /// The run's identity, as `progress.json` records it.
    private let identity: [(key: String, value: JSONValue)]
    let statistics: SpilledCalibrationStatistics
    private(set) var finishedBlocks: Int

    var progressPath: String { folder + "/progress.json" }
    var resumePoint: CalibrationResumePoint { CalibrationResumePoint(hiddenStates: folder + "/hidden-states.f32", firstBlock: finishedBlocks) }

    /// Opens `folder` (created when absent) for the run of `lines` lines of the data with SHA-256
    /// `dataSHA256` through the model with SHA-256 `modelSHA256`, recording the ops `layers`: a
    /// new run when it holds no progress record, else the recorded one continues.
    /// - Throws: `ShrinkIOError.cannotOpen` when the folder cannot be made; `.invalidHeader` when
    ///   its progress record is unreadable or belongs to another run (another model, data, line
    ///   count or set of ops); `.writeFailed` when its files cannot be opened or are shorter than recorded.
    init(folder: String, modelSHA256: String, dataSHA256: String, lines: Int, layers: Set<String>) throws(ShrinkIOError) {
        self.folder = folder
        let names = Array(layers.sorted().joined(separator: "\n").utf8)
        identity = [(key: "format", value: .number(String(Self.format))), (key: "model_sha256", value: .string(modelSHA256)),
                    (key: "data_sha256", value: .string(dataSHA256)), (key: "lines", value: .number(String(lines))),
                    (key: "layers_sha256", value: .string(names.withUnsafeBytes { SHA256.hexDigest($0) }))]
        do { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) } catch {
            throw .cannotOpen(path: folder, reason: "cannot create the checkpoint folder: \(error.localizedDescription)")
        }
        let progressPath = folder + "/progress.json"
        guard let progress = try Self.progress(folder: folder) else {
            finishedBlocks = 0
            statistics = try SpilledCalibrationStatistics(spill: SpillFile(checkpointAt: folder + "/statistics.bin", keeping: 0),
                                                          index: Self.emptyIndex)
            return
        }
        for (key, value) in identity where progress.member(key) != value {
            throw .invalidHeader(path: progressPath, reason: "the checkpoint belongs to another calibration run ('\(key)' differs); remove the folder or choose another")
        }
        guard let blocks = progress.member("finished_blocks")?.integerValue, blocks >= 0,
              let bytes = progress.member("statistics_bytes")?.integerValue, bytes >= 0, let index = progress.member("statistics") else {
            throw .invalidHeader(path: progressPath, reason: "needs 'finished_blocks', 'statistics_bytes' and 'statistics'")
        }
        finishedBlocks = blocks
        statistics = try SpilledCalibrationStatistics(spill: SpillFile(checkpointAt: folder + "/statistics.bin", keeping: bytes), index: index)
    }

    /// The progress record in `folder`, nil when it has none.
    /// - Throws: `ShrinkIOError.invalidHeader` when it is not JSON.
    private static func progress(folder: String) throws(ShrinkIOError) -> JSONValue? {
        let path = folder + "/progress.json"
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        do { return try data.withUnsafeBytes { (bytes) throws(JSONParseError) in try JSONValue.parse(bytes) } } catch {
            throw .invalidHeader(path: path, reason: "not JSON: \(error)")
        }
    }

    /// `finished_blocks` of the progress record in `folder`, nil without a readable one.
    static func finishedBlocks(folder: String) -> Int? {
        (try? progress(folder: folder))??.member("finished_blocks")?.integerValue
    }

    private static let emptyIndex: JSONValue = .object([(key: "ops", value: .object([])), (key: "owners", value: .object([]))])

    /// Records that blocks up to `block` finished (their statistics appended to `statistics`, the
    /// hidden states entering `block + 1` synchronized by the runtime): the statistics go to the
    /// storage device, then the progress record is replaced.
    /// - Throws: `ShrinkIOError.writeFailed` when the file system refuses.
    mutating func commit(block: Int) throws(ShrinkIOError) {
        try statistics.spill.synchronize()
        finishedBlocks = block + 1
        let progress: JSONValue = .object(identity + [
            (key: "finished_blocks", value: .number(String(finishedBlocks))),
            (key: "statistics_bytes", value: .number(String(statistics.spill.size))),
            (key: "statistics", value: statistics.index),
        ])
        let file = try AtomicFile(path: progressPath)
        try file.write(progress.serialized())
        try file.commit()
    }

    /// Removes the folder's files, then the folder if nothing else is in it.
    func remove() { Self.remove(folder: folder) }

    /// Removes a checkpoint folder's files, then the folder if nothing else is in it.
    static func remove(folder: String) {
        for name in ["progress.json", "statistics.bin", "hidden-states.f32"] { try? FileManager.default.removeItem(atPath: folder + "/" + name) }
        if (try? FileManager.default.contentsOfDirectory(atPath: folder))?.isEmpty == true { try? FileManager.default.removeItem(atPath: folder) }
    }

    /// Streams the statistics of `layers` over `lines` lines of `data` through `files` block by
    /// block, resuming at the checkpoint's first unfinished block: each block's statistics are
    /// appended to `statistics`, committed, then passed to `blockCommitted`. A checkpoint that had
    /// not finished a block when the stream failed is removed.
    /// - Throws: the stream's errors, and `commit`'s.
    mutating func stream(files: ModelFiles, architecture: any ModelArchitecture, data: String, lines: Int, layers: Set<String>, threads: Int,
                         blockCommitted: (Int) throws -> Void) throws {
        do {
            try Calibration.streamInputStatistics(files: files, architecture: architecture, dataPath: data, limit: lines, layers: layers,
                                                  threads: threads, resume: resumePoint) { block, recorded in
                if !recorded.isEmpty { try statistics.append(recorded) }
                try commit(block: block)
                try blockCommitted(block)
            }
        } catch {
            // A checkpoint without a finished block holds nothing to continue from.
            if finishedBlocks == 0 { remove() }
            throw error
        }
    }
}
