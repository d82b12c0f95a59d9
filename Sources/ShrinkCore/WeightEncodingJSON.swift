/// The JSON form of `WeightEncoding`, stored per tensor in compressed files:
///
/// - `{"kind": "dense", "dtype": "F16"}`
/// - `{"kind": "affine", "bits": 4, "signed": true, "symmetric": false, "granularity": G, "scale_dtype": "F16"}` (`"U8"`, `"I8"`: integer
///   block scales), plus `"super_block_size": 256` and `"offset_dtype": "F16"` when set
///   with `G` one of `{"kind": "per_tensor"}`, `{"kind": "per_channel", "axis": 0}`,
///   `{"kind": "per_block", "block_size": 32}`
/// - `{"kind": "palette", "bits": 4, "granularity": P, "vector_size": 1, "lut_dtype": "F16", "per_channel_scale": false}`, plus
///   `"block_scales": {"block_size": 32, "dtype": "I8", "super_block_size": 256}` when set
///   with `P` one of `{"kind": "per_tensor"}`, `{"kind": "per_grouped_channel", "axis": 0, "group_size": 16}`
/// - `{"kind": "sparse", "pattern": S, "base": <encoding>}` with `S` one of `{"kind": "unstructured"}`,
///   `{"kind": "n_of_m", "n": 2, "m": 4}`, `{"kind": "blocks", "block_size": 4}`
/// - `{"kind": "rotated", "transform": "randomized_hadamard", "block_size": 128, "base": <encoding>}`
extension WeightEncoding {
    /// The encoding as JSON.
    public var json: JSONValue {
        func number(_ value: Int) -> JSONValue { .number(String(value)) }
        switch self {
        case .dense(let dtype):
            return .object([("kind", .string("dense")), ("dtype", .string(dtype.rawValue))])
        case .affine(let layout):
            let granularity: JSONValue = switch layout.granularity {
            case .perTensor: .object([("kind", .string("per_tensor"))])
            case .perChannel(let axis): .object([("kind", .string("per_channel")), ("axis", number(axis))])
            case .perBlock(let size): .object([("kind", .string("per_block")), ("block_size", number(size))])
            }
            var fields: [(key: String, value: JSONValue)] = [
                ("kind", .string("affine")), ("bits", number(layout.bits)), ("signed", .bool(layout.signed)),
                ("symmetric", .bool(layout.symmetric)), ("granularity", granularity), ("scale_dtype", .string(layout.scaleDType.rawValue))]
            if let superBlock = layout.superBlockSize { fields.append(("super_block_size", number(superBlock))) }
            if let offsetDType = layout.offsetDType { fields.append(("offset_dtype", .string(offsetDType.rawValue))) }
            return .object(fields)
        case .palette(let layout):
            let granularity: JSONValue = switch layout.granularity {
            case .perTensor: .object([("kind", .string("per_tensor"))])
            case .perGroupedChannel(let axis, let size):
                .object([("kind", .string("per_grouped_channel")), ("axis", number(axis)), ("group_size", number(size))])
            }
            var fields: [(key: String, value: JSONValue)] = [
                ("kind", .string("palette")), ("bits", number(layout.bits)), ("granularity", granularity),
                ("vector_size", number(layout.vectorSize)), ("lut_dtype", .string(layout.lutDType.rawValue)),
                ("per_channel_scale", .bool(layout.perChannelScale))]
            if let scaling = layout.blockScales {
                var scale: [(key: String, value: JSONValue)] = [("block_size", number(scaling.blockSize)), ("dtype", .string(scaling.dtype.rawValue))]
                if let superBlock = scaling.superBlockSize { scale.append(("super_block_size", number(superBlock))) }
                fields.append(("block_scales", .object(scale)))
            }
            return .object(fields)
        case .sparse(let layout, let base):
            let pattern: JSONValue = switch layout.pattern {
            case .unstructured: .object([("kind", .string("unstructured"))])
            case .nOfM(let n, let m): .object([("kind", .string("n_of_m")), ("n", number(n)), ("m", number(m))])
            case .blocks(let size): .object([("kind", .string("blocks")), ("block_size", number(size))])
            }
            return .object([("kind", .string("sparse")), ("pattern", pattern), ("base", base.json)])
        case .rotated(let block, let base):
            return .object([("kind", .string("rotated")), ("transform", .string("randomized_hadamard")), ("block_size", number(block)),
                            ("base", base.json)])
        }
    }

