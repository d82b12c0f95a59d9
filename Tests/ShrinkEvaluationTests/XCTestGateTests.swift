import Shrink
import ShrinkEvaluation
import ShrinkTestSupport
import ShrinkTesting
import XCTest

/// The XCTest face of the accuracy gate.
final class XCTestGateTests: XCTestCase {
    func testInt8HoldsAGateFromXCTest() throws {
        let task = try EvaluationTasks.make(name: "stsb", data: nil, base: TestModels.miniLM, limit: 16)
        let recipe = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("recipes/minilm-int8-channel.json").path
        let outcome = try XCTAssertAccuracy(model: try ModelLocation.resolve(TestModels.miniLM), .recipe(recipe), task: task,
                                            thresholds: AccuracyThresholds(maxSpearmanDrop: 1, minMeanCosine: 0.998))
        XCTAssertTrue(outcome.passed, outcome.message)
        XCTAssertGreaterThan(outcome.metrics["mean_cosine"] ?? 0, 0.998)
    }
}
