import Foundation
import Testing
import ShrinkKernels
import ShrinkTestSupport

/// The decoder's runtime ops (RMSNorm, SwiGLU, rotary positions, causal attention over a cache) and softmax against references
/// computed in `Double`, over awkward widths, zero rows and large inputs.
@Suite struct DecoderOpsTests {
    @Test(arguments: [1, 7, 64, 576])
    func rmsNormMatchesTheDoubleReference(width: Int) {
        var generator = SeededGenerator(seed: UInt64(width))
        let rows = 3
        var x = generator.floats(rows * width, in: -4...4)
        x.replaceSubrange(0..<width, with: [Float](repeating: 0, count: width))  // A zero row stays zero.
        let weight = generator.floats(width, in: 0.5...1.5)
        var actual = x
        actual.withUnsafeMutableBufferPointer { RMSNormWeights(weight: weight, epsilon: 1e-5).apply($0.baseAddress!, rows: rows) }
        for row in 0..<rows {
            let line = x[(row * width)..<((row + 1) * width)].map(Double.init)
            let scale = 1 / (line.reduce(0) { $0 + $1 * $1 } / Double(width) + 1e-5).squareRoot()
            for i in 0..<width {
                let expected = line[i] * scale * Double(weight[i])
                #expect(abs(Double(actual[row * width + i]) - expected) <= 1e-5 * max(1, abs(expected)), "row \(row) element \(i)")
            }
        }
        #expect(actual.prefix(width).allSatisfy { $0 == 0 })
    }

    /// Every variant against a `Double` reference, on lengths that do and do not fill vectors and
    /// on inputs far past the exp's clamp (±120).
    @Test(arguments: KernelVariant.available, [1000, 13, 16])
    func swiGLUMatchesTheDoubleReference(kernels: KernelVariant, count: Int) {
        var generator = SeededGenerator(seed: 9)
        let gate = generator.floats(count, in: -30...30) + [120, -120, 0], up = generator.floats(count + 3)
        var actual = gate
        actual.withUnsafeMutableBufferPointer { kernels.swiGLU(gate: $0.baseAddress!, up: up, gate.count) }
        for i in gate.indices {
            let x = Double(gate[i]), expected = x / (1 + exp(-x)) * Double(up[i])
            #expect(abs(Double(actual[i]) - expected) <= 1e-6 * max(1, abs(expected)), "\(kernels) element \(i): \(actual[i]) vs \(expected)")
        }
    }

