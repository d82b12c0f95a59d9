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
    public init(path: String) throws(ShrinkCoreError) {
        self.path = path
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .cannotMap(path: path, reason: Self.systemMessage()) }
        defer { close(descriptor) }
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

    deinit {
        if let base = bytes.baseAddress {
            munmap(UnsafeMutableRawPointer(mutating: base), bytes.count)
        }
    }

    static func systemMessage() -> String {
        String(cString: strerror(errno))
    }
}
