/// The bytes behind one or more tensors: a heap allocation owned by this object, or a region of a
/// memory-mapped file kept alive by it. Storage is immutable once created.
public final class TensorStorage: @unchecked Sendable {
    /// The stored bytes.
    public let bytes: UnsafeRawBufferPointer
    private let mappedFile: MemoryMappedFile?
    /// Where `bytes` lie in `mappedFile`.
    private let mappedRange: Range<Int>
    private let allocation: UnsafeMutableRawPointer?

    /// Copies `count` bytes produced by `initializer` into a new 64-byte aligned allocation.
    public init(byteCount: Int, initializingWith initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(byteCount, 1), alignment: 64)
        let used = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<byteCount])
        used.initializeMemory(as: UInt8.self, repeating: 0)
        do {
            try initializer(used)
        } catch {
            buffer.deallocate()
            throw error
        }
        bytes = UnsafeRawBufferPointer(used)
        allocation = buffer.baseAddress
        mappedFile = nil
        mappedRange = 0..<0
    }

    /// A view of `range` inside a mapped file; the file stays mapped while the view exists.
    public init(mappedFile: MemoryMappedFile, range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= mappedFile.bytes.count)
        self.mappedFile = mappedFile
        mappedRange = range
        allocation = nil
        bytes = UnsafeRawBufferPointer(rebasing: mappedFile.bytes[range])
    }

    /// Whether the bytes are a view of a memory-mapped file rather than a heap allocation.
    public var isMapped: Bool { mappedFile != nil }

    /// For mapped bytes, drops their resident pages from memory (`MemoryMappedFile.releasePages`):
    /// a consumer that has read a large tensor once calls this so that the process does not keep
    /// the whole file resident. The bytes stay valid. Does nothing for heap storage.
    public func releasePages() {
        mappedFile?.releasePages(mappedRange)
    }

    deinit {
        allocation?.deallocate()
    }
}
