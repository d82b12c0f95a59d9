import ShrinkCompression
import ShrinkCore

/// Every encoding the passes produce, by name: the list that drives the round-trip and decoding
/// tests, so a new encoding is tested the day it is added here. The builders also serve the
/// benchmarks.
public enum EncodingCatalog {
    public static func quantize(_ bits: Int, symmetric: Bool, signed: Bool = true, _ granularity: QuantizationGranularity,
                         scale: DType = .f16, clip: Bool = false, method: RoundingMethod = .roundToNearest) -> OpCompressionConfig {
        var config = QuantizationConfig()
        config.method = method
        config.bits = bits
        config.symmetric = symmetric
        config.signed = signed
        config.granularity = granularity
        config.scaleDType = scale
        config.clipSearch = clip
        return OpCompressionConfig(quantize: config)
    }

    public static func palettize(_ bits: Int, _ mode: PalettizationConfig.Mode = .kmeans, _ granularity: PaletteGranularity = .perTensor,
                          vector: Int = 1, lut: DType = .f16, channelScale: Bool = false) -> OpCompressionConfig {
        var config = PalettizationConfig()
        config.bits = bits
        config.mode = mode
        config.granularity = granularity
        config.clusterDim = vector
        config.lutDType = lut
        config.perChannelScale = channelScale
        return OpCompressionConfig(palettize: config)
    }

