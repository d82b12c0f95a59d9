import Testing
import ShrinkCore
import ShrinkKernels
import ShrinkModels

/// `InputStatisticsRecorder` keeps one set of statistics per group of ops that saw the same
/// inputs, and still gives each op the sums it would have accumulated alone.
@Suite struct InputStatisticsRecorderTests {
    /// Deterministic inputs: `rows × width` values from `seed`.
    static func inputs(rows: Int, width: Int, seed: UInt64) -> [Float] {
        var random = SplitMix64(seed: seed)
        return (0..<(rows * width)).map { _ in Float(Double(random.next() >> 11) / Double(1 << 53) * 2 - 1) }
    }

    /// Each op's statistics accumulated alone, observation by observation.
    static func alone(_ observations: [(op: String, inputs: [Float], rows: Int)], width: Int) -> [String: LayerInputStatistics] {
        var statistics: [String: LayerInputStatistics] = [:]
        for (op, inputs, rows) in observations {
            var product = [Float](repeating: 0, count: width * width)
            inputs.withUnsafeBufferPointer { x in
                product.withUnsafeMutableBufferPointer { DenseMatmul.gram(x: x.baseAddress!, rows: rows, width: width, output: $0.baseAddress!, threads: 1) }
            }
            product.withUnsafeBufferPointer { product in
                inputs.withUnsafeBufferPointer { statistics[op, default: LayerInputStatistics(width: width)].add(rows: $0, count: rows, product: product) }
            }
        }
        return statistics
    }

    static func storage(_ statistics: LayerInputStatistics) -> UnsafeRawPointer {
        statistics.correlation.matrix.withUnsafeBytes { $0.baseAddress! }
    }

    @Test(arguments: [1, 2]) func groupsGiveEachOpItsOwnSums(threads: Int) {
        let width = 24
        let (a, b, c, d) = (Self.inputs(rows: 5, width: width, seed: 1), Self.inputs(rows: 3, width: width, seed: 2),
                            Self.inputs(rows: 7, width: width, seed: 3), Self.inputs(rows: 2, width: width, seed: 4))
        // q, k, v read one input per text (one group); gate and up too, until up alone sees `d`
        // (it leaves the group); `o` sees the same input twice in a row (added twice); `down`
        // reads `gate`'s input once, after `up` left.
        let observations: [(op: String, inputs: [Float], rows: Int)] = [
            ("q", a, 5), ("k", a, 5), ("v", a, 5), ("o", b, 3), ("o", b, 3), ("gate", c, 7), ("up", c, 7),
            ("q", b, 3), ("k", b, 3), ("v", b, 3), ("gate", c, 7), ("up", c, 7), ("up", d, 2), ("down", d, 2),
            ("q", d, 2), ("k", d, 2), ("v", d, 2), ("gate", a, 5), ("up", a, 5),
        ]
        let recorder = InputStatisticsRecorder(layers: ["q", "k", "v", "o", "gate", "up", "down"], threads: threads)
        let ignored = Self.inputs(rows: 2, width: width, seed: 9)
        for (op, inputs, rows) in observations {
            inputs.withUnsafeBufferPointer { recorder.observe(layer: op, inputs: $0, rows: rows, width: width) }
            ignored.withUnsafeBufferPointer { recorder.observe(layer: "unrecorded", inputs: $0, rows: 2, width: width) }
        }
        let expected = Self.alone(observations, width: width)
        #expect(recorder.recorded == expected)
        let drained = recorder.drain()
        #expect(drained == expected)
        #expect(recorder.drain().isEmpty)
        #expect(drained["o"]?.rows == 6)
        // One storage for q, k and v; up and down differ from gate and from each other.
        let q = Self.storage(drained["q"]!)
        #expect(Self.storage(drained["k"]!) == q && Self.storage(drained["v"]!) == q)
        #expect(Self.storage(drained["up"]!) != Self.storage(drained["gate"]!))
        #expect(drained["up"] != drained["gate"] && drained["down"] != drained["up"])
    }
}
