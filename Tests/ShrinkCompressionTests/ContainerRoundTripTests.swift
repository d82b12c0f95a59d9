import Foundation
import Testing
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// `decode(read(write(encode(W))))` equals `decode(encode(W))` bit for bit, for every encoding,
/// on random tensors of odd shapes and on real MiniLM weights.
@Suite struct ContainerRoundTripTests {
    static func roundTrip(_ encoded: [EncodedTensor], dense: [(name: String, tensor: DenseTensor)] = []) throws -> CompressedModel {
        let folder = TemporaryDirectory()
        let path = folder.file("model.safetensors")
        try CompressedModel(denseTensors: dense, encodedTensors: encoded, metadata: ["note": "test"]).write(to: path)
        let read = try CompressedModel(file: try SafetensorsFile(path: path))
        // Read everything before the folder goes away (tensors are views of the mapped file).
        return CompressedModel(denseTensors: read.denseTensors.map { ($0.name, $0.tensor.copied()) },
                               encodedTensors: try read.encodedTensors.map {
                                   try EncodedTensor(name: $0.name, shape: $0.shape, sourceDType: $0.sourceDType, encoding: $0.encoding,
                                                     parts: $0.parts.mapValues { $0.copied() })
                               }, metadata: read.metadata)
    }

    @Test(arguments: EncodingCatalog.all.map(\.name))
    func everyEncodingRoundTripsBitForBit(name: String) throws {
        let config = EncodingCatalog.all.first { $0.name == name }!.config
        var generator = SeededGenerator(seed: 42)
        // Odd shapes: 3-D, a tail block, channels not a multiple of 8.
        let shapes = [[6, 24], [12, 20], [6, 3, 8], [18, 36]]
        var encoded: [EncodedTensor] = []
        for (index, shape) in shapes.enumerated() {
            let values = generator.floats(shape.reduce(1, *), in: -0.5...0.5)
            let dtype: DType = [.f32, .f16, .bf16][index % 3]
            let tensor = try DenseTensor(converting: values, to: dtype, shape: shape)
            if let mismatch = config.mismatch(shape: shape) {
                #expect(throws: CompressionError.self, "\(mismatch)") { try WeightCompressor.encode(name: "t", tensor: tensor, config: config) }
                continue
            }
            encoded.append(try WeightCompressor.encode(name: "t\(index)", tensor: tensor, config: config))
        }
        let dense = [("bias", try DenseTensor(converting: [1, 2, 3], shape: [3]))]
        let read = try Self.roundTrip(encoded, dense: dense)
        #expect(read.metadata == ["note": "test"])
        #expect(read.denseTensors.map(\.name) == ["bias"] && read.denseTensors[0].tensor.floats() == [1, 2, 3])
        for (original, back) in zip(encoded, read.encodedTensors) {
            #expect(back.encoding == original.encoding && back.shape == original.shape && back.sourceDType == original.sourceDType)
            let a = original.decode(), b = back.decode()
            #expect(a.map(\.bitPattern) == b.map(\.bitPattern), "\(name) \(original.name)")
        }
    }

    /// Every shipped recipe's encodings on real MiniLM tensors (one attention, one feed-forward weight).
    @Test(arguments: EncodingCatalog.all.map(\.name))
    func realMiniLMTensorsRoundTrip(name: String) throws {
        let config = EncodingCatalog.all.first { $0.name == name }!.config
        let file = try SafetensorsFile(path: TestModels.miniLM + "/model.safetensors")
        var encoded: [EncodedTensor] = []
        for tensorName in ["encoder.layer.2.attention.self.value.weight", "encoder.layer.4.output.dense.weight"] {
            encoded.append(try WeightCompressor.encode(name: tensorName, tensor: try file.tensor(named: tensorName), config: config, threads: 2))
        }
        let read = try Self.roundTrip(encoded)
        for (original, back) in zip(encoded, read.encodedTensors) {
            #expect(original.decode().map(\.bitPattern) == back.decode().map(\.bitPattern), "\(name) \(original.name)")
        }
    }

