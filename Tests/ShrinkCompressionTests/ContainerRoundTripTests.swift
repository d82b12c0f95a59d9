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
