import Foundation
import ShrinkCore
import ShrinkKernels

/// Receives the inputs of the linear layers a model runs (see `WeightSource.init(path:threads:activations:observer:)`).
public protocol LinearInputObserver: AnyObject, Sendable {
    /// `inputs` holds `rows × width` floats, row-major, the input of linear op `layer`
    /// (`encoder.layer.0.attention.self.query`).
    func observe(layer: String, inputs: UnsafeBufferPointer<Float>, rows: Int, width: Int)
}

/// A linear op that shows its inputs to an observer before computing.
struct ObservedLinear: LinearOperator {
    let base: any LinearOperator
    let name: String
    let observer: any LinearInputObserver
    var inFeatures: Int { base.inFeatures }
    var outFeatures: Int { base.outFeatures }
    var execution: LinearExecution { base.execution }

    func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        x.withUnsafeBufferPointer { buffer in
            observer.observe(layer: name, inputs: UnsafeBufferPointer(rebasing: buffer[0..<(rows * inFeatures)]), rows: rows, width: inFeatures)
        }
        base.forward(x, rows: rows, into: &y)
    }
}

/// Accumulates `LayerInputStatistics` (`Σ xᵀx`, `Σ |x|`, `max |x|`) of chosen linear layers while
/// a model runs.
///
/// Ops that read the same input one after the other (query, key, value; gate, up) share one
/// product `Xᵀ·X` and, while every input one of them saw the others saw too, one set of
/// statistics: an observation is added once per group of ops that saw it, and an op whose inputs
/// part from its group's takes a copy of the group's statistics first. Each op's statistics are
/// therefore the sums it would have accumulated alone, bit for bit, and `recorded` / `drain`
/// return ops of one group as values sharing their storage (copy on write). Memory: one
/// `width²` product, the last input, and one set of statistics per group.
public final class InputStatisticsRecorder: LinearInputObserver, @unchecked Sendable {
    /// Statistics shared by the ops that saw the same inputs; `members` counts them.
    private final class Group {
        var statistics: LayerInputStatistics
        var members = 0
        init(_ statistics: LayerInputStatistics) { self.statistics = statistics }
    }

    private let lock = NSLock()
    private let layers: Set<String>
    private var groups: [String: Group] = [:]
    private var product: [Float] = []
    /// The inputs `product` was computed from (the upper triangle of `Xᵀ·X` of the last observation).
    private var productInputs: [Float] = []
    private var productRows = 0
    private var productWidth = 0
    /// The ops that observed `productInputs` and whose statistics do not hold it yet, in order.
    private var pending: [String] = []
    private let threads: Int

    /// Records the layers named in `layers` (op names, without `.weight`), computing each `Xᵀ·X`
    /// (its upper triangle, `DenseMatmul.gramUpper`) and adding it to the statistics on `threads`
    /// threads: the same bits at any count.
    public init(layers: Set<String>, threads: Int = 1) {
        self.layers = layers
        self.threads = max(1, threads)
    }

    public func observe(layer: String, inputs: UnsafeBufferPointer<Float>, rows: Int, width: Int) {
        guard layers.contains(layer), rows > 0 else { return }
        lock.withLock {
            let count = rows * width
            let repeated = productWidth == width && productInputs.count == count && productInputs.withUnsafeBytes { kept in
                memcmp(kept.baseAddress!, inputs.baseAddress!, 4 * count) == 0
            }
            if repeated, !pending.contains(layer) {
                pending.append(layer)
                return
            }
            addPending()
            pending = [layer]
            guard !repeated else { return }
            if product.count < width * width { product = [Float](repeating: 0, count: width * width) }
            product.withUnsafeMutableBufferPointer { buffer in
                DenseMatmul.gramUpper(x: inputs.baseAddress!, rows: rows, width: width, output: buffer.baseAddress!, threads: threads)
            }
            // One buffer across observations of one size, not an allocation of tens of MB each.
            if productInputs.count == count {
                productInputs.withUnsafeMutableBufferPointer { $0.baseAddress!.update(from: inputs.baseAddress!, count: count) }
            } else {
                productInputs = Array(inputs)
            }
            productRows = rows
            productWidth = width
        }
    }