    public static var all: [(name: String, config: OpCompressionConfig)] {
        var list: [(String, OpCompressionConfig)] = []
        for bits in 2...8 {
            list.append(("int\(bits) symmetric per-channel", quantize(bits, symmetric: true, .perChannel(axis: 0))))
            list.append(("uint\(bits) affine per-block 16", quantize(bits, symmetric: false, signed: false, .perBlock(blockSize: 16))))
        }
        list.append(("int4 affine per-tensor f32 scales", quantize(4, symmetric: false, .perTensor, scale: .f32)))
        list.append(("uint8 symmetric axis 1", quantize(8, symmetric: true, signed: false, .perChannel(axis: 1))))
        list.append(("int4 per-block 32 clip search", quantize(4, symmetric: true, .perBlock(blockSize: 32), clip: true)))
        list.append(("uint4 affine per-block 32 integer scales", quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 32), scale: .u8)))
        list.append(("int4 symmetric per-block 64 integer scales", quantize(4, symmetric: true, .perBlock(blockSize: 64), scale: .u8)))
        list.append(("int2 affine per-block 16 integer scales", quantize(2, symmetric: false, .perBlock(blockSize: 16), scale: .u8)))
        for bits in [1, 2, 3, 4, 6, 8] {
            list.append(("palette \(bits)-bit kmeans", palettize(bits)))
            list.append(("palette \(bits)-bit uniform grouped", palettize(bits, .uniform, .perGroupedChannel(axis: 0, groupSize: 3))))
        }
        list.append(("palette 4-bit f32 LUT channel-scaled", palettize(4, lut: .f32, channelScale: true)))
        list.append(("palette 4-bit int8 LUT", palettize(4, lut: .i8)))
        list.append(("palette 3-bit int8 LUT", palettize(3, lut: .i8)))
        list.append(("palette 2-bit int8 LUT", palettize(2, lut: .i8)))
        list.append(("uint2 affine per-block 32", quantize(2, symmetric: false, signed: false, .perBlock(blockSize: 32))))
        list.append(("palette 2-bit vector 2", palettize(2, vector: 2)))
        list.append(("palette 4-bit vector 2 int8 LUT", palettize(4, vector: 2, lut: .i8)))
        list.append(("palette 6-bit vector 2 int8 LUT", palettize(6, vector: 2, lut: .i8)))
        list.append(("palette 4-bit vector 2 grouped 16 int8 LUT", palettize(4, .kmeans, .perGroupedChannel(axis: 0, groupSize: 16), vector: 2, lut: .i8)))
        list.append(("palette 3-bit vector 4 grouped", palettize(3, .kmeans, .perGroupedChannel(axis: 0, groupSize: 2), vector: 4)))
        list.append(("palette 8-bit vector 2 int8 LUT", palettize(8, vector: 2, lut: .i8)))
        list.append(("palette 8-bit vector 4 int8 LUT", palettize(8, vector: 4, lut: .i8)))
        list.append(("palette 6-bit vector 4 int8 LUT", palettize(6, vector: 4, lut: .i8)))
        list.append(("palette 2-bit custom", palettize(2, .custom([-0.5, 0, 0.25, 0.5]))))
        list.append(("palette axis-1 grouped", palettize(4, .kmeans, .perGroupedChannel(axis: 1, groupSize: 4))))
        list.append(("prune 50% magnitude", OpCompressionConfig(prune: .magnitude(sparsity: 0.5))))
        list.append(("prune 2:4", OpCompressionConfig(prune: .nOfM(n: 2, m: 4))))
        list.append(("prune blocks of 4", OpCompressionConfig(prune: .block(blockSize: 4, sparsity: 0.25))))
        var prunedPalette = palettize(4, .kmeans, .perGroupedChannel(axis: 0, groupSize: 2))
        prunedPalette.prune = .nOfM(n: 2, m: 4)
        list.append(("2:4 + palette 4-bit grouped", prunedPalette))
        var prunedIntPalette = palettize(4, lut: .i8)
        prunedIntPalette.prune = .nOfM(n: 2, m: 4)
        list.append(("2:4 + palette 4-bit int8 LUT", prunedIntPalette))
        var prunedHalfPalette = palettize(4)
        prunedHalfPalette.prune = .nOfM(n: 2, m: 4)
        list.append(("2:4 + palette 4-bit f16 LUT", prunedHalfPalette))
        var prunedQuantized = quantize(4, symmetric: false, .perBlock(blockSize: 8))
        prunedQuantized.prune = .magnitude(sparsity: 0.3)
        list.append(("30% + int4 per-block 8", prunedQuantized))
        var prunedIntegerScaled = quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 32), scale: .u8)
        prunedIntegerScaled.prune = .nOfM(n: 2, m: 4)
        list.append(("2:4 + uint4 per-block 32 integer scales", prunedIntegerScaled))
        var prunedInt8 = quantize(8, symmetric: false, signed: false, .perChannel(axis: 0))
        prunedInt8.prune = .nOfM(n: 2, m: 4)
        list.append(("2:4 + uint8 affine per-channel", prunedInt8))
        var prunedIntLUT = palettize(3, lut: .i8)
        prunedIntLUT.prune = .block(blockSize: 2, sparsity: 0.5)
        list.append(("blocks + palette int8 LUT", prunedIntLUT))
        var rotatedBlocks = quantize(4, symmetric: false, signed: false, .perBlock(blockSize: 16))
        rotatedBlocks.rotate = RotationConfig(seed: 1)
        list.append(("rotated uint4 affine per-block 16", rotatedBlocks))
        var rotatedPalette = palettize(3, lut: .i8)
        rotatedPalette.rotate = RotationConfig(block: .largest)
        list.append(("rotated palette 3-bit int8 LUT", rotatedPalette))
        var rotatedChannels = quantize(8, symmetric: true, .perChannel(axis: 0))
        rotatedChannels.rotate = RotationConfig(seed: 2)
        list.append(("rotated int8 symmetric per-channel", rotatedChannels))
        return list
    }

    /// Entry `name` applied to random weights (uniform in −1…1, drawn from `SeededGenerator(seed:)`)
    /// of each of `shapes` that its config fits.
    public static func encodedWeights(_ name: String, shapes: [[Int]], seed: UInt64) throws -> [(shape: [Int], weight: EncodedTensor)] {
        let config = all.first { $0.name == name }!.config
        var generator = SeededGenerator(seed: seed)
        return try shapes.filter { config.mismatch(shape: $0) == nil }.map { shape in
            let tensor = try DenseTensor(converting: generator.floats(shape[0] * shape[1]), shape: shape)
            return (shape, try WeightCompressor.encode(name: "w", tensor: tensor, config: config))
        }
    }
}
