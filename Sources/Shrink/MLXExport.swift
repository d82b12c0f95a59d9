import Foundation
import ShrinkCore
import ShrinkIO
import ShrinkModels

/// What `ModelExport.mlx` wrote.
public struct MLXExportSummary: Sendable {
    /// Quantized tensors per (bits, group size), most common first.
    public let quantized: [(bits: Int, groupSize: Int, count: Int)]
    /// Tensors written with their float values.
    public let dense: Int
    /// Bytes of the written `model.safetensors`.
    public let weightBytes: Int
    /// Tokenizer files written (from GGUF metadata) or copied from the model's folder.
    public let copiedFiles: [String]
}

extension ModelExport {
    /// Side files of a Hugging Face folder that an MLX folder carries along when present.
    static let mlxSideFiles = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]

    /// Writes the model at `input` (a compressed container, GGUF or safetensors file; its
    /// configuration from the GGUF metadata, else the `config.json` at `configPath`) as an MLX
    /// folder at `output`: `model.safetensors` with Hugging Face tensor names (GGUF Llama query and
    /// key rows un-permuted, `HuggingFaceTensor`), every affine-encoded linear as MLX's quantized
    /// layout (`<op>.weight` packed `U32`, `<op>.scales`, `<op>.biases`, `MLXAffinePacking`,
    /// exact), float tensors as stored, and `config.json`: the Hugging Face configuration plus
    /// `quantization` (`group_size` and `bits` of the most common layout, an entry per op whose
    /// layout differs, `false` for ops left in floats), the block `mlx_lm` reads. Tokenizer files
    /// next to `configPath` are copied; a GGUF model's tokenizer is written as `tokenizer.json` and
    /// `tokenizer_config.json` (`HuggingFaceTokenizer.files`). Written atomically: on any error nothing is left at `output`.
    /// - Throws: `ShrinkIOError.notExportable` naming the tensor, why and the nearest MLX layout
    ///   (a palette, a pruned or rotated weight, a group MLX lacks); `.unsupportedFormat` for a
    ///   model with a folded residual rotation or without a configuration.
    public static func mlx(input: String, configPath: String?, output: String) throws -> MLXExportSummary {
        let store = try TensorStores.open(path: input)
        guard let configuration = try ModelArchitectures.configuration(of: store, configPath: configPath) else {
            throw ShrinkIOError.unsupportedFormat(path: input, reason: "MLX export needs the model's config.json (next to it, or --base)")
        }
        let architecture = try ModelArchitectures.architecture(for: configuration)
        if store.metadata[FoldedResidualRotation.metadataKey] != nil {
            throw ShrinkIOError.unsupportedFormat(path: input, reason: "its residual rotation is folded into the weights (metadata \(FoldedResidualRotation.metadataKey)), which MLX's models do not undo; compress without fold_rotations")
        }
        let folder = try AtomicFolder(path: output)
        var tensors: [(name: String, tensor: DenseTensor)] = []
        var layouts: [(op: String, layout: (bits: Int, groupSize: Int)?)] = []
        var denseCount = 0
        for name in store.names {
            guard let target = architecture.huggingFaceTensor(name) else {
                throw ShrinkIOError.notExportable(path: input, tensor: name, reason: "a \(type(of: architecture).name) checkpoint has no such tensor")
            }
            switch store.tensor(named: name)! {
            case .dense(let tensor):
                let bytes = target.rowOrder.map {
                    MLXAffinePacking.reorderRows(Array(tensor.bytes), width: tensor.bytes.count / tensor.shape[0], order: $0)
                } ?? Array(tensor.bytes)
                tensors.append((target.name, try DenseTensor(dtype: tensor.dtype, shape: tensor.shape, bytes: bytes)))
                denseCount += 1
                if tensor.shape.count == 2, target.name.hasSuffix(".weight") { layouts.append((String(target.name.dropLast(7)), nil)) }
            case .encoded(let encoded):
                guard target.name.hasSuffix(".weight") else {
                    throw ShrinkIOError.notExportable(path: input, tensor: name, reason: "MLX quantizes only weights of ops (<op>.weight)")
                }
                var packed: MLXAffineTensor
                do {
                    packed = try MLXAffinePacking.pack(encoded)
                } catch {
                    throw ShrinkIOError.notExportable(path: input, tensor: name, reason: "\(error) (nearest MLX layout: \(nearestMLXLayout(encoded.encoding)))")
                }
                if let order = target.rowOrder { packed = packed.permutingRows(order) }
                let op = String(target.name.dropLast(7))
                let leading = Array(encoded.shape.dropLast())
                tensors.append((op + ".weight", try DenseTensor(dtype: .u32, shape: leading + [packed.wordsPerRow], bytes: bytes(of: packed.words))))
                tensors.append((op + ".scales", try DenseTensor(dtype: .f32, shape: leading + [packed.columns / packed.groupSize], bytes: bytes(of: packed.scales))))
                tensors.append((op + ".biases", try DenseTensor(dtype: .f32, shape: leading + [packed.columns / packed.groupSize], bytes: bytes(of: packed.biases))))
                layouts.append((op, (packed.bits, packed.groupSize)))
            }
        }
        var counts: [String: (bits: Int, groupSize: Int, count: Int)] = [:]
        for case let (_, layout?) in layouts { counts["\(layout.bits)/\(layout.groupSize)", default: (layout.bits, layout.groupSize, 0)].count += 1 }
        let quantized = counts.values.sorted { ($0.count, $0.bits, $0.groupSize) > ($1.count, $1.bits, $1.groupSize) }

        var config = architecture.huggingFaceConfig(configuration, tensorNames: Set(store.names)).filter { $0.key != "quantization" }
        if let main = quantized.first {
            func number(_ value: Int) -> JSONValue { .number(String(value)) }
            var block: [(key: String, value: JSONValue)] = [("group_size", number(main.groupSize)), ("bits", number(main.bits)), ("mode", .string("affine"))]
            for (op, layout) in layouts {
                guard let layout else { block.append((op, .bool(false))); continue }
                if layout != (main.bits, main.groupSize) {
                    block.append((op, .object([("group_size", number(layout.groupSize)), ("bits", number(layout.bits))])))
                }
            }
            config.append(("quantization", .object(block)))
        }
        try SafetensorsWriter.write(tensors, metadata: ["format": "mlx"], to: folder.file("model.safetensors"))
        let configFile = try AtomicFile(path: folder.file("config.json"))
        try configFile.write(JSONValue.object(config).serialized() + "\n")
        try configFile.commit()
        var copied: [String] = []
        if case .gguf(let metadata) = configuration {
            let (tokenizer, tokenizerConfig) = try HuggingFaceTokenizer.files(metadata: metadata)
            for (name, json) in [("tokenizer.json", tokenizer), ("tokenizer_config.json", tokenizerConfig)] {
                let file = try AtomicFile(path: folder.file(name))
                try file.write(json.serialized() + "\n")
                try file.commit()
                copied.append(name)
            }
        }
        let sourceFolder = configPath.map { ($0 as NSString).deletingLastPathComponent }
        for name in mlxSideFiles where !copied.contains(name) {
            guard let sourceFolder, let data = FileManager.default.contents(atPath: sourceFolder + "/" + name) else { continue }
            let file = try AtomicFile(path: folder.file(name))
            try data.withUnsafeBytes { raw in Result { () throws(ShrinkIOError) in try file.write(raw) } }.get()
            try file.commit()
            copied.append(name)
        }
        let weightBytes = (try? MemoryMappedFile(path: folder.file("model.safetensors")).bytes.count) ?? 0
        try folder.commit()
        return MLXExportSummary(quantized: quantized, dense: denseCount, weightBytes: weightBytes, copiedFiles: copied)
    }

    /// The MLX layout closest to `encoding`, for error messages: affine codes of the nearest width
    /// MLX has, in groups of 32.
    static func nearestMLXLayout(_ encoding: WeightEncoding) -> String {
        func nearestBits(_ bits: Int) -> Int { MLXAffinePacking.bitWidths.min { abs($0 - bits) < abs($1 - bits) }! }
        switch encoding {
        case .dense(let dtype): return dtype.rawValue
        case .affine(let layout): return "affine \(nearestBits(layout.bits))-bit, group 32"
        case .palette(let layout): return "affine \(nearestBits(layout.bits))-bit, group 32"
        case .sparse(_, let base), .rotated(_, let base): return nearestMLXLayout(base)
        }
    }

    static func bytes<T>(of values: [T]) -> [UInt8] { values.withUnsafeBytes { Array($0) } }
}
