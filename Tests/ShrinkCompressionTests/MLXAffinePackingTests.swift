import Testing
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// `MLXAffinePacking` lays every affine encoding MLX can hold into its layout exactly (checked
/// against the reference decoding and against the codes read back from the words), picks the
/// largest group MLX accepts, and refuses the rest.
@Suite struct MLXAffinePackingTests {
    static func encode(bits: Int, symmetric: Bool, signed: Bool, granularity: QuantizationGranularity, scaleDType: DType = .f16,
                       shape: [Int], seed: UInt64) throws -> EncodedTensor {
        var quantize = QuantizationConfig()
        (quantize.bits, quantize.symmetric, quantize.signed, quantize.granularity, quantize.scaleDType) = (bits, symmetric, signed, granularity, scaleDType)
        var generator = SeededGenerator(seed: seed)
        let tensor = try DenseTensor(converting: generator.floats(shape.reduce(1, *)), shape: shape)
        return try WeightCompressor.encode(name: "w", tensor: tensor, config: OpCompressionConfig(quantize: quantize))
    }

    @Test(arguments: [2, 3, 4, 5, 6, 8])
    func everyWidthDecodesAsShrinkDoes(bits: Int) throws {
        // (symmetric, signed, granularity, MLX group): rows of 96 take blocks of 64 as groups of 32
        // (the last block is short), rows of 512 take blocks of 256 as groups of 128.
        let cases: [(Bool, Bool, QuantizationGranularity, Int)] = [
            (false, false, .perBlock(blockSize: 32), 32), (true, true, .perBlock(blockSize: 64), 32),
            (true, true, .perChannel(axis: 0), 32), (false, true, .perBlock(blockSize: 256), 128), (true, false, .perTensor, 32),
        ]
        for (index, (symmetric, signed, granularity, group)) in cases.enumerated() {
            let shape = granularity == .perBlock(blockSize: 256) ? [3, 512] : [5, 96]
            let tensor = try Self.encode(bits: bits, symmetric: symmetric, signed: signed, granularity: granularity, shape: shape, seed: UInt64(index))
            let packed = try MLXAffinePacking.pack(tensor)
            #expect(packed.groupSize == group && packed.bits == bits && packed.words.count == shape[0] * shape[1] * bits / 32)
            #expect(firstBitMismatch(MLXAffinePacking.decode(packed), tensor.decode()) == nil, "\(tensor.encoding.summary)")
            let codes = tensor.parts["codes"]!.bytes
            for position in stride(from: 0, to: shape[0] * shape[1], by: 7) {
                let stored = PackedBits.value(at: position, bits: bits, in: codes)
                let bit = position * bits
                var wide = UInt64(packed.words[bit / 32]) >> (bit % 32)
                if bit % 32 + bits > 32 { wide |= UInt64(packed.words[bit / 32 + 1]) << (32 - bit % 32) }
                #expect(UInt8(wide & UInt64((1 << bits) - 1)) == stored)
            }
        }
    }

    @Test func twoLevelIntegerScalesAndOffsetsAreExact() throws {
        let tensor = try Self.encode(bits: 4, symmetric: false, signed: false, granularity: .perBlock(blockSize: 32), scaleDType: .u8,
                                     shape: [4, 128], seed: 9)
        let packed = try MLXAffinePacking.pack(tensor)
        #expect(firstBitMismatch(MLXAffinePacking.decode(packed), tensor.decode()) == nil)
    }

    @Test func rowsPermuteWithTheirScales() throws {
        let tensor = try Self.encode(bits: 3, symmetric: false, signed: false, granularity: .perBlock(blockSize: 32), shape: [4, 64], seed: 3)
        let packed = try MLXAffinePacking.pack(tensor)
        let order = [2, 0, 3, 1]
        let permuted = MLXAffinePacking.decode(packed.permutingRows(order))
        let decoded = tensor.decode()
        #expect(firstBitMismatch(permuted, order.flatMap { decoded[($0 * 64)..<(($0 + 1) * 64)] }) == nil)
    }

    @Test func whatMLXCannotHoldIsRefused() throws {
        let blocksOf16 = try Self.encode(bits: 4, symmetric: true, signed: true, granularity: .perBlock(blockSize: 16), shape: [2, 64], seed: 1)
        #expect(throws: MLXAffinePacking.Failure.groups(columns: 64, run: 16)) { try MLXAffinePacking.pack(blocksOf16) }
        let perInput = try Self.encode(bits: 8, symmetric: true, signed: true, granularity: .perChannel(axis: 1), shape: [2, 64], seed: 2)
        #expect(throws: MLXAffinePacking.Failure.groups(columns: 64, run: 1)) { try MLXAffinePacking.pack(perInput) }
        let sevenBits = try Self.encode(bits: 7, symmetric: true, signed: true, granularity: .perBlock(blockSize: 32), shape: [2, 64], seed: 3)
        #expect(throws: MLXAffinePacking.Failure.bits(7)) { try MLXAffinePacking.pack(sevenBits) }
        var palette = PalettizationConfig()
        palette.bits = 2
        var generator = SeededGenerator(seed: 4)
        let lut = try WeightCompressor.encode(name: "w", tensor: try DenseTensor(converting: generator.floats(128), shape: [2, 64]),
                                              config: OpCompressionConfig(palettize: palette))
        #expect(throws: MLXAffinePacking.Failure.notAffine(encoding: lut.encoding.summary)) { try MLXAffinePacking.pack(lut) }
    }

    @Test func f32ScalesThatMLXWouldRoundAreRefused() throws {
        // With full-precision scales s · c and s · z each round in Float, so s · c − s · z is not
        // always Shrink's s · (c − z): the check catches it rather than writing a near copy.
        var refusedOne = false
        for seed in 0..<8 {
            let tensor = try Self.encode(bits: 8, symmetric: false, signed: false, granularity: .perChannel(axis: 0), scaleDType: .f32,
                                         shape: [16, 128], seed: UInt64(seed))
            do {
                let packed = try MLXAffinePacking.pack(tensor)
                #expect(firstBitMismatch(MLXAffinePacking.decode(packed), tensor.decode()) == nil)
            } catch MLXAffinePacking.Failure.notExact {
                refusedOne = true
            }
        }
        #expect(refusedOne)
    }
}
