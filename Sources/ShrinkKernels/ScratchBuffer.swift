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
