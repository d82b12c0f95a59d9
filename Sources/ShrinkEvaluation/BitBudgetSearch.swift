import Foundation
import ShrinkCore

/// The search behind `shrink search`: one candidate per layer of a `SensitivityReport`, the
/// choice that minimises the summed loss (each layer's loss measured alone, assumed to add up)
/// with the summed compressed bytes within a budget.
///
/// An exact multiple-choice knapsack by dynamic programming over bytes counted in units of
/// `ceil(budget / resolution)` bytes, each layer's bytes rounded up to whole units (so the budget
/// always holds): `O(layers · candidates · resolution)` time, `O(layers · resolution)` memory.
public enum BitBudgetSearch {
    public enum Failure: Error, CustomStringConvertible, Equatable {
        case empty
        /// Even the smallest candidate of every layer needs `needed` bytes.
        case overBudget(budget: Int, needed: Int)
        /// With sizes rounded up to units of `unit` bytes the smallest candidates exceed the budget.
        case tooCoarse(budget: Int, unit: Int)

        public var description: String {
            switch self {
            case .empty: "the sensitivity report has no layers"
            case .overBudget(let budget, let needed):
                String(format: "the budget (%d bytes) is below what the smallest candidates need (%d bytes)", budget, needed)
            case .tooCoarse(let budget, let unit):
                String(format: "the budget (%d bytes) is within rounding (units of %d bytes) of the smallest candidates; raise it or the resolution", budget, unit)
            }
        }
    }

    /// The elements of every layer of `report` (each layer counted once).
    public static func elements(_ report: SensitivityReport) -> Int {
        report.uniqueLayers.reduce(0) { total, layer in total + (report.layers.first { $0.layer == layer }?.elements ?? 0) }
    }

    /// Per layer (model order), the chosen measurement.
    public static func choose(_ report: SensitivityReport, budgetBytes: Int, resolution: Int = 20_000) throws(Failure) -> [LayerSensitivity] {
        let layers = report.uniqueLayers
        guard !layers.isEmpty else { throw .empty }
        let options = layers.map { layer in report.layers.filter { $0.layer == layer && $0.loss.isFinite } }
        let needed = options.reduce(0) { $0 + ($1.map(\.bytes).min() ?? 0) }
        guard needed <= budgetBytes else { throw .overBudget(budget: budgetBytes, needed: needed) }
        let unit = max(1, (budgetBytes + resolution - 1) / resolution)
        let capacity = budgetBytes / unit
        // best[c]: least loss of the layers so far within c units; choice[l][c]: layer l's option there.
        var best = [Double](repeating: 0, count: capacity + 1)
        var choice = [[Int32]](repeating: [], count: layers.count)
        for (index, layerOptions) in options.enumerated() {
            var next = [Double](repeating: .infinity, count: capacity + 1)
            var picked = [Int32](repeating: -1, count: capacity + 1)
            for (option, measurement) in layerOptions.enumerated() {
                let units = (measurement.bytes + unit - 1) / unit
                guard units <= capacity else { continue }
                for c in units...capacity where best[c - units] + measurement.loss < next[c] {
                    next[c] = best[c - units] + measurement.loss
                    picked[c] = Int32(option)
                }
            }
            best = next
            choice[index] = picked
        }
        guard var c = best.indices.min(by: { best[$0] < best[$1] }), best[c].isFinite else {
            throw .tooCoarse(budget: budgetBytes, unit: unit)
        }
        var chosen: [LayerSensitivity] = []
        for index in layers.indices.reversed() {
            let measurement = options[index][Int(choice[index][c])]
            chosen.append(measurement)
            c -= (measurement.bytes + unit - 1) / unit
        }
        return chosen.reversed()
    }

    /// The recipe that applies `chosen`: an `op_name` entry per tensor with its candidate's config,
    /// and the calibration data of the chosen candidates (which must agree), absolute.
    public static func recipe(_ chosen: [LayerSensitivity], report: SensitivityReport) throws -> String {
        let used = Set(chosen.map(\.candidate))
        let calibrations = report.candidates.filter { used.contains($0.name) && $0.calibrationData != nil }
        if let first = calibrations.first, calibrations.contains(where: { $0.calibrationData != first.calibrationData || $0.calibrationLimit != first.calibrationLimit }) {
            throw DatasetError.cannotRead(path: first.recipe, reason: "the chosen candidates calibrate on different data; give them the same \"calibration\"")
        }
        var lines = ["{", "  \"op_name\": {"]
        let entries = chosen.flatMap { layer in layer.compressedTensors.map { (tensor: $0, config: layer.config) } }
        for (index, entry) in entries.enumerated() {
            lines.append("    \(JSONValue.string(entry.tensor).serialized()): \(entry.config)" + (index + 1 < entries.count ? "," : ""))
        }
        lines.append("  }" + (calibrations.isEmpty ? "" : ","))
        if let calibration = calibrations.first, let data = calibration.calibrationData {
            lines.append("  \"calibration\": {\"data\": \(JSONValue.string(data).serialized()), \"limit\": \(calibration.calibrationLimit ?? 512)}")
        }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }
}
