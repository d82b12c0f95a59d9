import Foundation
import ShrinkCore

/// Scaled dot-product attention, sentence by sentence and head by head (threads split the
/// (sentence, head) pairs). Sequences of up to `fusedLength` tokens run the fused kernel
/// (`KernelVariant.attentionHead`: keys transposed once, then scores, softmax and the weighted
/// sum of values per query row, reading the head's columns in place); longer ones copy the head's
/// query, key and transposed value columns into contiguous blocks so that both products run
/// through the tiled kernel (`KernelVariant.gemmNT`).
public enum Attention {
    /// The longest sequence the fused kernel takes (its scratch must stay small, and the tiled
    /// path's register tiles pay off on long sequences).
    public static let fusedLength = 64

    /// The scratch floats one thread needs for sequences of up to `longest` tokens.
    public static func scratch(longest: Int, headSize: Int) -> Int {
        longest <= fusedLength && headSize <= 128 ? KernelVariant.attentionScratch(length: longest, headSize: headSize)
                                                  : 3 * longest * headSize + longest * longest
    }

    /// `scratch` holds `threads × scratch(longest:headSize:)` floats.
    public static func run(query: [Float], key: [Float], value: [Float], lengths: [Int], hidden: Int, heads: Int, threads: Int,
                    kernel: KernelVariant, scratch: inout [Float], into context: inout [Float]) {
        let headSize = hidden / heads
        let scale = 1 / sqrt(Float(headSize))
        let longest = lengths.max() ?? 0
        let work = lengths.reduce(0) { $0 + $1 * $1 } * hidden
        query.withUnsafeBufferPointer { q in
            key.withUnsafeBufferPointer { k in
                value.withUnsafeBufferPointer { v in
                    context.withUnsafeMutableBufferPointer { c in
                        lengths.withUnsafeBufferPointer { lengthBuffer in
                            scratch.withUnsafeMutableBufferPointer { scratchBuffer in
                                let job = HeadsJob(query: q.baseAddress!, key: k.baseAddress!, value: v.baseAddress!, context: c.baseAddress!,
                                                   lengths: lengthBuffer, hidden: hidden, heads: heads, scale: scale, longest: longest,
                                                   scratch: scratchBuffer.baseAddress!, kernel: kernel)
                                WorkerPool.shared.run(work >= 1 << 20 ? Parallel.workers(lengths.count * heads, threads: threads) : 1, job)
                            }
                        }
                    }
                }
            }
        }
    }

    /// The (sentence, head) pairs of a batch, split over the workers.
    struct HeadsJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: HeadsJob.self).pointee.run(worker: worker, of: workers) } }
        let query, key, value: UnsafePointer<Float>
        let context: UnsafeMutablePointer<Float>
        let lengths: UnsafeBufferPointer<Int>
        let hidden, heads: Int
        let scale: Float
        let longest: Int
        /// `scratch(longest:headSize:)` floats per worker.
        let scratch: UnsafeMutablePointer<Float>
        let kernel: KernelVariant

        func run(worker: Int, of workers: Int) {
            let range = Parallel.range(worker: worker, of: workers, count: lengths.count * heads)
            let headSize = hidden / heads
            // Token offset of the range's first sentence, then advanced sentence by sentence.
            var sentence = range.lowerBound / heads
            var start = lengths[0..<sentence].reduce(0, +)
            let fused = longest <= fusedLength && headSize <= 128
            let scratch = self.scratch + worker * Attention.scratch(longest: longest, headSize: headSize)
            for pair in range {
                let (pairSentence, head) = pair.quotientAndRemainder(dividingBy: heads)
                while sentence < pairSentence { start += lengths[sentence]; sentence += 1 }
                let length = lengths[sentence], offset = start * hidden + head * headSize
                if fused {
                    kernel.attentionHead(q: query + offset, k: key + offset, v: value + offset, length: length, headSize: headSize,
                                         stride: hidden, scale: scale, scratch: scratch, out: context + offset)
                } else {
                    tiled(query: query + offset, key: key + offset, value: value + offset, length: length, headSize: headSize,
                          hidden: hidden, scale: scale, kernel: kernel, scratch: scratch, capacity: longest, into: context + offset)
                }
            }
        }
    }

    /// One head of one sequence through the tiled kernel; `scratch` holds `3 · capacity · headSize
    /// + capacity²` floats.
    static func tiled(query: UnsafePointer<Float>, key: UnsafePointer<Float>, value: UnsafePointer<Float>, length: Int, headSize: Int,
                      hidden: Int, scale: Float, kernel: KernelVariant, scratch: UnsafeMutablePointer<Float>, capacity: Int,
                      into context: UnsafeMutablePointer<Float>) {
        let (qh, kh, vT, scores) = (scratch, scratch + capacity * headSize, scratch + 2 * capacity * headSize, scratch + 3 * capacity * headSize)
        for token in 0..<length {
            for d in 0..<headSize {
                qh[token * headSize + d] = query[token * hidden + d] * scale
                kh[token * headSize + d] = key[token * hidden + d]
                vT[d * length + token] = value[token * hidden + d]
            }
        }
        // scores[i][j] = q_i · k_j
        kernel.gemmNT(kh, length, qh, length, headSize, scores, length)
        softmaxRows(scores, rows: length, columns: length)
        // context[i][d] = Σ_j p_ij v_jd, written into the head's columns.
        kernel.gemmNT(vT, headSize, scores, length, length, context, hidden)
    }

    /// In-place softmax of each of `rows` rows of `columns` floats (max subtracted first).
    public static func softmaxRows(_ values: UnsafeMutablePointer<Float>, rows: Int, columns: Int) {
        for row in 0..<rows {
            let line = values + row * columns
            var maximum = -Float.infinity
            for column in 0..<columns { maximum = max(maximum, line[column]) }
            var sum: Float = 0
            for column in 0..<columns {
                let e = expf(line[column] - maximum)
                line[column] = e
                sum += e
            }
            let inverse = 1 / sum
            for column in 0..<columns { line[column] *= inverse }
        }
    }
}
