import CShrinkKernels
import Testing
import ShrinkCompression
import ShrinkCore
import ShrinkKernels
import ShrinkTestSupport

/// The integer path (int8 activations × u8 weight codes): the vector kernel against its Swift
/// twin (same arithmetic, so identical outputs), and both against exact arithmetic on the stored
/// weights (`ReferenceEncodedLinear`) within the bound that activation quantization (and, for
/// palettes whose LUTs take 16-bit codes, their grid) allows.
@Suite struct Int8ActivationLinearTests {
    static let shapes: [[Int]] = [[97, 385], [96, 64], [13, 7], [16, 48], [33, 100]]
    /// Byte panels in tiles of 4, 2 and 1 rows; 2-, 3- and 4-bit panels in single-panel tiles of 1–8 rows
    /// (15 = 8 + 7, 9 = 5 + 4; integer-scaled ones of 1–10 rows: 9, 10, 15 = 8 + 7) and, from
    /// `SHRINK_WIDEN_FROM_ROWS`, widened to bytes.
    static let rowCounts = [1, 2, 3, 6, 9, 10, 15, Int(SHRINK_WIDEN_FROM_ROWS) + 1]

    /// Whether the integer path takes `weight`: everything but float values, scales along the
    /// inputs (they cannot be factored out of an integer dot) and blocks that are not a multiple of
    /// 32 inputs. A rotated weight's panels are its base's, behind `RotatedLinear`.
    static func isCovered(_ encoding: WeightEncoding, columns: Int) -> Bool {
        switch encoding {
        case .dense, .rotated: false
        case .affine(let affine):
            switch affine.granularity {
            case .perBlock(let size): size % 32 == 0 || size >= columns
            case .perChannel(let axis): axis == 0
            case .perTensor: true
            }
        case .palette: true
        case .sparse(_, let base): isCovered(base, columns: columns)
        }
    }

    /// Per output, the largest error integer arithmetic may make against the exact product.
    static func errorBound(x: [Float], rows: Int, decoded: [Float], weights: Int8PanelWeights) -> [Float] {
        let (inFeatures, outFeatures) = (weights.columns, weights.rows)
        var bound = [Float](repeating: 0, count: rows * outFeatures)
        for m in 0..<rows {
            let halfSteps = (0..<inFeatures).map { k in
                let block = k / 32 * 32
                return x[(m * inFeatures + block)..<(m * inFeatures + min(block + 32, inFeatures))].map(abs).max()! / 254
            }
            for o in 0..<outFeatures {
                let delta = weights.maximumWeightError(row: o)
                var sum: Float = 0, magnitude: Float = 0
                for k in 0..<inFeatures {
                    let (xv, wv) = (abs(x[m * inFeatures + k]), abs(decoded[o * inFeatures + k]))
                    sum += halfSteps[k] * (wv + delta) + xv * delta
                    magnitude += (xv + halfSteps[k]) * (wv + delta)
                }
                bound[m * outFeatures + o] = sum * 1.001 + 1e-5 * magnitude + 1e-6
            }
        }
        return bound
    }