    /// An int8 LUT's optional zero points: decoded as `(q − z) · s`, checked for count and dtype,
    /// refused beside an f16 LUT.
    @Test func int8LUTZeroPointsAreCheckedAndDecoded() throws {
        let indices = try DenseTensor(dtype: .u8, shape: [1], bytes: [0b11_10_01_00])
        let lut = try DenseTensor(dtype: .i8, shape: [1, 4, 1], bytes: [Int8(-128), -1, 0, 127].map { UInt8(bitPattern: $0) })
        let scales = try DenseTensor(converting: [0.5], shape: [1])
        let zeroPoints = try DenseTensor(dtype: .i8, shape: [1], bytes: [UInt8(bitPattern: -3)])
        func palette(_ dtype: DType) -> WeightEncoding {
            .palette(PaletteEncoding(bits: 2, granularity: .perTensor, vectorSize: 1, lutDType: dtype, perChannelScale: false))
        }
        let tensor = try EncodedTensor(name: "w", shape: [1, 4], sourceDType: .f32, encoding: palette(.i8),
                                       parts: ["indices": indices, "lut": lut, "lut_scales": scales, "lut_zero_points": zeroPoints])
        #expect(tensor.decode() == [-62.5, 1, 1.5, 65])
        let wrongCount = try DenseTensor(dtype: .i8, shape: [2], bytes: [0, 0])
        #expect(throws: ShrinkCoreError.self) {
            try EncodedTensor(name: "w", shape: [1, 4], sourceDType: .f32, encoding: palette(.i8),
                              parts: ["indices": indices, "lut": lut, "lut_scales": scales, "lut_zero_points": wrongCount])
        }
        let halfLUT = try DenseTensor(converting: [-1, 0, 1, 2], to: .f16, shape: [1, 4, 1])
        do {
            _ = try EncodedTensor(name: "w", shape: [1, 4], sourceDType: .f32, encoding: palette(.f16),
                                  parts: ["indices": indices, "lut": halfLUT, "lut_zero_points": zeroPoints])
            Issue.record("accepted zero points beside an f16 LUT")
        } catch {
            #expect("\(error)".contains("lut_zero_points belong to I8 LUTs"), "\(error)")
        }
    }

    @Test func corruptContainerMetadataIsATypedError() throws {
        let folder = TemporaryDirectory()
        let path = folder.file("bad.safetensors")
        let part = try DenseTensor(dtype: .u8, shape: [3], bytes: [1, 2, 3])
        let cases: [(String, String)] = [
            (#"{"w": {"shape": [2, 3], "dtype": "F32", "encoding": {"kind": "affine"}, "parts": ["codes"]}}"#, "encoding.granularity: missing"),
            (#"{"w": {"shape": [2, 3], "dtype": "F32", "encoding": {"kind": "dense", "dtype": "F32"}, "parts": ["nope"]}}"#, "no tensor named 'w#nope'"),
            (#"{"w": {"shape": [-2], "dtype": "F32"}}"#, "shape must be an array of non-negative integers"),
            (#"{"w": {"shape": [2, 3], "dtype": "F32", "encoding": {"kind": "palette", "bits": 4, "granularity": {"kind": "per_tensor"}, "vector_size": 1, "lut_dtype": "F16", "per_channel_scale": false}, "parts": ["codes"]}}"#, "missing part 'indices'"),
            ("not json", "invalid JSON"),
        ]
        for (description, expected) in cases {
            try SafetensorsWriter.write([("w#codes", part), ("w#nope2", part)], metadata: ["shrink.format": "1", "shrink.tensors": description], to: path)
            do {
                _ = try CompressedModel(file: try SafetensorsFile(path: path))
                Issue.record("accepted \(description)")
            } catch {
                #expect(error.description.contains(expected) && error.description.hasPrefix(path), "\(error)")
            }
        }
    }
}
