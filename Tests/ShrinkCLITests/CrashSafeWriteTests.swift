import Foundation
import Testing
import ShrinkTestSupport

/// `shrink compress` killed (SIGKILL) at points spread over its run leaves the destination as it
/// was, absent or the complete previous file, never a part of the new one: files are written next
/// to the destination, unnamed until complete (`O_TMPFILE`), and renamed over it only then
/// (`AtomicFile`), so no temporary file outlives a kill either.
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
}
