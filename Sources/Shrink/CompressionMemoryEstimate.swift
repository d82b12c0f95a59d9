import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkModels

/// What `ModelCompressor.compress` is expected to hold in memory at its peak, worked out from the
/// plan before anything is encoded.
public struct CompressionMemoryEstimate: Sendable {
    /// The estimated peak resident bytes: the larger of the calibration run's and the encoding's.
    public let bytes: Int
    /// The tensors whose encoding sets the encoding's peak (the largest that `threads` workers run at once).
    public let largestTensors: [String]
    /// The calibration run's estimated peak (0 without one: no calibrated layers, or a statistics file).
    public let calibrationBytes: Int
}

extension ModelCompressor {
    /// The process's own resident bytes besides tensors (code, runtime, the source's header).
    static let baseResidentBytes = 80 << 20

    /// Estimates the peak resident memory of compressing `model` with `recipe` on `threads` threads,
    /// the larger of two phases. Encoding:
    ///
    ///     base + Σ_{the largest set of tensors the encoder runs at once} working bytes + tuning
    ///
    /// with `base` 80 MB, each tensor's working bytes as `encodingWorkingSet` counts them, the set
    /// as `concurrentPeak` finds it (at most `threads` tensors whose quadratic parts fit the
    /// encoder's budget), and `tuning`, for recipes that tune end to end, the model as floats
    /// (4 bytes per element).
    /// Calibration (calibrated recipes without a statistics file), which runs the model block by
    /// block and spills each block's statistics:
    ///
    ///     base + max_block (8·Σ_{its calibrated inputs} n² + its source bytes) + 4·max n² + 4·h·longest·(1 + 2·blocks) + e
    ///
    /// the block's correlations (one per input its calibrated ops read: query, key and value share
    /// one, gate and up one; `sharedInput(of:)`) and mapped weight pages (released when every text went through the block),
    /// one float `XᵀX`; one text's hidden states (the others wait in a spill file) and a key/value
    /// cache per block (`h` the narrowest calibrated input, the model's width; `longest` a quarter
    /// of the longest line's UTF-8 bytes, at most 2,048 tokens); an F32 token embedding's float
    /// copy (F16, BF16 and encoded tables are read row by row from the mapped file). Encoded tensors, the output and the source's pages are not counted: they go to disk
    /// or are released as each tensor finishes. Measured peaks are compared with it in
    /// `Benchmarks/scale.sh`.
    /// - Throws: what opening the model and resolving the plan throw.
    public static func estimatePeakMemory(model: ModelLocation, recipe: Recipe, threads: Int,
                                          fromStatisticsFile: Bool = false) throws -> CompressionMemoryEstimate {
        let (store, _, plan) = try plan(model: model, recipe: recipe)
        var working: [(name: String, set: EncodingWorkingSet)] = []
        var blockCorrelations: [String: [String: Int]] = [:], blockSources: [String: Int] = [:]
        var widths: [Int] = []
        for entry in plan.entries {
            guard case .compress(let config, _) = entry.decision else { continue }
            let inputs = entry.tensor.shape.last ?? 1
            let source = store.storage(of: entry.tensor.name)?.bytes ?? 0
            if config.isCalibrated {
                blockCorrelations[entry.role.layer, default: [:]][sharedInput(of: entry.role), default: 0] = 8 * inputs * inputs
                blockSources[entry.role.layer, default: 0] += source
                widths.append(inputs)
            }
            working.append((entry.tensor.name, encodingWorkingSet(shape: entry.tensor.shape, config: config, sourceBytes: source)))
        }
        let together = concurrentPeak(working.map(\.set), threads: threads)
        let tuning = recipe.tuning == nil ? 0 : 4 * store.descriptors.reduce(0) { $0 + $1.shape.reduce(1, *) }
        var calibration = 0
        if !fromStatisticsFile, let data = recipe.calibration, let hidden = widths.min(), let widest = widths.max() {
            // Unreadable text counts as none: compress reports it, after what it checks first.
            let lines = (try? Calibration.lines(data.path, limit: data.limit)) ?? []
            let longest = min(2048, (lines.map(\.utf8.count).max() ?? 0) / 4)
            let embedding = plan.entries.filter { $0.role.opType == .embedding && $0.tensor.dtype == .f32 }.map { $0.tensor.shape.reduce(1, *) }.max() ?? 0
            let block = blockCorrelations.map { $0.value.values.reduce(0, +) + blockSources[$0.key, default: 0] }.max() ?? 0
            calibration = baseResidentBytes + block + 4 * widest * widest
                + 4 * hidden * longest * (1 + 2 * blockCorrelations.count) + 4 * embedding
        }
        let encoding = baseResidentBytes + together.reduce(0) { $0 + working[$1].set.bytes } + tuning
        return CompressionMemoryEstimate(bytes: max(encoding, calibration), largestTensors: together.map { working[$0].name }, calibrationBytes: calibration)
    }

