#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import ShrinkCore

/// A scratch file for bytes that should not stay in memory: created next to a destination (on the
/// same file system, which has room for what is written there) without a lasting name, so it
/// disappears with its descriptor whatever ends the process. On Linux it is never named
/// (`O_TMPFILE`); elsewhere it is `path.spill-XXXXXX`, unlinked at once.
///
/// Appends reserve their byte range under a lock and write outside it, so threads append at once.
/// Written bytes live in the page cache, not in the process: a consumer reads them back (`read`) or
/// maps the file (`map`) and releases the pages it has used (`MemoryMappedFile.releasePages`).
public final class SpillFile: @unchecked Sendable {
    /// The destination the spill file lies next to, for errors.
    public let path: String
    private let descriptor: Int32
    private let lock = NSLock()
    private var reserved = 0

    /// Creates the spill file in `path`'s folder.
    /// - Throws: `ShrinkIOError.writeFailed` when the folder does not take new files.
    public init(nextTo path: String) throws(ShrinkIOError) {
        self.path = path
        #if os(Linux)
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? "."
        let unnamed = open(folder, AtomicFile.unnamedTemporaryFlags | O_RDWR | O_CLOEXEC, 0o600)
        if unnamed >= 0 {
            descriptor = unnamed
            return
        }
        #endif
        var template = Array("\(path).spill-XXXXXX".utf8CString)
        let named = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard named >= 0 else {
            throw .writeFailed(path: path, reason: "cannot create a spill file: \(String(cString: strerror(errno)))")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        descriptor = named
    }

    /// Opens the named file `path` (created when absent) as a spill file that outlives the process,
    /// cut to its first `keeping` bytes (which then count as appended): a checkpoint's storage,
    /// removed by its owner. Its bytes last once `synchronize()` returns.
    /// - Throws: `ShrinkIOError.writeFailed` when the file cannot be opened, or is shorter than `keeping`.
    public init(checkpointAt path: String, keeping: Int) throws(ShrinkIOError) {
        self.path = path
        let opened = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard opened >= 0 else { throw .writeFailed(path: path, reason: "cannot open the checkpoint file: \(String(cString: strerror(errno)))") }
        var status = stat()
        guard fstat(opened, &status) == 0, Int(status.st_size) >= keeping, ftruncate(opened, off_t(keeping)) == 0 else {
            close(opened)
            throw .writeFailed(path: path, reason: "the checkpoint file holds fewer than the \(keeping) bytes its progress record lists")
        }
        descriptor = opened
        reserved = keeping
    }

    /// Waits until every byte written so far is on the storage device (`fsync`).
    /// - Throws: `ShrinkIOError.writeFailed` when the file system reports an error.
    public func synchronize() throws(ShrinkIOError) {
        guard fsync(descriptor) == 0 else { throw .writeFailed(path: path, reason: "spill file: \(String(cString: strerror(errno)))") }
    }

    /// Bytes reserved by appends so far (padding included): the offset the next unaligned append gets.
    public var size: Int { lock.withLock { reserved } }

    /// Writes `bytes` after everything appended before, at the next multiple of `alignment`, and
    /// returns their offset. Safe to call from several threads.
    /// - Throws: `ShrinkIOError.writeFailed` when the file system refuses (the disk is full).
    @discardableResult
    public func append(_ bytes: UnsafeRawBufferPointer, alignment: Int = 1) throws(ShrinkIOError) -> Int {
        let offset = reserve(bytes.count, alignment: alignment)
        try write(bytes, at: offset)
        return offset
    }

    /// Reserves `count` bytes after everything appended or reserved before, at the next multiple
    /// of `alignment`, and returns their offset; they read back only once written (`write(_:at:)`).
    /// Safe to call from several threads.
    public func reserve(_ count: Int, alignment: Int = 1) -> Int {
        lock.withLock {
            let start = (reserved + alignment - 1) / alignment * alignment
            reserved = start + count
            return start
        }
    }

    /// Writes `bytes` at `offset`, over what lies there (bytes an append reserved, to be rewritten).
    /// - Throws: `ShrinkIOError.writeFailed` when the file system refuses (the disk is full).
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(ShrinkIOError) {
        var written = 0
        while written < bytes.count {
            let result = pwrite(descriptor, bytes.baseAddress! + written, bytes.count - written, off_t(offset + written))
            if result < 0 {
                if errno == EINTR { continue }
                throw .writeFailed(path: path, reason: "spill file: \(String(cString: strerror(errno)))")
            }
            written += result
        }
    }

    /// `count` bytes from `offset`.
    /// - Throws: `ShrinkIOError.writeFailed` when they cannot be read back.
    public func read(at offset: Int, count: Int) throws(ShrinkIOError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        try bytes.withUnsafeMutableBytes { buffer in Result { () throws(ShrinkIOError) in try read(at: offset, into: buffer) } }.get()
        return bytes
    }

    /// Fills `buffer` with the bytes from `offset`.
    /// - Throws: `ShrinkIOError.writeFailed` when they cannot be read back.
    public func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ShrinkIOError) {
        var done = 0
        while done < buffer.count {
            let result = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else { throw .writeFailed(path: path, reason: "spill file: cannot read back \(buffer.count) bytes at \(offset)") }
            done += result
        }
    }

