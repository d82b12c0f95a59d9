import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkTestSupport

/// One calibration run serves every calibrated recipe of a model: the second recipe hits the
/// cache, and a recipe compressed from cached correlations writes the same bytes as one that ran
/// the calibration text itself. Needs MiniLM.
@Suite struct CalibrationCacheTests {
    static let recipes = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("recipes")

    @Test func calibratedRecipesShareOneRunAndWriteTheSameBytes() throws {
        let folder = TemporaryDirectory()
        let model = try ModelLocation.resolve(TestModels.miniLM)
        let block32 = try Recipe.load(path: Self.recipes.appendingPathComponent("minilm-int4-block32-gptq.json").path)
        let block64 = try Recipe.load(path: Self.recipes.appendingPathComponent("minilm-int4-block64-gptq.json").path)
        let cache = CalibrationCache()
        _ = try ModelCompressor.compress(model: model, recipe: block64, output: folder.file("b64.safetensors"), threads: 2, calibrationCache: cache)
        #expect(cache.hits == 0)
        _ = try ModelCompressor.compress(model: model, recipe: block32, output: folder.file("cached.safetensors"), threads: 2, calibrationCache: cache)
        #expect(cache.hits == 1)
        _ = try ModelCompressor.compress(model: model, recipe: block32, output: folder.file("fresh.safetensors"), threads: 2)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.file("cached.safetensors")))
                == Data(contentsOf: URL(fileURLWithPath: folder.file("fresh.safetensors"))))
    }
}
