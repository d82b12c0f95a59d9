import CBLAS
import Foundation
import Testing
@testable import ShrinkCompression
import ShrinkCore
import ShrinkTestSupport

@Suite struct GPTQTests {
    /// `rows × width` inputs whose columns are strongly correlated (each a mix of a few shared
    /// sources plus noise), like a transformer's hidden states.
    static func correlatedInputs(rows: Int, width: Int, seed: UInt64) -> [Float] {
        var generator = SeededGenerator(seed: seed)
        let sources = 4
        let mixing = generator.floats(sources * width, in: -1...1)
        var inputs = [Float](repeating: 0, count: rows * width)
        for row in 0..<rows {
            let latent = generator.floats(sources, in: -1...1)
            let noise = generator.floats(width, in: -0.1...0.1)
            for column in 0..<width {
                var value = noise[column]
                for source in 0..<sources { value += latent[source] * mixing[source * width + column] }
                inputs[row * width + column] = value
            }
        }
        return inputs
    }

    /// `Σ_rows ‖x · (W − Ŵ)ᵀ‖²`, the output error GPTQ minimises.
    static func outputError(inputs: [Float], rows: Int, original: [Float], decoded: [Float], out: Int, width: Int) -> Double {
        var total = 0.0
        for row in 0..<rows {
            for channel in 0..<out {
                var sum = 0.0
                for column in 0..<width {
                    sum += Double(inputs[row * width + column]) * Double(original[channel * width + column] - decoded[channel * width + column])
                }
                total += sum * sum
            }
        }
        return total
    }

    static func config(_ granularity: QuantizationGranularity, bits: Int = 4, method: RoundingMethod) -> OpCompressionConfig {
        EncodingCatalog.quantize(bits, symmetric: false, signed: false, granularity, method: method)
    }

