#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a file so that readers see either the old file or the complete new one, never a part:
/// the bytes go to a temporary file in the same folder, which is flushed to disk and then renamed
/// over `path`.
///
/// On Linux the temporary file is unnamed (`O_TMPFILE`) until `commit` links it under a temporary
/// name and renames it over `path`, so a process killed while writing (even by SIGKILL) leaves no
/// file behind. Where the file system lacks `O_TMPFILE` it is a named `.<name>.tmp-XXXXXX` file,
/// removed when writing fails or `commit` is never called (a SIGKILL then leaves it).
public final class AtomicFile {
    /// The destination path.
    public let path: String
    private let folder: String
    private let base: String
    /// The temporary file's name, or `nil` while it is unnamed (`O_TMPFILE`).
    private var temporaryPath: String?
    private var descriptor: Int32
    private var committed = false

    /// Creates the temporary file next to `path`.
    public init(path: String) throws(ShrinkIOError) {
        self.path = path
        let slash = path.lastIndex(of: "/")
        folder = slash.map { String(path[...$0]) } ?? ""
        base = slash.map { String(path[path.index(after: $0)...]) } ?? path
        #if os(Linux)
        descriptor = open(folder.isEmpty ? "." : folder, Self.unnamedTemporaryFlags | O_WRONLY | O_CLOEXEC, 0o644)
        if descriptor >= 0 {
            fchmod(descriptor, 0o644)
            return
        }
        #endif
        (descriptor, temporaryPath) = try Self.namedTemporary(folder: folder, base: base, destination: path)
    }

    #if os(Linux)
    /// `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`), which Glibc's Swift overlay does not export.
    static let unnamedTemporaryFlags: Int32 = 0o20000000 | O_DIRECTORY
    #endif

    private static func namedTemporary(folder: String, base: String, destination: String) throws(ShrinkIOError) -> (Int32, String) {
        var template = Array("\(folder).\(base).tmp-XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw .writeFailed(path: destination, reason: "cannot create a temporary file: \(String(cString: strerror(errno)))")
        }
        fchmod(descriptor, 0o644)
        return (descriptor, String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
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
        if temporaryPath == nil { try link() }
        close(descriptor)
        descriptor = -1
        guard let temporaryPath, rename(temporaryPath, path) == 0 else {
            throw .writeFailed(path: path, reason: String(cString: strerror(errno)))
        }
        committed = true
    }

    /// Gives the unnamed temporary file a name next to `path`: `linkat` cannot replace a file, so
    /// it takes a fresh `.<name>.tmp-<n>` name that `commit` renames over `path`.
    private func link() throws(ShrinkIOError) {
        for attempt in 0..<100 {
            let candidate = "\(folder).\(base).tmp-\(getpid())-\(attempt)"
            if linkat(AT_FDCWD, "/proc/self/fd/\(descriptor)", AT_FDCWD, candidate, AT_SYMLINK_FOLLOW) == 0 {
                temporaryPath = candidate
                return
            }
            guard errno == EEXIST else { break }
        }
        throw .writeFailed(path: path, reason: "cannot name the temporary file: \(String(cString: strerror(errno)))")
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
        if !committed, let temporaryPath { unlink(temporaryPath) }
    }
}

/// Writes a folder so that readers see either nothing at `path` or the complete folder: files go
/// to a temporary folder next to `path`, renamed to `path` by `commit`. `path` must not exist or
/// be an empty folder (a folder with files is never replaced). When `commit` is never called, the
/// temporary folder and everything in it is removed.
public final class AtomicFolder {
    /// The destination path.
    public let path: String
    /// The temporary folder to write the files into.
    public let temporaryPath: String
    private var committed = false

    /// Checks `path` and creates the temporary folder next to it.
    /// - Throws: `ShrinkIOError.writeFailed` when `path` is a file or a folder with files, or the
    ///   temporary folder cannot be created.
    public init(path: String) throws(ShrinkIOError) {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        self.path = trimmed
        try Self.checkReplaceable(trimmed)
        let slash = trimmed.lastIndex(of: "/")
        let folder = slash.map { String(trimmed[...$0]) } ?? ""
        let base = slash.map { String(trimmed[trimmed.index(after: $0)...]) } ?? trimmed
        var template = Array("\(folder).\(base).tmp-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw .writeFailed(path: trimmed, reason: "cannot create a temporary folder: \(String(cString: strerror(errno)))")
        }
        temporaryPath = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        chmod(temporaryPath, 0o755)
    }

    /// The path of file `name` inside the temporary folder.
    public func file(_ name: String) -> String { temporaryPath + "/" + name }

    /// Renames the temporary folder to `path`.
    public func commit() throws(ShrinkIOError) {
        try Self.checkReplaceable(path)
        rmdir(path)
        guard rename(temporaryPath, path) == 0 else { throw .writeFailed(path: path, reason: String(cString: strerror(errno))) }
        committed = true
    }

    private static func checkReplaceable(_ path: String) throws(ShrinkIOError) {
        var status = stat()
        guard stat(path, &status) == 0 else { return }
        guard status.st_mode & S_IFMT == S_IFDIR else { throw .writeFailed(path: path, reason: "is a file, not a folder") }
        guard let names = entries(of: path) else { throw .writeFailed(path: path, reason: String(cString: strerror(errno))) }
        guard names.isEmpty else { throw .writeFailed(path: path, reason: "the folder is not empty; nothing was replaced") }
    }

    /// The names in folder `path` but `.` and `..`, nil when it cannot be read.
    private static func entries(of path: String) -> [String]? {
        guard let directory = opendir(path) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    deinit {
        guard !committed else { return }
        for name in Self.entries(of: temporaryPath) ?? [] { unlink(temporaryPath + "/" + name) }
        rmdir(temporaryPath)
    }
}
