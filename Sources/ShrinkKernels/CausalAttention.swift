import Foundation
import ShrinkCore

/// Causal grouped-query attention over a key/value cache: query row `i` (at position
/// `start + i`) of head `h` attends to cache positions `0…start + i` of key/value head
/// `h / (heads / keyValueHeads)`:
/// `context = Σ_j softmax_j(scale · q · k_j) · v_j`, the softmax with its maximum subtracted, in
/// `Float`. The cache holds, per position, `keyValueHeads × headSize` keys (and values) in a row.
/// O(rows · heads · positions · headSize); threads take the (row, head) pairs in turn.
public enum CausalAttention {
    /// Scratch floats one thread needs for `positions` cache positions.
    public static func scratch(positions: Int) -> Int { positions }

    /// - Parameters:
    ///   - query: `rows × heads × headSize` floats.
    ///   - keys, values: the cache, `(start + rows) × keyValueHeads × headSize` floats at least.
    ///   - scratch: `threads × scratch(positions: start + rows)` floats.
    ///   - context: receives `rows × heads × headSize` floats.
    public static func run(query: UnsafePointer<Float>, rows: Int, start: Int, heads: Int, keyValueHeads: Int, headSize: Int,
                           keys: UnsafePointer<Float>, values: UnsafePointer<Float>, scale: Float, threads: Int,
                           scratch: UnsafeMutablePointer<Float>, context: UnsafeMutablePointer<Float>) {
        let pairs = rows * heads
        let work = pairs * (start + rows) * headSize
        let workers = max(1, min(threads, pairs, work / (1 << 16)))
        WorkerPool.shared.run(workers, PairsJob(query: query, keys: keys, values: values, context: context, scratch: scratch, start: start,
                                                rows: rows, heads: heads, keyValueHeads: keyValueHeads, headSize: headSize, scale: scale))
    }

    /// The (row, head) pairs of a batch, split over the workers (a job the pool runs without allocating).
    struct PairsJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: PairsJob.self).pointee.run(worker: worker, of: workers) } }
        let query, keys, values: UnsafePointer<Float>
        let context, scratch: UnsafeMutablePointer<Float>
        let start, rows, heads, keyValueHeads, headSize: Int
        let scale: Float

        func run(worker: Int, of workers: Int) {
            let group = heads / keyValueHeads, stride = keyValueHeads * headSize
            let scores = scratch + worker * CausalAttention.scratch(positions: start + rows)
            // Pairs dealt out in turn: a row's cost grows with its position, so contiguous shares
            // would leave the last worker with most of a prompt's work.
            for pair in Swift.stride(from: worker, to: rows * heads, by: workers) {
                let (row, head) = pair.quotientAndRemainder(dividingBy: heads)
                let q = query + (row * heads + head) * headSize
                let kv = (head / group) * headSize
                let length = start + row + 1
                var largest = -Float.infinity
                for j in 0..<length {
                    let score = scale * dot(q, keys + j * stride + kv, headSize)
                    scores[j] = score
                    largest = max(largest, score)
                }
                var total: Float = 0
                for j in 0..<length {
                    let e = expf(scores[j] - largest)
                    scores[j] = e
                    total += e
                }
                let out = context + (row * heads + head) * headSize
                out.update(repeating: 0, count: headSize)
                let inverse = 1 / total
                for j in 0..<length { axpy(scores[j] * inverse, values + j * stride + kv, out, headSize) }
            }
        }
    }

    /// `Σ a[i] · b[i]` over `n` floats, 16 lanes at a time.
    @inline(__always)
    static func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ n: Int) -> Float {
        var sum = SIMD16<Float>()
        var i = 0
        while i + 16 <= n {
            // `addProduct` would call `fmaf` lane by lane: a multiply and an add vectorize.
            sum += UnsafeRawPointer(a + i).loadUnaligned(as: SIMD16<Float>.self) * UnsafeRawPointer(b + i).loadUnaligned(as: SIMD16<Float>.self)
            i += 16
        }
        var total = sum.sum()
        while i < n {
            total += a[i] * b[i]
            i += 1
        }
        return total
    }

    /// `y[i] += a · x[i]` over `n` floats.
    @inline(__always)
    static func axpy(_ a: Float, _ x: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>, _ n: Int) {
        var i = 0
        while i + 16 <= n {
            let target = UnsafeMutableRawPointer(y + i)
            let value = target.loadUnaligned(as: SIMD16<Float>.self) + a * UnsafeRawPointer(x + i).loadUnaligned(as: SIMD16<Float>.self)
            target.storeBytes(of: value, as: SIMD16<Float>.self)
            i += 16
        }
        while i < n {
            y[i] += a * x[i]
            i += 1
        }
    }
}
