import Foundation
import Testing
@testable import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// `compress` streams: encoded tensors wait in a spill file, not in memory. What it writes must be
/// what each tensor's config gives that tensor alone, byte for byte, on any thread count.
@Suite struct StreamingCompressionTests {
    @Test(arguments: [1, 2])
    func streamedOutputHoldsEachTensorAsEncodedAlone(threads: Int) throws {
        let folder = TemporaryDirectory()
        let model = try CompressCommandTests.tinyModel(in: folder)
        let recipePath = try CompressCommandTests.recipe(
            #"{"op_type": {"linear": {"quantize": {"bits": 4, "granularity": "per_block", "block_size": 8}}, "embedding": {"palettize": {"bits": 3, "granularity": "per_grouped_channel", "group_size": 16}}}}"#,
            in: folder)
        let recipe = try Recipe.load(path: recipePath)
        let location = try ModelLocation.resolve(model)
        let output = folder.file("out.safetensors")
        _ = try ModelCompressor.compress(model: location, recipe: recipe, output: output, threads: threads)
        // The spill file had no name: only the output is new in the folder.
        #expect(folder.contents == ["out.safetensors", "recipe.json", "tiny.safetensors"])

        let written = try CompressedModel(file: try SafetensorsFile(path: output))
        let (store, _, plan) = try ModelCompressor.plan(model: location, recipe: recipe)
        var compressed = 0
        for entry in plan.entries {
            guard case .compress(let config, _) = entry.decision else { continue }
            compressed += 1
            let name = entry.tensor.name
            let alone = try WeightCompressor.encode(name: name, tensor: try ModelCompressor.denseSource(store, name), config: config)
            let stored = try #require(written.encodedTensors.first { $0.name == name })
            #expect(stored.encoding == alone.encoding)
            #expect(stored.parts.keys.sorted() == alone.parts.keys.sorted())
            for (part, tensor) in alone.parts { #expect(Array(stored.parts[part]!.bytes) == Array(tensor.bytes), "\(name)#\(part)") }
            #expect(stored.decode() == alone.decode())
        }
        #expect(compressed == 2 && written.encodedTensors.count == 2)
    }

    /// The estimate names the largest tensors, one per thread, and grows with the thread count.
    @Test func estimateCountsTheLargestTensorsPerThread() throws {
        let folder = TemporaryDirectory()
        let location = try ModelLocation.resolve(try CompressCommandTests.tinyModel(in: folder))
        let recipe = try Recipe.load(path: try CompressCommandTests.recipe(#"{"global": {"palettize": {"bits": 4}}}"#, in: folder))
        let one = try ModelCompressor.estimatePeakMemory(model: location, recipe: recipe, threads: 1)
        let two = try ModelCompressor.estimatePeakMemory(model: location, recipe: recipe, threads: 2)
        #expect(one.largestTensors == ["embed.weight"])
        #expect(two.largestTensors == ["embed.weight", "layers.0.proj.weight"])
        // Palettes: 7 working bytes per element plus the source bytes (F16 embedding, F32 linear).
        #expect(one.bytes == ModelCompressor.baseResidentBytes + 64 * 16 * (7 + 2))
        #expect(two.bytes == one.bytes + 32 * 16 * (7 + 4))
        #expect(one.calibrationBytes == 0)
    }

    /// A calibrated recipe adds the calibration run's peak: one block's correlations, mapped weights
    /// and float `XᵀX`, the calibration tokens' hidden states and caches (a quarter of the text's
    /// bytes), the token embedding as floats; the encoding adds the tensor's correlation and factorisations.
    @Test func estimateCountsTheCalibrationRun() throws {
        let folder = TemporaryDirectory()
        let location = try ModelLocation.resolve(try CompressCommandTests.tinyModel(in: folder))
        try "aaaaaaaa\n\nbbbbbbbbbbbbbbbb\n".write(toFile: folder.file("calibration.txt"), atomically: true, encoding: .utf8)
        let recipe = try Recipe.load(path: try CompressCommandTests.recipe(
            #"{"op_type": {"linear": {"quantize": {"bits": 4, "method": "gptq"}}}, "calibration": {"data": "calibration.txt", "limit": 2}}"#, in: folder))
        let estimate = try ModelCompressor.estimatePeakMemory(model: location, recipe: recipe, threads: 1)
        // proj: 32 × 16 F32, 16 inputs; the longest line 16 / 4 tokens, one block; the F16 embedding is read by rows.
        #expect(estimate.calibrationBytes == ModelCompressor.baseResidentBytes + 8 * 256 + 32 * 16 * 4 + 4 * 256 + 4 * 16 * 4 * (1 + 2))
        #expect(estimate.largestTensors == ["layers.0.proj.weight"])
        #expect(estimate.bytes == ModelCompressor.baseResidentBytes + 32 * 16 * (6 + 4) + 12 * 256)
        let fromFile = try ModelCompressor.estimatePeakMemory(model: location, recipe: recipe, threads: 1, fromStatisticsFile: true)
        #expect(fromFile.calibrationBytes == 0 && fromFile.bytes == estimate.bytes)
    }

    /// The encoder never runs two tensors with the largest correlation together; smaller ones run
    /// beside one, and tensors without a correlation always do. The estimate's set follows suit.
    @Test func twoLargestCorrelationsNeverRunTogether() {
        func set(_ bytes: Int, _ quadratic: Int) -> EncodingWorkingSet { EncodingWorkingSet(bytes: bytes, quadratic: quadratic) }
        // A 4.8 B model's down (11008 inputs), gate (4096) and a data-free embedding, in MB.
        let sets = [set(1_800, 1_450), set(1_800, 1_450), set(560, 200), set(560, 200), set(400, 0)]
        #expect(ModelCompressor.quadraticBudget(sets) == 2_175)
        #expect(ModelCompressor.concurrentPeak(sets, threads: 2) == [0, 2])
        #expect(ModelCompressor.concurrentPeak(sets, threads: 4) == [0, 2, 3, 4])
        #expect(ModelCompressor.concurrentPeak(sets, threads: 1) == [0])
        // Without correlations the largest run together.
        let dataFree = [set(100, 0), set(300, 0), set(200, 0)]
        #expect(ModelCompressor.quadraticBudget(dataFree) == 0)
        #expect(ModelCompressor.concurrentPeak(dataFree, threads: 2) == [1, 2])
    }

    /// A block's query, key and value read one input, as do its gate and up: the estimate counts
    /// one correlation for each, as the calibration recorder keeps.
    @Test func opsReadingOneInputShareOneCorrelation() {
        let ops = [("attn_q", "attention.q"), ("attn_k", "attention.k"), ("attn_v", "attention.v"), ("attn_output", "attention.output"),
                   ("ffn_gate", "mlp.gate"), ("ffn_up", "mlp.up"), ("ffn_down", "mlp.down"), ("other", nil)]
        let inputs = ops.map { op, kind in
            ModelCompressor.sharedInput(of: TensorRole(name: "blk.0.\(op).weight", op: "blk.0.\(op)", opType: .linear, layer: "blk.0", kind: kind))
        }
        #expect(inputs[0] == inputs[1] && inputs[1] == inputs[2] && inputs[4] == inputs[5])
        #expect(Set(inputs).count == 5)
        let nextBlock = ModelCompressor.sharedInput(of: TensorRole(name: "blk.1.attn_q.weight", op: "blk.1.attn_q", opType: .linear, layer: "blk.1", kind: "attention.q"))
        #expect(nextBlock != inputs[0])
    }
}
