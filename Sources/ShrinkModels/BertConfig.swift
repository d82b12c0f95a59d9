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

    /// Rows of the word embedding table.
    public var vocabularySize: Int
    /// Rows of the token-type embedding table.
    public var typeVocabularySize: Int

    public init(hiddenSize: Int, layers: Int, heads: Int, intermediateSize: Int, maxPositions: Int, layerNormEpsilon: Float,
                vocabularySize: Int = 30522, typeVocabularySize: Int = 2) {
        self.hiddenSize = hiddenSize
        self.layers = layers
        self.heads = heads
        self.intermediateSize = intermediateSize
        self.maxPositions = maxPositions
        self.layerNormEpsilon = layerNormEpsilon
        self.vocabularySize = vocabularySize
        self.typeVocabularySize = typeVocabularySize
    }

    /// Reads `config.json`.
    public init(path: String) throws(ModelError) {
        try self.init(json: try ModelConfiguration.jsonObject(path: path), path: path)
    }

    /// Decodes a parsed `config.json` (`path` names it in errors); every size is required and checked.
    public init(json root: JSONValue, path: String) throws(ModelError) {
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
                  layerNormEpsilon: Float(pairs.first { $0.key == "layer_norm_eps" }?.value.doubleValue ?? 1e-12),
                  vocabularySize: try integer("vocab_size"), typeVocabularySize: try integer("type_vocab_size"))
        guard hiddenSize % heads == 0 else { throw .invalidFile(path: path, reason: "hidden_size is not a multiple of num_attention_heads") }
    }
}
