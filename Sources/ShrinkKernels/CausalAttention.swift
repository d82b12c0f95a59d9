import Foundation
import ShrinkCore

/// Causal grouped-query attention over a key/value cache: query row `i` (at position
/// `start + i`) of head `h` attends to cache positions `0…start + i` of key/value head
/// `h / (heads / keyValueHeads)`:
/// `context = Σ_j softmax_j(scale · q · k_j) · v_j`, the softmax with its maximum subtracted, in
/// `Float` (`KernelVariant.causalAttention`). The cache holds the keys of each key/value head in
/// `keyCapacity` positions transposed in tiles of 16 (`headSize` rows of 16 positions each:
/// `keys[h · headSize · keyCapacity + (j / 16) · 16 · headSize + d · 16 + j % 16]`), so that a
/// decoded token reads each head's keys as one contiguous run, and values per position,
/// `keyValueHeads × headSize` in a row. O(rows · heads · positions · headSize); the work is cut
/// into units of one key/value head and a block of up to `blockRows` rows, which the threads take
/// in turn.
public enum CausalAttention {
    /// Query rows per unit of work.
    public static let blockRows = 16

    /// Multiply-adds of scores per worker below which a batch runs on one thread. Low, because a
    /// decoded token's attention waits on cache lines that the weight stream has evicted, and a
    /// second thread overlaps those waits (SmolLM2 4.5-bit decode at 2 threads, 64 tokens: 200–233
    /// µs of attention per token with 2^16, 126–152 µs with every unit handed out).
    static let minimumWorkPerWorker = 1 << 12

    /// Scratch floats one thread needs for `positions` cache positions.
    public static func scratch(positions: Int) -> Int { KernelVariant.causalAttentionScratch(positions: positions) }

    /// The positions a cache of `capacity` positions holds keys for (rounded up to a whole tile of 16).
    public static func keyCapacity(_ capacity: Int) -> Int { (capacity + 15) / 16 * 16 }

    /// Writes `rows` keys, row-major (`keyValueHeads × headSize` floats each), into the tiled keys
    /// at positions `start…`: dimension `d` of head `h` at position `j` goes to
    /// `keys[h · headSize · keyCapacity + (j / 16) · 16 · headSize + d · 16 + j % 16]`.
    public static func storeKeys(_ batch: UnsafePointer<Float>, rows: Int, start: Int, keyValueHeads: Int, headSize: Int,
                                 keyCapacity: Int, into keys: UnsafeMutablePointer<Float>) {
        for row in 0..<rows {
            let position = start + row, source = batch + row * keyValueHeads * headSize
            let tile = keys + position / 16 * 16 * headSize + position % 16
            for head in 0..<keyValueHeads {
                let target = tile + head * headSize * keyCapacity, key = source + head * headSize
                for d in 0..<headSize { target[d * 16] = key[d] }
            }
        }
    }

    /// - Parameters:
    ///   - query: `rows × heads × headSize` floats.
    ///   - keys: the tiled keys, `keyValueHeads × headSize × keyCapacity` floats, `keyCapacity` at
    ///     least `start + rows` rounded up to 16.
    ///   - values: `(start + rows) × keyValueHeads × headSize` floats at least.
    ///   - scratch: `threads × scratch(positions: start + rows)` floats.
    ///   - context: receives `rows × heads × headSize` floats.
    public static func run(query: UnsafePointer<Float>, rows: Int, start: Int, heads: Int, keyValueHeads: Int, headSize: Int,
                           keys: UnsafePointer<Float>, keyCapacity: Int, values: UnsafePointer<Float>, scale: Float, threads: Int,
                           kernels: KernelVariant = .best,
                           scratch: UnsafeMutablePointer<Float>, context: UnsafeMutablePointer<Float>) {
        let units = keyValueHeads * ((rows + blockRows - 1) / blockRows)
        let work = rows * heads * (start + rows) * headSize
        let workers = max(1, min(threads, units, work / minimumWorkPerWorker))
        WorkerPool.shared.run(workers, UnitsJob(query: query, keys: keys, values: values, context: context, scratch: scratch,
                                                keyCapacity: keyCapacity, start: start,
                                                rows: rows, heads: heads, keyValueHeads: keyValueHeads, headSize: headSize, scale: scale,
                                                kernels: kernels))
    }

    /// The (key/value head, row block) units of a batch, split over the workers (a job the pool runs
    /// without allocating).
    struct UnitsJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: UnitsJob.self).pointee.run(worker: worker, of: workers) } }
        let query, keys, values: UnsafePointer<Float>
        let context, scratch: UnsafeMutablePointer<Float>
        let keyCapacity, start, rows, heads, keyValueHeads, headSize: Int
        let scale: Float
        let kernels: KernelVariant

        func run(worker: Int, of workers: Int) {
            let group = heads / keyValueHeads, queryStride = heads * headSize, valueStride = keyValueHeads * headSize
            let blocks = (rows + CausalAttention.blockRows - 1) / CausalAttention.blockRows
            let scores = scratch + worker * CausalAttention.scratch(positions: start + rows)
            // Units dealt out in turn, latest rows first: a row's cost grows with its position, so
            // contiguous shares would leave the last worker with most of a prompt's work.
            for unit in Swift.stride(from: worker, to: blocks * keyValueHeads, by: workers) {
                let (block, head) = unit.quotientAndRemainder(dividingBy: keyValueHeads)
                let first = (blocks - 1 - block) * CausalAttention.blockRows
                let offset = head * group * headSize
                kernels.causalAttention(q: query + offset, queryStride: queryStride, keys: keys + head * headSize * keyCapacity,
                                        v: values + head * headSize, valueStride: valueStride, headSize: headSize, group: group, start: start,
                                        rows: first..<min(rows, first + CausalAttention.blockRows), scale: scale, scratch: scores,
                                        out: context + offset)
            }
        }
    }
}
