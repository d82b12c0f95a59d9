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

/// Accumulates `InputCorrelation`s (`Σ xᵀx`) of chosen linear layers while a model runs.
public final class InputCorrelationRecorder: LinearInputObserver, @unchecked Sendable {
    private let lock = NSLock()
    private let layers: Set<String>
    private var correlations: [String: InputCorrelation] = [:]
    private var product: [Float] = []

    /// Records the layers named in `layers` (op names, without `.weight`).
    public init(layers: Set<String>) {
        self.layers = layers
    }

    public func observe(layer: String, inputs: UnsafeBufferPointer<Float>, rows: Int, width: Int) {
        guard layers.contains(layer), rows > 0 else { return }
        lock.withLock {
            if product.count < width * width { product = [Float](repeating: 0, count: width * width) }
            product.withUnsafeMutableBufferPointer { buffer in
                DenseMatmul.gram(x: inputs.baseAddress!, rows: rows, width: width, output: buffer.baseAddress!)
                correlations[layer, default: InputCorrelation(size: width)].add(
                    product: UnsafeBufferPointer(rebasing: buffer[0..<(width * width)]), rows: rows)
            }
        }
    }

    /// What was recorded, by op name.
    public var recorded: [String: InputCorrelation] { lock.withLock { correlations } }
}

/// Runs calibration text through any architecture's runtime and records the input correlations
/// of its linear layers.
public enum Calibration {
    /// The correlations of `layers` (op names) over the first `limit` non-blank lines of
    /// `dataPath`, run through the model in `files` with fp32 activations. Layers the runtime does
    /// not run (a pooler that sentence embeddings skip) are absent from the result.
    /// - Throws: `ModelError` for a model that cannot be built, `.invalidFile` for unreadable or
    ///   empty calibration text.
    public static func inputCorrelations(files: ModelFiles, architecture: any ModelArchitecture, dataPath: String, limit: Int,
                                         layers: Set<String>, threads: Int) throws -> [String: InputCorrelation] {
        let recorder = InputCorrelationRecorder(layers: layers)
        let runtime = try architecture.makeRuntime(files: files, options: RuntimeOptions(threads: threads, activations: .float32, observer: recorder))
        guard let data = FileManager.default.contents(atPath: dataPath), let text = String(data: data, encoding: .utf8) else {
            throw ModelError.invalidFile(path: dataPath, reason: "cannot read the calibration data as UTF-8 text")
        }
        let lines = text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).map(String.init)
            .filter { !$0.allSatisfy(\.isWhitespace) }.prefix(limit)
        guard !lines.isEmpty else { throw ModelError.invalidFile(path: dataPath, reason: "holds no calibration lines") }
        try runtime.run(calibrationTexts: Array(lines))
        return recorder.recorded
    }
}
