import Foundation
import ShrinkCore

/// GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
/// Transformers", 2022) for a 2-D weight `[out, in]` and the correlation `H` of its inputs.
///
/// Each output channel is quantized independently, input column by input column. After column
/// `i` is rounded, its error `e = (w_i − ŵ_i) / U_ii` is spread over the columns not yet
/// quantized, `w_j −= e · U_ij` for `j > i`, where `U` is the upper Cholesky factor of
/// `(H + λI)⁻¹` (`Hinv = Uᵀ·U`) and `λ` is `damping` × the mean diagonal of `H`. This is the
/// optimal update of the remaining weights for the output error `(w − ŵ) H (w − ŵ)ᵀ`. Scale
/// groups are chosen as their first column is reached (per block), from the whole original row
/// (per channel) or from the whole tensor (per tensor), with the same rule as round-to-nearest.
/// Inputs that were always zero (`H_ii = 0`) do not couple to the others.
enum GPTQ {
    static func encode(_ values: [Float], shape: [Int], correlation: InputCorrelation, config: QuantizationConfig, damping: Double,
                       actOrder: Bool, threads: Int, tensor: String) throws(CompressionError) -> (layout: AffineEncoding, parts: [String: DenseTensor]) {
        precondition(shape.count == 2 && values.count == shape[0] * shape[1])
        let (rows, columns) = (shape[0], shape[1])
        guard correlation.size == columns else {
            throw .invalidWeight(tensor: tensor, reason: "the calibration correlation is \(correlation.size) wide, the weight has \(columns) inputs")
        }
        // The order columns are quantized in, and the correlation in that order.
        let order = actOrder
            ? (0..<columns).sorted { (correlation.matrix[$0 * columns + $0], $1) > (correlation.matrix[$1 * columns + $1], $0) }
            : Array(0..<columns)
        let factor = try inverseFactor(actOrder ? correlation.permuted(order) : correlation, damping: damping, tensor: tensor)
        let layout = LinearQuantizer.layout(config)
        let (qMin, qMax) = LinearQuantizer.codeRange(config)
        let blockSize: Int
        switch config.granularity {
        case .perBlock(let size): blockSize = size
        case .perChannel, .perTensor: blockSize = columns
        }
        let blocksPerRow = (columns + blockSize - 1) / blockSize
        let perTensor = config.granularity == .perTensor
        let tensorParameters: LinearQuantizer.GroupParameters? = perTensor
            ? try LinearQuantizer.chooseParameters(values, importance: nil, config: config, layout: layout, tensor: tensor) : nil
        var codes = [UInt8](repeating: 0, count: values.count)
        var parameters = [LinearQuantizer.GroupParameters](repeating: .init(scale: 0, zeroPoint: 0), count: perTensor ? 1 : rows * blocksPerRow)
        let failure = FailureBox()
        codes.withUnsafeMutableBufferPointer { codeBuffer in
            parameters.withUnsafeMutableBufferPointer { parameterBuffer in
                nonisolated(unsafe) let (codeBase, parameterBase) = (codeBuffer.baseAddress!, parameterBuffer.baseAddress!)
                Parallel.forEachRange(rows, threads: threads) { range in
                    do throws(CompressionError) {
                        var weights = [Float](repeating: 0, count: columns)
                        for row in range {
                            for position in 0..<columns { weights[position] = values[row * columns + order[position]] }
                            // Out of order, the groups are fixed from the original weights up front.
                            if actOrder, !perTensor {
                                for block in 0..<blocksPerRow {
                                    let begin = row * columns + block * blockSize, end = min(begin + blockSize, (row + 1) * columns)
                                    parameterBase[row * blocksPerRow + block] = try LinearQuantizer.chooseParameters(
                                        Array(values[begin..<end]), importance: nil, config: config, layout: layout, tensor: tensor)
                                }
                            }
                            var group = tensorParameters ?? .init(scale: 0, zeroPoint: 0)
                            for position in 0..<columns {
                                let column = order[position]
                                if !perTensor {
                                    if !actOrder, column % blockSize == 0 {
                                        let end = min(position + blockSize, columns)
                                        parameterBase[row * blocksPerRow + column / blockSize] = try LinearQuantizer.chooseParameters(
                                            Array(weights[position..<end]), importance: nil, config: config, layout: layout, tensor: tensor)
                                    }
                                    group = parameterBase[row * blocksPerRow + column / blockSize]
                                }
                                let q = LinearQuantizer.quantize(weights[position], group, layout: layout, qMin: qMin, qMax: qMax)
                                codeBase[row * columns + column] = UInt8(q + layout.codeOffset)
                                let decoded = group.scale * Float(q - LinearQuantizer.effectiveZeroPoint(group, layout))
                                let error = (weights[position] - decoded) / factor[position * columns + position]
                                guard error != 0 else { continue }
                                factor.withUnsafeBufferPointer { u in
                                    let line = u.baseAddress! + position * columns
                                    for later in (position + 1)..<columns { weights[later] -= error * line[later] }
                                }
                            }
                        }
                    } catch {
                        failure.record(error)
                    }
                }
            }
        }
        if let error = failure.error { throw error }
        if let tensorParameters { parameters[0] = tensorParameters }
        return (layout, LinearQuantizer.parts(codes: codes, parameters: parameters, config: config))
    }

