import Testing
import ShrinkKernels
import ShrinkTestSupport

/// The fused residual add + LayerNorm of every variant against the Swift twin (sums in `Double`),
/// over row lengths with vector tails, with and without a residual.
@Suite struct LayerNormTests {
    @Test(arguments: KernelVariant.available, [1, 7, 8, 17, 100, 384])
    func matchesTheDoubleSumTwin(variant: KernelVariant, width: Int) {
        var generator = SeededGenerator(seed: UInt64(width))
        let rows = 3
        let x = generator.floats(rows * width, in: -4...4).enumerated().map { $0.offset % 5 == 0 ? $0.element + 3 : $0.element }
        let residual = generator.floats(rows * width), gamma = generator.floats(width, in: 0.5...1.5), beta = generator.floats(width)
        for withResidual in [false, true] {
            var actual = x, expected = x
            residual.withUnsafeBufferPointer { r in
                variant.addLayerNorm(&actual, residual: withResidual ? r.baseAddress : nil, rows: rows, width, gamma: gamma, beta: beta,
                                     epsilon: 1e-12)
                KernelVariant.swift.addLayerNorm(&expected, residual: withResidual ? r.baseAddress : nil, rows: rows, width, gamma: gamma,
                                                 beta: beta, epsilon: 1e-12)
            }
            let worst = zip(actual, expected).map { abs($0 - $1) }.max()!
            #expect(worst <= 1e-5, "\(variant) width \(width) residual \(withResidual): worst difference \(worst)")
            #expect(actual.allSatisfy { $0.isFinite })
        }
    }
}
