import Foundation
import Testing
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// Files written by Shrink load in Python's `safetensors` with identical values, and files written
/// by Python's `safetensors` load in Shrink with identical values. Needs `python3` with
/// `safetensors`, `numpy` and `ml_dtypes` (the test command installs them).
@Suite struct PythonCrossCheckTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/safetensors_crosscheck.py").path

    /// Runs the cross-check script and parses what it printed.
    static func runScript(_ mode: String, _ path: String) throws -> [(key: String, value: JSONValue)] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, mode, path]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CrossCheckFailure(message: "python3 \(script) \(mode) failed (pip install safetensors numpy ml_dtypes?): \(errorText)")
        }
        return try data.withUnsafeBytes { try JSONValue.parse($0) }.objectValue ?? []
    }

    struct CrossCheckFailure: Error, CustomStringConvertible { let message: String; var description: String { message } }

    /// Compares one tensor read by Shrink with Python's description of it: bytes, and every element
    /// as float32 (NaN compared as NaN, everything else bit for bit).
    static func compare(_ name: String, _ tensor: DenseTensor, _ python: JSONValue) {
        guard let fields = python.objectValue else { Issue.record("\(name): no description"); return }
        func field(_ key: String) -> JSONValue? { fields.first { $0.key == key }?.value }
        #expect(field("dtype")?.stringValue == tensor.dtype.rawValue, "\(name) dtype")
        #expect(field("shape")?.arrayValue?.compactMap(\.integerValue) == tensor.shape, "\(name) shape")
        let hex = tensor.bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
        #expect(field("bytes")?.stringValue == hex, "\(name) bytes")
        let expected = field("floats")?.arrayValue?.compactMap { $0.integerValue.map { Float(bitPattern: UInt32($0)) } } ?? []
        let actual = tensor.floats()
        #expect(expected.count == actual.count, "\(name) element count")
        let mismatch = firstBitMismatch(actual, expected)
        #expect(mismatch == nil, "\(name): element \(mismatch?.offset ?? -1) is \(mismatch?.actual ?? 0), Python says \(mismatch?.expected ?? 0)")
    }

    @Test func filesWrittenByPythonLoadWithIdenticalValues() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("python.safetensors")
        let description = try Self.runScript("write", path)
        let file = try SafetensorsFile(path: path)
        #expect(file.entries.count == description.count - 1)
        for (name, python) in description {
            if name == "__metadata__" {
                let metadata = Dictionary(uniqueKeysWithValues: (python.objectValue ?? []).map { ($0.key, $0.value.stringValue ?? "") })
                #expect(file.metadata == metadata)
            } else {
                Self.compare(name, try file.tensor(named: name), python)
            }
        }
    }

    @Test func filesWrittenByShrinkLoadInPythonWithIdenticalValues() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("shrink.safetensors")
        var tensors = try SafetensorsRoundTripTests.sampleTensors()
        let everyHalf = (0...UInt16.max).flatMap { withUnsafeBytes(of: $0.littleEndian) { Array($0) } }
        tensors.append(("every.f16", try DenseTensor(dtype: .f16, shape: [256, 256], bytes: everyHalf)))
        tensors.append(("every.bf16", try DenseTensor(dtype: .bf16, shape: [65536], bytes: everyHalf)))
        tensors.append(("every.e4m3", try DenseTensor(dtype: .f8E4M3, shape: [256], bytes: (0...255).map(UInt8.init))))
        tensors.append(("every.e5m2", try DenseTensor(dtype: .f8E5M2, shape: [256], bytes: (0...255).map(UInt8.init))))
        try SafetensorsWriter.write(tensors, metadata: ["format": "pt", "source": "shrink"], to: path)
        let description = try Self.runScript("read", path)
        let byName = Dictionary(uniqueKeysWithValues: description.map { ($0.key, $0.value) })
        let metadata = (byName["__metadata__"]?.objectValue ?? []).map { "\($0.key)=\($0.value.stringValue ?? "?")" }.sorted()
        #expect(metadata == ["format=pt", "source=shrink"])
        for (name, tensor) in tensors {
            guard let python = byName[name] else { Issue.record("Python did not read \(name)"); continue }
            Self.compare(name, tensor, python)
        }
    }
}
