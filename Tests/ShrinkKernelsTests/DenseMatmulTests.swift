import Foundation
import Testing
import ShrinkCore
import ShrinkKernels
import ShrinkTestSupport

/// The BLAS path against the scalar `Double` reference over awkward shapes, with and without bias.
@Suite struct DenseMatmulTests {
    @Test(arguments: [(1, 385, 97), (1, 1, 1), (2, 7, 13), (32, 384, 384), (5, 13, 385), (33, 64, 3)])
    func blasMatchesTheReference(rows: Int, outFeatures: Int, inFeatures: Int) {
        var generator = SeededGenerator(seed: UInt64(rows * 1_000_003 + outFeatures * 1009 + inFeatures))
        let x = generator.floats(rows * inFeatures)
        let weights = generator.floats(outFeatures * inFeatures)
        let bias = generator.floats(outFeatures)
        for useBias in [false, true] {
            var fast = [Float](repeating: .nan, count: rows * outFeatures)
            var reference = fast
            bias.withUnsafeBufferPointer { b in
                DenseMatmul.blas(x: x, rows: rows, weights: weights, outFeatures: outFeatures, inFeatures: inFeatures,
                                 bias: useBias ? b.baseAddress : nil, output: &fast)
                DenseMatmul.reference(x: x, rows: rows, weights: weights, outFeatures: outFeatures, inFeatures: inFeatures,
                                      bias: useBias ? b.baseAddress : nil, output: &reference)
            }
            // fp32 accumulation over `inFeatures` terms of magnitude ≤ 1: error ≤ inFeatures · 2⁻²⁴ · |terms|.
            let tolerance = Float(inFeatures) * 0x1p-22 + 1e-6
            let worst = zip(fast, reference).enumerated().max { abs($0.element.0 - $0.element.1) < abs($1.element.0 - $1.element.1) }!
            #expect(abs(worst.element.0 - worst.element.1) <= tolerance,
                    "bias \(useBias): worst index \(worst.offset): \(worst.element.0) vs \(worst.element.1)")
        }
    }

    /// The BLAS path's bits depend on the operands only: 1, 2 and 3 threads, and OpenBLAS on one
    /// thread (as while another thread of the process calibrates) or on its own count, agree.
    @Test(arguments: [(1, 385, 97), (33, 385, 97), (64, 300, 129), (40, 1536, 384)])
    func blasBitsDependOnTheOperandsOnly(rows: Int, outFeatures: Int, inFeatures: Int) {
        var generator = SeededGenerator(seed: UInt64(rows * 31 + outFeatures * 7 + inFeatures))
        let x = generator.floats(rows * inFeatures)
        let weights = generator.floats(outFeatures * inFeatures)
        func product(threads: Int) -> [Float] {
            var output = [Float](repeating: .nan, count: rows * outFeatures)
            DenseMatmul.blas(x: x, rows: rows, weights: weights, outFeatures: outFeatures, inFeatures: inFeatures,
                             bias: nil, output: &output, threads: threads)
            return output
        }
        let expected = product(threads: 1)
        for threads in [2, 3] { #expect(product(threads: threads).map(\.bitPattern) == expected.map(\.bitPattern)) }
        #expect(BLASThreading.singleThreaded { product(threads: 2) }.map(\.bitPattern) == expected.map(\.bitPattern))
    }

    /// The dense operator's panel kernel against the reference: every variant, 1 and 2 threads, every
    /// row tile (6, 4, 2, 1 and their mixes) and channel counts with tails.
    /// Also: 1, 2 and 3 threads give the same bits (block pairs are computed alike at any count),
    /// over widths with partial column blocks.
    @Test(arguments: [(1, 1), (7, 13), (200, 97), (3, 385), (64, 129), (130, 300)])
    func gramMatchesTheReference(rows: Int, width: Int) {
        var generator = SeededGenerator(seed: UInt64(rows * 1009 + width))
        let x = generator.floats(rows * width)
        // Xᵀ·X is X·Wᵀ with X = Xᵀ as the input and W = Xᵀ as the weight.
        let transposed = (0..<(rows * width)).map { x[($0 % rows) * width + $0 / rows] }
        var fast = [Float](repeating: .nan, count: width * width)
        var reference = fast
        DenseMatmul.gram(x: x, rows: rows, width: width, output: &fast)
        DenseMatmul.reference(x: transposed, rows: width, weights: transposed, outFeatures: width, inFeatures: rows, bias: nil, output: &reference)
        let tolerance = Float(rows) * 0x1p-22 + 1e-6
        #expect(zip(fast, reference).allSatisfy { abs($0 - $1) <= tolerance })
        for threads in [2, 3] {
            var threaded = [Float](repeating: .nan, count: width * width)
            DenseMatmul.gram(x: x, rows: rows, width: width, output: &threaded, threads: threads)
            #expect(threaded.map(\.bitPattern) == fast.map(\.bitPattern), "\(threads) threads")
        }
    }

    /// `gramUpper` writes the upper triangle only (the NaNs below the diagonal stay), with `gram`'s
    /// bits there.
    @Test(arguments: [(3, 1), (20, 129), (5, 300)])
    func gramUpperLeavesTheLowerTriangle(rows: Int, width: Int) {
        var generator = SeededGenerator(seed: UInt64(rows + width))
        let x = generator.floats(rows * width)
        var full = [Float](repeating: .nan, count: width * width), upper = full
        DenseMatmul.gram(x: x, rows: rows, width: width, output: &full)
        DenseMatmul.gramUpper(x: x, rows: rows, width: width, output: &upper, threads: 2)
        for i in 0..<width {
            for j in 0..<width {
                if j >= i { #expect(upper[i * width + j].bitPattern == full[i * width + j].bitPattern) } else { #expect(upper[i * width + j].isNaN) }
            }
        }
    }

    @Test(arguments: KernelVariant.available, [1, 2])
    func denseLinearMatchesTheReference(variant: KernelVariant, threads: Int) {
        var generator = SeededGenerator(seed: 77)
        var outputs: [[Float]] = []
        for (outFeatures, inFeatures) in [(97, 385), (5, 7), (16, 64), (33, 1)] {
            let weights = generator.floats(outFeatures * inFeatures), bias = generator.floats(outFeatures)
            let layer = DenseLinear(weights: weights, bias: bias, outFeatures: outFeatures, inFeatures: inFeatures, threads: threads,
                                    variant: variant, minimumWorkPerThread: 0)
            for rows in [1, 2, 3, 4, 5, 7, 13, PackedLinear.blasRowThreshold + 3] {
                let x = generator.floats(rows * inFeatures)
                var actual = [Float](repeating: .nan, count: rows * outFeatures), expected = actual
                layer.forward(x, rows: rows, into: &actual)
                bias.withUnsafeBufferPointer { b in
                    DenseMatmul.reference(x: x, rows: rows, weights: weights, outFeatures: outFeatures, inFeatures: inFeatures,
                                          bias: b.baseAddress, output: &expected)
                }
                let worst = zip(actual, expected).map { abs($0 - $1) }.max()!
                #expect(worst <= Float(inFeatures) * 0x1p-22 + 1e-6, "\(variant) \(outFeatures)×\(inFeatures) rows \(rows): \(worst)")
                outputs.append(actual)
            }
        }
        // One FMA per input in input order in both implementations: the same bits.
        if variant != .swift {
            var twin = SeededGenerator(seed: 77)
            var index = 0
            for (outFeatures, inFeatures) in [(97, 385), (5, 7), (16, 64), (33, 1)] {
                let weights = twin.floats(outFeatures * inFeatures), bias = twin.floats(outFeatures)
                let layer = DenseLinear(weights: weights, bias: bias, outFeatures: outFeatures, inFeatures: inFeatures, threads: threads,
                                        variant: .swift, minimumWorkPerThread: 0)
                for rows in [1, 2, 3, 4, 5, 7, 13, PackedLinear.blasRowThreshold + 3] {
                    let x = twin.floats(rows * inFeatures)
                    var actual = [Float](repeating: .nan, count: rows * outFeatures)
                    layer.forward(x, rows: rows, into: &actual)
                    #expect(actual == outputs[index], "\(variant) \(outFeatures)×\(inFeatures) rows \(rows): the vector kernel and its Swift twin differ")
                    index += 1
                }
            }
        }
    }

    @Test func reportsTheLoadedBLAS() {
        let path = BLASLibrary.loadedPath ?? ""
        #expect(path.contains("blas"), "\(BLASLibrary.summary)")
    }
}

/// The vector GELU against the C library's `erff` over a grid and the saturation ranges.
@Suite struct GELUTests {
    @Test(arguments: KernelVariant.available)
    func matchesTheExactGELU(variant: KernelVariant) {
        var values = (0...4000).map { Float($0 - 2000) / 200 } + [-100, -30, 30, 100, 0, -0.0, 1e-30, -1e-30]
        let expected = values.map { 0.5 * $0 * (1 + erff($0 * 0.70710678118654752)) }
        values.withUnsafeMutableBufferPointer { variant.gelu($0.baseAddress!, $0.count) }
        let worst = zip(values, expected).map { abs($0 - $1) / max(1, abs($1)) }.max()!
        #expect(worst <= 1e-6, "\(variant): worst relative error \(worst)")
        #expect(values.allSatisfy { $0.isFinite })
    }
}