    @Test(arguments: [RotaryEmbedding.Pairing.adjacent, .halves])
    func rotaryPositionsRotateThePairsTheModeNames(pairing: RotaryEmbedding.Pairing) {
        let headSize = 64, heads = 3
        let rope = RotaryEmbedding(dimensions: headSize, base: 10000, pairing: pairing)
        var generator = SeededGenerator(seed: 3)
        let x = generator.floats(heads * headSize)
        var table = [Float](repeating: 0, count: rope.tableSize)
        for position in [0, 1, 7, 100] {
            var actual = x
            table.withUnsafeMutableBufferPointer { rope.angles(position: position, into: $0.baseAddress!) }
            actual.withUnsafeMutableBufferPointer { rope.rotate($0.baseAddress!, heads: heads, headSize: headSize, table: table) }
            for head in 0..<heads {
                for pair in 0..<(headSize / 2) {
                    let (i, j) = pairing == .adjacent ? (2 * pair, 2 * pair + 1) : (pair, pair + headSize / 2)
                    let theta = Double(position) * pow(10000, -2 * Double(pair) / Double(headSize))
                    let a = Double(x[head * headSize + i]), b = Double(x[head * headSize + j])
                    let tolerance = 1e-5 * (1 + Double(position))
                    #expect(abs(Double(actual[head * headSize + i]) - (a * cos(theta) - b * sin(theta))) <= tolerance, "position \(position) pair \(pair)")
                    #expect(abs(Double(actual[head * headSize + j]) - (a * sin(theta) + b * cos(theta))) <= tolerance, "position \(position) pair \(pair)")
                }
            }
            if position == 0 { #expect(actual == x) }
        }
    }

    @Test func softmaxRowsSumToOneWithoutOverflow() {
        var values: [Float] = [1, 2, 3, 4, 1000, 1001, 999, -Float.greatestFiniteMagnitude, 0, 0, 0, 0]
        values.withUnsafeMutableBufferPointer { Attention.softmaxRows($0.baseAddress!, rows: 3, columns: 4) }
        for row in 0..<3 {
            let sum = values[(row * 4)..<(row * 4 + 4)].reduce(0, +)
            #expect(abs(sum - 1) <= 1e-6)
        }
        let first = [1.0, 2, 3, 4].map { exp($0 - 4) }, total = first.reduce(0, +)
        for i in 0..<4 { #expect(abs(Double(values[i]) - first[i] / total) <= 1e-7) }
        #expect(values[7] == 0 && values[8] == 0.25)
    }
    /// Causal grouped-query attention, every kernel variant, against a `Double` reference: head
    /// sizes that are and are not multiples of 16 (and past the vector kernel's 128), one and several
    /// heads per key/value head, batches starting at position 0 and continuing a cache, one row
    /// (decode) and more rows than a unit's block (several units per key/value head), 1–3 threads.
    @Test(arguments: [(64, 9, 3, 0, 5), (24, 4, 4, 7, 3), (17, 6, 2, 30, 1), (64, 2, 1, 0, 40), (128, 6, 2, 3, 37), (64, 9, 3, 100, 1),
                      (33, 3, 1, 0, 17), (160, 4, 2, 5, 3)], [1, 2, 3])
    func causalAttentionMatchesTheDoubleReference(shape: (headSize: Int, heads: Int, keyValueHeads: Int, start: Int, rows: Int), threads: Int) {
        for kernels in KernelVariant.available { causalAttention(shape: shape, threads: threads, kernels: kernels) }
    }

    func causalAttention(shape: (headSize: Int, heads: Int, keyValueHeads: Int, start: Int, rows: Int), threads: Int, kernels: KernelVariant) {
        let (headSize, heads, kvHeads, start, rows) = shape
        var generator = SeededGenerator(seed: UInt64(headSize * 31 + start))
        let positions = start + rows, stride = kvHeads * headSize
        let query = generator.floats(rows * heads * headSize, in: -2...2)
        let keys = generator.floats(positions * stride, in: -2...2), values = generator.floats(positions * stride, in: -1...1)
        var scratch = [Float](repeating: .nan, count: threads * CausalAttention.scratch(positions: positions))
        // The cache's tiled keys; the padding past the last position is left NaN (the kernels must not use it).
        let keyCapacity = CausalAttention.keyCapacity(positions)
        var tiled = [Float](repeating: .nan, count: stride * keyCapacity)
        // Stored in two batches, as a cache fills: the prompt's rows, then the rest.
        keys.withUnsafeBufferPointer { batch in
            tiled.withUnsafeMutableBufferPointer { cache in
                for range in [0..<start, start..<positions] where !range.isEmpty {
                    CausalAttention.storeKeys(batch.baseAddress! + range.lowerBound * stride, rows: range.count, start: range.lowerBound,
                                              keyValueHeads: kvHeads, headSize: headSize, keyCapacity: keyCapacity, into: cache.baseAddress!)
                }
            }
        }
        var context = [Float](repeating: .nan, count: rows * heads * headSize)
        let scale = 1 / Float(headSize).squareRoot()
        query.withUnsafeBufferPointer { q in
            tiled.withUnsafeBufferPointer { k in
                values.withUnsafeBufferPointer { v in
                    scratch.withUnsafeMutableBufferPointer { s in
                        context.withUnsafeMutableBufferPointer { c in
                            CausalAttention.run(query: q.baseAddress!, rows: rows, start: start, heads: heads, keyValueHeads: kvHeads, headSize: headSize,
                                                keys: k.baseAddress!, keyCapacity: keyCapacity, values: v.baseAddress!, scale: scale, threads: threads,
                                                kernels: kernels, scratch: s.baseAddress!, context: c.baseAddress!)
                        }
                    }
                }
            }
        }
        for row in 0..<rows {
            for head in 0..<heads {
                let kv = (head / (heads / kvHeads)) * headSize, length = start + row + 1
                let scores = (0..<length).map { j in
                    (0..<headSize).reduce(0.0) { $0 + Double(query[(row * heads + head) * headSize + $1]) * Double(keys[j * stride + kv + $1]) } * Double(scale)
                }
                let largest = scores.max()!, weights = scores.map { exp($0 - largest) }, total = weights.reduce(0, +)
                for d in 0..<headSize {
                    let expected = (0..<length).reduce(0.0) { $0 + weights[$1] / total * Double(values[$1 * stride + kv + d]) }
                    let actual = Double(context[(row * heads + head) * headSize + d])
                    #expect(abs(actual - expected) <= 1e-5, "\(kernels): row \(row) head \(head) dimension \(d)")
                }
            }
        }
    }
}
