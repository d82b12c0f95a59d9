import Foundation

/// A value shared between threads in tests, guarded by an `NSLock`.
///
/// Tests use this rather than `Synchronization.Mutex`: on Linux `Mutex` waits on a raw `futex`
/// system call, which ThreadSanitizer does not intercept, so the ordering it provides is invisible
/// to the sanitizer and every access under it is reported as a race. `NSLock` is a pthread mutex,
/// which the sanitizer models.
public final class LockedValue<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value and returns its result.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
