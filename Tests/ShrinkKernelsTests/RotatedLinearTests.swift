import Testing
import ShrinkCompression
import ShrinkCore
import ShrinkKernels
import ShrinkTestSupport

/// Rotated weights (`W = W' · R`) run as `W' · (R · x)`: in fp32 that equals the decoded weight
/// times `x` up to float rounding, and with int8 activations it is exactly the base encoding's
/// integer kernel on the rotated inputs.
@Suite struct RotatedLinearTests {
    static let encodings = EncodingCatalog.all.filter { $0.config.rotate != nil }
    static let shapes: [[Int]] = [[96, 64], [16, 48], [40, 576], [33, 384]]

    @Test func theCatalogHasRotatedEncodings() { #expect(Self.encodings.count >= 3) }

    @Test(arguments: encodings.map(\.name))
    func rotatedLayersComputeTheirDecodedWeights(encoding: String) throws {
        var generator = SeededGenerator(seed: 21)
        for (shape, weight) in try EncodingCatalog.encodedWeights(encoding, shapes: Self.shapes, seed: 20) {
            let (outFeatures, inFeatures) = (shape[0], shape[1])
            let (stored, rotation) = try #require(weight.inputRotation)
            let decoded = weight.decode()
            let bias = generator.floats(outFeatures)
            for rows in [1, 7, PackedLinear.blasRowThreshold + 1] {
                let x = generator.floats(rows * inFeatures, in: -2...2)
                var rotatedX = x
                rotatedX.withUnsafeMutableBufferPointer { buffer in for m in 0..<rows { rotation.rotate(buffer.baseAddress! + m * inFeatures) } }
                for threads in [1, 2] {
                    let f32 = ActivationPrecision.float32.linear(weight: weight, bias: bias, threads: threads)
                    #expect(f32.execution.kernel.hasPrefix("hadamard"), "\(f32.execution.kernel)")
                    var actual = [Float](repeating: .nan, count: rows * outFeatures)
                    f32.forward(x, rows: rows, into: &actual)
                    for m in 0..<rows {
                        for o in 0..<outFeatures {
                            var expected = Double(bias[o]), bound = 0.0
                            for i in 0..<inFeatures {
                                let product = Double(x[m * inFeatures + i]) * Double(decoded[o * inFeatures + i])
                                expected += product
                                bound += abs(product)
                            }
                            let error = abs(Double(actual[m * outFeatures + o]) - expected)
                            #expect(error <= 1e-5 * bound + 1e-5, "\(encoding) \(shape) rows \(rows): y[\(m)][\(o)] \(actual[m * outFeatures + o]) vs \(expected)")
                            if error > 1e-5 * bound + 1e-5 { return }
                        }
                    }
                    let int8 = ActivationPrecision.int8.linear(weight: weight, bias: bias, threads: threads)
                    let base = ActivationPrecision.int8.linear(weight: stored, bias: bias, threads: threads)
                    var rotatedRun = [Float](repeating: .nan, count: rows * outFeatures), baseRun = rotatedRun
                    int8.forward(x, rows: rows, into: &rotatedRun)
                    base.forward(rotatedX, rows: rows, into: &baseRun)
                    #expect(rotatedRun == baseRun, "\(encoding) \(shape) rows \(rows) threads \(threads): int8 differs from its base on R·x")
                    #expect(int8.execution.weights == base.execution.weights)
                }
            }
        }
    }

    /// In place and from another buffer; the sizes take Sylvester blocks of 8 to 1,024 (16 to 512
    /// run in registers) and Paley blocks.
    @Test(arguments: [48, 64, 96, 384, 576, 1024, 1536, 11008 / 43 * 3, 40, 24], HadamardRotation.Block.allCases)
    func everyVariantRotatesLikeTheReference(size: Int, block: HadamardRotation.Block) {
        let rotation = HadamardRotation(size: size, seed: 8, block: block)
        var generator = SeededGenerator(seed: UInt64(size))
        let rows = 3
        let x = generator.floats(rows * size, in: -4...4)
        var reference = x
        reference.withUnsafeMutableBufferPointer { buffer in for row in 0..<rows { rotation.rotate(buffer.baseAddress! + row * size) } }
        for variant in KernelVariant.available {
            var inPlace = x
            inPlace.withUnsafeMutableBufferPointer { variant.rotate(rotation, from: $0.baseAddress!, into: $0.baseAddress!, rows: rows) }
            #expect(inPlace == reference, "\(variant) \(size) in place")
            var copied = [Float](repeating: .nan, count: x.count)
            copied.withUnsafeMutableBufferPointer { target in
                x.withUnsafeBufferPointer { variant.rotate(rotation, from: $0.baseAddress!, into: target.baseAddress!, rows: rows) }
            }
            #expect(copied == reference, "\(variant) \(size) from another buffer")
        }
    }

    /// Query, key and value rotated alike rotate their input once and share one integer pass; with
    /// another seed for one of them each runs alone. Either way every output is the layer's own.
    @Test(arguments: [[1, 1, 1], [1, 1, 2]])
    func groupsOfRotatedLayersGiveEachLayersOwnOutputs(seeds: [UInt64]) throws {
        var generator = SeededGenerator(seed: 31)
        let inFeatures = 96
        let layers = try zip([40, 16, 33], seeds).map { outFeatures, seed in
            var config = EncodingCatalog.quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 32), scale: .u8)
            config.rotate = RotationConfig(seed: seed)
            let tensor = try DenseTensor(converting: generator.floats(outFeatures * inFeatures), shape: [outFeatures, inFeatures])
            return ActivationPrecision.int8.linear(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: config),
                                                   bias: generator.floats(outFeatures), threads: 2)
        }
        let group = LinearGroup(layers)
        for rows in [1, 9, 40] {
            let x = generator.floats(rows * inFeatures, in: -2...2)
            var (first, second, third) = ([Float](repeating: .nan, count: rows * 40), [Float](repeating: .nan, count: rows * 16), [Float](repeating: .nan, count: rows * 33))
            group.forward(x, rows: rows, into: &first, &second, &third)
            for (layer, output) in zip(layers, [first, second, third]) {
                var alone = [Float](repeating: .nan, count: rows * layer.outFeatures)
                layer.forward(x, rows: rows, into: &alone)
                #expect(output == alone, "seeds \(seeds), \(rows) rows: \(layer.outFeatures) outputs differ from the layer alone")
            }
        }
    }

    @Test func rotationNeedsAHadamardBlockOfSixteen() {
        let config = OpCompressionConfig(rotate: RotationConfig(), quantize: QuantizationConfig())
        #expect(config.mismatch(shape: [8, 385])?.key == "rotate.block")
        #expect(config.mismatch(shape: [8, 24])?.key == "rotate.block")
        #expect(config.mismatch(shape: [8, 48]) == nil)
        let largest = OpCompressionConfig(rotate: RotationConfig(block: .largest), quantize: QuantizationConfig())
        #expect(largest.mismatch(shape: [8, 20])?.key == "rotate.block")
        #expect(largest.mismatch(shape: [8, 24]) == nil)
        #expect(config.mismatch(shape: [8, 48]) == nil)
    }
}