    /// Reads the JSON form; the error message names the offending field.
    public init(json: JSONValue) throws(WeightEncodingJSONError) {
        let fields = try Fields(json, path: "encoding")
        switch try fields.string("kind") {
        case "dense":
            self = .dense(try fields.dtype("dtype"))
        case "affine":
            let granularityFields = try Fields(try fields.value("granularity"), path: "encoding.granularity")
            let granularity: QuantizationGranularity
            switch try granularityFields.string("kind") {
            case "per_tensor": granularity = .perTensor
            case "per_channel": granularity = .perChannel(axis: try granularityFields.integer("axis"))
            case "per_block": granularity = .perBlock(blockSize: try granularityFields.integer("block_size"))
            case let other: throw WeightEncodingJSONError(message: "encoding.granularity.kind: unknown '\(other)'")
            }
            self = .affine(AffineEncoding(bits: try fields.integer("bits"), signed: try fields.boolean("signed"),
                                          symmetric: try fields.boolean("symmetric"), granularity: granularity,
                                          scaleDType: try fields.dtype("scale_dtype"),
                                          superBlockSize: fields.has("super_block_size") ? try fields.integer("super_block_size") : nil,
                                          offsetDType: fields.has("offset_dtype") ? try fields.dtype("offset_dtype") : nil))
        case "palette":
            let granularityFields = try Fields(try fields.value("granularity"), path: "encoding.granularity")
            let granularity: PaletteGranularity
            switch try granularityFields.string("kind") {
            case "per_tensor": granularity = .perTensor
            case "per_grouped_channel":
                granularity = .perGroupedChannel(axis: try granularityFields.integer("axis"), groupSize: try granularityFields.integer("group_size"))
            case let other: throw WeightEncodingJSONError(message: "encoding.granularity.kind: unknown '\(other)'")
            }
            var blockScales: BlockScales?
            if fields.has("block_scales") {
                let scaleFields = try Fields(try fields.value("block_scales"), path: "encoding.block_scales")
                blockScales = BlockScales(blockSize: try scaleFields.integer("block_size"), dtype: try scaleFields.dtype("dtype"),
                                          superBlockSize: scaleFields.has("super_block_size") ? try scaleFields.integer("super_block_size") : nil)
            }
            self = .palette(PaletteEncoding(bits: try fields.integer("bits"), granularity: granularity,
                                            vectorSize: try fields.integer("vector_size"), lutDType: try fields.dtype("lut_dtype"),
                                            perChannelScale: try fields.boolean("per_channel_scale"), blockScales: blockScales))
        case "sparse":
            let patternFields = try Fields(try fields.value("pattern"), path: "encoding.pattern")
            let pattern: SparsityPattern
            switch try patternFields.string("kind") {
            case "unstructured": pattern = .unstructured
            case "n_of_m": pattern = .nOfM(n: try patternFields.integer("n"), m: try patternFields.integer("m"))
            case "blocks": pattern = .blocks(blockSize: try patternFields.integer("block_size"))
            case let other: throw WeightEncodingJSONError(message: "encoding.pattern.kind: unknown '\(other)'")
            }
            self = .sparse(SparseEncoding(pattern: pattern), base: try WeightEncoding(json: try fields.value("base")))
        case "rotated":
            let transform = try fields.string("transform")
            guard transform == "randomized_hadamard" else {
                throw WeightEncodingJSONError(message: "encoding.transform: unknown '\(transform)' (expected randomized_hadamard)")
            }
            self = .rotated(blockSize: try fields.integer("block_size"), base: try WeightEncoding(json: try fields.value("base")))
        case let other:
            throw WeightEncodingJSONError(message: "encoding.kind: unknown '\(other)'")
        }
    }

    private struct Fields {
        let pairs: [(key: String, value: JSONValue)]
        let path: String

        init(_ value: JSONValue, path: String) throws(WeightEncodingJSONError) {
            guard let pairs = value.objectValue else { throw WeightEncodingJSONError(message: "\(path): expected an object") }
            self.pairs = pairs
            self.path = path
        }

        func has(_ key: String) -> Bool { pairs.contains { $0.key == key } }

        func value(_ key: String) throws(WeightEncodingJSONError) -> JSONValue {
            guard let value = pairs.first(where: { $0.key == key })?.value else {
                throw WeightEncodingJSONError(message: "\(path).\(key): missing")
            }
            return value
        }

        func string(_ key: String) throws(WeightEncodingJSONError) -> String {
            guard let text = try value(key).stringValue else { throw WeightEncodingJSONError(message: "\(path).\(key): expected a string") }
            return text
        }

        func integer(_ key: String) throws(WeightEncodingJSONError) -> Int {
            guard let number = try value(key).integerValue else { throw WeightEncodingJSONError(message: "\(path).\(key): expected an integer") }
            return number
        }

        func boolean(_ key: String) throws(WeightEncodingJSONError) -> Bool {
            guard case .bool(let flag) = try value(key) else { throw WeightEncodingJSONError(message: "\(path).\(key): expected true or false") }
            return flag
        }

        func dtype(_ key: String) throws(WeightEncodingJSONError) -> DType {
            let name = try string(key)
            guard let dtype = DType(rawValue: name) else { throw WeightEncodingJSONError(message: "\(path).\(key): unknown dtype '\(name)'") }
            return dtype
        }
    }
}

/// A malformed JSON encoding description.
public struct WeightEncodingJSONError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
