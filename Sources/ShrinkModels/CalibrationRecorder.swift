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
public final class InputStatisticsRecorder: LinearInputObserver, @unchecked Sendable {
    private let lock = NSLock()
    private let layers: Set<String>
    private var statistics: [String: LayerInputStatistics] = [:]
    private var product: [Float] = []
    /// The inputs `product` was computed from (`Xᵀ·X` of the last observation), so that ops that
    /// read the same input one after the other (query, key, value; gate, up) share one product.
    private var productInputs: [Float] = []
    private var productWidth = 0
    private let threads: Int

    /// Records the layers named in `layers` (op names, without `.weight`), computing each `Xᵀ·X`
    /// on `threads` threads (`DenseMatmul.gram`: the same bits at any count).
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
            if product.count < width * width { product = [Float](repeating: 0, count: width * width) }
            product.withUnsafeMutableBufferPointer { buffer in
                if !repeated {
                    DenseMatmul.gram(x: inputs.baseAddress!, rows: rows, width: width, output: buffer.baseAddress!, threads: threads)
                    productInputs = Array(inputs)
                    productWidth = width
                }
                statistics[layer, default: LayerInputStatistics(width: width)].add(
                    rows: inputs, count: rows, product: UnsafeBufferPointer(rebasing: buffer[0..<(width * width)]))
            }
        }
    }

    /// What was recorded, by op name.
    public var recorded: [String: LayerInputStatistics] { lock.withLock { statistics } }

    /// What was recorded since the last `drain`, by op name; the recorder forgets it.
    public func drain() -> [String: LayerInputStatistics] {
        lock.withLock {
            defer { statistics = [:] }
            return statistics
        }
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
            statistics.merge($0) { first, _ in first }
        }
        return statistics
    }

    /// The same statistics block by block (`ModelRuntime.run(calibrationTexts:spillNextTo:blockFinished:)`):
    /// `blockFinished` gets, after each block, the statistics of its ops that input reached, and
    /// nothing of them is kept after it returns. With `spillNextTo` a decoder keeps the texts'
    /// hidden states in a spill file in that path's folder.
    public static func streamInputStatistics(files: ModelFiles, architecture: any ModelArchitecture, dataPath: String, limit: Int,
                                             layers: Set<String>, threads: Int, spillNextTo: String? = nil,
                                             blockFinished: ([String: LayerInputStatistics]) throws -> Void) throws {
        let recorder = InputStatisticsRecorder(layers: layers, threads: threads)
        let runtime = try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: threads, activations: .float32, observer: recorder))
        try runtime.run(calibrationTexts: try lines(dataPath, limit: limit), spillNextTo: spillNextTo) { _ in
            let block = recorder.drain()
            if !block.isEmpty { try blockFinished(block) }
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
