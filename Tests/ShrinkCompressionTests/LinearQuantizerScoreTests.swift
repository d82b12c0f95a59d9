import Testing
@testable import ShrinkCompression
import ShrinkTestSupport

@Suite struct LinearQuantizerScoreTests {
    /// The candidate score equals `Σ (v − s · clamp(round(v / s), qMin − z, qMax − z))²` computed
    /// in doubles, for lengths with and without a tail of fewer than four values, values beyond
    /// the code range on both sides and every zero point of a 4-bit range.
    @Test(arguments: [1, 3, 4, 31, 32, 33, 130])
    func affineScoreIsTheSquaredErrorOfTheNearestCodes(count: Int) {
        var generator = SeededGenerator(seed: UInt64(count))
        let values = generator.floats(count, in: -3...3)
        let scale: Float = 0.21
        for z in 0...15 {
            let (below, above) = (Double(0 - z), Double(15 - z))
            let expected = values.reduce(0.0) { sum, value in
                let q = min(max((Double(value) / Double(scale)).rounded(.toNearestOrEven), below), above)
                let delta = Double(value) - Double(scale) * q
                return sum + delta * delta
            }
            let score = LinearQuantizer.squaredError(values, scale: scale, zeroPoint: z, qMin: 0, qMax: 15)
            #expect(abs(Double(score) - expected) <= 1e-5 * max(expected, 1e-6), "count \(count) z \(z): \(score) vs \(expected)")
        }
    }
}
