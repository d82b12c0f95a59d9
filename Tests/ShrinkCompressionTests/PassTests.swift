import Testing
import ShrinkCompression
import ShrinkCore
import ShrinkTestSupport

@Suite struct PassTests {
    /// A 6 × 24 weight with a few awkward values.
    static func weight(seed: UInt64 = 1, shape: [Int] = [6, 24]) -> DenseTensor {
        var generator = SeededGenerator(seed: seed)
        var values = generator.floats(shape.reduce(1, *), in: -0.2...0.2)
        values[3] = 1.5  // outlier
        return try! DenseTensor(converting: values, shape: shape)
    }

    @Test(arguments: EncodingCatalog.all.map(\.name))
    func everyEncodingDecodesCloseToTheWeight(name: String) throws {
        let config = EncodingCatalog.all.first { $0.name == name }!.config
        // 6 × 24, or 6 × 32 for rotations in power-of-two blocks, which need a block of 16 or more,
        // or 16 × 24 for LUTs per 16 channels.
        let tensor = Self.weight(shape: [[6, 24], [6, 32], [16, 24]].first { config.mismatch(shape: $0) == nil }!)
        let encoded = try WeightCompressor.encode(name: "w", tensor: tensor, config: config)
        let decoded = encoded.decode()
        let original = tensor.floats()
        #expect(decoded.count == original.count)
        if let prune = config.prune {
            let zeros = decoded.filter { $0 == 0 }.count
            switch prune {
            case .nOfM(let n, let m): #expect(zeros >= original.count * (m - n) / m)
            case .magnitude(let sparsity), .block(_, let sparsity): #expect(zeros >= Int((sparsity * Double(original.count)).rounded()))
            }
        }
        if config.quantize == nil && config.palettize == nil {
            // Pruning alone keeps the surviving values exactly.
            #expect(zip(original, decoded).allSatisfy { $1 == 0 || $0 == $1 })
        }
        let relative = WeightError.relativeSquaredError(original: original, decoded: decoded)
        #expect(relative < 1, "\(name): relative squared error \(relative)")
        let bits = config.quantize?.bits ?? config.palettize?.bits
        if let bits, bits >= 4, config.palettize?.mode ?? .kmeans == .kmeans {
            #expect(relative < 0.1, "\(name): relative squared error \(relative)")
        }
        if let bits {
            let vector = config.palettize?.clusterDim ?? 1
            let packed = encoded.parts["codes"] ?? encoded.parts["indices"]!
            let encodedCount = config.prune == nil ? original.count : decoded.filter { $0 != 0 }.count
            #expect(packed.byteCount == (encodedCount / vector * bits + 7) / 8 || config.prune != nil)
        }
    }

    @Test(arguments: 2...8)
    func symmetricQuantizationErrorIsAtMostHalfAScaleStep(bits: Int) throws {
        let tensor = Self.weight(seed: UInt64(bits))
        var config = QuantizationConfig()
        config.bits = bits
        config.scaleDType = .f32
        let encoded = try WeightCompressor.encode(name: "w", tensor: tensor, config: OpCompressionConfig(quantize: config))
        let scales = encoded.parts["scales"]!.floats()
        let original = tensor.floats(), decoded = encoded.decode()
        for index in original.indices {
            let scale = scales[index / 24]
            #expect(abs(original[index] - decoded[index]) <= scale / 2 * 1.0001, "element \(index)")
        }
    }

    @Test func affineQuantizationRepresentsTheRangeEnds() throws {
        let tensor = try DenseTensor(converting: [-1, -0.5, 0, 0.3, 7, 7, 7, 7], shape: [2, 4])
        for signed in [true, false] {
            let config = EncodingCatalog.quantize(8, symmetric: false, signed: signed, .perChannel(axis: 0), scale: .f32)
            let encoded = try WeightCompressor.encode(name: "w", tensor: tensor, config: config)
            let decoded = encoded.decode()
            let step = encoded.parts["scales"]!.floats()[0]
            // The zero point is rounded to an integer, so the ends are within half a step.
            #expect(abs(decoded[0] + 1) <= step / 2 && abs(decoded[3] - 0.3) <= step / 2)
            #expect(decoded[4...7].allSatisfy { $0 == 7 }, "a constant group is exact")
        }
    }

