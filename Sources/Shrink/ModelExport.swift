import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkModels

/// What `ModelExport.gguf` wrote.
public struct GGUFExportSummary: Sendable {
    /// Tensors written per ggml type name, in the order of `GGMLType.allCases`.
    public let tensorsPerType: [(type: String, count: Int)]
    /// Metadata key-value pairs carried over.
    public let metadataCount: Int
    /// Bytes of the written file.
    public let fileBytes: Int
    /// Tensors no ggml type held, converted with `requantizeNearest`: the tensor, its encoding,
    /// the type written and the SNR (dB) of the written weights against the model's.
    public let requantized: [(tensor: String, encoding: String, type: String, snrDecibels: Double)]
}

/// Writes models in the formats other runtimes load.
public enum ModelExport {
    /// Writes the model at `input` (a compressed container made from a GGUF file, or a GGUF file) as
    /// a GGUF file at `output` that llama.cpp loads: the GGUF metadata it carries (architecture,
    /// hyper-parameters, tokenizer, chat template) unchanged, dense F32/F16/BF16 tensors as those
    /// types, and every encoded tensor as the ggml type whose blocks hold it exactly
    /// (`GGMLBlockPacking`: the blocks decode back to the tensor's parts byte for byte), so the file
    /// computes what the container does. Written atomically: on any error nothing is left at `output`.
    /// With `requantizeNearest`, a tensor no type holds is instead decoded and quantized again
    /// to its nearest type that Shrink's quantizer writes (`requantizationType`: Q8_0, Q5_0 or
    /// Q4_0, round to nearest per block of 32; F16 for rows that are not whole blocks), and the
    /// summary reports its SNR against the model's weights.
    /// - Throws: `ShrinkIOError.notExportable` naming the tensor, its encoding and the nearest ggml
    ///   type when no type holds it (without `requantizeNearest`); `.unsupportedFormat` for a model
    ///   without GGUF metadata or with residual rotations folded into its weights (which GGUF's
    ///   Llama graph does not apply).
    public static func gguf(input: String, output: String, requantizeNearest: Bool = false) throws -> GGUFExportSummary {
        let store = try TensorStores.open(path: input)
        let metadata: [(key: String, value: GGUFValue)]
        if let gguf = store as? GGUFStore {
            metadata = gguf.file.metadata
        } else if let json = store.metadata[GGUFMetadata.containerKey] {
            metadata = try GGUFMetadata(json: json, path: input).entries
        } else {
            throw ShrinkIOError.unsupportedFormat(path: input, reason: "GGUF export needs a model made from a GGUF file (its architecture and tokenizer metadata, key \(GGUFMetadata.containerKey)); this one has none")
        }
        if store.metadata[FoldedResidualRotation.metadataKey] != nil {
            throw ShrinkIOError.unsupportedFormat(path: input, reason: "its residual rotation is folded into the weights (metadata \(FoldedResidualRotation.metadataKey)), which a GGUF runtime does not undo; compress without fold_rotations")
        }
        var tensors: [GGUFWriter.Tensor] = []
        var requantized: [(tensor: String, encoding: String, type: String, snrDecibels: Double)] = []
        for name in store.names {
            switch store.tensor(named: name)! {
            case .dense(let tensor):
                guard let type = GGMLType.allCases.first(where: { $0.denseDType == tensor.dtype }) else {
                    throw ShrinkIOError.notExportable(path: input, tensor: name, reason: "dtype \(tensor.dtype.rawValue) is no GGUF type (nearest: F32)")
                }
                tensors.append(GGUFWriter.Tensor(name: name, shape: tensor.shape, type: type, bytes: Array(tensor.bytes)))
            case .encoded(let encoded):
                do {
                    let (type, bytes) = try GGMLBlockPacking.blocks(of: encoded)
                    tensors.append(GGUFWriter.Tensor(name: name, shape: encoded.shape, type: type, bytes: bytes))
                } catch {
                    guard requantizeNearest else {
                        throw ShrinkIOError.notExportable(path: input, tensor: name,
                                                          reason: "\(error) (nearest ggml type: \(nearestType(encoded.encoding).name); --requantize nearest converts it)")
                    }
                    let (tensor, snr) = try requantize(encoded, path: input)
                    tensors.append(tensor)
                    requantized.append((name, encoded.encoding.summary, tensor.type.name, snr))
                }
            }
        }
        try GGUFWriter.write(metadata: metadata, tensors: tensors, to: output)
        let counts = GGMLType.allCases.compactMap { type -> (type: String, count: Int)? in
            let count = tensors.count { $0.type == type }
            return count > 0 ? (type.name, count) : nil
        }
        let fileBytes = (try? MemoryMappedFile(path: output).bytes.count) ?? 0
        return GGUFExportSummary(tensorsPerType: counts, metadataCount: metadata.count, fileBytes: fileBytes, requantized: requantized)
    }

