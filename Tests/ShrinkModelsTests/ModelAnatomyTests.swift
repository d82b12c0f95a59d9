import Testing
import ShrinkCore
import ShrinkModels

@Suite struct ModelAnatomyTests {
    func role(_ name: String, _ shape: [Int], _ dtype: DType = .f32, among others: [TensorDescriptor] = []) -> TensorRole {
        ModelAnatomy.roles(of: others + [TensorDescriptor(name: name, dtype: dtype, shape: shape)]).last!
    }

    @Test func bertNames() {
        let query = role("encoder.layer.3.attention.self.query.weight", [384, 384])
        #expect(query.opType == .linear && query.layer == "encoder.layer.3" && query.op == "encoder.layer.3.attention.self.query")
        let bias = role("encoder.layer.3.attention.self.query.bias", [384],
                        among: [TensorDescriptor(name: "encoder.layer.3.attention.self.query.weight", dtype: .f32, shape: [384, 384])])
        #expect(bias.opType == .linear)
        #expect(role("encoder.layer.0.output.LayerNorm.weight", [384]).opType == .norm)
        let words = role("embeddings.word_embeddings.weight", [30522, 384])
        #expect(words.opType == .embedding && words.layer == "embeddings")
        #expect(role("embeddings.position_ids", [1, 512], .i64).opType == .buffer)
        #expect(role("pooler.dense.weight", [384, 384]).layer == "pooler")
    }

    @Test func llamaAndGGUFNames() {
        let projection = role("model.layers.12.self_attn.q_proj.weight", [576, 576], .bf16)
        #expect(projection.opType == .linear && projection.layer == "model.layers.12")
        #expect(role("model.layers.0.input_layernorm.weight", [576]).opType == .norm)
        #expect(role("model.embed_tokens.weight", [49152, 576]).opType == .embedding)
        #expect(role("model.norm.weight", [576]).opType == .norm)
        #expect(role("blk.5.ffn_down.weight", [576, 1536]).layer == "blk.5")
        #expect(role("blk.5.attn_norm.weight", [576]).opType == .norm)
        #expect(role("token_embd.weight", [49152, 576]).opType == .embedding)
        #expect(role("conv1.weight", [64, 3, 7, 7]).opType == .conv)
    }

    @Test func naturalOrderComparesNumbersByValue() {
        let names = ["layer.10", "layer.2", "embeddings", "layer.1.b", "layer.1"]
        #expect(names.sorted(by: ModelAnatomy.naturalOrder) == ["embeddings", "layer.1", "layer.1.b", "layer.2", "layer.10"])
    }
}
