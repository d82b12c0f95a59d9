#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The process's OpenBLAS thread count, one switch for every caller.
///
/// OpenBLAS splits a call's work over its global thread count, and some of its kernels (Haswell's
/// `sgemm` and `ssyrk`, which it picks on AMD Zen) sum a split's tile edges in another order: the
/// same call gives other bits at another count, or while another thread of the process has
/// OpenBLAS on one thread. Every BLAS call of Shrink's therefore runs inside `singleThreaded`, in
/// pieces fixed by the operands (`DenseMatmul`), and Shrink's own threads keep the cores busy:
/// results depend on neither `--threads` nor timing. Sections nest and overlap across threads:
/// OpenBLAS stays on one thread from the first entry to the last exit, which restores the count the
/// first entry found (the host application's own BLAS use is unchanged outside sections). With a
/// BLAS other than OpenBLAS (single-threaded netlib) every call is a no-op.
public enum BLASThreading {
    private typealias Setter = @convention(c) (Int32) -> Void
    private typealias Getter = @convention(c) () -> Int32
    private static let lock = NSLock()
    nonisolated(unsafe) private static var depth = 0
    /// The count to restore when the last section exits.
    nonisolated(unsafe) private static var outside: Int32 = 1
    private static let functions: (set: Setter, get: Getter)? = {
        let process = dlopen(nil, RTLD_NOW)
        guard let set = dlsym(process, "openblas_set_num_threads"), let get = dlsym(process, "openblas_get_num_threads") else { return nil }
        return (unsafeBitCast(set, to: Setter.self), unsafeBitCast(get, to: Getter.self))
    }()

    /// `body` with OpenBLAS on one thread when `condition` holds (else `body` as is).
    public static func singleThreaded<Result, Failure: Error>(when condition: Bool = true, _ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        guard condition else { return try body() }
        enter()
        defer { leave() }
        return try body()
    }

    private static func enter() {
        lock.withLock {
            if depth == 0, let functions {
                outside = functions.get()
                functions.set(1)
            }
            depth += 1
        }
    }

    private static func leave() {
        lock.withLock {
            depth -= 1
            if depth == 0, let functions { functions.set(outside) }
        }
    }
}
