import Foundation
import Testing
import Shrink
import ShrinkCompression
@testable import ShrinkModels
import ShrinkTestSupport

/// A batch run as groups of sentences, each group on one thread through every layer
/// (`BertEncoder.grouping`), gives every sentence the embedding it has alone, bit for bit, at any
/// thread count; layers whose rows may depend on the batch (fp32 through BLAS) keep the batch whole.
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
        let tokens = ids.reduce(0) { $0 + $1.count }
        for (encoder, threads) in [(one, 1), (two, 2), (three, 3)] {
            let grouping = encoder.grouping(ids)
            #expect(grouping.threads == threads && grouping.groups % threads == 0)
            #expect(grouping.groups >= tokens / BertEncoder.tokensPerGroup && grouping.groups <= tokens / BertEncoder.tokensPerGroup + threads)
        }
        #expect(one.grouping(ids).groups > 1, "\(tokens) tokens run as several groups on one thread")
        #expect(two.grouping([ids[0]]) == (1, 1), "a single sentence runs whole")
        let alone = try ids.map { try one.embed([$0])[0] }
        for encoder in [one, two, three] {
            // Twice: the second pass reuses each group's kept buffers.
            for _ in 0..<2 { #expect(try encoder.embed(ids) == alone) }
        }

        let dense = try encoder(weights: TestModels.miniLM + "/model.safetensors", threads: 2)
        #expect(dense.grouping(ids) == (1, 1))
    }

    /// `partition` puts every sentence in exactly one non-empty group, in batch order within each,
    /// and its groups' costs differ by at most the costliest sentence (longest first, lightest group).
    @Test(arguments: [1, 2, 3, 5])
    func partitionBalancesCost(groups: Int) {
        var generator = SeededGenerator(seed: UInt64(groups))
        for count in [groups, groups + 1, 32, 97] {
            let sequences = (0..<count).map { _ in [Int32](repeating: 1, count: Int.random(in: 1...128, using: &generator)) }
            var order = [Int](repeating: -1, count: count), bounds = [Int](repeating: -1, count: groups + 1)
            order.withUnsafeMutableBufferPointer { order in
                bounds.withUnsafeMutableBufferPointer { BertEncoder.partition(sequences, groups: groups, order: order, bounds: $0) }
            }
            #expect(order.sorted() == Array(0..<count))
            #expect(bounds.first == 0 && bounds.last == count)
            func cost(_ index: Int) -> Int { sequences[index].count * (sequences[index].count + BertEncoder.attentionCostLength) }
            var costs: [Int] = []
            for group in 0..<groups {
                let members = Array(order[bounds[group]..<bounds[group + 1]])
                #expect(!members.isEmpty && members == members.sorted(), "group \(group) of \(groups), \(count) sentences")
                costs.append(members.reduce(0) { $0 + cost($1) })
            }
            let costliest = (0..<count).map(cost).max()!
            #expect(costs.max()! - costs.min()! <= costliest, "costs \(costs), \(count) sentences")
        }
    }
}
