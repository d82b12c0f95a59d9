import Foundation
import Testing
import ShrinkCore
import ShrinkModels
import ShrinkTestSupport

/// Calibration runs a model one block at a time (`ModelRuntime.run(calibrationTexts:spillNextTo:blockFinished:)`):
/// every linear op sees, bit for bit, the inputs that running each text through the whole model
/// shows it, and each block's ops have all their inputs when their block finishes.
@Suite struct LayerByLayerCalibrationTests {
    /// Runs `texts` block by block through a runtime with an observer, and returns what each
    /// finished block had recorded (in block order).
    static func blocks(_ texts: [String], runtime make: (InputStatisticsRecorder) throws -> any ModelRuntime,
                       layers: [String], spillNextTo: String? = nil) throws -> [[String: LayerInputStatistics]] {
        let recorder = InputStatisticsRecorder(layers: Set(layers))
        let runtime = try make(recorder)
        var blocks: [[String: LayerInputStatistics]] = []
        var finished: [Int] = []
        try runtime.run(calibrationTexts: texts, spillNextTo: spillNextTo) { block in
            finished.append(block)
            blocks.append(recorder.drain())
        }
        #expect(finished == Array(0..<finished.count))
        return blocks
    }

    /// Every op of `blocks[b]` is an op of layer `b` by `prefix`, and all of a layer's ops are there.
    static func expectLayered(_ blocks: [[String: LayerInputStatistics]], ops: [String], prefix: (Int) -> String) {
        for (index, block) in blocks.enumerated() {
            #expect(Set(block.keys) == Set(ops.filter { $0.hasPrefix(prefix(index)) }))
        }
    }

    @Test func bertLayersSeeWhatWholePassesShow() throws {
        let (files, architecture) = try ModelArchitectureTests.miniLM()
        let sentences = ["A man is playing a guitar.", "Shrink runs any store.", "Two dogs run across a snowy field, chasing a ball.", "OK"]
        // 70 texts: three batches of 32, the last one short.
        let texts = (0..<70).map { sentences[$0 % sentences.count] + String(repeating: " again", count: $0 % 5) }
        func runtime(_ observer: InputStatisticsRecorder) throws -> any ModelRuntime {
            try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: 2, activations: .float32, observer: observer))
        }
        let whole = InputStatisticsRecorder(layers: Set(architecture.observationPoints))
        let encoder = try #require(try runtime(whole) as? any SentenceEmbeddingRuntime)
        let ids = texts.map(encoder.tokenize)
        for start in stride(from: 0, to: ids.count, by: 32) { _ = try encoder.embed(Array(ids[start..<min(start + 32, ids.count)])) }

        let blocks = try Self.blocks(texts, runtime: runtime, layers: architecture.observationPoints)
        #expect(blocks.count == 6)
        Self.expectLayered(blocks, ops: architecture.observationPoints) { "encoder.layer.\($0)." }
        let streamed = blocks.reduce(into: [String: LayerInputStatistics]()) { $0.merge($1) { first, _ in first } }
        #expect(streamed == whole.recorded)
        #expect(streamed["encoder.layer.5.output.dense"]?.rows == ids.reduce(0) { $0 + $1.count })
    }

    @Test func llamaLayersSeeWhatEvaluateShows() throws {
        let path = Qwen3CrossCheckTests.folder.appendingPathComponent("model.gguf").path
        let (files, architecture) = try ModelArchitectures.open(weightsPath: path, configPath: nil)
        let text = try String(contentsOf: Qwen3CrossCheckTests.folder.appendingPathComponent("text.txt"), encoding: .utf8)
        // The last text is cut to the context.
        let texts = [text, "Short.", String(repeating: text + " ", count: 12)]
        func runtime(_ observer: InputStatisticsRecorder) throws -> any ModelRuntime {
            try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: 2, activations: .float32, observer: observer))
        }
        let whole = InputStatisticsRecorder(layers: Set(architecture.observationPoints))
        let decoder = try #require(try runtime(whole) as? LlamaDecoder)
        let tokenizer = try #require(decoder.tokenizer)
        let capacity = min(decoder.config.contextLength, 2048)
        let state = decoder.makeState(capacity: capacity)
        var tokens = 0
        for text in texts {
            state.reset()
            let ids = Array(tokenizer.encode(text, addBOS: tokenizer.addsBOS).prefix(capacity))
            try decoder.evaluate(ids, state: state)
            tokens += ids.count
        }

        // Hidden states between layers in memory, then in a spill file.
        let folder = TemporaryDirectory()
        for spill in [nil, folder.file("statistics")] {
            let blocks = try Self.blocks(texts, runtime: runtime, layers: architecture.observationPoints, spillNextTo: spill)
            #expect(blocks.count == decoder.config.layers)
            Self.expectLayered(blocks, ops: architecture.observationPoints) { "blk.\($0)." }
            let streamed = blocks.reduce(into: [String: LayerInputStatistics]()) { $0.merge($1) { first, _ in first } }
            #expect(streamed.keys.sorted() == whole.recorded.keys.sorted())
            #expect(streamed == whole.recorded)
            #expect(streamed["blk.1.ffn_down"]?.rows == tokens)
        }
        #expect(folder.contents.isEmpty)
    }
}