    @Test(arguments: [1, 7, 33, 150])
    func inverseFactorSquaresToTheDampedInverse(size: Int) throws {
        let rows = 3 * size + 5
        var correlation = InputCorrelation(size: size)
        correlation.add(rows: Self.correlatedInputs(rows: rows, width: size, seed: UInt64(size)), count: rows)
        let damping = 0.01
        let upper = try GPTQ.inverseFactor(correlation, damping: damping, tensor: "w")
        // (UᵀU) · (H + λI) must be the identity.
        let meanDiagonal = (0..<size).reduce(0.0) { $0 + correlation.matrix[$1 * size + $1] } / Double(size)
        var worst = 0.0
        for i in 0..<size {
            for j in 0..<size {
                var sum = 0.0
                for k in 0..<size {
                    var inverse = 0.0
                    for m in 0...min(i, k) { inverse += Double(upper[m * size + i]) * Double(upper[m * size + k]) }
                    let h = correlation.matrix[k * size + j] + (k == j ? damping * meanDiagonal : 0)
                    sum += inverse * h
                }
                worst = max(worst, abs(sum - (i == j ? 1 : 0)))
            }
        }
        #expect(worst < 1e-3, "largest deviation from the identity \(worst)")
        for i in 0..<size { for j in 0..<i { #expect(upper[i * size + j] == 0) } }
    }

    /// The factor as computed by copies: the permuted correlation, its reversal with the dead
    /// inputs decoupled and the ridge added, the Cholesky factor, `L⁻¹` from the identity, `J·L⁻¹·J`.
    static func copyingInverseFactor(_ correlation: InputCorrelation, order: [Int], damping: Double) -> [Float]? {
        let n = correlation.size
        let matrix = (0..<(n * n)).map { correlation.matrix[order[$0 / n] * n + order[$0 % n]] }
        let meanDiagonal = (0..<n).reduce(0.0) { $0 + matrix[$1 * n + $1] } / Double(n)
        let dead = (0..<n).map { matrix[$0 * n + $0] <= 0 }
        var reversed = [Double](repeating: 0, count: n * n)
        for i in 0..<n {
            let source = n - 1 - i
            for j in 0..<n { reversed[i * n + j] = dead[source] || dead[n - 1 - j] ? 0 : matrix[source * n + n - 1 - j] }
            reversed[i * n + i] = (dead[source] ? 1 : reversed[i * n + i]) + damping * (meanDiagonal > 0 ? meanDiagonal : 1)
        }
        guard GPTQ.choleskyInPlace(&reversed, n) else { return nil }
        var inverse = [Double](repeating: 0, count: n * n)
        for i in 0..<n { inverse[i * n + i] = 1 }
        for start in stride(from: 0, to: n, by: 64) {
            cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, Int32(n - start), Int32(min(64, n - start)), 1,
                        reversed.withUnsafeBufferPointer { $0.baseAddress! } + start * n + start, Int32(n),
                        inverse.withUnsafeMutableBufferPointer { $0.baseAddress! } + start * n + start, Int32(n))
        }
        var upper = [Float](repeating: 0, count: n * n)
        for i in 0..<n { for j in i..<n { upper[i * n + j] = Float(inverse[(n - 1 - i) * n + (n - 1 - j)]) } }
        return upper
    }

    /// The factor computed in the correlation's own matrix (permuted along cycles, inverted in
    /// place) has the bits of the one computed by copies, over sizes around the 64-wide blocks,
    /// shuffled orders and inputs that were always zero.
    @Test(arguments: [1, 7, 63, 64, 65, 150, 200])
    func inPlaceFactorHasTheBitsOfTheCopyingOne(size: Int) throws {
        let rows = 2 * size + 9
        var inputs = Self.correlatedInputs(rows: rows, width: size, seed: UInt64(size) + 40)
        if size > 2 { for row in 0..<rows { inputs[row * size + size / 2] = 0 } }
        var correlation = InputCorrelation(size: size)
        correlation.add(rows: inputs, count: rows)
        var generator = SeededGenerator(seed: UInt64(size))
        var shuffled = Array(0..<size)
        for i in stride(from: size - 1, to: 0, by: -1) { shuffled.swapAt(i, Int(generator.next() % UInt64(i + 1))) }
        for order in [Array(0..<size), shuffled] {
            let expected = try #require(Self.copyingInverseFactor(correlation, order: order, damping: 0.01))
            let factor = try GPTQ.inverseFactor(correlation, order: order, damping: 0.01, tensor: "w")
            #expect(factor.map(\.bitPattern) == expected.map(\.bitPattern))
        }
    }

    /// Compresses a 12 × `width` weight seen through correlated inputs with `nearest` and with
    /// `calibrated`, and checks that GPTQ cuts the output error to `ratio` of it at the same size.
    static func expectLessOutputError(nearest: OpCompressionConfig, calibrated: OpCompressionConfig, seed: UInt64, width: Int = 45,
                                      ratio: Double = 0.5) throws {
        let (out, rows) = (12, 200)
        let inputs = correlatedInputs(rows: rows, width: width, seed: seed)
        var correlation = InputCorrelation(size: width)
        correlation.add(rows: inputs, count: rows)
        var generator = SeededGenerator(seed: seed + 1)
        let weights = generator.floats(out * width, in: -0.5...0.5)
        let tensor = try DenseTensor(converting: weights, shape: [out, width])
        let rounded = try WeightCompressor.encode(name: "w", tensor: tensor, config: nearest)
        let gptq = try WeightCompressor.encode(name: "w", tensor: tensor, config: calibrated, correlation: correlation, threads: 2)
        #expect(gptq.encoding == rounded.encoding && gptq.byteCount == rounded.byteCount)
        let roundedError = outputError(inputs: inputs, rows: rows, original: weights, decoded: rounded.decode(), out: out, width: width)
        let gptqError = outputError(inputs: inputs, rows: rows, original: weights, decoded: gptq.decode(), out: out, width: width)
        #expect(gptqError < ratio * roundedError, "GPTQ output error \(gptqError), nearest \(roundedError)")
    }

    @Test(arguments: [QuantizationGranularity.perBlock(blockSize: 16), .perBlock(blockSize: 13), .perChannel(axis: 0), .perTensor],
          [false, true])
    func gptqHasLessOutputErrorThanRounding(granularity: QuantizationGranularity, actOrder: Bool) throws {
        try Self.expectLessOutputError(nearest: Self.config(granularity, method: .roundToNearest),
                                       calibrated: Self.config(granularity, method: .gptq(damping: 0.01, actOrder: actOrder)), seed: 3)
    }

    @Test(arguments: [PaletteGranularity.perTensor, .perGroupedChannel(axis: 0, groupSize: 4), .perGroupedChannel(axis: 1, groupSize: 5)],
          [false, true])
    func palettesByGPTQHaveLessOutputErrorThanNearestEntries(granularity: PaletteGranularity, actOrder: Bool) throws {
        for (lut, channelScale) in [(DType.f16, false), (.i8, false), (.f16, true)] {
            let nearest = EncodingCatalog.palettize(3, .kmeans, granularity, lut: lut, channelScale: channelScale)
            var calibrated = nearest
            calibrated.palettize!.method = .gptq(damping: 0.01, actOrder: actOrder)
            try Self.expectLessOutputError(nearest: nearest, calibrated: calibrated, seed: 13)
        }
    }

    /// GPTVQ: vector entries chosen a vector of input columns at a time in the block's output-error
    /// metric, the error spread over later columns, then the LUT refitted.
    @Test(arguments: [PaletteGranularity.perTensor, .perGroupedChannel(axis: 0, groupSize: 4)], [false, true])
    func vectorPalettesByGPTQHaveLessOutputErrorThanNearestEntries(granularity: PaletteGranularity, actOrder: Bool) throws {
        for (vector, bits, lut, channelScale) in [(2, 3, DType.f16, false), (4, 4, .i8, false), (2, 2, .f32, true)] {
            let nearest = EncodingCatalog.palettize(bits, .kmeans, granularity, vector: vector, lut: lut, channelScale: channelScale)
            var calibrated = nearest
            calibrated.palettize!.method = .gptq(damping: 0.01, actOrder: actOrder)
            try Self.expectLessOutputError(nearest: nearest, calibrated: calibrated, seed: 17, width: 48, ratio: 0.7)
        }
    }

    /// Each diagonal block's inverse times the block is the identity.
    @Test(arguments: [1, 2, 4, 8])
    func blockInversesInvertTheDiagonalBlocks(width: Int) throws {
        let size = 24
        var correlation = InputCorrelation(size: size)
        correlation.add(rows: Self.correlatedInputs(rows: 80, width: size, seed: 5), count: 80)
        let upper = try GPTQ.inverseFactor(correlation, damping: 0.01, tensor: "w")
        let inverses = GPTQ.blockInverses(upper, columns: size, width: width)
        for block in 0..<(size / width) {
            for i in 0..<width {
                for j in 0..<width {
                    var sum = 0.0
                    for k in 0..<width {
                        sum += Double(upper[(block * width + i) * size + block * width + k]) * Double(inverses[block * width * width + k * width + j])
                    }
                    #expect(abs(sum - (i == j ? 1 : 0)) < 1e-4, "block \(block) (\(i), \(j)): \(sum)")
                }
            }
        }
    }

    /// For fixed indices the refitted LUTs have less output error than the LUTs they replace, and
    /// are its minimum: moving any one LUT value either way does not lower it.
    @Test(arguments: [PaletteGranularity.perTensor, .perGroupedChannel(axis: 0, groupSize: 4)], [1, 4])
    func refittedLUTsMinimiseTheOutputError(granularity: PaletteGranularity, vector: Int) throws {
        let (out, width, rows) = (12, 48, 200)
        let inputs = Self.correlatedInputs(rows: rows, width: width, seed: 21)
        var correlation = InputCorrelation(size: width)
        correlation.add(rows: inputs, count: rows)
        var generator = SeededGenerator(seed: 22)
        let weights = generator.floats(out * width, in: -0.5...0.5)
        let encoded = try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: weights, shape: [out, width]),
                                                  config: EncodingCatalog.palettize(3, .kmeans, granularity, vector: vector, lut: .f32))
        let luts = encoded.parts["lut"]!.floats()
        let indices = (0..<(out * width / vector)).map { PackedBits.value(at: $0, bits: 3, in: encoded.parts["indices"]!.bytes) }
        let refitted = GPTQ.refitLUTs(weights, shape: [out, width], correlation: correlation, luts: luts, indices: indices, entries: 8,
                                      width: vector, granularity: granularity, channelScales: nil, dtype: .f32, threads: 2)
        func error(_ table: [Float]) -> Double {
            let decoded = (0..<(out * width)).map {
                table[(EncodingLayout.group(of: $0, granularity, shape: [out, width]) * 8 + Int(indices[$0 / vector])) * vector + $0 % vector]
            }
            return Self.outputError(inputs: inputs, rows: rows, original: weights, decoded: decoded, out: out, width: width)
        }
        let before = error(luts), after = error(refitted)
        #expect(after < before, "output error \(after) after the refit, \(before) before")
        for slot in refitted.indices {
            for step: Float in [-1e-2, 1e-2] {
                var moved = refitted
                moved[slot] += step
                #expect(error(moved) >= after * (1 - 1e-6), "moving LUT value \(slot) by \(step) lowers the output error")
            }
        }
    }

    @Test func uncorrelatedInputsGiveRoundToNearest() throws {
        // H = c·I: no column's error can be compensated by another, so GPTQ rounds every weight.
        let width = 40
        var correlation = InputCorrelation(size: width)
        let identity = (0..<(width * width)).map { Float($0 % (width + 1) == 0 ? 3 : 0) }
        identity.withUnsafeBufferPointer { correlation.add(product: $0, rows: 3) }
        var generator = SeededGenerator(seed: 4)
        let tensor = try DenseTensor(converting: generator.floats(5 * width, in: -1...1), shape: [5, width])
        for granularity in [QuantizationGranularity.perBlock(blockSize: 8), .perChannel(axis: 0)] {
            let rounded = try WeightCompressor.encode(name: "w", tensor: tensor, config: Self.config(granularity, bits: 3, method: .roundToNearest))
            for actOrder in [false, true] {
                let config = Self.config(granularity, bits: 3, method: .gptq(damping: 0.05, actOrder: actOrder))
                let gptq = try WeightCompressor.encode(name: "w", tensor: tensor, config: config, correlation: correlation)
                #expect(gptq.decode() == rounded.decode())
                #expect(Array(gptq.parts["codes"]!.bytes) == Array(rounded.parts["codes"]!.bytes))
            }
        }
    }

    @Test func deadInputsAndBadArgumentsAreHandled() throws {
        let width = 8
        var inputs = Self.correlatedInputs(rows: 30, width: width, seed: 5)
        for row in 0..<30 { inputs[row * width + 2] = 0 }  // input 2 is never active
        var correlation = InputCorrelation(size: width)
        correlation.add(rows: inputs, count: 30)
        var generator = SeededGenerator(seed: 6)
        let tensor = try DenseTensor(converting: generator.floats(4 * width), shape: [4, width])
        let config = Self.config(.perBlock(blockSize: 4), method: .gptq(damping: 0.01, actOrder: false))
        let encoded = try WeightCompressor.encode(name: "w", tensor: tensor, config: config, correlation: correlation)
        #expect(encoded.decode().allSatisfy { $0.isFinite })
        #expect(throws: CompressionError.invalidWeight(tensor: "w", reason: "\"method\": \"gptq\" needs calibration data (recipe key \"calibration\")")) {
            try WeightCompressor.encode(name: "w", tensor: tensor, config: config)
        }
        let narrow = try DenseTensor(converting: [Float](repeating: 0.5, count: 32), shape: [8, 4])
        #expect(throws: CompressionError.invalidWeight(tensor: "w", reason: "the calibration correlation is 8 wide, the weight has 4 inputs")) {
            try WeightCompressor.encode(name: "w", tensor: narrow, config: config, correlation: correlation)
        }
        var infinite = InputCorrelation(size: width)
        infinite.add(rows: [Float](repeating: .infinity, count: width), count: 1)
        #expect(throws: CompressionError.invalidWeight(tensor: "w", reason: "the calibration inputs are not finite")) {
            try WeightCompressor.encode(name: "w", tensor: tensor, config: config, correlation: infinite)
        }
    }

    @Test func gramProductsAgreeWithTheRowReference() {
        let (rows, width) = (9, 5)
        let inputs = Self.correlatedInputs(rows: rows, width: width, seed: 8)
        var byRows = InputCorrelation(size: width)
        byRows.add(rows: inputs, count: rows)
        var product = [Float](repeating: 0, count: width * width)
        for i in 0..<width {
            for j in 0..<width {
                var sum: Float = 0
                for row in 0..<rows { sum += inputs[row * width + i] * inputs[row * width + j] }
                product[i * width + j] = sum
            }
        }
        var byProduct = InputCorrelation(size: width)
        product.withUnsafeBufferPointer { byProduct.add(product: $0, rows: rows) }
        #expect(byProduct.rows == rows && byRows.rows == rows)
        #expect(zip(byRows.matrix, byProduct.matrix).allSatisfy { abs($0 - $1) <= 1e-4 * max(1, abs($0)) })
    }
}
