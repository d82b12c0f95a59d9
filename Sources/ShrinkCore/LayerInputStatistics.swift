/// What calibration saw at one linear layer's input, over the rows `x` (each `width` floats) it
/// was given: the second moment `H = Σ xᵀx` (`correlation`), and per input channel `j` the sum
/// `Σ |x_j|` and the maximum `max |x_j|`. Activation-aware passes scale channels by their mean
/// magnitude; the calibrated quantizers read `H`.
public struct LayerInputStatistics: Sendable, Equatable {
    /// `Σ xᵀx` and the number of rows.
    public private(set) var correlation: InputCorrelation
    /// `Σ |x_j|` per input channel, in doubles.
    public private(set) var absoluteSums: [Double]
    /// `max |x_j|` per input channel (0 before any row).
    public private(set) var absoluteMaxima: [Float]

    /// Empty statistics for inputs of width `width`.
    public init(width: Int) {
        correlation = InputCorrelation(size: width)
        absoluteSums = [Double](repeating: 0, count: width)
        absoluteMaxima = [Float](repeating: 0, count: width)
    }

    /// Statistics as stored: `absoluteSums` and `absoluteMaxima` have `correlation.size` entries.
    public init(correlation: InputCorrelation, absoluteSums: [Double], absoluteMaxima: [Float]) {
        precondition(absoluteSums.count == correlation.size && absoluteMaxima.count == correlation.size)
        self.correlation = correlation
        self.absoluteSums = absoluteSums
        self.absoluteMaxima = absoluteMaxima
    }

    /// The input width.
    public var width: Int { correlation.size }
    /// Rows seen.
    public var rows: Int { correlation.rows }

    /// `Σ |x_j| / rows` per channel (zeros before any row).
    public var meanAbsolute: [Float] {
        absoluteSums.map { rows == 0 ? 0 : Float($0 / Double(rows)) }
    }

    /// Adds `rows` input rows (`rows × width`, row-major) whose product `Xᵀ·X` the caller computed
    /// (its upper triangle is read: `InputCorrelation.add(product:rows:threads:)`, on `threads`
    /// workers). O(rows · width) beyond the product.
    public mutating func add(rows inputs: UnsafeBufferPointer<Float>, count: Int, product: UnsafeBufferPointer<Float>, threads: Int = 1) {
        accumulate(rows: inputs, count: count, upperProduct: product, threads: threads)
        correlation.mirrorUpperTriangle()
    }

    /// `add(rows:count:product:threads:)` without mirroring the correlation: its entries below the
    /// diagonal are stale until `mirrorCorrelation()` (`InputCorrelation.addUpperTriangle`).
    package mutating func accumulate(rows inputs: UnsafeBufferPointer<Float>, count: Int, upperProduct product: UnsafeBufferPointer<Float>,
                                     threads: Int) {
        precondition(inputs.count >= count * width)
        correlation.addUpperTriangle(of: product, rows: count, threads: threads)
        for row in 0..<count {
            let base = row * width
            for j in 0..<width {
                let magnitude = abs(inputs[base + j])
                absoluteSums[j] += Double(magnitude)
                absoluteMaxima[j] = max(absoluteMaxima[j], magnitude)
            }
        }
    }

    /// Completes the correlation after `accumulate` calls: `InputCorrelation.mirrorUpperTriangle`.
    package mutating func mirrorCorrelation() {
        correlation.mirrorUpperTriangle()
    }
}
