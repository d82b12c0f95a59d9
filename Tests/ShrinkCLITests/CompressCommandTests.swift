import Foundation
import Testing
import Shrink
import ShrinkCLI
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

@Suite struct CompressCommandTests {
    static let recipesFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("recipes").path

    /// A tiny model with a linear layer, an embedding and a norm.
    static func tinyModel(in folder: TemporaryDirectory, poison: Float? = nil) throws -> String {
        var generator = SeededGenerator(seed: 3)
        var weight = generator.floats(32 * 16, in: -0.3...0.3)
        if let poison { weight[77] = poison }
        let path = folder.file("tiny.safetensors")
        try SafetensorsWriter.write([
            ("layers.0.proj.weight", try DenseTensor(converting: weight, shape: [32, 16])),
            ("layers.0.proj.bias", try DenseTensor(converting: generator.floats(32), shape: [32])),
            ("embed.weight", try DenseTensor(converting: generator.floats(64 * 16), to: .f16, shape: [64, 16])),
            ("layers.0.norm.weight", try DenseTensor(converting: generator.floats(16), shape: [16])),
        ], to: path)
        return path
    }

    static func recipe(_ json: String, in folder: TemporaryDirectory) throws -> String {
        let path = folder.file("recipe.json")
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func compressesInspectsAndDecompresses() throws {
        let folder = TemporaryDirectory()
        let model = try Self.tinyModel(in: folder)
        let recipe = try Self.recipe(#"{"op_type": {"linear": {"quantize": {"bits": 4, "granularity": "per_block", "block_size": 8}}, "embedding": {"palettize": {"bits": 3}}}}"#, in: folder)
        let output = folder.file("small.safetensors")
        let result = run(["compress", "--model", model, "--recipe", recipe, "--output", output])
        #expect(result.code == 0, "\(result.errors)")
        #expect(result.errors.contains("layers.0.proj.weight  int4 symmetric per-block 8"))
        #expect(result.output.contains("bits per weight:") && result.output.contains("ratio"))

        let inspected = run(["inspect", output])
        #expect(inspected.code == 0)
        #expect(inspected.output.contains("palette 3-bit per-tensor") && inspected.output.contains("shrink compressed safetensors"))

        let dense = folder.file("dense.safetensors")
        #expect(run(["decompress", "--input", output, "--output", dense]).code == 0)
        let compressed = try CompressedModel(file: try SafetensorsFile(path: output))
        let decompressed = try SafetensorsFile(path: dense)
        #expect(decompressed.entries.map(\.name).sorted() == ["embed.weight", "layers.0.norm.weight", "layers.0.proj.bias", "layers.0.proj.weight"])
        for encoded in compressed.encodedTensors {
            let tensor = try decompressed.tensor(named: encoded.name)
            #expect(tensor.dtype == encoded.sourceDType)
            let expected = try DenseTensor(converting: encoded.decode(), to: encoded.sourceDType, shape: encoded.shape)
            #expect(Array(tensor.bytes) == Array(expected.bytes))
        }
    }

    /// `inspect --kernels` shows, per linear layer of MiniLM, the kernel and the weights it
    /// multiplies: an int8 LUT as 8-bit codes, exactly; an f16 LUT as 16-bit codes in two planes;
    /// with fp32 activations, the decoded LUT. Needs the model: scripts/fetch-models.py minilm.
    @Test func inspectShowsWhichKernelEachLayerRuns() throws {
        let folder = TemporaryDirectory()
        for (lut, weights) in [("int8", "4-bit LUT indices → 8-bit codes"), ("f16", "4-bit LUT indices → 16-bit codes (two planes)")] {
            let recipe = try Self.recipe(#"{"op_type": {"linear": {"palettize": {"bits": 4, "lut_dtype": "\#(lut)"}}}, "weight_threshold": 2048}"#, in: folder)
            let output = folder.file("\(lut).safetensors")
            #expect(run(["compress", "--model", TestModels.miniLM, "--recipe", recipe, "--output", output]).code == 0)
            let integer = run(["inspect", output, "--kernels", "--base", TestModels.miniLM])
            #expect(integer.code == 0, "\(integer.errors)")
            let rows = integer.output.split(separator: "\n").filter { $0.contains("encoder.layer.") }
            #expect(rows.count == 36 && rows.allSatisfy { $0.contains(weights) && $0.contains("int8 × u8 codes") }, "\(integer.output)")
            if lut == "int8" { #expect(rows.allSatisfy { $0.hasSuffix("exact") }, "\(integer.output)") }
            let float = run(["inspect", output, "--kernels", "--base", TestModels.miniLM, "--activations", "f32", "--json"])
            let layers = try JSONSerialization.jsonObject(with: Data(float.output.utf8)) as? [[String: Any]]
            let executions = try #require(layers).compactMap { $0["execution"] as? [String: Any] }
            #expect(executions.count == 36 && executions.allSatisfy { ($0["maximum_weight_error"] as? Double) == 0 }, "\(float.output)")
            #expect(executions.filter { ($0["weights"] as? String) == "4-bit LUT indices → f32 LUT" }.count == 36, "\(float.output)")
        }
    }

    @Test func failuresLeaveNoOutputBehind() throws {
        let folder = TemporaryDirectory()
        let output = folder.file("out.safetensors")
        let poisoned = try Self.tinyModel(in: folder, poison: .nan)
        let recipe = try Self.recipe(#"{"global": {"palettize": {"bits": 4}}}"#, in: folder)
        let nan = run(["compress", "--model", poisoned, "--recipe", recipe, "--output", output])
        #expect(nan.code == 2)
        #expect(nan.errors.hasSuffix("tensor 'layers.0.proj.weight': element 77 is nan; weights must be finite"))

        let model = try Self.tinyModel(in: folder)
        let badRecipe = try Self.recipe(#"{"global": {"palettize": {"bits": 4, "granularity": "per_grouped_channel", "group_size": 5}}}"#, in: folder)
        let mismatch = run(["compress", "--model", model, "--recipe", badRecipe, "--output", output])
        #expect(mismatch.code == 2)
        #expect(mismatch.errors.contains("global.palettize.group_size: tensor 'layers.0.proj.weight' of shape [32, 16]: 5 does not divide the 32 channels of axis 0"))

        #expect(run(["compress", "--model", model, "--output", output]).errors.contains("missing option --recipe"))
        #expect(run(["compress", "--model", model, "--recipe", recipe, "--output", output, "--threads", "0"]).code == 2)
        #expect(run(["decompress", "--input", model + ".missing", "--output", output]).code == 2)
        #expect(!FileManager.default.fileExists(atPath: output))
        #expect(folder.contents.allSatisfy { !$0.contains("out.safetensors") })
    }

    /// Calibrated recipes name what is missing: the calibration text, or the config that running the model needs.
    @Test func calibrationFailuresNameTheFile() throws {
        let folder = TemporaryDirectory()
        let output = folder.file("out.safetensors")
        let gptq = #"{"op_type": {"linear": {"quantize": {"bits": 4, "method": "gptq"}}}, "calibration": {"data": "missing.txt"}}"#
        let recipe = try Self.recipe(gptq, in: folder)
        let missing = run(["compress", "--model", TestModels.miniLM, "--recipe", recipe, "--output", output])
        #expect(missing.code == 2)
        #expect(missing.errors.contains(folder.file("missing.txt") + ": cannot read the calibration data as UTF-8 text"), "\(missing.errors)")
        try "\n  \n".write(toFile: folder.file("missing.txt"), atomically: true, encoding: .utf8)
        let empty = run(["compress", "--model", TestModels.miniLM, "--recipe", recipe, "--output", output])
        #expect(empty.errors.contains("holds no calibration lines"), "\(empty.errors)")
        let noConfig = run(["compress", "--model", try Self.tinyModel(in: folder), "--recipe", recipe, "--output", output])
        #expect(noConfig.errors.contains("calibration runs the model, which needs its config.json next to the weights"), "\(noConfig.errors)")
        #expect(!FileManager.default.fileExists(atPath: output))
    }

    /// Every shipped recipe compresses the real all-MiniLM-L6-v2 and the result reads back, but
    /// for recipes with end-to-end tuning (`tune`, minutes each): `RecipeGateTests` compresses and
    /// evaluates every shipped recipe through the library, those included.
    @Test(arguments: try! FileManager.default.contentsOfDirectory(atPath: recipesFolder)
        .filter { $0.hasPrefix("minilm-") && $0.hasSuffix(".json") && (try? Recipe.load(path: recipesFolder + "/" + $0))?.tuning == nil }.sorted())
    func shippedRecipesCompressMiniLM(recipe: String) throws {
        let folder = TemporaryDirectory()
        let output = folder.file("out.safetensors")
        let result = run(["compress", "--model", TestModels.miniLM, "--recipe", Self.recipesFolder + "/" + recipe, "--output", output])
        #expect(result.code == 0, "\(result.errors)")
        let compressed = try CompressedModel(file: try SafetensorsFile(path: output))
        // Searched recipes follow the encoder-linears accounting: their embeddings stay fp32.
        let linearsOnly = recipe.hasPrefix("minilm-searched-")
        #expect(compressed.encodedTensors.count >= (linearsOnly ? 36 : 38), "every linear weight and the large embeddings")
        let bytes = compressed.encodedTensors.reduce(0) { $0 + $1.byteCount } + compressed.denseTensors.reduce(0) { $0 + $1.tensor.byteCount }
        #expect(Double(bytes) < 90_856_960 / (linearsOnly ? 1.6 : 3))
        #expect(compressed.metadata["shrink.source_sha256"] == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db")
        #expect(compressed.metadata["shrink.recipe_name"] == String(recipe.dropLast(5)))
    }
}
