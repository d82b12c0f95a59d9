import Foundation
import Testing
import Shrink
import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkTestSupport

/// One calibration run serves every calibrated recipe of a model: the second recipe hits the
/// cache, and a recipe compressed from cached correlations (held in memory) writes the same bytes
/// as one that ran the calibration text itself (streamed block by block through a spill file).
/// Needs MiniLM.
@Suite struct CalibrationCacheTests {
    static let recipes = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("recipes")

    /// Also: `shrink calibrate`'s file stands in for the calibration run, with the same bytes out.
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
        let fresh = try Data(contentsOf: URL(fileURLWithPath: folder.file("fresh.safetensors")))
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.file("cached.safetensors"))) == fresh)

        let calibration = try #require(block32.calibration)
        let summary = try ModelCalibration.record(model: model, data: calibration.path, limit: calibration.limit, output: folder.file("stats.safetensors"), threads: 2)
        #expect(summary.layers == 36 && summary.distinctInputs == 24 && summary.lines == calibration.limit)
        let statistics = try CalibrationStatisticsFile(path: summary.output)
        let query = try statistics.statistics(of: "encoder.layer.0.attention.self.query")
        #expect(query.width == 384 && query.rows == summary.rows.lowerBound)
        #expect(zip(query.meanAbsolute, query.absoluteMaxima).allSatisfy { $0 > 0 && $0 <= $1 })
        _ = try ModelCompressor.compress(model: model, recipe: block32, output: folder.file("from-stats.safetensors"), threads: 2,
                                         calibrationCache: CalibrationCache(statistics: statistics))
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.file("from-stats.safetensors"))) == fresh)
    }

    /// A statistics file recorded on another model is refused naming its model key; nothing is written.
    @Test func statisticsOfAnotherModelAreRefused() throws {
        let folder = TemporaryDirectory()
        let model = try ModelLocation.resolve(TestModels.miniLM)
        let recipe = try Recipe.load(path: Self.recipes.appendingPathComponent("minilm-int4-block32-gptq.json").path)
        var query = LayerInputStatistics(width: 384)
        let row = [Float](repeating: 1, count: 384), product = [Float](repeating: 1, count: 384 * 384)
        row.withUnsafeBufferPointer { x in product.withUnsafeBufferPointer { query.add(rows: x, count: 1, product: $0) } }
        let other = folder.file("other.safetensors")
        let provenance = CalibrationProvenance(model: "other.safetensors", modelSHA256: String(repeating: "0", count: 64), data: "d", dataSHA256: "0", lines: 1)
        try CalibrationStatisticsFile.write(["encoder.layer.0.attention.self.query": query], provenance: provenance, to: other)
        let output = folder.file("refused.safetensors")
        do {
            _ = try ModelCompressor.compress(model: model, recipe: recipe, output: output, threads: 2,
                                             calibrationCache: CalibrationCache(statistics: try CalibrationStatisticsFile(path: other)))
            Issue.record("used statistics recorded on another model")
        } catch let error as ShrinkIOError {
            guard case .invalidMetadata(other, "shrink.calibration.model_sha256", _) = error else { Issue.record("wrong error \(error)"); return }
        }
        #expect(!FileManager.default.fileExists(atPath: output))
    }
}
