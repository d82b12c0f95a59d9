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

/// A small deterministic generator (SplitMix64) so tests are reproducible from a seed.
public struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` floats drawn uniformly from `range`.
    public mutating func floats(_ count: Int, in range: ClosedRange<Float> = -1...1) -> [Float] {
        (0..<count).map { _ in Float.random(in: range, using: &self) }
    }
}

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
