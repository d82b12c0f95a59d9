import Foundation
import ShrinkCore

/// A fresh folder under the system's temporary folder, removed when the value is released.
public final class TemporaryDirectory {
    /// The folder's path (no trailing slash).
    public let path: String

    public init() {
        path = NSTemporaryDirectory() + "shrink-tests-" + UUID().uuidString
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the folder.
    public func file(_ name: String) -> String { path + "/" + name }

    /// The names of the entries in the folder, sorted.
    public var contents: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The library's reproducible generator, under the name the tests use.
public typealias SeededGenerator = SplitMix64

/// Where the test command put Shrink's models, for tests that need the real ones.
public enum TestModels {
    /// The cache folder (`$SHRINK_MODELS_DIR` or `~/.cache/shrink/models`).
    public static var cacheDirectory: String {
        if let custom = ProcessInfo.processInfo.environment["SHRINK_MODELS_DIR"], !custom.isEmpty { return custom }
        return NSHomeDirectory() + "/.cache/shrink/models"
    }

    /// The all-MiniLM-L6-v2 folder; fetched by `scripts/fetch-models.py`.
    public static var miniLM: String { cacheDirectory + "/all-MiniLM-L6-v2" }
}

/// The first element where two float arrays differ bit for bit (NaN matches any NaN), or nil.
public func firstBitMismatch(_ actual: [Float], _ expected: [Float]) -> (offset: Int, actual: Float, expected: Float)? {
    guard let found = zip(actual, expected).enumerated().first(where: { _, pair in
        pair.0.isNaN != pair.1.isNaN || (!pair.0.isNaN && pair.0.bitPattern != pair.1.bitPattern)
    }) else { return nil }
    return (found.offset, found.element.0, found.element.1)
}

/// Runs `python3 <script> <arguments…>`; returns the exit status and what it wrote to standard
/// error and standard output.
public func runPythonScript(_ script: String, _ arguments: [String]) throws -> (status: Int32, errors: String, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", script] + arguments
    let output = Pipe(), errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    // Both pipes are drained at once, so a chatty script cannot block on a full one.
    nonisolated(unsafe) var outputData = Data()
    let finished = DispatchSemaphore(value: 0)
    Thread {
        outputData = output.fileHandleForReading.readDataToEndOfFile()
        finished.signal()
    }.start()
    let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    finished.wait()
    process.waitUntilExit()
    return (process.terminationStatus, text, String(decoding: outputData, as: UTF8.self))
}