    /// Integer block scales: each block's scale is `m · S` with `S` the row's f16 scale, every
    /// `(q − z) · m` over the whole code range fits in int8, a quiet block keeps a small step next
    /// to a loud one, and each block's squared error is at most that of its own range on the
    /// multiple of `S` just above its own step (`n · ((s + S) / 2)²`).
    @Test(arguments: [(4, false), (4, true), (3, true), (2, false)])
    func integerBlockScalesAreMultiplesOfTheRowScale(bits: Int, symmetric: Bool) throws {
        var generator = SeededGenerator(seed: UInt64(bits))
        let (rows, columns) = (8, 96)
        var values = generator.floats(rows * columns, in: -1...1)
        for row in 0..<rows { for k in 32..<64 { values[row * columns + k] *= 0.05 } }
        values[7] = 9
        let config = EncodingCatalog.quantize(bits, symmetric: symmetric, signed: false, .perBlock(blockSize: 32), scale: .u8)
        let encoded = try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: values, shape: [rows, columns]), config: config)
        let multipliers = encoded.parts["scales"]!, rowScales = encoded.parts["channel_scales"]!
        #expect(multipliers.dtype == .u8 && rowScales.dtype == .f16 && rowScales.elementCount == rows)
        let zeroPoints = encoded.parts["zero_points"]?.floats()
        let scales = encoded.affineScales(), decoded = encoded.decode(), stored = rowScales.floats()
        var largerSteps = 0
        for group in 0..<(rows * 3) {
            let m = Int(multipliers.bytes[group]), row = group / 3
            #expect(scales[group] == Float(m) * stored[row], "block \(group): m \(m)")
            let z = zeroPoints.map { Int($0[group]) } ?? 1 << (bits - 1)
            #expect(-z * m >= -128 && ((1 << bits) - 1 - z) * m <= 127, "block \(group): z \(z), m \(m)")
            if m > (symmetric ? 128 >> (bits - 1) : 127 / ((1 << bits) - 1)) { largerSteps += 1 }
            let block = (0..<32).map { row * columns + (group % 3) * 32 + $0 }
            let own = symmetric ? block.map { abs(values[$0]) }.max()! / Float((1 << (bits - 1)) - 1)
                                : (block.map { values[$0] }.max()! - block.map { values[$0] }.min()!) / Float((1 << bits) - 1)
            let error = block.reduce(Float(0)) { $0 + (decoded[$1] - values[$1]) * (decoded[$1] - values[$1]) }
            #expect(error <= 32 * (own + stored[row]) * (own + stored[row]) / 4 * 1.001, "block \(group): error \(error)")
            if group % 3 == 1 { #expect(scales[group] < scales[group - 1] / 4, "the quiet block \(group) keeps a fine step") }
        }
        if bits == 4, !symmetric { #expect(largerSteps > 0, "centred 4-bit blocks take multipliers above 8") }
        var huge = values
        huge[5] = 1e9
        do {
            _ = try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: huge, shape: [rows, columns]), config: config)
            Issue.record("a row scale beyond F16 was accepted")
        } catch {
            #expect("\(error)".contains("row scale overflows F16"), "\(error)")
        }
        var badParts = encoded.parts
        badParts["channel_scales"] = try DenseTensor(converting: [Float](repeating: 1, count: rows - 1), to: .f16, shape: [rows - 1])
        #expect(throws: ShrinkCoreError.self) {
            try EncodedTensor(name: "w", shape: [rows, columns], sourceDType: .f32, encoding: encoded.encoding, parts: badParts)
        }
        let perChannel = AffineEncoding(bits: bits, signed: false, symmetric: true, granularity: .perChannel(axis: 0), scaleDType: .u8)
        #expect(throws: ShrinkCoreError.self) {
            try EncodedTensor(name: "w", shape: [rows, columns], sourceDType: .f32, encoding: .affine(perChannel),
                              parts: ["codes": encoded.parts["codes"]!,
                                      "scales": try DenseTensor(dtype: .u8, shape: [rows], bytes: [UInt8](repeating: 1, count: rows)),
                                      "channel_scales": rowScales])
        }
    }

    @Test func uniquePalettizationIsLosslessAndRejectsTooManyValues() throws {
        let values: [Float] = [0.5, -0.25, 0.5, 1, 0, 0, -0.25, 1]
        let tensor = try DenseTensor(converting: values, shape: [2, 4])
        let encoded = try WeightCompressor.encode(name: "w", tensor: tensor, config: EncodingCatalog.palettize(2, .unique, lut: .f32))
        #expect(encoded.decode() == values)
        let inexact = try DenseTensor(converting: [0.1, 0.2, 0.1, 0.2], shape: [2, 2])
        #expect(throws: CompressionError.invalidWeight(tensor: "w", reason: "unique palettization must be lossless but element 0 (0.1) decodes to 0.099975586; use \"lut_dtype\": \"f32\" without per_channel_scale")) {
            try WeightCompressor.encode(name: "w", tensor: inexact, config: EncodingCatalog.palettize(2, .unique, lut: .f16))
        }
        #expect(throws: CompressionError.invalidWeight(tensor: "w", reason: "has 4 distinct values in a LUT group; unique palettization with 1 bits allows 2")) {
            try WeightCompressor.encode(name: "w", tensor: tensor, config: EncodingCatalog.palettize(1, .unique))
        }
    }

    @Test func nOfMPruningKeepsTheLargestInEveryGroup() throws {
        let values: [Float] = [0.1, -0.9, 0.3, 0.2, 5, 4, -3, 2]
        let tensor = try DenseTensor(converting: values, shape: [1, 8])
        let encoded = try WeightCompressor.encode(name: "w", tensor: tensor, config: OpCompressionConfig(prune: .nOfM(n: 2, m: 4)))
        #expect(encoded.decode() == [0, -0.9, 0.3, 0, 5, 4, 0, 0])
        #expect(encoded.parts["mask"]!.bytes.first == 0b0011_0110)
    }

    /// All-zero, constant, subnormal and huge-outlier weights (shape 6 × 48, or 16 × 18 for LUTs
    /// per 16 channels). A constant is kept exactly by every encoding but the rotated ones, which see it as a
    /// rotated, non-constant row.
    @Test(arguments: EncodingCatalog.all.map(\.name))
    func degenerateWeights(name: String) throws {
        let config = EncodingCatalog.all.first { $0.name == name }!.config
        let normal = Float.leastNormalMagnitude
        let patterns: [[Float]] = [[0], [0.75], [normal / 128, -normal / 1024, 0, normal / 16], [1e6, 0, 0, 1e-3]]
        for pattern in patterns {
            let values = (0..<288).map { pattern[$0 % pattern.count] }
            let tensor = try DenseTensor(converting: values, shape: config.mismatch(shape: [6, 48]) == nil ? [6, 48] : [16, 18])
            let encoded: EncodedTensor
            do {
                encoded = try WeightCompressor.encode(name: "w", tensor: tensor, config: config)
            } catch {
                // An f16 scale or LUT cannot hold what a 1e6 outlier needs: a clear error, not infinity.
                #expect(pattern[0] == 1e6 && error.description.contains("overflows F16"), "\(error)")
                continue
            }
            let decoded = encoded.decode()
            #expect(decoded.allSatisfy { $0.isFinite }, "\(pattern)")
            if pattern == [0] { #expect(decoded == values, "zeros stay zeros") }
            if pattern == [0.75], config.prune == nil, case .custom? = config.palettize?.mode {} else if pattern == [0.75], config.prune == nil,
                                                                                                      config.rotate == nil {
                #expect(decoded.allSatisfy { abs($0 - 0.75) < 1e-3 }, "a constant is kept: \(decoded.prefix(4))")
            }
        }
    }

    @Test func nonFiniteAndEmptyWeightsAreErrors() throws {
        let config = EncodingCatalog.palettize(4)
        #expect(throws: CompressionError.nonFiniteWeight(tensor: "w", index: 2, value: .infinity)) {
            try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: [1, 2, .infinity, 4], shape: [2, 2]), config: config)
        }
        do {
            _ = try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: [1, .nan], shape: [1, 2]), config: config)
            Issue.record("accepted NaN")
        } catch let error as CompressionError {
            guard case .nonFiniteWeight(let tensor, let index, _) = error else { Issue.record("\(error)"); return }
            #expect(tensor == "w" && index == 1)
        }
        #expect(throws: CompressionError.invalidWeight(tensor: "w", reason: "is empty")) {
            try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: [], shape: [0, 4]), config: config)
        }
        #expect(throws: CompressionError.invalidWeight(tensor: "ids", reason: "dtype I64 is not a float type")) {
            try WeightCompressor.encode(name: "ids", tensor: try DenseTensor(dtype: .i64, shape: [1, 1], bytes: [UInt8](repeating: 0, count: 8)), config: config)
        }
    }

    @Test func palettizationDoesNotDependOnTheThreadCount() throws {
        let tensor = Self.weight(seed: 9, shape: [16, 40])
        let config = EncodingCatalog.palettize(4, .kmeans, .perGroupedChannel(axis: 0, groupSize: 2))
        let one = try WeightCompressor.encode(name: "w", tensor: tensor, config: config, threads: 1)
        let two = try WeightCompressor.encode(name: "w", tensor: tensor, config: config, threads: 2)
        #expect(one.decode() == two.decode())
        #expect(Array(one.parts["indices"]!.bytes) == Array(two.parts["indices"]!.bytes))
    }

    @Test func importanceWeightsPullCentroidsTowardImportantValues() throws {
        let values: [Float] = [0, 0.1, 0.2, 1, 1.1, 1.2, 5, 5.1]
        let even = OptimalKMeans1D.cluster(values, k: 2)
        var importance = [Float](repeating: 1, count: 8)
        importance[6] = 0; importance[7] = 0
        let weighted = OptimalKMeans1D.cluster(values, importance: importance, k: 2)
        #expect(even.centroids.count == 2 && even.centroids[1] > 5)
        #expect(weighted.centroids[1] < 2, "\(weighted.centroids)")
    }
}
