import CShrinkKernels
import Dispatch
import ShrinkCore

/// The machine's read bandwidth as benchmarks measure it next to their kernels.
public enum MemoryBandwidth {
    /// How the probe reads: 64-byte AVX-512 loads when the CPU has them, else 64-bit loads.
    public static let method = shrink_cpu_has_avx512() != 0 ? "AVX-512 loads, 8 sums" : "64-bit loads, 4 sums"

    /// GB/s of the fastest of `passes` passes over a fresh `ReadProbe`'s buffer (peak bandwidth).
    public static func read(threads: Int, passes: Int = 5) -> Double { ReadProbe().fastest(threads: threads, passes: passes) }
}

/// A 256 MiB buffer that threads sum over contiguous parts, to measure read bandwidth. The buffer
/// lives where repacked weights do (a `WeightArena`, in huge pages where the kernel grants them),
/// so that a kernel's fraction of it compares like with like; it is written once, so that repeated
/// measurements do not pay for page faults.
public final class ReadProbe: @unchecked Sendable {
    /// Bytes of one pass.
    public let bytes = 256 << 20
    private let arena = WeightArena()
    private let buffer: UnsafeMutablePointer<UInt64>
    private let sums: UnsafeMutablePointer<UInt64>
    private let threadLimit = 64

    public init() {
        let count = bytes / 8
        buffer = arena.allocate(UInt64.self, count: count).baseAddress!
        for index in 0..<count { buffer[index] = UInt64(index) }
        sums = UnsafeMutablePointer<UInt64>.allocate(capacity: threadLimit * 8)
    }

    deinit { sums.deallocate() }

    /// GB/s of the fastest of `passes` passes.
    public func fastest(threads: Int, passes: Int) -> Double {
        let seconds = (0..<max(1, passes)).map { _ in pass(threads: threads) }.min()!
        return Double(bytes) / seconds / 1e9
    }

    /// GB/s over whole passes reading at least `bytes` in all: total bytes over total time, the
    /// bandwidth a stream of that length sustains now (on a shared machine, well below the peak).
    public func sustained(threads: Int, bytes total: Int) -> Double {
        let passes = max(1, (total + bytes - 1) / bytes)
        let seconds = (0..<passes).reduce(0.0) { sum, _ in sum + pass(threads: threads) }
        return Double(passes * bytes) / seconds / 1e9
    }

    /// Seconds of one pass over the buffer on `threads` threads (at most 64).
    private func pass(threads: Int) -> Double {
        let count = bytes / 8, threads = min(max(1, threads), threadLimit)
        nonisolated(unsafe) let (source, results) = (buffer, sums)
        let vector = shrink_cpu_has_avx512() != 0
        let start = DispatchTime.now().uptimeNanoseconds
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            let begin = count * thread / threads, end = count * (thread + 1) / threads
            if vector {
                results[thread * 8] = shrink_read_sum_u64(source + begin, end - begin)
                return
            }
            var a: UInt64 = 0, b: UInt64 = 0, c: UInt64 = 0, d: UInt64 = 0
            var index = begin
            while index + 4 <= end {
                a &+= source[index]; b &+= source[index + 1]; c &+= source[index + 2]; d &+= source[index + 3]
                index += 4
            }
            results[thread * 8] = a &+ b &+ c &+ d
        }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
}