    /// `U`, the upper Cholesky factor of `(H + λI)⁻¹`, row-major `n × n` (zeros below the diagonal).
    static func inverseFactor(_ correlation: InputCorrelation, damping: Double, tensor: String) throws(CompressionError) -> [Float] {
        let n = correlation.size
        var h = correlation.matrix
        let meanDiagonal = (0..<n).reduce(0.0) { $0 + h[$1 * n + $1] } / Double(n)
        guard meanDiagonal.isFinite else { throw .invalidWeight(tensor: tensor, reason: "the calibration inputs are not finite") }
        for i in 0..<n {
            if h[i * n + i] <= 0 {
                for j in 0..<n { h[i * n + j] = 0; h[j * n + i] = 0 }
                h[i * n + i] = 1
            }
            h[i * n + i] += damping * (meanDiagonal > 0 ? meanDiagonal : 1)
        }
        guard choleskyInPlace(&h, n) else {
            throw .invalidWeight(tensor: tensor, reason: "the damped input correlation is not positive definite; raise \"damping\"")
        }
        let inverse = inverseFromCholesky(h, n)
        var lower = inverse
        guard choleskyInPlace(&lower, n) else {
            throw .invalidWeight(tensor: tensor, reason: "the inverse input correlation is not positive definite; raise \"damping\"")
        }
        var upper = [Float](repeating: 0, count: n * n)
        for i in 0..<n { for j in i..<n { upper[i * n + j] = Float(lower[j * n + i]) } }
        return upper
    }

    /// Replaces the lower triangle of the symmetric `a` (`n × n`, row-major) with `L`, `a = L·Lᵀ`;
    /// `false` when `a` is not positive definite. The upper triangle is left as it was.
    static func choleskyInPlace(_ a: inout [Double], _ n: Int) -> Bool {
        a.withUnsafeMutableBufferPointer { buffer in
            let m = buffer.baseAddress!
            for j in 0..<n {
                let rowJ = m + j * n
                var diagonal = rowJ[j]
                for k in 0..<j { diagonal -= rowJ[k] * rowJ[k] }
                guard diagonal > 0, diagonal.isFinite else { return false }
                let pivot = diagonal.squareRoot()
                rowJ[j] = pivot
                for i in (j + 1)..<max(j + 1, n) {
                    let rowI = m + i * n
                    var sum = rowI[j]
                    for k in 0..<j { sum -= rowI[k] * rowJ[k] }
                    rowI[j] = sum / pivot
                }
            }
            return true
        }
    }

    /// `(L·Lᵀ)⁻¹` from the lower Cholesky factor `L` (the lower triangle of `factor`), full and symmetric.
    static func inverseFromCholesky(_ factor: [Double], _ n: Int) -> [Double] {
        // M = L⁻¹, row by row: M_i = (e_i − Σ_{k<i} L_ik M_k) / L_ii (M is lower triangular).
        var inverseFactor = [Double](repeating: 0, count: n * n)
        inverseFactor.withUnsafeMutableBufferPointer { buffer in
            let m = buffer.baseAddress!
            for i in 0..<n {
                let rowI = m + i * n
                for k in 0..<i {
                    let coefficient = factor[i * n + k]
                    guard coefficient != 0 else { continue }
                    let rowK = m + k * n
                    for j in 0...k { rowI[j] -= coefficient * rowK[j] }
                }
                rowI[i] += 1
                let pivot = 1 / factor[i * n + i]
                for j in 0...i { rowI[j] *= pivot }
            }
        }
        // H⁻¹ = Mᵀ·M = Σ_k (row k of M)ᵀ (row k of M), accumulated in the lower triangle.
        var inverse = [Double](repeating: 0, count: n * n)
        inverse.withUnsafeMutableBufferPointer { buffer in
            inverseFactor.withUnsafeBufferPointer { mBuffer in
                let (h, m) = (buffer.baseAddress!, mBuffer.baseAddress!)
                for k in 0..<n {
                    let rowK = m + k * n
                    for i in 0...k {
                        let coefficient = rowK[i]
                        guard coefficient != 0 else { continue }
                        let rowI = h + i * n
                        for j in 0...i { rowI[j] += coefficient * rowK[j] }
                    }
                }
                for i in 0..<n { for j in (i + 1)..<max(i + 1, n) { h[i * n + j] = h[j * n + i] } }
            }
        }
        return inverse
    }
}

/// The first error thrown by any worker of a parallel loop.
final class FailureBox: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var error: CompressionError?

    func record(_ error: CompressionError) {
        lock.withLock { if self.error == nil { self.error = error } }
    }
}