    /// The ggml type `--requantize nearest` writes for `encoding`: Q8_0 from 6 bits up, Q5_0 at 5,
    /// Q4_0 at 4 and below (by the bits of its codes or palette indices).
    static func requantizationType(_ encoding: WeightEncoding) -> GGMLType {
        switch encoding {
        case .dense: return .f16
        case .affine(let layout): return layout.bits >= 6 ? .q8_0 : layout.bits == 5 ? .q5_0 : .q4_0
        case .palette(let layout): return layout.bits >= 6 ? .q8_0 : layout.bits == 5 ? .q5_0 : .q4_0
        case .sparse(_, let base), .rotated(_, let base): return requantizationType(base)
        }
    }

    /// `tensor` decoded and quantized to `requantizationType` (F16 when its rows are not whole
    /// blocks of 32), with the SNR of the result against the decoded weights.
    static func requantize(_ tensor: EncodedTensor, path: String) throws -> (GGUFWriter.Tensor, Double) {
        let weights = tensor.decode()
        let type = (tensor.shape.last ?? 1) % 32 == 0 ? requantizationType(tensor.encoding) : .f16
        guard case .affine(let layout)? = GGMLEncoding.encoding(of: type) else {
            let half = try DenseTensor(converting: weights, to: .f16, shape: tensor.shape)
            return (GGUFWriter.Tensor(name: tensor.name, shape: tensor.shape, type: .f16, bytes: Array(half.bytes)),
                    WeightError.snr(original: weights, decoded: half.floats()))
        }
        var config = QuantizationConfig()
        (config.bits, config.symmetric, config.signed, config.granularity, config.scaleDType) = (layout.bits, true, layout.signed, layout.granularity, .f16)
        let encoded = try WeightCompressor.encode(name: tensor.name, tensor: try DenseTensor(converting: weights, shape: tensor.shape),
                                                  config: OpCompressionConfig(quantize: config))
        do {
            let (packedType, bytes) = try GGMLBlockPacking.blocks(of: encoded)
            return (GGUFWriter.Tensor(name: tensor.name, shape: tensor.shape, type: packedType, bytes: bytes),
                    WeightError.snr(original: weights, decoded: encoded.decode()))
        } catch {
            throw ShrinkIOError.notExportable(path: path, tensor: tensor.name, reason: "requantized to \(type.name), \(error)")
        }
    }

    /// The ggml type closest to `encoding` in bits per weight and kind, for error messages: affine
    /// codes by their bits (symmetric 4/5 bits as `Q4_0`/`Q5_0`, with offsets `Q4_1`/`Q5_1`),
    /// 4-bit palettes as `IQ4_NL`, other palettes by their bits, everything else by its base.
    static func nearestType(_ encoding: WeightEncoding) -> GGMLType {
        switch encoding {
        case .dense: return .f16
        case .affine(let layout):
            switch layout.bits {
            case ...2: return .q2_K
            case 3: return .q3_K
            case 4: return layout.symmetric ? .q4_0 : .q4_1
            case 5: return layout.symmetric ? .q5_0 : .q5_1
            case 6: return .q6_K
            default: return .q8_0
            }
        case .palette(let layout):
            switch layout.bits {
            case ...2: return .q2_K
            case 3: return .q3_K
            case 4: return .iq4_NL
            case 5: return .q5_1
            case 6: return .q6_K
            default: return .q8_0
            }
        case .sparse(_, let base), .rotated(_, let base):
            return nearestType(base)
        }
    }
}
