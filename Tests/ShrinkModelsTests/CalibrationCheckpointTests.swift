import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkIO
import ShrinkModels
import ShrinkTestSupport

/// A calibration run with a checkpoint folder continues after an interruption from its last
/// finished block and writes the bytes an uninterrupted run writes; the folder goes once the
/// file is written. (`CrashSafeWriteTests` kills the CLI mid-block.)
@Suite struct CalibrationCheckpointTests {
    struct Stop: Error {}

    static let fixture = Qwen3CrossCheckTests.folder.appendingPathComponent("model.gguf").path

    /// Calibration text: the fixture's text, a short line and a long one.
    static func data(in folder: TemporaryDirectory) throws -> String {
        let text = try String(contentsOf: Qwen3CrossCheckTests.folder.appendingPathComponent("text.txt"), encoding: .utf8)
        let path = folder.file("data.txt")
        try [text, "Short.", String(repeating: text + " ", count: 6)].joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func anInterruptedRunContinuesToTheSameBytes() throws {
        let folder = TemporaryDirectory()
        let (model, data) = (try ModelLocation.resolve(Self.fixture), try Self.data(in: folder))
        let reference = folder.file("reference.safetensors")
        _ = try ModelCalibration.record(model: model, data: data, limit: 3, output: reference, threads: 2)
        let (output, checkpoint) = (folder.file("statistics.safetensors"), folder.file("checkpoint"))
        // Stopped once block 0 is committed: no output, the checkpoint records one block.
        #expect(throws: Stop.self) {
            try ModelCalibration.record(model: model, data: data, limit: 3, output: output, checkpoint: checkpoint, threads: 2) {
                if $0 == 0 { throw Stop() }
            }
        }
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(ModelCalibration.finishedBlocks(checkpoint: checkpoint) == 1)
        // Another run (another line count) refuses the folder and leaves it as it was.
        #expect(throws: ShrinkIOError.self) {
            try ModelCalibration.record(model: model, data: data, limit: 2, output: output, checkpoint: checkpoint, threads: 2)
        }
        #expect(ModelCalibration.finishedBlocks(checkpoint: checkpoint) == 1)
        // Continued on one thread, block 0 not run again: the reference's bytes, the folder gone.
        var blocks: [Int] = []
        _ = try ModelCalibration.record(model: model, data: data, limit: 3, output: output, checkpoint: checkpoint, threads: 1) { blocks.append($0) }
        #expect(blocks == [1])
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == Data(contentsOf: URL(fileURLWithPath: reference)))
        #expect(!FileManager.default.fileExists(atPath: checkpoint))
        // A checkpointed run that is never interrupted writes the same bytes too.
        let straight = folder.file("straight.safetensors")
        _ = try ModelCalibration.record(model: model, data: data, limit: 3, output: straight, checkpoint: folder.file("unused"), threads: 2)
        #expect(try Data(contentsOf: URL(fileURLWithPath: straight)) == Data(contentsOf: URL(fileURLWithPath: reference)))
        #expect(folder.contents == ["data.txt", "reference.safetensors", "statistics.safetensors", "straight.safetensors"])
    }

    /// A checkpoint whose files lost bytes its progress record lists (a truncated statistics file,
    /// a missing hidden-states file) is an error naming that file, and nothing is written.
    @Test func truncatedCheckpointFilesAreRefused() throws {
        let folder = TemporaryDirectory()
        let (model, data) = (try ModelLocation.resolve(Self.fixture), try Self.data(in: folder))
        let (output, checkpoint) = (folder.file("statistics.safetensors"), folder.file("checkpoint"))
        for file in ["statistics.bin", "hidden-states.f32"] {
            #expect(throws: Stop.self) {
                try ModelCalibration.record(model: model, data: data, limit: 3, output: output, checkpoint: checkpoint, threads: 1) { _ in throw Stop() }
            }
            let path = checkpoint + "/" + file
            if file == "statistics.bin" { #expect(truncate(path, 100) == 0) } else { try FileManager.default.removeItem(atPath: path) }
            #expect {
                try ModelCalibration.record(model: model, data: data, limit: 3, output: output, checkpoint: checkpoint, threads: 1)
            } throws: { error in
                guard case ShrinkIOError.writeFailed(let failed, _) = error else { return false }
                return failed == path
            }
            #expect(!FileManager.default.fileExists(atPath: output))
            try FileManager.default.removeItem(atPath: checkpoint)
        }
    }

    /// A calibrated compression with a checkpoint writes the bytes of one without, and removes
    /// the folder (`CrashSafeWriteTests` kills and continues the CLI's calibration).
    @Test func aCheckpointedCompressionWritesTheSameBytes() throws {
        let folder = TemporaryDirectory()
        let data = try Self.data(in: folder)
        let recipePath = folder.file("gptq.json")
        try #"{"op_type": {"linear": {"quantize": {"bits": 4, "granularity": "per_block", "block_size": 32, "method": "gptq"}}, "embedding": null}, "calibration": {"data": "\#(data)", "limit": 3}}"#
            .write(toFile: recipePath, atomically: true, encoding: .utf8)
        let (model, recipe) = (try ModelLocation.resolve(Self.fixture), try Recipe.load(path: recipePath))
        let (reference, output, checkpoint) = (folder.file("reference.safetensors"), folder.file("model.safetensors"), folder.file("checkpoint"))
        _ = try ModelCompressor.compress(model: model, recipe: recipe, output: reference, threads: 2)
        _ = try ModelCompressor.compress(model: model, recipe: recipe, output: output, threads: 2, checkpoint: checkpoint)
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == Data(contentsOf: URL(fileURLWithPath: reference)))
        #expect(folder.contents == ["data.txt", "gptq.json", "model.safetensors", "reference.safetensors"])
    }

    /// An unreadable progress record is an error naming it; an encoder cannot resume, and its
    /// run leaves no folder behind.
    @Test func badCheckpointsAndEncodersAreRefused() throws {
        let folder = TemporaryDirectory()
        let data = try Self.data(in: folder)
        let checkpoint = folder.file("checkpoint")
        try FileManager.default.createDirectory(atPath: checkpoint, withIntermediateDirectories: true)
        try "{\"format\": 1, ".write(toFile: checkpoint + "/progress.json", atomically: true, encoding: .utf8)
        #expect {
            try ModelCalibration.record(model: try ModelLocation.resolve(Self.fixture), data: data, limit: 3, output: folder.file("s.safetensors"),
                                        checkpoint: checkpoint, threads: 1)
        } throws: { error in
            guard case ShrinkIOError.invalidHeader(let path, _) = error else { return false }
            return path == checkpoint + "/progress.json"
        }
        let encoderCheckpoint = folder.file("encoder")
        #expect(throws: ModelError.self) {
            try ModelCalibration.record(model: try ModelLocation.resolve(TestModels.miniLM), data: data, limit: 3, output: folder.file("e.safetensors"),
                                        checkpoint: encoderCheckpoint, threads: 1)
        }
        #expect(!FileManager.default.fileExists(atPath: encoderCheckpoint))
        #expect(!FileManager.default.fileExists(atPath: folder.file("e.safetensors")))
    }
}
