import Foundation
import ShrinkCore

/// The BERT hyper-parameters Shrink reads from a Hugging Face `config.json`.
public struct BertConfig: Sendable, Equatable {
    public var hiddenSize: Int
    public var layers: Int
    public var heads: Int
    public var intermediateSize: Int
    public var maxPositions: Int
    public var layerNormEpsilon: Float

    public init(hiddenSize: Int, layers: Int, heads: Int, intermediateSize: Int, maxPositions: Int, layerNormEpsilon: Float) {
        self.hiddenSize = hiddenSize
        self.layers = layers
        self.heads = heads
        self.intermediateSize = intermediateSize
        self.maxPositions = maxPositions
        self.layerNormEpsilon = layerNormEpsilon
    }

    /// Reads `config.json`; every key is required and checked.
    public init(path: String) throws(ModelError) {
        guard let data = FileManager.default.contents(atPath: path) else { throw .invalidFile(path: path, reason: "cannot read") }
        let root: JSONValue
        do { root = try data.withUnsafeBytes { bytes in Result { () throws(JSONParseError) in try JSONValue.parse(bytes) } }.get() } catch {
            throw .invalidFile(path: path, reason: "invalid JSON: \(error)")
        }
        let pairs = root.objectValue ?? []
        func integer(_ key: String) throws(ModelError) -> Int {
            guard let value = pairs.first(where: { $0.key == key })?.value.integerValue, value > 0 else {
                throw .invalidFile(path: path, reason: "\(key) must be a positive integer")
            }
            return value
        }
        guard let type = pairs.first(where: { $0.key == "model_type" })?.value.stringValue, type == "bert" else {
            throw .invalidFile(path: path, reason: "model_type must be \"bert\"")
        }
        if let activation = pairs.first(where: { $0.key == "hidden_act" })?.value.stringValue, activation != "gelu" {
            throw .invalidFile(path: path, reason: "hidden_act \"\(activation)\" is not supported (expected \"gelu\")")
        }
        self.init(hiddenSize: try integer("hidden_size"), layers: try integer("num_hidden_layers"),
                  heads: try integer("num_attention_heads"), intermediateSize: try integer("intermediate_size"),
                  maxPositions: try integer("max_position_embeddings"),
                  layerNormEpsilon: Float(pairs.first { $0.key == "layer_norm_eps" }?.value.doubleValue ?? 1e-12))
        guard hiddenSize % heads == 0 else { throw .invalidFile(path: path, reason: "hidden_size is not a multiple of num_attention_heads") }
    }
}
