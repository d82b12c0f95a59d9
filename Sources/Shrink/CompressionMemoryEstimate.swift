import ShrinkCompression
import ShrinkCore
import ShrinkIO

/// What `ModelCompressor.compress` is expected to hold in memory at its peak, worked out from the
/// plan before anything is encoded.
public struct CompressionMemoryEstimate: Sendable {
    /// The estimated peak resident bytes.
    public let bytes: Int
    /// The tensors whose encoding sets the peak (the `threads` largest the recipe compresses).
    public let largestTensors: [String]
    /// Bytes of the calibration statistics held for the whole run (0 without calibrated layers or
    /// when they are read from a statistics file layer by layer).
    public let calibrationBytes: Int
}

extension ModelCompressor {
    /// The process's own resident bytes besides tensors (code, runtime, the source's header).
    static let baseResidentBytes = 80 << 20

    /// Estimates the peak resident memory of compressing `model` with `recipe` on `threads` threads:
    ///
    ///     base + Σ_{the threads largest compressed tensors} (elements · w + source bytes) + calibration + tuning
    ///
    /// with `base` 80 MB and `w` the working bytes per element of the tensor's config: 6 rounded to
    /// nearest (float copy, codes, packed codes), 7 for a palette (and its assignment), 12 for GPTQ
    /// plus `16·n²` for its factorisations of `n` inputs; 5 more with pruning, 4 more with a
    /// rotation. A calibrated tensor's input correlation, `8·n²`, counts with it when read from a
    /// statistics file (`fromStatisticsFile`, one layer at a time); otherwise `calibration` is
    /// `8·n²` per calibrated layer (a calibration run records them all at once); `tuning`, for recipes that tune end to end, is the model as floats (4 bytes per
    /// element). Encoded tensors and the output are not counted: they go to disk as they finish.
    /// Measured peaks lie within about 25 % of it (`Benchmarks/scale.sh`).
    /// - Throws: what opening the model and resolving the plan throw.
    public static func estimatePeakMemory(model: ModelLocation, recipe: Recipe, threads: Int,
                                          fromStatisticsFile: Bool = false) throws -> CompressionMemoryEstimate {
        let (store, _, plan) = try plan(model: model, recipe: recipe)
        var working: [(name: String, bytes: Int)] = []
        var calibration = 0
        for entry in plan.entries {
            guard case .compress(let config, _) = entry.decision else { continue }
            let shape = entry.tensor.shape
            let elements = shape.reduce(1, *), inputs = shape.last ?? 1
            var perElement = config.isCalibrated ? 12 : config.palettize != nil ? 7 : 6
            if config.prune != nil { perElement += 5 }
            if config.rotate != nil { perElement += 4 }
            let correlation = config.isCalibrated ? 8 * inputs * inputs : 0
            let factorisations = 2 * correlation + (fromStatisticsFile ? correlation : 0)
            if !fromStatisticsFile { calibration += correlation }
            working.append((entry.tensor.name, elements * perElement + factorisations + (store.storage(of: entry.tensor.name)?.bytes ?? 0)))
        }
        let largest = working.sorted { ($0.bytes, $1.name) > ($1.bytes, $0.name) }.prefix(max(threads, 1))
        let tuning = recipe.tuning == nil ? 0 : 4 * store.descriptors.reduce(0) { $0 + $1.shape.reduce(1, *) }
        return CompressionMemoryEstimate(bytes: baseResidentBytes + largest.reduce(0) { $0 + $1.bytes } + calibration + tuning,
                                         largestTensors: largest.map(\.name), calibrationBytes: calibration)
    }
}
