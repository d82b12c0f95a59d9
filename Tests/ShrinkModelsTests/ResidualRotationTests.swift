import CAllocationCounter
import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkModels
import ShrinkTestSupport

/// A rotation of the residual stream folded into the weights (`FoldedResidualRotation`): the
/// folded model computes the unrotated one's logits, `decompress` undoes the fold, the compressor
/// folds what a recipe asks and refuses what cannot be folded, and bad metadata is a typed error.
@Suite struct ResidualRotationTests {
    static let gguf = Qwen3CrossCheckTests.folder.appendingPathComponent("model.gguf").path

    /// The random Qwen3 fixture with its residual stream rotated by `rotation`'s seed, every
    /// weight dense (folded readers and writers, ones for the absorbed norms, the rest decoded),
    /// written as a container.
    static func foldedFixture(seed: UInt64, into path: String) throws -> FoldedResidualRotation {
        let store = try GGUFStore(path: gguf)
        let architecture = try Qwen3Architecture(configuration: .gguf(GGUFMetadata(file: store.file)))
        let stream = try #require(architecture.residualStream)
        let fold = FoldedResidualRotation(rotation: HadamardRotation(size: stream.width, seed: seed), stream: stream)
        var dense: [(name: String, tensor: DenseTensor)] = []
        for name in store.names {
            let stored = try #require(store.tensor(named: name))
            var values = stored.decodedFloats()
            if fold.norms.contains(name) {
                values = [Float](repeating: 1, count: values.count)
            } else if let norm = fold.readers[name] {
                try fold.fold(name, values: &values, shape: stored.shape, normScale: try #require(store.tensor(named: norm)).decodedFloats())
            } else {
                try fold.fold(name, values: &values, shape: stored.shape, normScale: nil)
            }
            dense.append((name, try DenseTensor(converting: values, shape: stored.shape)))
        }
        let metadata = [GGUFMetadata.containerKey: GGUFMetadata(file: store.file).json, FoldedResidualRotation.metadataKey: fold.metadataValue]
        try CompressedModel(denseTensors: dense, encodedTensors: [], metadata: metadata).write(to: path)
        return fold
    }

    static func logits(_ path: String, tokens: [Int32], threads: Int = 2) throws -> [[Float]] {
        let (files, architecture) = try ModelArchitectures.open(weightsPath: path, configPath: nil)
        let decoder = try (architecture as! Qwen3Architecture).makeDecoder(files: files, options: RuntimeOptions(threads: threads, activations: .float32))
        var rows: [[Float]] = []
        try decoder.evaluate(tokens, state: decoder.makeState(capacity: 64), logitRows: 0..<tokens.count) { _, values in rows.append(Array(values)) }
        return rows
    }

    static let tokens: [Int32] = [285, 269, 39, 115, 32, 51, 271, 115, 32, 68, 79, 78, 39, 84, 313, 112, 46, 46, 46, 293]

    /// Embeddings rotated on entry, the stream un-rotated before the final norm: the folded
    /// model's logits equal the dense model's up to float rounding, for several rotations.
    @Test(arguments: [UInt64(0), 7])
    func foldedModelComputesTheUnrotatedLogits(seed: UInt64) throws {
        let folder = TemporaryDirectory()
        let dense = folder.file("dense.safetensors"), folded = folder.file("folded.safetensors")
        _ = try Self.foldedFixture(seed: seed, into: folded)
        try CompressedModel(denseTensors: try Self.decodedFixture(), encodedTensors: [],
                            metadata: [GGUFMetadata.containerKey: GGUFMetadata(file: try GGUFStore(path: Self.gguf).file).json]).write(to: dense)
        let expected = try Self.logits(dense, tokens: Self.tokens), actual = try Self.logits(folded, tokens: Self.tokens)
        let spread = Double(expected.flatMap { $0 }.max()! - expected.flatMap { $0 }.min()!)
        let difference = Qwen3CrossCheckTests.largestDifference(expected, actual)
        #expect(difference <= 1e-4 * spread, "max |Δ| \(difference) against a spread of \(spread)")
    }

    static func decodedFixture() throws -> [(name: String, tensor: DenseTensor)] {
        let store = try GGUFStore(path: gguf)
        return try store.names.map { name in
            let stored = try #require(store.tensor(named: name))
            return (name, try DenseTensor(converting: stored.decodedFloats(), shape: stored.shape))
        }
    }

    /// `decompress` undoes the fold: readers come out as their weight times their norm's scale,
    /// writers as stored before folding.
    @Test func decompressUnfolds() throws {
        let folder = TemporaryDirectory()
        let fold = try Self.foldedFixture(seed: 3, into: folder.file("folded.safetensors"))
        try ModelCompressor.decompress(input: folder.file("folded.safetensors"), output: folder.file("plain.safetensors"))
        let plain = try SafetensorsStore(path: folder.file("plain.safetensors"))
        let source = try GGUFStore(path: Self.gguf)
        #expect(plain.metadata[FoldedResidualRotation.metadataKey] == nil)
        for name in fold.readers.keys.sorted().prefix(3) + fold.writers.sorted().prefix(3) {
            var expected = try #require(source.tensor(named: name)).decodedFloats()
            if let norm = fold.readers[name] {
                let scale = try #require(source.tensor(named: norm)).decodedFloats()
                for index in expected.indices { expected[index] *= scale[index % scale.count] }
            }
            let actual = try #require(plain.tensor(named: name)).decodedFloats()
            let largest = expected.map(abs).max()!
            #expect(zip(expected, actual).allSatisfy { abs($0 - $1) <= 1e-5 * largest }, "\(name)")
        }
    }

    /// A decoded token of a folded model allocates nothing on the heap (the un-rotation's scratch
    /// is the state's); the fixture's weights are dense, which the float kernels run.
    @Test func foldedDecodingAllocatesNothingPerToken() throws {
        let folder = TemporaryDirectory()
        _ = try Self.foldedFixture(seed: 1, into: folder.file("folded.safetensors"))
        let (files, architecture) = try ModelArchitectures.open(weightsPath: folder.file("folded.safetensors"), configPath: nil)
        let decoder = try (architecture as! Qwen3Architecture).makeDecoder(files: files, options: RuntimeOptions(threads: 2))
        let state = decoder.makeState(capacity: 32, batch: 8)
        let prompt = Array(Self.tokens.prefix(8)), next = Self.tokens.suffix(4).map { [$0] }
        var best: Float = 0
        try decoder.evaluate(prompt, state: state, logitRows: 7..<8) { _, logits in best = logits[0] }
        shrink_count_allocations_begin()
        for token in next { try decoder.evaluate(token, state: state, logitRows: 0..<1) { _, logits in best = logits[0] } }
        let allocations = shrink_count_allocations_end()
        #expect((shrink_allocations_counted() == 0 || allocations == 0) && best.isFinite, "\(allocations) allocations over 4 tokens")
    }

    /// The compressor folds when the recipe asks (`fold_rotations`), writes the metadata and the
    /// norms as ones, and runs close to the same recipe unfolded; what cannot be folded is a
    /// recipe error naming the key and the reason.
    @Test func compressorFoldsWhatTheRecipeAsks() throws {
        let folder = TemporaryDirectory()
        let location = try ModelLocation.resolve(Self.gguf)
        func recipe(_ body: String) throws -> Recipe { try Recipe.parse(Data(body.utf8), file: "r.json") }
        let linear = #"{"rotate": {}, "quantize": {"bits": 8, "granularity": "per_channel"}}"#
        let folded = try recipe(#"{"op_type": {"linear": \#(linear), "output": null}, "fold_rotations": true}"#)
        let unfolded = try recipe(#"{"op_type": {"linear": \#(linear), "output": null}}"#)
        let summary = try ModelCompressor.compress(model: location, recipe: folded, output: folder.file("f.safetensors"), threads: 2)
        _ = try ModelCompressor.compress(model: location, recipe: unfolded, output: folder.file("u.safetensors"), threads: 2)
        #expect(summary.residualRotation?.contains("folded into") == true, "\(summary.residualRotation ?? "nil")")
        let store = try SafetensorsStore(path: folder.file("f.safetensors"))
        let architecture = try Qwen3Architecture(configuration: .gguf(GGUFMetadata(file: try GGUFStore(path: Self.gguf).file)))
        let fold = try #require(try FoldedResidualRotation(metadata: store.metadata, path: store.path))
        #expect(fold.covers(try #require(architecture.residualStream)) && fold.rotation == HadamardRotation(size: fold.rotation.size, seed: 0))
        #expect(try #require(store.tensor(named: "blk.0.attn_norm.weight")).decodedFloats().allSatisfy { $0 == 1 })
        let a = try Self.logits(folder.file("f.safetensors"), tokens: Self.tokens), b = try Self.logits(folder.file("u.safetensors"), tokens: Self.tokens)
        let spread = Double(b.flatMap { $0 }.max()! - b.flatMap { $0 }.min()!)
        #expect(Qwen3CrossCheckTests.largestDifference(a, b) <= 0.05 * spread)

        let mixed = try recipe(#"{"op_type": {"linear": \#(linear), "output": null}, "op_name": {"blk.0.ffn_up.weight": {"rotate": {"seed": 2}, "quantize": {"bits": 8}}}, "fold_rotations": true}"#)
        #expect { try ModelCompressor.compress(model: location, recipe: mixed, output: folder.file("m.safetensors"), threads: 2) } throws: { error in
            guard case CompressionError.invalidRecipe(_, let keyPath, let reason) = error else { return false }
            return keyPath == "fold_rotations" && reason.contains("blk.0.ffn_up.weight")
        }
        let bert = try recipe(#"{"op_type": {"linear": \#(linear)}, "fold_rotations": true}"#)
        #expect { try ModelCompressor.compress(model: try ModelLocation.resolve(TestModels.miniLM), recipe: bert, output: folder.file("b.safetensors"), threads: 2) } throws: { error in
            guard case CompressionError.invalidRecipe(_, let keyPath, let reason) = error else { return false }
            return keyPath == "fold_rotations" && reason.contains("LayerNorm")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.file("m.safetensors")) && !FileManager.default.fileExists(atPath: folder.file("b.safetensors")))
    }

    /// Malformed fold metadata, or a fold over other layers than the model's, is a typed error
    /// naming the file and key.
    @Test func badFoldMetadataIsATypedError() throws {
        let store = try GGUFStore(path: Self.gguf)
        let architecture = try Qwen3Architecture(configuration: .gguf(GGUFMetadata(file: store.file)))
        let stream = try #require(architecture.residualStream)
        let good = FoldedResidualRotation(rotation: HadamardRotation(size: stream.width, seed: 5), stream: stream)
        #expect(try FoldedResidualRotation(metadata: [FoldedResidualRotation.metadataKey: good.metadataValue], path: "m") == good)
        #expect(try FoldedResidualRotation(metadata: [:], path: "m") == nil)
        let key = FoldedResidualRotation.metadataKey
        for bad in ["{", "[]", good.metadataValue.replacingOccurrences(of: "\"block_size\":64", with: "\"block_size\":48"),
                    good.metadataValue.replacingOccurrences(of: "\"size\":64", with: "\"size\":640"),
                    good.metadataValue.replacingOccurrences(of: "\"signs\":\"", with: "\"signs\":\"zz")] {
            #expect { try FoldedResidualRotation(metadata: [key: bad], path: "m") } throws: { error in
                guard case ModelError.invalidFile(let path, let reason) = error else { return false }
                return path == "m" && reason.contains(key)
            }
        }
        let folder = TemporaryDirectory()
        _ = try Self.foldedFixture(seed: 0, into: folder.file("folded.safetensors"))
        let file = try SafetensorsFile(path: folder.file("folded.safetensors"))
        var model = try CompressedModel(file: file)
        let partial = FoldedResidualRotation(rotation: good.rotation, stream: ResidualStream(width: stream.width, readers: Array(stream.readers.prefix(1)), writers: stream.writers))
        model = CompressedModel(denseTensors: model.denseTensors, encodedTensors: model.encodedTensors,
                                metadata: file.metadata.merging([key: partial.metadataValue]) { $1 })
        try model.write(to: folder.file("partial.safetensors"))
        #expect(throws: ModelError.self) { try Self.logits(folder.file("partial.safetensors"), tokens: [1]) }
        // A fold whose reader has another width: decompress refuses it, naming the tensor.
        let other = FoldedResidualRotation(rotation: HadamardRotation(size: 2 * stream.width, seed: 5),
                                           stream: ResidualStream(width: 2 * stream.width, readers: stream.readers, writers: stream.writers))
        model.metadata[key] = other.metadataValue
        try model.write(to: folder.file("wide.safetensors"))
        #expect { try ModelCompressor.decompress(input: folder.file("wide.safetensors"), output: folder.file("wide-plain.safetensors")) } throws: { error in
            guard case ModelError.invalidWeight(let tensor, _) = error else { return false }
            return other.readers[tensor] != nil || other.writers.contains(tensor)
        }
        #expect(!FileManager.default.fileExists(atPath: folder.file("wide-plain.safetensors")))
    }

