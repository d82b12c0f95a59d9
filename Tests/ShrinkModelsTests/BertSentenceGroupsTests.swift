import Foundation
import Testing
import Shrink
import ShrinkCompression
@testable import ShrinkModels
import ShrinkTestSupport

/// A batch run as groups of sentences, each group on a thread of its own through every layer
/// (`BertEncoder.groupCount`), gives every sentence the embedding of a one-thread pass and of the
/// sentence alone, bit for bit; layers whose rows may depend on the batch (fp32 through BLAS) keep
/// the batch whole.
@Suite struct BertSentenceGroupsTests {
    func encoder(weights: String, threads: Int) throws -> BertEncoder {
        try BertEncoder(config: try BertConfig(path: TestModels.miniLM + "/config.json"), pooling: try SentencePooling(folder: TestModels.miniLM),
                        source: try WeightSource(path: weights, threads: threads))
    }

    @Test func groupsGiveTheEmbeddingsOfOnePass() throws {
        let folder = TemporaryDirectory()
        let weights = folder.file("model.safetensors")
        try Data(#"{"global": {"quantize": {"bits": 8}}, "weight_threshold": 2048}"#.utf8).write(to: URL(fileURLWithPath: folder.file("recipe.json")))
        _ = try ModelCompressor.compress(model: try ModelLocation.resolve(TestModels.miniLM), recipe: try Recipe.load(path: folder.file("recipe.json")),
                                         output: weights)
        let tokenizer = try WordPieceTokenizer(vocabularyFile: TestModels.miniLM + "/vocab.txt")
        let ids = try BertEncoderTests.referenceSentences().prefix(33).map(tokenizer.encode)
        let one = try encoder(weights: weights, threads: 1), two = try encoder(weights: weights, threads: 2)
        let three = try encoder(weights: weights, threads: 3)
        #expect(one.groupCount(ids) == 1 && two.groupCount(ids) == 2 && three.groupCount(ids) == 3)
        #expect(two.groupCount([ids[0]]) == 1, "a single sentence runs whole")
        let reference = try one.embed(ids)
        for encoder in [two, three] {
            // Twice: the second pass reuses each group's kept buffers.
            for _ in 0..<2 { #expect(try encoder.embed(ids) == reference) }
        }
        for index in [0, 16, 32] { #expect(try two.embed([ids[index]])[0] == reference[index]) }

        let dense = try encoder(weights: TestModels.miniLM + "/model.safetensors", threads: 2)
        #expect(dense.groupCount(ids) == 1)
    }
}
