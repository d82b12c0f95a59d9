import CShrinkKernels
import Dispatch
import ShrinkCore

/// The machine's read bandwidth as benchmarks measure it next to their kernels.
public enum MemoryBandwidth {
    /// How the probe reads: 64-byte AVX-512 loads when the CPU has them, else 64-bit loads.
    public static let method = shrink_cpu_has_avx512() != 0 ? "AVX-512 loads, 8 sums" : "64-bit loads, 4 sums"

    /// GB/s summing a 256 MiB buffer (threads over contiguous parts), best of `passes` passes. The
    /// buffer lives where repacked weights do (a `WeightArena`, in huge pages where the kernel
    /// grants them), so that the kernels' fraction of it compares like with like.
    public static func read(threads: Int, passes: Int = 5) -> Double {
        let count = 256 << 20 / 8
        let arena = WeightArena()
        defer { withExtendedLifetime(arena) {} }
        let buffer = arena.allocate(UInt64.self, count: count).baseAddress!
        for index in 0..<count { buffer[index] = UInt64(index) }
        let sums = UnsafeMutablePointer<UInt64>.allocate(capacity: threads * 8)
        defer { sums.deallocate() }
        nonisolated(unsafe) let (source, results) = (buffer, sums)
        let vector = shrink_cpu_has_avx512() != 0
        var best = Double.infinity
        for _ in 0..<max(1, passes) {
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
            best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        return Double(count * 8) / best / 1e9
    }
}
