#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a file so that readers see either the old file or the complete new one, never a part:
/// the bytes go to a temporary file in the same folder, which is flushed to disk and then renamed
/// over `path`. When writing fails or `commit` is never called, the temporary file is removed.
public final class AtomicFile {
    /// The destination path.
    public let path: String
    private let temporaryPath: String
    private var descriptor: Int32
    private var committed = false

    /// Creates the temporary file next to `path`.
    public init(path: String) throws(ShrinkIOError) {
        self.path = path
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let base = slash.map { String(path[path.index(after: $0)...]) } ?? path
        var template = Array("\(folder).\(base).tmp-XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw .writeFailed(path: path, reason: "cannot create a temporary file: \(String(cString: strerror(errno)))")
        }
        self.descriptor = descriptor
        self.temporaryPath = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        fchmod(descriptor, 0o644)
    }

    /// Appends `bytes` to the temporary file.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(ShrinkIOError) {
        var written = 0
        while written < bytes.count {
            let result = Glibc.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
            if result < 0 {
                if errno == EINTR { continue }
                throw .writeFailed(path: path, reason: String(cString: strerror(errno)))
            }
            written += result
        }
    }

    /// Appends the UTF-8 bytes of `text`.
    public func write(_ text: String) throws(ShrinkIOError) {
        var copy = text
        try copy.withUTF8 { buffer in
            Result { () throws(ShrinkIOError) in try write(UnsafeRawBufferPointer(buffer)) }
        }.get()
    }

    /// Flushes the temporary file to disk and renames it to `path`.
    public func commit() throws(ShrinkIOError) {
        guard fsync(descriptor) == 0 else { throw .writeFailed(path: path, reason: String(cString: strerror(errno))) }
        close(descriptor)
        descriptor = -1
        guard rename(temporaryPath, path) == 0 else {
            throw .writeFailed(path: path, reason: String(cString: strerror(errno)))
        }
        committed = true
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
        if !committed { unlink(temporaryPath) }
    }
}

/// A scratch file for bytes that do not fit in memory comfortably: created next to a destination
/// (`path.spill-XXXXXX`, on the same file system) and unlinked at once, so that it disappears with
/// its descriptor, whatever ends the process. Appends at the end; reads anywhere.
final class SpillFile {
    let path: String
    private let descriptor: Int32
    /// Bytes appended so far.
    private(set) var size = 0

    init(nextTo path: String) throws(ShrinkIOError) {
        self.path = path
        var template = Array("\(path).spill-XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw .writeFailed(path: path, reason: "cannot create a spill file: \(String(cString: strerror(errno)))")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        self.descriptor = descriptor
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws(ShrinkIOError) {
        var written = 0
        while written < bytes.count {
            let result = pwrite(descriptor, bytes.baseAddress! + written, bytes.count - written, off_t(size + written))
            if result < 0 {
                if errno == EINTR { continue }
                throw .writeFailed(path: path, reason: "spill file: \(String(cString: strerror(errno)))")
            }
            written += result
        }
        size += bytes.count
    }

    /// `count` bytes from `offset`.
    func read(at offset: Int, count: Int) throws(ShrinkIOError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let result = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else { throw .writeFailed(path: path, reason: "spill file: cannot read back \(count) bytes at \(offset)") }
            done += result
        }
        return bytes
    }

    deinit { close(descriptor) }
}
