import CShrinkKernels
import Testing
import ShrinkCore
import ShrinkIO
import ShrinkKernels
import ShrinkTestSupport

/// GGUF block types run as stored: every type's encoding through the fp32-activation kernels
/// (every variant) and, where the integer path takes it, the int8-activation kernels (every
/// variant), against the scalar reference on the decoded weights, over awkward row counts and
/// 1 and 2 threads.
@Suite struct GGMLKernelTests {
    static let shapes: [[Int]] = [[17, 256], [33, 512], [1, 768]]

    /// The types the integer kernels run exactly: all of them.
    static let integerTypes: Set<GGMLType> = Set(GGMLBlocks.quantizedTypes)

    @Test(arguments: GGMLBlocks.quantizedTypes)
    func everyTypeRunsAsStored(type: GGMLType) throws {
        var generator = SeededGenerator(seed: UInt64(type.rawValue))
        for shape in Self.shapes {
            let (outFeatures, inFeatures) = (shape[0], shape[1])
            let weight = try GGMLBlocks.tensor(type, rows: outFeatures, columns: inFeatures, generator: &generator)
            let bias = generator.floats(outFeatures)
            let decoded = weight.decode()
            let reference = ReferenceEncodedLinear(weight: weight, bias: bias)
            let panels = Int8PanelWeights(weight: weight)
            #expect((panels != nil) == Self.integerTypes.contains(type), "\(type.name): integer path \(panels != nil)")
            #expect(panels.map(\.isExact) != false, "\(type.name): the integer path must use the stored codes")
            for rows in [1, 2, 9, 10, 15, Int(SHRINK_WIDEN_FROM_ROWS) + 1] {
                var x = generator.floats(rows * inFeatures, in: -2...2)
                for m in 0..<rows { x[m * inFeatures + (m * 7) % inFeatures] = 40 }
                var expected = [Float](repeating: 0, count: rows * outFeatures)
                reference.forward(x, rows: rows, into: &expected)
                for threads in [1, 2] {
                    for variant in KernelVariant.available {
                        let kernel = PackedLinear(weight: weight, bias: bias, threads: threads, variant: variant, minimumWorkPerThread: 0)
                        var actual = [Float](repeating: .nan, count: rows * outFeatures)
                        kernel.forward(x, rows: rows, into: &actual)
                        let worst = (0..<actual.count).map { index -> Float in
                            let (m, o) = index.quotientAndRemainder(dividingBy: outFeatures)
                            let bound = (0..<inFeatures).reduce(Float(0)) { $0 + abs(x[m * inFeatures + $1] * decoded[o * inFeatures + $1]) }
                            return abs(actual[index] - expected[index]) / (1e-5 * bound + 1e-6)
                        }.max()!
                        #expect(worst <= 1, "\(type.name) fp32 \(variant) \(shape) rows \(rows) threads \(threads): \(worst) × the tolerance")
                    }
                    guard let panels else { continue }
                    let bound = Int8ActivationLinearTests.errorBound(x: x, rows: rows, decoded: decoded, weights: panels)
                    var outputs: [[Float]] = []
                    for variant in IntegerKernelVariant.available {
                        let kernel = Int8ActivationLinear(weights: panels, bias: bias, threads: threads, variant: variant, minimumWorkPerThread: 0)
                        var actual = [Float](repeating: .nan, count: rows * outFeatures)
                        kernel.forward(x, rows: rows, into: &actual)
                        let worst = (0..<actual.count).max { abs(actual[$0] - expected[$0]) / bound[$0] < abs(actual[$1] - expected[$1]) / bound[$1] }!
                        #expect(abs(actual[worst] - expected[worst]) <= bound[worst],
                                "\(type.name) int8 \(variant) \(shape) rows \(rows) threads \(threads): y[\(worst)] \(actual[worst]) vs \(expected[worst])")
                        outputs.append(actual)
                    }
                    #expect(outputs.allSatisfy { $0 == outputs[0] }, "\(type.name) \(shape) rows \(rows): the integer variants differ")
                }
            }
        }
    }
}
