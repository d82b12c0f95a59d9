import Foundation
import Shrink
import ShrinkEvaluation
import Testing
import XCTest

/// Accuracy gates for test suites: evaluate a compressed model against the uncompressed one on a
/// task and fail the test, with a message giving the measured values, the thresholds and the
/// layers whose compression hurt most, when a threshold does not hold.
public enum ShrinkExpect {
    /// Swift Testing: records an issue at the caller when the gate fails; returns what it measured.
    @discardableResult
    /// `baseline`: the uncompressed model's evaluation on `task`, when already known;
    /// `calibrationCache`: calibration runs shared by several recipes' gates.
    public static func accuracy(model: ModelLocation, _ candidate: AccuracyGate.Candidate, task: any EvaluationTask,
                                thresholds: AccuracyThresholds, baseline: TaskEvaluation? = nil, calibrationCache: CalibrationCache? = nil,
                                sourceLocation: SourceLocation = #_sourceLocation) throws -> GateOutcome {
        let outcome = try AccuracyGate.check(model: model, candidate: candidate, task: task, thresholds: thresholds, baseline: baseline,
                                             calibrationCache: calibrationCache)
        if !outcome.passed { Issue.record(Comment(rawValue: outcome.message), sourceLocation: sourceLocation) }
        return outcome
    }
}

/// XCTest: fails the test at the caller when the gate fails; returns what it measured.
@discardableResult
public func XCTAssertAccuracy(model: ModelLocation, _ candidate: AccuracyGate.Candidate, task: any EvaluationTask,
                              thresholds: AccuracyThresholds, baseline: TaskEvaluation? = nil,
                              file: StaticString = #filePath, line: UInt = #line) throws -> GateOutcome {
    let outcome = try AccuracyGate.check(model: model, candidate: candidate, task: task, thresholds: thresholds, baseline: baseline)
    if !outcome.passed { XCTFail(outcome.message, file: file, line: line) }
    return outcome
}
