import Foundation

/// Runs OpenBLAS single-threaded while calibrated passes encode. OpenBLAS splits one call's work
/// over its own threads in a way that depends on how many are free (a call made while another
/// thread is inside OpenBLAS gets fewer), and some of its kernels (Haswell's `sgemm` on AMD Zen)
/// sum the tile edges of a split in another order: GPTQ's output then depended on `--threads`.
/// With one OpenBLAS thread every call computes the same way; Shrink's own threads (tensors at
/// once, row batches) keep the cores busy. A no-op with a BLAS other than OpenBLAS.
enum BLASThreads {
    private typealias Setter = @convention(c) (Int32) -> Void
    private typealias Getter = @convention(c) () -> Int32
    private static let lock = NSLock()
    nonisolated(unsafe) private static var depth = 0
    nonisolated(unsafe) private static var saved: Int32 = 1
    private static let functions: (set: Setter, get: Getter)? = {
        let process = dlopen(nil, RTLD_NOW)
        guard let set = dlsym(process, "openblas_set_num_threads"), let get = dlsym(process, "openblas_get_num_threads") else { return nil }
        return (unsafeBitCast(set, to: Setter.self), unsafeBitCast(get, to: Getter.self))
    }()

    /// Puts OpenBLAS on one thread until the matching `leave` (nested and concurrent callers share
    /// one switch; the last to leave restores the previous count).
    static func enterSingleThreaded() {
        lock.withLock {
            if depth == 0, let functions {
                saved = functions.get()
                functions.set(1)
            }
            depth += 1
        }
    }

    static func leave() {
        lock.withLock {
            depth -= 1
            if depth == 0, let functions { functions.set(saved) }
        }
    }
}