    /// The file as written so far, mapped read-only (later appends are not visible in the mapping).
    /// - Throws: `ShrinkIOError.writeFailed` when it cannot be mapped.
    public func map() throws(ShrinkIOError) -> MemoryMappedFile {
        do { return try MemoryMappedFile(descriptor: descriptor, path: path + " (spill file)") } catch {
            throw .writeFailed(path: path, reason: "\(error)")
        }
    }

    deinit { close(descriptor) }
}

extension SpillFile {
    /// Where a spilled tensor's bytes lie, and what they are.
    public struct Region: Sendable {
        public let offset: Int
        public let dtype: DType
        public let shape: [Int]
    }

    /// Appends `tensor`'s bytes at a 64-byte aligned offset.
    public func append(_ tensor: DenseTensor) throws(ShrinkIOError) -> Region {
        Region(offset: try append(tensor.bytes, alignment: 64), dtype: tensor.dtype, shape: tensor.shape)
    }

    /// The tensor `region` describes, a view of `mapping` (this file's `map()`, taken after the
    /// append): no bytes are copied or read until used.
    /// - Throws: `ShrinkIOError.writeFailed` when the region lies outside the mapping.
    public func tensor(_ region: Region, in mapping: MemoryMappedFile) throws(ShrinkIOError) -> DenseTensor {
        guard let count = Shape.byteCount(region.shape, dtype: region.dtype), region.offset >= 0,
              region.offset + count <= mapping.bytes.count else {
            throw .writeFailed(path: path, reason: "spill file: a \(region.dtype.rawValue) \(region.shape) tensor at \(region.offset) lies outside its \(mapping.bytes.count) bytes")
        }
        do {
            return try DenseTensor(dtype: region.dtype, shape: region.shape,
                                   storage: TensorStorage(mappedFile: mapping, range: region.offset..<(region.offset + count)))
        } catch {
            throw .writeFailed(path: path, reason: "spill file: \(error)")
        }
    }
}

/// An encoded tensor whose parts were moved to a `SpillFile`: its description, and where each part lies.
public struct SpilledEncodedTensor: Sendable {
    public let name: String
    public let shape: [Int]
    public let sourceDType: DType
    public let encoding: WeightEncoding
    public let parts: [String: SpillFile.Region]

    /// Appends `tensor`'s parts to `spill` (in part-name order); the caller may then drop `tensor`.
    public init(_ tensor: EncodedTensor, into spill: SpillFile) throws(ShrinkIOError) {
        (name, shape, sourceDType, encoding) = (tensor.name, tensor.shape, tensor.sourceDType, tensor.encoding)
        var parts: [String: SpillFile.Region] = [:]
        for (part, data) in tensor.parts.sorted(by: { $0.key < $1.key }) { parts[part] = try spill.append(data) }
        self.parts = parts
    }

    /// The encoded tensor again, its parts views of `mapping` (`spill.map()` after the appends).
    /// - Throws: `ShrinkIOError.writeFailed` when a part lies outside the mapping.
    public func tensor(in spill: SpillFile, mapping: MemoryMappedFile) throws(ShrinkIOError) -> EncodedTensor {
        var views: [String: DenseTensor] = [:]
        for (part, region) in parts { views[part] = try spill.tensor(region, in: mapping) }
        do {
            return try EncodedTensor(name: name, shape: shape, sourceDType: sourceDType, encoding: encoding, parts: views)
        } catch {
            throw .writeFailed(path: spill.path, reason: "spill file: tensor '\(name)': \(error)")
        }
    }
}
