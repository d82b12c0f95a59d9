import Dispatch
import Foundation
import ShrinkCore

/// A linear layer `y = x · Wᵀ + b` over `rows` input rows, whatever the weight's encoding.
public protocol LinearOperator: Sendable {
    var inFeatures: Int { get }
    var outFeatures: Int { get }
    /// Computes `rows × outFeatures` outputs from `rows × inFeatures` inputs (row-major).
    func forward(_ x: [Float], rows: Int, into y: inout [Float])
}

/// The default least work (multiply-adds) worth handing to another thread. The worker pool's
/// hand-off costs about a microsecond; on the development VM MiniLM at batch 1 with 2 threads ran
/// at 0.89 ms per sentence with 256 K, 1.0 ms with 64 K and 1.24 ms with 4 M.
public let defaultMinimumWorkPerThread = 1 << 18

/// How many of `threads` threads `work` multiply-adds over `outFeatures` rows should use.
func workerCount(threads: Int, work: Int, outFeatures: Int, minimumWork: Int) -> Int {
    max(1, min(threads, outFeatures, minimumWork > 0 ? work / minimumWork : threads))
}

/// An fp32 weight: few input rows go through the register-tiled kernel (threads split the output
/// rows), many through the system BLAS.
public final class DenseLinear: LinearOperator, @unchecked Sendable {
    public let inFeatures: Int
    public let outFeatures: Int
    public let threads: Int
    public let variant: KernelVariant
    /// Least multiply-adds per thread before work is split (0: always split, for tests).
    public let minimumWorkPerThread: Int
    let weights: [Float]
    let bias: [Float]?

    /// `weights` is `outFeatures × inFeatures`, row-major.
    public init(weights: [Float], bias: [Float]?, outFeatures: Int, inFeatures: Int,
                threads: Int = ProcessInfo.processInfo.activeProcessorCount, variant: KernelVariant = .best,
                minimumWorkPerThread: Int = defaultMinimumWorkPerThread) {
        precondition(weights.count == outFeatures * inFeatures && (bias?.count ?? outFeatures) == outFeatures && threads >= 1)
        self.weights = weights
        self.bias = bias
        self.outFeatures = outFeatures
        self.inFeatures = inFeatures
        self.threads = threads
        self.variant = variant
        self.minimumWorkPerThread = minimumWorkPerThread
    }

    public func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        precondition(x.count >= rows * inFeatures && y.count >= rows * outFeatures)
        if rows < PackedLinear.blasRowThreshold {
            let workers = workerCount(threads: threads, work: rows * outFeatures * inFeatures, outFeatures: outFeatures,
                                      minimumWork: minimumWorkPerThread)
            weights.withUnsafeBufferPointer { w in
                x.withUnsafeBufferPointer { input in
                    y.withUnsafeMutableBufferPointer { output in
                        nonisolated(unsafe) let (weight, inp, out) = (w.baseAddress!, input.baseAddress!, output.baseAddress!)
                        let work: @Sendable (Int) -> Void = { worker in
                            let begin = self.outFeatures * worker / workers, end = self.outFeatures * (worker + 1) / workers
                            self.variant.gemmNT(weight + begin * self.inFeatures, end - begin, inp, rows, self.inFeatures, out + begin, self.outFeatures)
                            if let bias = self.bias {
                                for m in 0..<rows { for r in begin..<end { out[m * self.outFeatures + r] += bias[r] } }
                            }
                        }
                        if workers == 1 { work(0) } else { WorkerPool.shared.run(workers, work) }
                    }
                }
            }
            return
        }
        weights.withUnsafeBufferPointer { w in
            y.withUnsafeMutableBufferPointer { output in
                if let bias {
                    bias.withUnsafeBufferPointer { b in
                        DenseMatmul.blas(x: x, rows: rows, weights: w.baseAddress!, outFeatures: outFeatures, inFeatures: inFeatures,
                                         bias: b.baseAddress, output: output.baseAddress!)
                    }
                } else {
                    DenseMatmul.blas(x: x, rows: rows, weights: w.baseAddress!, outFeatures: outFeatures, inFeatures: inFeatures,
                                     bias: nil, output: output.baseAddress!)
                }
            }
        }
    }
}

/// The scalar reference for any encoded weight: each output row of the weight is decoded (into a
/// row-sized scratch buffer, never the whole matrix) and dotted with every input row, accumulating
/// in `Double`. Correct for every encoding; the optimized kernels are tested against it.
public final class ReferenceEncodedLinear: LinearOperator, @unchecked Sendable {
    public let inFeatures: Int
    public let outFeatures: Int
    let reader: EncodedTensorReader
    let bias: [Float]?

    public init(weight: EncodedTensor, bias: [Float]?) {
        precondition(weight.shape.count == 2 && (bias?.count ?? weight.shape[0]) == weight.shape[0])
        reader = EncodedTensorReader(weight)
        self.bias = bias
        outFeatures = weight.shape[0]
        inFeatures = weight.shape[1]
    }

    public func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        var row = [Float](repeating: 0, count: inFeatures)
        for output in 0..<outFeatures {
            row.withUnsafeMutableBufferPointer { reader.decode(flatRange: (output * inFeatures)..<((output + 1) * inFeatures), into: $0.baseAddress!) }
            for input in 0..<rows {
                var sum = Double(bias?[output] ?? 0)
                for index in 0..<inFeatures { sum += Double(x[input * inFeatures + index]) * Double(row[index]) }
                y[input * outFeatures + output] = Float(sum)
            }
        }
    }
}

/// The precision compressed linear layers compute in; their weights stay as stored either way.
public enum ActivationPrecision: String, CaseIterable, Sendable {
    /// Activations stay fp32 and weights are decoded to fp32 on the fly (`PackedLinear`).
    case float32 = "f32"
    /// Activations are quantized to int8 per row and per block of 32 inputs and multiplied with
    /// the weight codes by integer dot products (`Int8ActivationLinear`), for every encoding the
    /// integer path covers (`Int8PanelWeights`); other layers stay fp32.
    case int8

    /// The operator for an encoded weight in this precision.
    public func linear(weight: EncodedTensor, bias: [Float]?, threads: Int) -> any LinearOperator {
        if self == .int8, let panels = Int8PanelWeights(weight: weight) {
            return Int8ActivationLinear(weights: panels, bias: bias, threads: threads)
        }
        return PackedLinear(weight: weight, bias: bias, threads: threads)
    }
}