    /// Adds the kept observation to the statistics of the ops in `pending`: once per group whose
    /// members all saw it; members that saw it leave a group whose other members did not (with a
    /// copy of its statistics) and form a group of their own. O(width²) per group touched.
    private func addPending() {
        guard !pending.isEmpty else { return }
        defer { pending = [] }
        var seen: [ObjectIdentifier: Int] = [:]
        for op in pending { if let group = groups[op] { seen[ObjectIdentifier(group), default: 0] += 1 } }
        var moved: [ObjectIdentifier: Group] = [:]
        var fresh: Group?
        var touched: [Group] = []
        for op in pending {
            let group: Group
            if let current = groups[op] {
                let id = ObjectIdentifier(current)
                if current.members == seen[id] {
                    group = current
                } else {
                    group = moved[id] ?? Group(current.statistics)
                    moved[id] = group
                    current.members -= 1
                    group.members += 1
                }
            } else {
                group = fresh ?? Group(LayerInputStatistics(width: productWidth))
                fresh = group
                group.members += 1
            }
            groups[op] = group
            if !touched.contains(where: { $0 === group }) { touched.append(group) }
        }
        let size = productWidth * productWidth
        product.withUnsafeBufferPointer { product in
            productInputs.withUnsafeBufferPointer { inputs in
                for group in touched {
                    group.statistics.accumulate(rows: inputs, count: productRows, upperProduct: UnsafeBufferPointer(rebasing: product[0..<size]),
                                                 threads: threads)
                }
            }
        }
    }

    /// What was recorded, by op name.
    public var recorded: [String: LayerInputStatistics] {
        lock.withLock { completed() }
    }

    /// What was recorded since the last `drain`, by op name; the recorder forgets it.
    public func drain() -> [String: LayerInputStatistics] {
        lock.withLock {
            defer { groups = [:] }
            return completed()
        }
    }

    /// The statistics by op name, the pending observation added and each group's correlation
    /// mirrored (the observations add upper triangles only). Called with the lock held.
    private func completed() -> [String: LayerInputStatistics] {
        addPending()
        var mirrored: Set<ObjectIdentifier> = []
        for group in groups.values where mirrored.insert(ObjectIdentifier(group)).inserted { group.statistics.mirrorCorrelation() }
        return groups.mapValues(\.statistics)
    }
}

/// Runs calibration text through any architecture's runtime and records the input statistics
/// of its linear layers.
public enum Calibration {
    /// The statistics of `layers` (op names) over the first `limit` non-blank lines of the UTF-8
    /// text file `dataPath`; a layer no input reached is absent.
    public static func inputStatistics(files: ModelFiles, architecture: any ModelArchitecture, dataPath: String, limit: Int,
                                       layers: Set<String>, threads: Int) throws -> [String: LayerInputStatistics] {
        var statistics: [String: LayerInputStatistics] = [:]
        try streamInputStatistics(files: files, architecture: architecture, dataPath: dataPath, limit: limit, layers: layers, threads: threads) {
            statistics.merge($1) { first, _ in first }
        }
        return statistics
    }

    /// The same statistics block by block (`ModelRuntime.run(calibrationTexts:spillNextTo:resume:blockFinished:)`):
    /// `blockFinished(b, statistics)` gets, after each block `b`, the statistics of its ops that
    /// input reached (possibly none), and nothing of them is kept after it returns (freed heap
    /// memory goes back to the system then). With `spillNextTo` a decoder keeps the texts' hidden
    /// states in a spill file in that path's folder; with `resume`, in that checkpoint's file,
    /// starting at its first block.
    public static func streamInputStatistics(files: ModelFiles, architecture: any ModelArchitecture, dataPath: String, limit: Int,
                                             layers: Set<String>, threads: Int, spillNextTo: String? = nil, resume: CalibrationResumePoint? = nil,
                                             blockFinished: (Int, [String: LayerInputStatistics]) throws -> Void) throws {
        let recorder = InputStatisticsRecorder(layers: layers, threads: threads)
        let runtime = try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: threads, activations: .float32, observer: recorder))
        try runtime.run(calibrationTexts: try lines(dataPath, limit: limit), spillNextTo: spillNextTo, resume: resume) { block in
            try blockFinished(block, recorder.drain())
            // The block's statistics and activations are freed: their pages leave memory too.
            Heap.releaseFreeMemory()
        }
    }

    /// The first `limit` non-blank lines of the UTF-8 text file `path`.
    public static func lines(_ path: String, limit: Int) throws -> [String] {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ModelError.invalidFile(path: path, reason: "cannot read the calibration data as UTF-8 text")
        }
        let lines = text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).map(String.init)
            .filter { !$0.allSatisfy(\.isWhitespace) }.prefix(limit)
        guard !lines.isEmpty else { throw ModelError.invalidFile(path: path, reason: "holds no calibration lines") }
        return Array(lines)
    }
}
