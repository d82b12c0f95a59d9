import ShrinkCore
import ShrinkTestSupport
import Testing

struct InputCorrelationTests {
    /// The upper triangle of `Xᵀ·X` of `rows × width` random inputs, in floats, NaN below the
    /// diagonal (which the adds must not read).
    static func upperProduct(rows: Int, width: Int, seed: UInt64) -> [Float] {
        var generator = SeededGenerator(seed: seed)
        let x = generator.floats(rows * width)
        var product = [Float](repeating: .nan, count: width * width)
        for i in 0..<width {
            for j in i..<width {
                var sum: Float = 0
                for row in 0..<rows { sum += x[row * width + i] * x[row * width + j] }
                product[i * width + j] = sum
            }
        }
        return product
    }

    /// Sums of several products, added with and without deferred mirroring, on 1–3 threads, over
    /// widths around the 64-wide tiles: one set of bits, symmetric, each entry the double sum of
    /// the floats `Σ_p Double(P_p[min(i,j)][max(i,j)])` in product order.
    @Test(arguments: [1, 5, 63, 64, 65, 130])
    func deferredMirroringGivesTheSameSums(width: Int) {
        let products = (0..<3).map { Self.upperProduct(rows: 4 + $0, width: width, seed: UInt64(width * 10 + $0)) }
        var expected = [Double](repeating: 0, count: width * width)
        for product in products {
            for i in 0..<width { for j in 0..<width { expected[i * width + j] += Double(product[min(i, j) * width + max(i, j)]) } }
        }
        for threads in [1, 2, 3] {
            var eager = InputCorrelation(size: width), deferred = InputCorrelation(size: width)
            for (index, product) in products.enumerated() {
                product.withUnsafeBufferPointer { eager.add(product: $0, rows: 4 + index, threads: threads) }
                product.withUnsafeBufferPointer { deferred.addUpperTriangle(of: $0, rows: 4 + index, threads: threads) }
            }
            deferred.mirrorUpperTriangle()
            #expect(eager.matrix.map(\.bitPattern) == expected.map(\.bitPattern), "\(threads) threads")
            #expect(deferred == eager, "\(threads) threads")
            #expect(eager.rows == 15)
        }
    }

    /// Statistics accumulated without mirroring and completed once equal those added one by one.
    @Test func accumulatedStatisticsEqualAddedOnes() {
        let width = 70
        var generator = SeededGenerator(seed: 3)
        var added = LayerInputStatistics(width: width), accumulated = added
        for rows in [2, 7] {
            let x = generator.floats(rows * width)
            var product = [Float](repeating: .nan, count: width * width)
            for i in 0..<width { for j in i..<width { product[i * width + j] = (0..<rows).reduce(0) { $0 + x[$1 * width + i] * x[$1 * width + j] } } }
            x.withUnsafeBufferPointer { x in
                product.withUnsafeBufferPointer { p in
                    added.add(rows: x, count: rows, product: p, threads: 2)
                    accumulated.accumulate(rows: x, count: rows, upperProduct: p, threads: 1)
                }
            }
        }
        accumulated.mirrorCorrelation()
        #expect(accumulated == added)
        #expect(added.rows == 9)
    }
}
