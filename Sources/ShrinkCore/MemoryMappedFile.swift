#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A whole file mapped read-only into memory. Pages are read from disk only when touched, so
/// opening a large model costs no I/O beyond what is later used. The mapping lives as long as
/// this object (tensors that view it keep it alive).
public final class MemoryMappedFile: @unchecked Sendable {
    /// The path the file was opened from.
    public let path: String
    /// The file's bytes; empty for an empty file.
    public let bytes: UnsafeRawBufferPointer

    /// Maps the file at `path`.
    /// - Throws: `ShrinkCoreError.cannotMap` when the file is missing, unreadable, not a regular
    ///   file, or cannot be mapped.
    public convenience init(path: String) throws(ShrinkCoreError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .cannotMap(path: path, reason: Self.systemMessage()) }
        defer { close(descriptor) }
        try self.init(descriptor: descriptor, path: path)
    }

    /// Maps the whole file open on `descriptor` (readable; it stays the caller's to close, the
    /// mapping outlives it); `path` names it in errors.
    /// - Throws: `ShrinkCoreError.cannotMap` when it is not a regular file or cannot be mapped.
    public init(descriptor: Int32, path: String) throws(ShrinkCoreError) {
        self.path = path
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw .cannotMap(path: path, reason: Self.systemMessage())
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw .cannotMap(path: path, reason: "not a regular file")
        }
        let size = Int(status.st_size)
        guard size > 0 else {
            bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            return
        }
        let address = mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0)
        guard let address, address != MAP_FAILED else {
            throw .cannotMap(path: path, reason: Self.systemMessage())
        }
        bytes = UnsafeRawBufferPointer(start: address, count: size)
    }

    /// Drops the resident pages that lie wholly inside `range` from this process's memory
    /// (`madvise(MADV_DONTNEED)`); the bytes stay readable and are read again from the file (or
    /// the page cache) when next touched. Pages shared with bytes outside `range` stay.
    /// Complexity: O(pages in `range`) in the kernel, no I/O.
    public func releasePages(_ range: Range<Int>) {
        guard let base = bytes.baseAddress, range.lowerBound >= 0, range.upperBound <= bytes.count else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (Int(bitPattern: base) + range.lowerBound + page - 1) / page * page
        let end = (Int(bitPattern: base) + range.upperBound) / page * page
        guard end > start, let address = UnsafeMutableRawPointer(bitPattern: start) else { return }
        madvise(address, end - start, Int32(MADV_DONTNEED))
    }

    deinit {
        if let base = bytes.baseAddress {
            munmap(UnsafeMutableRawPointer(mutating: base), bytes.count)
        }
    }

    static func systemMessage() -> String {
        String(cString: strerror(errno))
    }
}
