import CAllocationCounter
import Foundation
import Testing
import ShrinkIO
import ShrinkTestSupport

/// Files whose headers claim sizes far beyond their bytes (tensor shapes of 2^62 elements, counts
/// of 2^60 entries, string and header lengths beyond the file) are refused with exit status 2 by
/// `shrink inspect` and `shrink decompress` while the process stays small: the readers check every
/// size against the bytes that back it before allocating. Peak memory is the child's `ru_maxrss`
/// from `wait4` (`run`), so other tests running at the same time do not count.
@Suite struct HostileSizeTests {
    /// Peak resident memory allowed to a process refusing a hostile file of a few kilobytes; a
    /// `shrink inspect` of a valid small file peaks near 30 MB.
    static let memoryBound = 150 << 20

    /// Runs `shrink` with `arguments`; its exit status and peak resident bytes. It runs as the
    /// child of a small Python process that reports its `wait4` usage: a child spawned straight
    /// from this test process would count this process's own peak (Linux records the replaced
    /// address space's high-water mark at `exec`, and a spawned child starts from the parent's).
    static func run(_ arguments: [String]) throws -> (status: Int32, peakBytes: Int) {
        let measure = """
            import os, subprocess, sys
            child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)
            print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)
            """
        let result = try runPythonScript("-c", [measure, CrashSafeWriteTests.executable] + arguments)
        let fields = result.output.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        try #require(result.status == 0 && fields.count == 2, "cannot measure shrink \(arguments): \(result.errors)")
        return (Int32(fields[0]), fields[1])
    }

    static func safetensors(header: String, data: Int = 0, declaredHeaderLength: UInt64? = nil) -> [UInt8] {
        var bytes: [UInt8] = []
        withUnsafeBytes(of: (declaredHeaderLength ?? UInt64(header.utf8.count)).littleEndian) { bytes += $0 }
        return bytes + Array(header.utf8) + [UInt8](repeating: 0, count: data)
    }

    /// Hostile files, each named after what it claims.
    static func hostileFiles(in folder: TemporaryDirectory) throws -> [String] {
        var files: [(String, [UInt8])] = []
        files.append(("header-length-2^48.safetensors", safetensors(header: "{}", declaredHeaderLength: 1 << 48)))
        files.append(("shape-2^62.safetensors", safetensors(header: #"{"w":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,16]}}"#, data: 16)))
        files.append(("shape-overflow.safetensors", safetensors(header: #"{"w":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904,16],"data_offsets":[0,16]}}"#, data: 16)))
        files.append(("offsets-2^62.safetensors", safetensors(header: #"{"w":{"dtype":"U8","shape":[4611686018427387904],"data_offsets":[0,4611686018427387904]}}"#, data: 16)))
        let container = #"{"__metadata__":{"shrink.format":"1","shrink.tensors":"{\"w\":{\"shape\":[4294967296,4294967296],\"dtype\":\"F32\",\"encoding\":{\"kind\":\"affine\",\"bits\":4,\"signed\":false,\"symmetric\":true,\"granularity\":\"per_tensor\",\"scale_dtype\":\"F32\"},\"parts\":[\"codes\",\"scales\"]}}"},"w#codes":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"w#scales":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}"#
        files.append(("container-shape-2^64.safetensors", safetensors(header: container, data: 12)))

        files.append(("tensor-count-max.gguf", GGUFBuilder.header(tensors: .max, metadata: 0).bytes))
        files.append(("metadata-count-2^60.gguf", GGUFBuilder.header(tensors: 0, metadata: 1 << 60).bytes))
        var array = GGUFBuilder.header(tensors: 0, metadata: 1)
        array.string("tokenizer.ggml.tokens")
        array.u32(9)
        array.u32(8)
        array.u64(1 << 62)
        files.append(("array-count-2^62.gguf", array.bytes))
        var string = GGUFBuilder.header(tensors: 0, metadata: 1)
        string.string("general.name")
        string.u32(8)
        string.u64(1 << 62)
        files.append(("string-length-2^62.gguf", string.bytes))
        var dimensions = GGUFBuilder.header(tensors: 1, metadata: 0)
        dimensions.tensorInfo("w", dimensions: [1 << 40, 1 << 40], type: 0, offset: 0)
        dimensions.data(64)
        files.append(("dimensions-2^80.gguf", dimensions.bytes))
        var dimensionCount = GGUFBuilder.header(tensors: 1, metadata: 0)
        dimensionCount.string("w")
        dimensionCount.u32(.max)
        files.append(("dimension-count-max.gguf", dimensionCount.bytes))

        return try files.map { name, bytes in
            let path = folder.file(name)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    @Test func hostileSizesAreRefusedInBoundedMemory() throws {
        try #require(FileManager.default.isExecutableFile(atPath: CrashSafeWriteTests.executable), "no shrink executable next to the tests")
        let folder = TemporaryDirectory()
        for path in try Self.hostileFiles(in: folder) {
            let name = URL(fileURLWithPath: path).lastPathComponent
            for arguments in [["inspect", path], ["decompress", "--input", path, "--output", folder.file("out.safetensors")]] {
                let (status, peak) = try Self.run(arguments)
                #expect(status == 2, "shrink \(arguments[0]) \(name): exit status \(status)")
                #expect(peak < Self.memoryBound, "shrink \(arguments[0]) \(name): peak \(peak >> 20) MB")
            }
            #expect(!FileManager.default.fileExists(atPath: folder.file("out.safetensors")), "\(name): an output was written")
        }
    }

    /// A legitimate but large metadata array (8 Mi one-byte elements in an 8 MiB file) costs at most
    /// `GGUFValue`'s 24 bytes per element, as `GGUFValue` documents: no allocation per element.
    @Test func largeMetadataArraysCostMemoryInProportionToTheFile() throws {
        try #require(FileManager.default.isExecutableFile(atPath: CrashSafeWriteTests.executable), "no shrink executable next to the tests")
        let folder = TemporaryDirectory()
        let count = 8 << 20
        var array = GGUFBuilder.header(tensors: 0, metadata: 1)
        array.string("tokenizer.ggml.token_type")
        array.u32(9)
        array.u32(0)
        array.u64(UInt64(count))
        array.bytes += [UInt8](repeating: 1, count: count)
        let path = array.write(folder)
        let baseline = try Self.run(["inspect", GGUFBuilder.valid().write(folder, "small.gguf")])
        let (status, peak) = try Self.run(["inspect", path])
        #expect(baseline.status == 0 && status == 0)
        #expect(MemoryLayout<GGUFValue>.stride <= 24)
        // Under AddressSanitizer freed blocks wait in its quarantine (256 MB), so the bound holds only unsanitized.
        #expect(shrink_sanitized_build() == 1 || peak - baseline.peakBytes < 28 * count, "peak \(peak >> 20) MB against \(baseline.peakBytes >> 20) MB for a small file")
    }
}
