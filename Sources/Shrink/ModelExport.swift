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
}

/// Writes models in the formats other runtimes load.
public enum ModelExport {
    /// Writes the model at `input` (a compressed container made from a GGUF file, or a GGUF file) as
    /// a GGUF file at `output` that llama.cpp loads: the GGUF metadata it carries (architecture,
    /// hyper-parameters, tokenizer, chat template) unchanged, dense F32/F16/BF16 tensors as those
    /// types, and every encoded tensor as the ggml type whose blocks hold it exactly
    /// (`GGMLBlockPacking`: the blocks decode back to the tensor's parts byte for byte), so the file
    /// computes what the container does. Written atomically: on any error nothing is left at `output`.
    /// - Throws: `ShrinkIOError.notExportable` naming the tensor, its encoding and the nearest ggml
    ///   type when no type holds it; `.unsupportedFormat` for a model without GGUF metadata or with
    ///   residual rotations folded into its weights (which GGUF's Llama graph does not apply).
    public static func gguf(input: String, output: String) throws -> GGUFExportSummary {
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
                    throw ShrinkIOError.notExportable(path: input, tensor: name, reason: "\(error) (nearest ggml type: \(nearestType(encoded.encoding).name))")
                }
            }
        }
        try GGUFWriter.write(metadata: metadata, tensors: tensors, to: output)
        let counts = GGMLType.allCases.compactMap { type -> (type: String, count: Int)? in
            let count = tensors.count { $0.type == type }
            return count > 0 ? (type.name, count) : nil
        }
        let fileBytes = (try? MemoryMappedFile(path: output).bytes.count) ?? 0
        return GGUFExportSummary(tensorsPerType: counts, metadataCount: metadata.count, fileBytes: fileBytes)
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
