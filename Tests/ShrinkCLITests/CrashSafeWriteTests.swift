import Foundation
import Shrink
import Testing
import ShrinkTestSupport

/// `shrink compress` killed (SIGKILL) at points spread over its run leaves the destination as it
/// was, absent or the complete previous file, never a part of the new one: files are written next
/// to the destination, unnamed until complete (`O_TMPFILE`), and renamed over it only then
/// (`AtomicFile`), so no temporary file outlives a kill either. A disk that fills up mid-write is
/// an error naming the destination, with the same guarantee.
@Suite struct CrashSafeWriteTests {
    /// The `shrink` executable the build put next to the running test binary.
    static var executable: String {
        let running = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var folder = URL(fileURLWithPath: running).deletingLastPathComponent()
        if folder.pathExtension == "xctest" || folder.lastPathComponent == "MacOS" { folder = folder.deletingLastPathComponent() }
        return folder.appendingPathComponent("shrink").path
    }

    static func compress(_ output: String, recipe: String, killAfter seconds: Double?) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["compress", "--model", "minilm", "--recipe", recipe, "--output", output, "--threads", "2"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        if let seconds {
            Thread.sleep(forTimeInterval: seconds)
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    @Test func aKilledCompressionLeavesTheDestinationWhole() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable), "no shrink executable next to the tests")
        let recipes = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("recipes")
        let folder = TemporaryDirectory()
        let output = folder.file("model.safetensors")
        // Killed before any complete file: nothing at the destination.
        func leftovers() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0 != "model.safetensors" && $0 != "complete.safetensors" }
        }
        _ = try Self.compress(output, recipe: recipes.appendingPathComponent("minilm-int8-channel.json").path, killAfter: 0.05)
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(try leftovers() == [])
        #expect(try Self.compress(output, recipe: recipes.appendingPathComponent("minilm-int8-channel.json").path, killAfter: nil) == 0)
        let previous = try Data(contentsOf: URL(fileURLWithPath: output))
        // Another recipe over it, killed at points from loading to writing: the previous file or the new one, whole.
        let other = recipes.appendingPathComponent("minilm-int4-block32.json").path
        var sawPrevious = false
        for delay in [0.02, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8] {
            _ = try Self.compress(output, recipe: other, killAfter: delay)
            let now = try Data(contentsOf: URL(fileURLWithPath: output))
            #expect(try leftovers() == [], "killed after \(delay) s")
            if now == previous {
                sawPrevious = true
            } else {
                let complete = folder.file("complete.safetensors")
                if !FileManager.default.fileExists(atPath: complete) {
                    #expect(try Self.compress(complete, recipe: other, killAfter: nil) == 0)
                }
                #expect(now == (try Data(contentsOf: URL(fileURLWithPath: complete))), "killed after \(delay) s: a partial file")
                break
            }
        }
        #expect(sawPrevious)
    }

    /// `shrink compress` whose files may not grow past `bytes` (`ulimit -f`, `SIGXFSZ` ignored, so
    /// a write past it fails as on a full disk): its exit status and standard error.
    static func compress(_ output: String, model: String = "minilm", recipe: String, fileSizeLimit bytes: Int) throws -> (status: Int32, error: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", "trap '' XFSZ; ulimit -f \(bytes / 1024); exec \"$0\" \"$@\"", executable,
                             "compress", "--model", model, "--recipe", recipe, "--output", output, "--threads", "2"]
        let error = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = error
        try process.run()
        let message = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, message)
    }

    /// Writes refused part way (the spill file's or the output's, at limits from 1 MB to just under
    /// the output's size): exit status 2, one error naming the output, nothing at the destination,
    /// no temporary file.
    @Test func aFullDiskIsAnErrorThatLeavesNothing() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable), "no shrink executable next to the tests")
        let recipe = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("recipes/minilm-int4-block32.json").path
        let folder = TemporaryDirectory()
        let complete = folder.file("complete.safetensors")
        #expect(try Self.compress(complete, recipe: recipe, killAfter: nil) == 0)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: complete)[.size] as? Int)
        try FileManager.default.removeItem(atPath: complete)
        let output = folder.file("model.safetensors")
        for limit in [1 << 20, size / 2, size - 4096] {
            let (status, error) = try Self.compress(output, recipe: recipe, fileSizeLimit: limit)
            #expect(status == 2, "limit \(limit): \(error)")
            #expect(error.contains(output) && error.contains("File too large"), "limit \(limit): \(error)")
            #expect(folder.contents == [], "limit \(limit)")
        }
    }

    /// The same while a decoder calibrates (SmolLM2, GPTQ on 4 lines, about 500 tokens): refused
    /// in the hidden states' spill (64 KB, under their 1.2 MB), in block 0's statistics (16 MB,
    /// under its 27 MB) and a few blocks in (100 MB).
    @Test func aFullDiskDuringADecodersCalibrationLeavesNothing() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable), "no shrink executable next to the tests")
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let folder = TemporaryDirectory()
        let recipe = folder.file("gptq.json")
        try #"{"op_type": {"linear": {"quantize": {"bits": 4, "granularity": "per_block", "block_size": 32, "method": "gptq"}}, "embedding": null}, "calibration": {"data": "\#(root.path)/data/calibration/smollm2-calibration.txt", "limit": 4}}"#
            .write(toFile: recipe, atomically: true, encoding: .utf8)
        let output = folder.file("model.safetensors")
        for limit in [64 << 10, 16 << 20, 100 << 20] {
            let (status, error) = try Self.compress(output, model: "smollm2", recipe: recipe, fileSizeLimit: limit)
            #expect(status == 2, "limit \(limit): \(error)")
            #expect(error.contains(output) && error.contains("File too large"), "limit \(limit): \(error)")
            #expect(folder.contents == ["gptq.json"], "limit \(limit)")
        }
    }

    /// `shrink calibrate --checkpoint` killed twice mid-block (SmolLM2, 2 lines, 30 blocks) and run
    /// again: the bytes of an uninterrupted run, and no checkpoint left.
    @Test func aKilledCheckpointedCalibrationContinuesToTheSameBytes() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.executable), "no shrink executable next to the tests")
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let data = root.appendingPathComponent("data/calibration/smollm2-calibration.txt").path
        let folder = TemporaryDirectory()
        let checkpoint = folder.file("checkpoint")
        func calibrate(_ output: String, checkpointed: Bool, killAtBlock block: Int?) throws -> Int32 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Self.executable)
            process.arguments = ["calibrate", "--model", "smollm2", "--data", data, "--limit", "2", "--output", output, "--threads", "2"]
                + (checkpointed ? ["--checkpoint", checkpoint] : [])
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            if let block {
                while process.isRunning, (ModelCalibration.finishedBlocks(checkpoint: checkpoint) ?? 0) < block { Thread.sleep(forTimeInterval: 0.01) }
                kill(process.processIdentifier, SIGKILL)
            }
            process.waitUntilExit()
            return process.terminationStatus
        }
        let (reference, output) = (folder.file("reference.safetensors"), folder.file("statistics.safetensors"))
        #expect(try calibrate(reference, checkpointed: false, killAtBlock: nil) == 0)
        _ = try calibrate(output, checkpointed: true, killAtBlock: 4)
        let first = try #require(ModelCalibration.finishedBlocks(checkpoint: checkpoint))
        _ = try calibrate(output, checkpointed: true, killAtBlock: first + 9)
        #expect(try #require(ModelCalibration.finishedBlocks(checkpoint: checkpoint)) > first)
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(try calibrate(output, checkpointed: true, killAtBlock: nil) == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == Data(contentsOf: URL(fileURLWithPath: reference)))
        #expect(folder.contents == ["reference.safetensors", "statistics.safetensors"])
    }
}