    @Test(arguments: EncodingCatalog.all.map(\.name))
    func matchesTheReferenceWithinTheQuantizationBound(encoding: String) throws {
        var generator = SeededGenerator(seed: 11)
        for (shape, weight) in try EncodingCatalog.encodedWeights(encoding, shapes: Self.shapes, seed: 10) {
            let (outFeatures, inFeatures) = (shape[0], shape[1])
            guard let weights = Int8PanelWeights(weight: weight) else {
                #expect(!Self.isCovered(weight.encoding, columns: inFeatures), "\(encoding) \(shape) should take the integer path")
                continue
            }
            #expect(Self.isCovered(weight.encoding, columns: inFeatures), "\(encoding) \(shape) is not meant for the integer path")
            let bias = generator.floats(outFeatures)
            let decoded = weight.decode()
            let reference = ReferenceEncodedLinear(weight: weight, bias: bias)
            for rows in Self.rowCounts {
                // Awkward activations: one outlier per row, and an all-zero block.
                var x = generator.floats(rows * inFeatures, in: -2...2)
                for m in 0..<rows { x[m * inFeatures + (m * 7) % inFeatures] = 40 }
                if inFeatures > 64 { for k in 32..<64 { x[k] = 0 } }
                var expected = [Float](repeating: 0, count: rows * outFeatures)
                reference.forward(x, rows: rows, into: &expected)
                let bound = Self.errorBound(x: x, rows: rows, decoded: decoded, weights: weights)
                var outputs: [IntegerKernelVariant: [Float]] = [:]
                for variant in IntegerKernelVariant.available {
                    for threads in [1, 2] {
                        let kernel = Int8ActivationLinear(weights: weights, bias: bias, threads: threads, variant: variant, minimumWorkPerThread: 0)
                        var actual = [Float](repeating: .nan, count: rows * outFeatures)
                        kernel.forward(x, rows: rows, into: &actual)
                        if let previous = outputs[variant] {
                            #expect(previous == actual, "\(encoding) \(shape) \(variant): 1 and 2 threads differ")
                        }
                        outputs[variant] = actual
                        let worst = (0..<actual.count).max { abs(actual[$0] - expected[$0]) / bound[$0] < abs(actual[$1] - expected[$1]) / bound[$1] }!
                        #expect(abs(actual[worst] - expected[worst]) <= bound[worst],
                                "\(encoding) \(variant) \(shape) rows \(rows) threads \(threads): y[\(worst)] \(actual[worst]) vs \(expected[worst]), bound \(bound[worst])")
                    }
                }
                for variant in IntegerKernelVariant.available where variant != .swift {
                    #expect(outputs[variant] == outputs[.swift], "\(encoding) \(shape) rows \(rows): \(variant) and the Swift twin differ")
                }
            }
        }
    }

    /// Integer-scaled weights give a row the same result whatever rows come with it (one at a time,
    /// in tiles below `SHRINK_WIDEN_FROM_ROWS`, or widened from there on), in every variant.
    @Test func integerScaledRowsDoNotDependOnTheirBatch() throws {
        var generator = SeededGenerator(seed: 5)
        let batch = Int(SHRINK_WIDEN_FROM_ROWS) + 1
        var checked = 0
        for entry in EncodingCatalog.all {
            for shape in [[40, 192], [33, 100]] where entry.config.mismatch(shape: shape) == nil {
                let (outFeatures, inFeatures) = (shape[0], shape[1])
                let tensor = try DenseTensor(converting: generator.floats(outFeatures * inFeatures), shape: shape)
                guard let weights = Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: entry.config)),
                      weights.isIntegerScaled else { continue }
                checked += 1
                let x = generator.floats(batch * inFeatures, in: -2...2)
                let bias = generator.floats(outFeatures)
                for variant in IntegerKernelVariant.available {
                    let kernel = Int8ActivationLinear(weights: weights, bias: bias, threads: 2, variant: variant, minimumWorkPerThread: 0)
                    var whole = [Float](repeating: .nan, count: batch * outFeatures)
                    kernel.forward(x, rows: batch, into: &whole)
                    for rows in [1, 9] {
                        for first in stride(from: 0, to: batch - rows + 1, by: rows) {
                            var part = [Float](repeating: .nan, count: rows * outFeatures)
                            kernel.forward(Array(x[(first * inFeatures)..<((first + rows) * inFeatures)]), rows: rows, into: &part)
                            #expect(part == Array(whole[(first * outFeatures)..<((first + rows) * outFeatures)]),
                                    "\(entry.name) \(shape) \(variant): rows \(first)..<\(first + rows) alone differ from the batch of \(batch)")
                        }
                    }
                }
            }
        }
        #expect(checked >= 4, "the catalog's integer-scaled encodings")
    }

    /// Quad panels whose 16 channels of a panel share a LUT that differs from panel to panel (4-vector
    /// palettes per 16 channels) run as their Swift twin in every variant, packed (2 bits per weight).
    @Test func quadPanelsWithALUTPerPanelMatchTheTwin() throws {
        var generator = SeededGenerator(seed: 21)
        let (outFeatures, inFeatures) = (48, 96)
        let tensor = try DenseTensor(converting: generator.floats(outFeatures * inFeatures), shape: [outFeatures, inFeatures])
        let config = EncodingCatalog.palettize(6, .kmeans, .perGroupedChannel(axis: 0, groupSize: 16), vector: 4, lut: .i8)
        let weights = try #require(Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: config)))
        #expect(weights.packedBits == 2 && weights.codeDescription == "8-bit quad indices → 8-bit codes")
        let bias = generator.floats(outFeatures)
        for rows in [1, 5, Int(SHRINK_WIDEN_FROM_ROWS) + 1] {
            let x = generator.floats(rows * inFeatures, in: -2...2)
            var outputs: [IntegerKernelVariant: [Float]] = [:]
            for variant in IntegerKernelVariant.available {
                var y = [Float](repeating: .nan, count: rows * outFeatures)
                Int8ActivationLinear(weights: weights, bias: bias, threads: 2, variant: variant, minimumWorkPerThread: 0).forward(x, rows: rows, into: &y)
                outputs[variant] = y
            }
            for variant in IntegerKernelVariant.available { #expect(outputs[variant] == outputs[.swift], "\(variant), \(rows) rows") }
        }
    }


    /// Layers that share an input, run as one pass (one quantization, their panels split over the
    /// threads as one range), give each layer's own outputs bit for bit, whatever their encodings
    /// and widths; operators that cannot share an input are refused.
    @Test func sharedInputLinearsMatchTheirLayers() throws {
        var generator = SeededGenerator(seed: 8)
        let inFeatures = 100
        let configs: [(Int, OpCompressionConfig)] = [
            (40, EncodingCatalog.quantize(8, symmetric: true, .perChannel(axis: 0))), (16, EncodingCatalog.palettize(4)),
            (33, EncodingCatalog.quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 32), scale: .u8)),
        ]
        let encoded = try configs.map { outFeatures, config in
            let tensor = try DenseTensor(converting: generator.floats(outFeatures * inFeatures), shape: [outFeatures, inFeatures])
            return (Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: config))!, generator.floats(outFeatures))
        }
        for variant in IntegerKernelVariant.available {
            for threads in [1, 2] {
                let layers = encoded.map { Int8ActivationLinear(weights: $0.0, bias: $0.1, threads: threads, variant: variant, minimumWorkPerThread: 0) }
                let group = try #require(SharedInputLinears(layers))
                for rows in [1, 9, Int(SHRINK_WIDEN_FROM_ROWS) + 1] {
                    let x = generator.floats(rows * inFeatures, in: -2...2)
                    var first = [Float](repeating: .nan, count: rows * layers[0].outFeatures)
                    var second = [Float](repeating: .nan, count: rows * layers[1].outFeatures)
                    var third = [Float](repeating: .nan, count: rows * layers[2].outFeatures)
                    first.withUnsafeMutableBufferPointer { a in
                        second.withUnsafeMutableBufferPointer { b in
                            third.withUnsafeMutableBufferPointer { c in
                                [a.baseAddress!, b.baseAddress!, c.baseAddress!].withUnsafeBufferPointer { group.forward(x, rows: rows, into: $0) }
                            }
                        }
                    }
                    for (layer, output) in zip(layers, [first, second, third]) {
                        var alone = [Float](repeating: .nan, count: rows * layer.outFeatures)
                        layer.forward(x, rows: rows, into: &alone)
                        #expect(output == alone, "\(variant), \(threads) threads, \(rows) rows: \(layer.outFeatures) outputs differ from the layer alone")
                    }
                }
            }
        }
        let narrower = Int8ActivationLinear(weights: encoded[0].0, bias: nil, threads: 2)
        let wider = try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: generator.floats(16 * 64), shape: [16, 64]),
                                                config: EncodingCatalog.quantize(8, symmetric: true, .perChannel(axis: 0)))
        #expect(SharedInputLinears([narrower, Int8ActivationLinear(weights: Int8PanelWeights(weight: wider)!, bias: nil, threads: 2)]) == nil,
                "different input widths")
        #expect(SharedInputLinears([narrower, Int8ActivationLinear(weights: encoded[1].0, bias: nil, threads: 1)]) == nil, "different thread counts")
        #expect(SharedInputLinears([narrower, DenseLinear(weights: generator.floats(16 * inFeatures), bias: nil, outFeatures: 16, inFeatures: inFeatures)]) == nil,
                "an fp32 layer")
    }

    /// Palette LUTs take 8-bit codes when their grid holds every entry (int8 LUTs, a custom LUT of
    /// coarse values), else 16-bit codes in two planes within 2⁻¹⁶ of the LUT's range; one-hot
    /// activations read back the weights every variant multiplies, which are the stored ones that
    /// closely (up to float rounding).
    @Test func paletteLUTsRunTheirStoredValues() throws {
        var generator = SeededGenerator(seed: 21)
        let (outFeatures, inFeatures) = (48, 96)
        let tensor = try DenseTensor(converting: generator.floats(outFeatures * inFeatures), shape: [outFeatures, inFeatures])
        var prunedInt8 = EncodingCatalog.palettize(4, lut: .i8)
        prunedInt8.prune = .nOfM(n: 2, m: 4)
        let cases: [(String, OpCompressionConfig, codeBits: Int, exact: Bool)] = [
            ("int8 LUT", EncodingCatalog.palettize(4, lut: .i8), 8, true),
            ("int8 LUT grouped 16", EncodingCatalog.palettize(3, .kmeans, .perGroupedChannel(axis: 0, groupSize: 16), lut: .i8), 8, true),
            ("int8 LUT 6-bit", EncodingCatalog.palettize(6, lut: .i8), 8, true),
            ("2:4 + int8 LUT", prunedInt8, 8, true),
            ("custom coarse LUT", EncodingCatalog.palettize(2, .custom([-0.5, 0, 0.25, 0.5])), 8, true),
            ("f16 LUT", EncodingCatalog.palettize(4), 16, false),
            ("f16 LUT 6-bit", EncodingCatalog.palettize(6), 16, false),
            ("vector LUT", EncodingCatalog.palettize(2, vector: 2), 16, false),
            ("int8 vector LUT", EncodingCatalog.palettize(4, vector: 2, lut: .i8), 8, true),
            ("int8 vector LUT grouped 16, channel scales",
             EncodingCatalog.palettize(3, .kmeans, .perGroupedChannel(axis: 0, groupSize: 16), vector: 4, lut: .i8, channelScale: true), 8, true),
        ]
        var identity = [Float](repeating: 0, count: inFeatures * inFeatures)
        for k in 0..<inFeatures { identity[k * inFeatures + k] = 1 }
        for (name, config, codeBits, exact) in cases {
            let weight = try WeightCompressor.encode(name: "w", tensor: tensor, config: config)
            let panels = try #require(Int8PanelWeights(weight: weight), "\(name)")
            #expect(panels.codeBits == codeBits && (!exact || panels.isExact), "\(name): \(panels.codeDescription)")
            let decoded = weight.decode()
            if case .palette = weight.encoding, codeBits == 16 {
                let range = Double(decoded.max()! - min(decoded.min()!, 0))
                #expect((0..<outFeatures).allSatisfy { Double(panels.maximumWeightError(row: $0)) <= range / 65534 }, "\(name)")
            }
            for variant in IntegerKernelVariant.available {
                let kernel = Int8ActivationLinear(weights: panels, bias: nil, threads: 2, variant: variant, minimumWorkPerThread: 0)
                var computed = [Float](repeating: .nan, count: inFeatures * outFeatures)
                kernel.forward(identity, rows: inFeatures, into: &computed)
                for o in 0..<outFeatures {
                    let row = decoded[(o * inFeatures)..<((o + 1) * inFeatures)]
                    let tolerance = panels.maximumWeightError(row: o) + 4e-6 * row.map(abs).max()!
                    let worst = (0..<inFeatures).map { abs(computed[$0 * outFeatures + o] - row[o * inFeatures + $0]) }.max()!
                    #expect(worst <= tolerance, "\(name) \(variant): row \(o) off by \(worst), allowed \(tolerance)")
                }
            }
        }
    }

    @Test func packedPanelsKeepTheirLUTsAndIntegerScales() throws {
        var generator = SeededGenerator(seed: 3)
        let tensor = try DenseTensor(converting: generator.floats(64 * 96), shape: [64, 96])
        let shared = Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: EncodingCatalog.palettize(4)))!
        #expect(shared.packedBits == 4 && shared.codeBits == 16 && shared.byteCount < 64 * 96, "an f16 LUT: nibble indices, 16-bit codes")
        let crumbs = Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: EncodingCatalog.palettize(2, lut: .i8)))!
        #expect(crumbs.packedBits == 2 && crumbs.codeBits == 8 && crumbs.isExact && crumbs.codeDescription == "2-bit LUT indices → 8-bit codes",
                "an int8 LUT of 4 entries: crumb indices, 8-bit codes")
        let affineCrumbs = Int8PanelWeights(weight: try WeightCompressor.encode(
            name: "w", tensor: tensor, config: EncodingCatalog.quantize(2, symmetric: false, signed: false, .perBlock(blockSize: 32))))!
        #expect(affineCrumbs.packedBits == 2 && affineCrumbs.isExact && affineCrumbs.codeDescription == "2-bit codes")
        #expect(affineCrumbs.byteCount < crumbs.byteCount + 64 * 96 / 4, "crumbs take a quarter byte per weight")
        let tribits = Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: EncodingCatalog.palettize(3, lut: .i8)))!
        #expect(tribits.packedBits == 3 && tribits.isExact && tribits.codeDescription == "3-bit LUT indices → 8-bit codes")
        let affineTribits = Int8PanelWeights(weight: try WeightCompressor.encode(
            name: "w", tensor: tensor, config: EncodingCatalog.quantize(3, symmetric: true, .perChannel(axis: 0))))!
        #expect(affineTribits.packedBits == 3 && affineTribits.isExact && affineTribits.codeDescription == "3-bit codes")
        let pairs = Int8PanelWeights(weight: try WeightCompressor.encode(
            name: "w", tensor: tensor, config: EncodingCatalog.palettize(4, .kmeans, .perGroupedChannel(axis: 0, groupSize: 16), vector: 2, lut: .i8)))!
        #expect(pairs.pairedEntries && pairs.packedBits == 2 && pairs.isExact && pairs.codeDescription == "4-bit pair indices → 8-bit codes",
                "int8 pairs of 16 entries per 16 channels: pair panels")
        let widePairs = Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: EncodingCatalog.palettize(6, vector: 2, lut: .i8)))!
        #expect(widePairs.pairedEntries && widePairs.packedBits == 3 && widePairs.isExact && widePairs.codeDescription == "6-bit pair indices → 8-bit codes")
        let widestPairs = Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: EncodingCatalog.palettize(8, vector: 2, lut: .i8)))!
        #expect(widestPairs.pairedEntries && widestPairs.packedBits == 4 && widestPairs.isExact
                && widestPairs.codeDescription == "8-bit pair indices → 8-bit codes", "int8 pairs of 256 entries: a byte per 2 weights")
        let quads = Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: EncodingCatalog.palettize(8, vector: 4, lut: .i8)))!
        #expect(quads.packedBits == 2 && quads.isExact && quads.codeDescription == "8-bit quad indices → 8-bit codes",
                "int8 4-vectors of 256 entries: quad panels, a byte per 4 weights")
        var prunedConfig = EncodingCatalog.palettize(4, lut: .i8)
        prunedConfig.prune = .nOfM(n: 2, m: 4)
        let pruned = Int8PanelWeights(weight: try WeightCompressor.encode(name: "w", tensor: tensor, config: prunedConfig))!
        #expect(pruned.packedBits == 3 && pruned.isExact && pruned.codeDescription == "2:4 kept 4-bit LUT indices → 8-bit codes",
                "2:4 with an int8 LUT: kept indices and masks")
        let splitPairs = Int8PanelWeights(weight: try WeightCompressor.encode(
            name: "w", tensor: tensor, config: EncodingCatalog.palettize(4, .kmeans, .perGroupedChannel(axis: 0, groupSize: 8), vector: 2, lut: .i8)))!
        #expect(!splitPairs.pairedEntries && splitPairs.packedBits == 8, "pairs whose LUTs split the panels take a byte per weight")
        let grouped = Int8PanelWeights(weight: try WeightCompressor.encode(
            name: "w", tensor: tensor, config: EncodingCatalog.palettize(4, .kmeans, .perGroupedChannel(axis: 0, groupSize: 8))))!
        #expect(grouped.packedBits == 8, "groups of 8 channels split the panels of 16: codes take a byte")
        let affine = Int8PanelWeights(weight: try WeightCompressor.encode(
            name: "w", tensor: tensor, config: EncodingCatalog.quantize(4, symmetric: true, .perBlock(blockSize: 32))))!
        #expect(affine.packedBits == 4 && affine.isExact && affine.maximumWeightError(row: 5) == 0 && !affine.isIntegerScaled)
        let encoded = try WeightCompressor.encode(
            name: "w", tensor: tensor, config: EncodingCatalog.quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 32), scale: .u8))
        let integerScaled = Int8PanelWeights(weight: encoded)!
        #expect(integerScaled.packedBits == 4 && integerScaled.isExact && integerScaled.isIntegerScaled,
                "integer block scales run as per-channel bytes")
        // A file may hold multipliers too large for bytes: valid, but it keeps float block scales.
        var parts = encoded.parts
        var multipliers = Array(parts["scales"]!.bytes)
        multipliers[0] = 200
        parts["scales"] = try DenseTensor(dtype: .u8, shape: [multipliers.count], bytes: multipliers)
        let oversized = try EncodedTensor(name: "w", shape: encoded.shape, sourceDType: .f32, encoding: encoded.encoding, parts: parts)
        let fallback = Int8PanelWeights(weight: oversized)!
        #expect(fallback.packedBits == 4 && fallback.isExact && !fallback.isIntegerScaled)
        let rows = Int(SHRINK_WIDEN_FROM_ROWS) + 1
        let x = generator.floats(rows * 96, in: -2...2)
        var outputs: [[Float]] = []
        for variant in IntegerKernelVariant.available {
            let kernel = Int8ActivationLinear(weights: fallback, bias: nil, threads: 2, variant: variant, minimumWorkPerThread: 0)
            var y = [Float](repeating: .nan, count: rows * 64)
            kernel.forward(x, rows: rows, into: &y)
            outputs.append(y)
        }
        #expect(outputs.allSatisfy { $0 == outputs[0] } && outputs[0].allSatisfy(\.isFinite), "every variant agrees on the fallback")
    }
}
