import Foundation
import Testing
import ShrinkKernels
import ShrinkTestSupport

/// The fused attention kernel and its Swift twin against a `Double` reference, over sequence
/// lengths with tails, head sizes that are and are not multiples of 16, and rows wider than a head.
@Suite struct AttentionKernelTests {
    /// softmax((scale · q) kᵀ) v in `Double`, for one head with rows `stride` apart.
    static func reference(q: [Float], k: [Float], v: [Float], length: Int, headSize: Int, stride: Int, scale: Float) -> [Double] {
        var out = [Double](repeating: 0, count: length * headSize)
        for i in 0..<length {
            var scores = (0..<length).map { j in
                (0..<headSize).reduce(0.0) { $0 + Double(q[i * stride + $1] * scale) * Double(k[j * stride + $1]) }
            }
            let largest = scores.max()!
            scores = scores.map { exp($0 - largest) }
            let total = scores.reduce(0, +)
            for d in 0..<headSize {
                out[i * headSize + d] = (0..<length).reduce(0.0) { $0 + scores[$1] * Double(v[$1 * stride + d]) } / total
            }
        }
        return out
    }

    @Test(arguments: KernelVariant.available, [(1, 32), (2, 32), (7, 24), (16, 32), (17, 8), (33, 64), (64, 128), (5, 100)])
    func matchesTheReference(variant: KernelVariant, shape: (length: Int, headSize: Int)) {
        let (length, headSize) = shape
        let stride = headSize + 11
        var generator = SeededGenerator(seed: UInt64(length * 131 + headSize))
        let q = generator.floats(length * stride, in: -3...3), k = generator.floats(length * stride, in: -3...3)
        let v = generator.floats(length * stride)
        let scale = 1 / Float(headSize).squareRoot()
        var out = [Float](repeating: .nan, count: length * stride)
        var scratch = [Float](repeating: .nan, count: KernelVariant.attentionScratch(length: length, headSize: headSize))
        variant.attentionHead(q: q, k: k, v: v, length: length, headSize: headSize, stride: stride, scale: scale, scratch: &scratch, out: &out)
        let expected = Self.reference(q: q, k: k, v: v, length: length, headSize: headSize, stride: stride, scale: scale)
        var worst = 0.0
        for i in 0..<length {
            for d in 0..<headSize { worst = max(worst, abs(Double(out[i * stride + d]) - expected[i * headSize + d])) }
            // Columns between heads are left alone.
            #expect((headSize..<stride).allSatisfy { out[i * stride + $0].isNaN })
        }
        // Outputs are convex combinations of values in [-1, 1]; fp32 sums and the polynomial exp
        // stay well inside 1e-5 of exact.
        #expect(worst < 1e-5, "\(variant) length \(length) head \(headSize): worst error \(worst)")
    }
}
