import Foundation
import ShrinkCore
import ShrinkIO

/// Input correlations recorded once per model and calibration set and handed to every recipe that
/// calibrates on the same text: a comparison or a suite of gates compresses one model with many
/// calibrated recipes, and running the calibration text through the model is most of a GPTQ pass's
/// time. The first calibrated recipe records every linear layer the architecture observes, so later
/// recipes that calibrate other layers hit too.
///
/// Entries are keyed by the weights file (path, size, modification time), the calibration file and
/// its line limit; they live as long as the cache (for SmolLM2-135M about 1 GB of correlations), so
/// a caller makes one for a batch of compressions and drops it after. A cache made from a
/// calibration statistics file (`shrink calibrate`) answers from that file instead, for its model
/// only, whatever calibration data a recipe names. Thread-safe.
public final class CalibrationCache: @unchecked Sendable {
    struct Key: Hashable {
        let weights: String
        let config: String?
        let bytes: Int
        let modified: Date
        let data: String
        let limit: Int
    }

    private struct Entry {
        let layers: Set<String>
        let correlations: [String: InputCorrelation]
    }

    private let lock = NSLock()
    private var entries: [Key: Entry] = [:]
    /// Calibration runs the cache saved (its hits).
    public private(set) var hits = 0
    /// The statistics file every answer comes from, when there is one.
    public let statistics: CalibrationStatisticsFile?

    public init() {
        statistics = nil
    }

    /// A cache that reads every correlation from `statistics`.
    public init(statistics: CalibrationStatisticsFile) {
        self.statistics = statistics
    }

    /// A reader of the correlations of `layers` from the statistics file, after checking that it
    /// was recorded on the model whose weights file `model` has SHA-256 `modelDigest`. Each call
    /// reads one layer from the file, so a caller holds only the layers it is encoding; a layer
    /// the file lacks (no calibration input reached it), or not among `layers`, reads as nil.
    func recordedCorrelations(_ statistics: CalibrationStatisticsFile, model: ModelLocation, modelDigest: String,
                              layers: Set<String>) throws -> @Sendable (String) throws -> InputCorrelation? {
        guard modelDigest == statistics.provenance.modelSHA256 else {
            throw ShrinkIOError.invalidMetadata(
                path: statistics.path, key: "\(CalibrationStatisticsFile.metadataKey).model_sha256",
                reason: "recorded on \(statistics.provenance.model) (SHA-256 \(statistics.provenance.modelSHA256.prefix(12))…), not on \(model.weightsPath) (\(modelDigest.prefix(12))…)")
        }
        lock.withLock { hits += 1 }
        return { layer in
            guard layers.contains(layer), statistics.layers[layer] != nil else { return nil }
            return try statistics.statistics(of: layer).correlation
        }
    }

    /// The correlations of `layers`: from an entry that recorded them all, else `record(allLayers)`
    /// (kept for later calls) for the key's model and calibration set.
    func correlations(model: ModelLocation, data: String, limit: Int, layers: Set<String>, allLayers: Set<String>,
                      record: (Set<String>) throws -> [String: InputCorrelation]) throws -> [String: InputCorrelation] {
        let attributes = try FileManager.default.attributesOfItem(atPath: model.weightsPath)
        let key = Key(weights: model.weightsPath, config: model.configPath, bytes: (attributes[.size] as? Int) ?? 0,
                      modified: (attributes[.modificationDate] as? Date) ?? .distantPast, data: data, limit: limit)
        if let entry = lock.withLock({ entries[key] }), layers.isSubset(of: entry.layers) {
            lock.withLock { hits += 1 }
            return entry.correlations.filter { layers.contains($0.key) }
        }
        let recorded = layers.union(allLayers)
        let correlations = try record(recorded)
        lock.withLock { entries[key] = Entry(layers: recorded, correlations: correlations) }
        return correlations.filter { layers.contains($0.key) }
    }
}