    /// The bytes one tensor's encoding holds at its peak:
    ///
    ///     elements · w + source bytes + c·n²
    ///
    /// with `w` the working bytes per element of its config: 6 for linear codes, rounded to
    /// nearest or by GPTQ (float copy, codes, packed codes), 7 for a palette (and its assignment),
    /// 12 for a palette assigned by GPTQ (its LUT refit's `W·H`, 4 bytes, beside the assignment);
    /// 5 more with pruning, 4 more with a rotation. `c·n²`, the quadratic part, only for a
    /// calibrated tensor of `n` inputs: its input correlation (doubles, read back one layer at a
    /// time), which quantizing GPTQ factors in place into a float result, `c = 12`, and palette
    /// GPTQ keeps for its refit beside a working copy, `c = 20`.
    static func encodingWorkingSet(shape: [Int], config: OpCompressionConfig, sourceBytes: Int) -> EncodingWorkingSet {
        let elements = shape.reduce(1, *), inputs = shape.last ?? 1
        var perElement = config.palettize == nil ? 6 : config.isCalibrated ? 12 : 7
        if config.prune != nil { perElement += 5 }
        if config.rotate != nil { perElement += 4 }
        let quadratic = config.isCalibrated ? (config.palettize != nil ? 20 : 12) * inputs * inputs : 0
        return EncodingWorkingSet(bytes: elements * perElement + sourceBytes + quadratic, quadratic: quadratic)
    }

    /// The encoder's budget for the quadratic parts of the tensors it runs at once: the largest
    /// one's and half again, so two tensors with the largest correlation never run together while
    /// tensors with at most half of it run beside one (tensors without one always fit). Per-element
    /// working bytes are not budgeted: they are a small multiple of the tensor itself.
    static func quadraticBudget(_ sets: [EncodingWorkingSet]) -> Int {
        let largest = sets.map(\.quadratic).max() ?? 0
        return largest + largest / 2
    }

    /// The indices of the largest set of at most `threads` tensors (by working bytes) whose
    /// quadratic parts fit `quadraticBudget` together (the first alone when none fits beside it):
    /// for each tensor, the others added in decreasing working bytes while they fit beside it; the
    /// heaviest of those sets. `O(m²·threads)` for `m` tensors.
    static func concurrentPeak(_ sets: [EncodingWorkingSet], threads: Int) -> [Int] {
        let budget = quadraticBudget(sets)
        let bySize = sets.indices.sorted { (sets[$0].bytes, $1) > (sets[$1].bytes, $0) }
        var best: [Int] = [], bestBytes = -1
        for first in bySize {
            var chosen = [first], quadratic = sets[first].quadratic
            for other in bySize where chosen.count < max(threads, 1) && other != first && quadratic + sets[other].quadratic <= budget {
                chosen.append(other)
                quadratic += sets[other].quadratic
            }
            let bytes = chosen.reduce(0) { $0 + sets[$1].bytes }
            if bytes > bestBytes { (best, bestBytes) = (chosen, bytes) }
        }
        return best
    }

    /// The input an op reads, by the kind its architecture names it by: a block's query, key and
    /// value read one, its gate and up one (the calibration recorder keeps one set of statistics for
    /// each); any other op its own.
    static func sharedInput(of role: TensorRole) -> String {
        switch role.kind {
        case "attention.q", "attention.k", "attention.v": role.layer + " attention input"
        case "mlp.gate", "mlp.up": role.layer + " mlp input"
        default: role.op
        }
    }
}

/// What encoding one tensor holds at its peak (`ModelCompressor.encodingWorkingSet`).
struct EncodingWorkingSet: Sendable {
    /// Every byte it holds.
    let bytes: Int
    /// The part that grows with the square of its inputs (a calibrated tensor's correlation).
    let quadratic: Int
}
