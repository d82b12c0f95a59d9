import Foundation
import Testing
import ShrinkIO
import ShrinkKernels
import ShrinkModels
import ShrinkTestSupport

/// Qwen3 against llama.cpp: a small random Qwen3-shaped GGUF (per-head q/k RMSNorm, NeoX rotary
/// positions, 4 query heads over 2 key/value heads of 32 floats with a hidden size of 64, an
/// untied output layer, linear layers in F16, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, a byte-level BPE
/// tokenizer with the `qwen2` pre-tokenizer) and llama.cpp's token ids and logits for a text
/// (`scripts/qwen3-fixture/make_fixture.py`, llama.cpp of llama-cpp-python 0.3.36, f32 cache), with
/// the exact logits of the same weights.
@Suite struct Qwen3CrossCheckTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/qwen3-random")

    /// llama.cpp's ids and logits (`llama_logits.cpp`'s layout: Int32 count, ids, Int32 width, rows).
    static func reference() throws -> (ids: [Int32], logits: [[Float]]) {
        let data = try Data(contentsOf: folder.appendingPathComponent("llama-logits.bin"))
        return data.withUnsafeBytes { raw in
            let count = Int(raw.loadUnaligned(as: Int32.self))
            let ids = (0..<count).map { raw.loadUnaligned(fromByteOffset: 4 + 4 * $0, as: Int32.self) }
            let width = Int(raw.loadUnaligned(fromByteOffset: 4 + 4 * count, as: Int32.self))
            let start = 8 + 4 * count
            let logits = (0..<count).map { row in
                (0..<width).map { raw.loadUnaligned(fromByteOffset: start + 4 * (row * width + $0), as: Float.self) }
            }
            return (ids, logits)
        }
    }

    static func decoder(threads: Int) throws -> LlamaDecoder {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: folder.appendingPathComponent("model.gguf").path, configPath: nil)
        let qwen3 = try #require(architecture as? Qwen3Architecture)
        return try qwen3.makeDecoder(files: files, options: RuntimeOptions(threads: threads))
    }

    @Test func tokenizesAsLlamaCpp() throws {
        let decoder = try Self.decoder(threads: 1)
        let text = try String(contentsOf: Self.folder.appendingPathComponent("text.txt"), encoding: .utf8)
        let tokenizer = try #require(decoder.tokenizer)
        #expect(tokenizer.preTokenizer == .qwen2)
        #expect(tokenizer.encode(text) == (try Self.reference().ids))
        #expect(tokenizer.decode(tokenizer.encode(text)) == text)
    }

    /// The exact logits (float64 forward pass over the dequantized weights), rows of the vocabulary.
    static func exact(rows: Int) throws -> [[Float]] {
        let data = try Data(contentsOf: folder.appendingPathComponent("exact-logits.f32"))
        let values = data.withUnsafeBytes { raw in (0..<(data.count / 4)).map { raw.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self) } }
        let width = values.count / rows
        return (0..<rows).map { Array(values[($0 * width)..<(($0 + 1) * width)]) }
    }

    static func largestDifference(_ a: [[Float]], _ b: [[Float]]) -> Double {
        zip(a, b).map { zip($0, $1).map { Double(abs($0 - $1)) }.max()! }.max()!
    }

    /// Shrink's logits of every position, as one batch and one token at a time through the cache,
    /// at 1 and 2 threads: the same argmax as llama.cpp's at every position, a largest difference
    /// far below the logits' spread, and no farther from the exact logits than llama.cpp's (both
    /// quantize activations to 8 bits, in their own ways: llama.cpp's own largest error is ≈ 0.54
    /// against a spread of 4.2).
    @Test(arguments: [1, 2])
    func logitsMatchLlamaCpp(threads: Int) throws {
        let decoder = try Self.decoder(threads: threads)
        #expect(decoder.config.headDimension == 32 && decoder.config.heads * decoder.config.headDimension != decoder.config.hiddenSize)
        let (ids, expected) = try Self.reference()
        let exact = try Self.exact(rows: ids.count)
        let spread = expected.joined().map(Double.init).standardDeviation
        let llamaError = Self.largestDifference(expected, exact)
        for batch in [ids.count, 1] {
            let state = decoder.makeState(capacity: ids.count, batch: batch)
            var rows: [[Float]] = []
            for start in stride(from: 0, to: ids.count, by: batch) {
                let tokens = Array(ids[start..<min(start + batch, ids.count)])
                try decoder.evaluate(tokens, state: state, logitRows: 0..<tokens.count) { _, logits in rows.append(Array(logits)) }
            }
            #expect(rows.count == ids.count)
            for (position, (actual, reference)) in zip(rows, expected).enumerated() {
                #expect(actual.indices.max { actual[$0] < actual[$1] } == reference.indices.max { reference[$0] < reference[$1] },
                        "position \(position), batch \(batch)")
            }
            let largest = Self.largestDifference(rows, expected), error = Self.largestDifference(rows, exact)
            #expect(largest < 0.1 * spread, "batch \(batch): max |Δ| \(largest) against a spread of \(spread)")
            #expect(error <= llamaError, "batch \(batch): max error \(error) against the exact logits, llama.cpp's \(llamaError)")
        }
    }
}

extension Array where Element == Double {
    var standardDeviation: Double {
        let mean = reduce(0, +) / Double(count)
        return (map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(count)).squareRoot()
    }
}
