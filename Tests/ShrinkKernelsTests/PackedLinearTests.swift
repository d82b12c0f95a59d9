import CAllocationCounter
import Testing
import ShrinkCompression
import ShrinkCore
import ShrinkKernels
import ShrinkTestSupport

/// Every encoding × kernel variant × awkward shape × 1 and 2 threads, against the scalar reference
/// (`ReferenceEncodedLinear`: the same decoded weights, `Double` accumulation). Tolerance:
/// `|y − y_ref| ≤ 1e-5 · Σ|x_i · w_i| + 1e-6`, the error of float accumulation in another order.
@Suite struct PackedLinearTests {
    static let shapes: [[Int]] = [[97, 385], [96, 64], [13, 7], [16, 48]]

    @Test(arguments: EncodingCatalog.all.map(\.name), KernelVariant.available)
    func matchesTheReference(encoding: String, variant: KernelVariant) throws {
        let config = EncodingCatalog.all.first { $0.name == encoding }!.config
        var generator = SeededGenerator(seed: 5)
        var tested = 0
        for shape in Self.shapes where config.mismatch(shape: shape) == nil {
            let (outFeatures, inFeatures) = (shape[0], shape[1])
            let weight = try WeightCompressor.encode(
                name: "w", tensor: try DenseTensor(converting: generator.floats(outFeatures * inFeatures), shape: shape), config: config)
            let bias = generator.floats(outFeatures)
            let decoded = weight.decode()
            let reference = ReferenceEncodedLinear(weight: weight, bias: bias)
            for rows in [1, 5, PackedLinear.blasRowThreshold + 1] {
                let x = generator.floats(rows * inFeatures, in: -2...2)
                var expected = [Float](repeating: 0, count: rows * outFeatures)
                reference.forward(x, rows: rows, into: &expected)
                for threads in [1, 2] {
                    let kernel = PackedLinear(weight: weight, bias: bias, threads: threads, variant: variant, minimumWorkPerThread: 0)
                    var actual = [Float](repeating: .nan, count: rows * outFeatures)
                    kernel.forward(x, rows: rows, into: &actual)
                    for m in 0..<rows {
                        for o in 0..<outFeatures {
                            let bound = (0..<inFeatures).reduce(Float(0)) { $0 + abs(x[m * inFeatures + $1] * decoded[o * inFeatures + $1]) }
                            let error = abs(actual[m * outFeatures + o] - expected[m * outFeatures + o])
                            #expect(error <= 1e-5 * bound + 1e-6,
                                    "\(encoding) \(variant) \(shape) rows \(rows) threads \(threads): y[\(m)][\(o)] \(actual[m * outFeatures + o]) vs \(expected[m * outFeatures + o])")
                            if error > 1e-5 * bound + 1e-6 { return }
                        }
                    }
                }
            }
            tested += 1
        }
        #expect(tested > 0, "no shape fits \(encoding)")
    }

    /// Dense weights used in place (F16, BF16, F32): forward passes within the reference's bound,
    /// and rows gathered exactly as stored.
    @Test(arguments: [DType.f16, .bf16, .f32], KernelVariant.available)
    func denseWeightsMatchTheReference(dtype: DType, variant: KernelVariant) throws {
        var generator = SeededGenerator(seed: 21)
        for shape in Self.shapes {
            let (outFeatures, inFeatures) = (shape[0], shape[1])
            let values = try DenseTensor(converting: generator.floats(outFeatures * inFeatures), to: dtype, shape: shape)
            let weight = try EncodedTensor(name: "w", shape: shape, sourceDType: dtype, encoding: .dense(dtype), parts: ["values": values])
            let bias = generator.floats(outFeatures)
            let decoded = weight.decode()
            let layer = PackedLinear(weight: weight, bias: nil, threads: 1, variant: variant)
            var row = [Float](repeating: .nan, count: inFeatures)
            layer.decodeWeightRow(outFeatures - 1, into: &row)
            #expect(row == Array(decoded[((outFeatures - 1) * inFeatures)...]), "\(dtype) \(variant) \(shape): last row gathered")
            for rows in [1, 5, PackedLinear.blasRowThreshold + 1] {
                let x = generator.floats(rows * inFeatures, in: -2...2)
                var expected = [Float](repeating: 0, count: rows * outFeatures)
                ReferenceEncodedLinear(weight: weight, bias: bias).forward(x, rows: rows, into: &expected)
                for threads in [1, 2] {
                    var actual = [Float](repeating: .nan, count: rows * outFeatures)
                    PackedLinear(weight: weight, bias: bias, threads: threads, variant: variant, minimumWorkPerThread: 0)
                        .forward(x, rows: rows, into: &actual)
                    let worst = (0..<actual.count).map { index -> Float in
                        let (m, o) = index.quotientAndRemainder(dividingBy: outFeatures)
                        let bound = (0..<inFeatures).reduce(Float(0)) { $0 + abs(x[m * inFeatures + $1] * decoded[o * inFeatures + $1]) }
                        return abs(actual[index] - expected[index]) - (1e-5 * bound + 1e-6)
                    }.max()!
                    #expect(worst <= 0, "\(dtype) \(variant) \(shape) rows \(rows) threads \(threads): over the tolerance by \(worst)")
                }
            }
        }
    }

    /// A steady-state forward pass below the BLAS threshold allocates nothing on the heap (the
    /// workers' decoded rows are kept by the layer), whatever the encoding and thread count.
    @Test(arguments: ["palette 4-bit kmeans", "int8 symmetric per-channel", "palette 3-bit vector 4 grouped"], [1, 2])
    func forwardPassesDoNotAllocate(encoding: String, threads: Int) throws {
        var generator = SeededGenerator(seed: 8)
        let config = try #require(EncodingCatalog.all.first { $0.name == encoding }).config
        let shape = [96, 64]
        let weights = [
            try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: generator.floats(96 * 64), shape: shape), config: config),
            try EncodedTensor(name: "w", shape: shape, sourceDType: .f16, encoding: .dense(.f16),
                              parts: ["values": try DenseTensor(converting: generator.floats(96 * 64), to: .f16, shape: shape)]),
        ]
        for weight in weights {
            let layer = PackedLinear(weight: weight, bias: generator.floats(96), threads: threads, minimumWorkPerThread: 0)
            for rows in [1, 5] {
                let x = generator.floats(rows * 64)
                var y = [Float](repeating: 0, count: rows * 96)
                layer.forward(x, rows: rows, into: &y)
                shrink_count_allocations_begin()
                layer.forward(x, rows: rows, into: &y)
                let allocations = shrink_count_allocations_end()
                #expect(shrink_allocations_counted() == 0 || allocations == 0, "\(weight.encoding.summary), \(rows) rows, \(threads) threads: \(allocations) allocations")
            }
        }
    }

    /// Row gathers (compressed embedding tables) give the stored values of every encoding.
    @Test(arguments: EncodingCatalog.all.map(\.name), KernelVariant.available)
    func weightRowsDecodeToTheStoredValues(encoding: String, variant: KernelVariant) throws {
        let config = EncodingCatalog.all.first { $0.name == encoding }!.config
        var generator = SeededGenerator(seed: 9)
        for shape in Self.shapes where config.mismatch(shape: shape) == nil {
            let weight = try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: generator.floats(shape[0] * shape[1]), shape: shape),
                                                     config: config)
            let decoded = weight.decode()
            let layer = PackedLinear(weight: weight, bias: nil, threads: 1, variant: variant)
            var row = [Float](repeating: .nan, count: shape[1])
            for index in [0, shape[0] / 2, shape[0] - 1] {
                row.withUnsafeMutableBufferPointer { layer.decodeWeightRow(index, into: $0.baseAddress!) }
                let expected = Array(decoded[(index * shape[1])..<((index + 1) * shape[1])])
                // Fused multiply-subtract may round a decoded value differently from the reference's
                // multiply then subtract: within 1e-6 of the row's largest magnitude.
                let scale = expected.map(abs).max()!
                let worst = zip(row, expected).map { abs($0 - $1) }.max()!
                #expect(worst <= 1e-6 * scale, "\(encoding) \(variant) \(shape) row \(index): error \(worst) (row max \(scale))")
            }
        }
    }

    @Test func resultsDoNotDependOnTheThreadCount() throws {
        var generator = SeededGenerator(seed: 8)
        let weight = try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: generator.floats(200 * 96), shape: [200, 96]),
                                                 config: EncodingCatalog.palettize(4))
        let x = generator.floats(3 * 96)
        var outputs: [[Float]] = []
        for threads in [1, 2, 3] {
            var y = [Float](repeating: 0, count: 3 * 200)
            PackedLinear(weight: weight, bias: nil, threads: threads, minimumWorkPerThread: 0).forward(x, rows: 3, into: &y)
            outputs.append(y)
        }
        #expect(outputs[0] == outputs[1] && outputs[1] == outputs[2])
    }
}
