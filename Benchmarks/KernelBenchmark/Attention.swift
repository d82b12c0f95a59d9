import Foundation
import ShrinkKernels
import ShrinkTestSupport

/// Causal attention (`CausalAttention.run`) per kernel variant this CPU runs, on one head layout
/// (`heads/keyValueHeads/headSize`): a prompt of `prompt` rows from an empty cache, and one decoded
/// row after `prompt − 1` cached positions; the variants interleaved in each of `rounds` rounds,
/// the median round reported, with each variant's time against the Swift twin's.
func benchmarkAttention(layout: (heads: Int, keyValueHeads: Int, headSize: Int), prompt: Int, threadCounts: [Int], rounds: Int) {
    let (heads, keyValueHeads, headSize) = layout
    var generator = SeededGenerator(seed: UInt64(heads * 1000 + headSize))
    let stride = keyValueHeads * headSize, capacity = CausalAttention.keyCapacity(prompt)
    let query = generator.floats(prompt * heads * headSize, in: -2...2)
    let keys = generator.floats(prompt * stride, in: -2...2), values = generator.floats(prompt * stride, in: -1...1)
    var tiled = [Float](repeating: 0, count: stride * capacity)
    keys.withUnsafeBufferPointer { batch in
        tiled.withUnsafeMutableBufferPointer {
            CausalAttention.storeKeys(batch.baseAddress!, rows: prompt, start: 0, keyValueHeads: keyValueHeads, headSize: headSize,
                                      keyCapacity: capacity, into: $0.baseAddress!)
        }
    }
    var context = [Float](repeating: 0, count: prompt * heads * headSize)
    let scale = 1 / Float(headSize).squareRoot()
    for threads in threadCounts {
        var scratch = [Float](repeating: 0, count: threads * CausalAttention.scratch(positions: prompt))
        for (label, rows, start) in [("prompt \(prompt)", prompt, 0), ("decode at \(prompt - 1)", 1, prompt - 1)] {
            var times = [[Double]](repeating: [], count: KernelVariant.available.count)
            for _ in 0..<rounds {
                for (index, variant) in KernelVariant.available.enumerated() {
                    times[index].append(median(repetitions: rows == 1 ? 200 : 5, warmUp: 1) { _ in
                        query.withUnsafeBufferPointer { q in
                            tiled.withUnsafeBufferPointer { k in
                                values.withUnsafeBufferPointer { v in
                                    scratch.withUnsafeMutableBufferPointer { s in
                                        context.withUnsafeMutableBufferPointer { c in
                                            CausalAttention.run(query: q.baseAddress! + start * heads * headSize, rows: rows, start: start, heads: heads,
                                                                keyValueHeads: keyValueHeads, headSize: headSize, keys: k.baseAddress!, keyCapacity: capacity,
                                                                values: v.baseAddress!, scale: scale, threads: threads, kernels: variant,
                                                                scratch: s.baseAddress!, context: c.baseAddress!)
                                        }
                                    }
                                }
                            }
                        }
                    })
                }
            }
            let medians = times.map { $0.sorted()[$0.count / 2] }
            for (index, variant) in KernelVariant.available.enumerated() {
                print(String(format: "attention %d/%d/%d  %-14@  %d thr  %-7@  %10.3f ms  ×%.2f vs swift", heads, keyValueHeads, headSize,
                             label as NSString, threads, variant.rawValue as NSString, medians[index] * 1e3, medians[0] / medians[index]))
            }
        }
    }
}
