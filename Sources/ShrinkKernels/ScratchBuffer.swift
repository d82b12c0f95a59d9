import Foundation

/// Bytes reused across calls: a grow-only, 64-byte aligned buffer lent to one caller at a time (a
/// concurrent caller gets a temporary one), so steady-state forward passes do not allocate.
final class ScratchBuffer: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: UnsafeMutableRawPointer?
    private var capacity = 0

    /// Runs `body` with at least `count` bytes of scratch.
    func withBytes<Result>(_ count: Int, _ body: (UnsafeMutableRawPointer) -> Result) -> Result {
        guard lock.try() else {
            let temporary = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 64)
            defer { temporary.deallocate() }
            return body(temporary)
        }
        defer { lock.unlock() }
        if capacity < count {
            storage?.deallocate()
            storage = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 64)
            capacity = count
        }
        return body(storage ?? UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 64))
    }

    deinit { storage?.deallocate() }
}

/// A float array reused across calls: lent to one caller at a time and grown as needed (a
/// concurrent caller gets a new one), for kernels whose callees take `[Float]`.
final class KeptFloats: @unchecked Sendable {
    private let lock = NSLock()
    private var kept: [Float] = []

    /// Runs `body` with an array of at least `count` floats (contents unspecified) that it may
    /// fill and read.
    func with<Result>(_ count: Int, _ body: (inout [Float]) -> Result) -> Result {
        var array = lock.withLock { () -> [Float] in
            defer { kept = [] }
            return kept
        }
        if array.count < count {
            // Grown by half at least, so that batches of rising length do not reallocate each time;
            // not zeroed, the caller overwrites what it reads.
            let capacity = Swift.max(count, array.count + array.count / 2)
            array = [Float](unsafeUninitializedCapacity: capacity) { _, initialized in initialized = capacity }
        }
        defer { lock.withLock { if kept.count < array.count { kept = array } } }
        return body(&array)
    }
}