    /// Folding then unfolding gives a reader's weight times its norm's scale and a writer's
    /// weight back, for both Hadamard block choices.
    @Test(arguments: HadamardRotation.Block.allCases)
    func unfoldInvertsFold(block: HadamardRotation.Block) throws {
        let width = 96, inputs = 40
        var generator = SplitMix64(seed: 11)
        func random(_ count: Int) -> [Float] { (0..<count).map { _ in Float(generator.next() % 2001) / 1000 - 1 } }
        let stream = ResidualStream(width: width, readers: [.init(norm: "n.weight", linears: ["r.weight"])], writers: ["w.weight"])
        let fold = FoldedResidualRotation(rotation: HadamardRotation(size: width, seed: 4, block: block), stream: stream)
        let reader = random(inputs * width), writer = random(width * inputs), scale = random(width)
        var folded = reader
        try fold.fold("r.weight", values: &folded, shape: [inputs, width], normScale: scale)
        try fold.unfold("r.weight", values: &folded, shape: [inputs, width])
        #expect(zip(folded, reader.indices.map { reader[$0] * scale[$0 % width] }).allSatisfy { abs($0 - $1) <= 1e-5 })
        var written = writer
        try fold.fold("w.weight", values: &written, shape: [width, inputs], normScale: nil)
        #expect(written != writer)
        try fold.unfold("w.weight", values: &written, shape: [width, inputs])
        #expect(zip(written, writer).allSatisfy { abs($0 - $1) <= 1e-5 })
    }
}
