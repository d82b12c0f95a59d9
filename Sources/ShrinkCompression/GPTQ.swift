import CBLAS
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
    /// Quantizes `values` (`[out, in]`) with affine codes of `config`.
    static func quantize(_ values: [Float], shape: [Int], correlation: InputCorrelation, config: QuantizationConfig, damping: Double,
                         actOrder: Bool, threads: Int, tensor: String) throws(CompressionError) -> (layout: AffineEncoding, parts: [String: DenseTensor]) {
        let columns = shape[1]
        let blockSize: Int
        switch config.granularity {
        case .perBlock(let size): blockSize = size
        case .perChannel, .perTensor: blockSize = columns
        }
        let perTensor = config.granularity == .perTensor
        let blocksPerRow = (columns + blockSize - 1) / blockSize
        let layout = LinearQuantizer.layout(config)
        let tensorParameters: LinearQuantizer.GroupParameters? = perTensor
            ? try LinearQuantizer.chooseParameters(values, importance: nil, config: config, layout: layout, tensor: tensor) : nil
        var codes = [UInt8](repeating: 0, count: values.count)
        var parameters = [LinearQuantizer.GroupParameters](repeating: .init(scale: 0, zeroPoint: 0), count: perTensor ? 1 : shape[0] * blocksPerRow)
        var rowScales = [Float](repeating: 0, count: config.scaleDType == .u8 ? shape[0] : 0)
        try codes.withUnsafeMutableBufferPointer { (codeBuffer) throws(CompressionError) in
            try parameters.withUnsafeMutableBufferPointer { (parameterBuffer) throws(CompressionError) in
                try rowScales.withUnsafeMutableBufferPointer { (rowScaleBuffer) throws(CompressionError) in
                    let rounder = AffineRounder(config: config, layout: layout, tensor: tensor, columns: columns, blockSize: blockSize,
                                                blocksPerRow: blocksPerRow, staticGroups: actOrder, tensorParameters: tensorParameters,
                                                codes: codeBuffer.baseAddress!, parameters: parameterBuffer.baseAddress!,
                                                rowScales: config.scaleDType == .u8 ? rowScaleBuffer.baseAddress! : nil,
                                                qMin: LinearQuantizer.codeRange(config).qMin, qMax: LinearQuantizer.codeRange(config).qMax)
                    try solve(values, shape: shape, correlation: correlation, damping: damping, actOrder: actOrder, threads: threads,
                              tensor: tensor, rounder: rounder)
                }
            }
        }
        if let tensorParameters { parameters[0] = tensorParameters }
        return (layout, LinearQuantizer.parts(codes: codes, parameters: parameters, config: config,
                                              rowScales: config.scaleDType == .u8 ? rowScales : nil))
    }

    /// Re-chooses the indices of a scalar palettization (`parts` from `Palettizer`) by GPTQ against
    /// its LUTs (times the channel scales, if any). For LUTs grouped along the output channels (or
    /// one per tensor), each LUT is then refitted to the output error for the chosen indices
    /// (`refitLUTs`; an int8 LUT then takes a new scale, `max|entry| / 127`, and its entries are
    /// rounded to it) and the indices chosen again. Returns the parts with the new `indices` (and
    /// `lut`, `lut_scales`).
    static func assignPalette(_ values: [Float], shape: [Int], correlation: InputCorrelation, layout: PaletteEncoding,
                              parts: [String: DenseTensor], damping: Double, actOrder: Bool, threads: Int,
                              tensor: String) throws(CompressionError) -> [String: DenseTensor] {
        precondition(layout.vectorSize == 1)
        let entries = layout.entries
        var luts = EncodedTensor.paletteLUTs(parts)
        let channelScales = parts["channel_scales"]?.floats()
        var indices = [UInt8](repeating: 0, count: values.count)
        func assign() throws(CompressionError) {
            try indices.withUnsafeMutableBufferPointer { (indexBuffer) throws(CompressionError) in
                let rounder = PaletteRounder(luts: luts, entries: entries, granularity: layout.granularity, shape: shape,
                                             channelScales: channelScales, channelAxis: layout.channelAxis, indices: indexBuffer.baseAddress!)
                try solve(values, shape: shape, correlation: correlation, damping: damping, actOrder: actOrder, threads: threads,
                          tensor: tensor, rounder: rounder)
            }
        }
        try assign()
        var result = parts
        if layout.channelAxis == 0 {
            let int8 = layout.lutDType == .i8
            luts = refitLUTs(values, shape: shape, correlation: correlation, luts: luts, indices: indices, entries: entries,
                             granularity: layout.granularity, channelScales: channelScales, dtype: int8 ? .f32 : layout.lutDType)
            if int8 {
                let grids = (0..<(luts.count / entries)).map { group in
                    let range = (group * entries)..<((group + 1) * entries)
                    let grid = LUTGrid(fitting: Array(luts[range]))
                    for index in range { luts[index] = grid.rounded(luts[index]) }
                    return grid
                }
                try assign()
                result.merge(LUTGrid.parts(luts: luts, grids: grids, shape: parts["lut"]!.shape)) { $1 }
            } else {
                try assign()
                result["lut"] = try! DenseTensor(converting: luts, to: layout.lutDType, shape: parts["lut"]!.shape)
            }
        }
        result["indices"] = try! DenseTensor(dtype: .u8, shape: [PackedBits.byteCount(count: indices.count, bits: layout.bits)],
                                             bytes: PackedBits.pack(indices, bits: layout.bits))
        return result
    }

    /// LUT entries minimising the output error `Σ_rows (w − ŵ) H (w − ŵ)ᵀ` for fixed indices: per
    /// LUT, the normal equations `A · lut = b` with `A_ab = Σ_r s_r² Σ_{i∈a, j∈b} H_ij` and
    /// `b_a = Σ_r s_r Σ_{i∈a} (H w_r)_i` (`s_r` the row's channel scale or 1), with a 1e-6 relative
    /// ridge (a larger one pulls entries toward 0: 0.01 cost MiniLM's palette 0.017 of mean cosine);
    /// an entry no weight uses, or a system that does not solve, keeps its value.
    /// Entries are rounded to `dtype`.
    static func refitLUTs(_ values: [Float], shape: [Int], correlation: InputCorrelation, luts: [Float], indices: [UInt8], entries: Int,
                          granularity: PaletteGranularity, channelScales: [Float]?, dtype: DType) -> [Float] {
        let (rows, columns) = (shape[0], shape[1])
        let groups = luts.count / entries
        var a = [Double](repeating: 0, count: groups * entries * entries), b = [Double](repeating: 0, count: groups * entries)
        // Per chunk of rows: H · [P | Wᵀ] in one dgemm, where P (columns × rows·entries) is each
        // row's one-hot index matrix and W the rows' weights; column (r, e) of H·P holds
        // Σ_{j: index(r, j) = e} H_ij and column r of H·Wᵀ holds (H w_r)_i.
        let chunk = 16
        var stacked = [Double](), product = [Double]()
        for start in stride(from: 0, to: rows, by: chunk) {
            let count = min(chunk, rows - start), width = count * (entries + 1)
            stacked = [Double](repeating: 0, count: columns * width)
            product = [Double](repeating: 0, count: columns * width)
            for r in 0..<count {
                let row = start + r
                for j in 0..<columns {
                    stacked[j * width + r * entries + Int(indices[row * columns + j])] = 1
                    stacked[j * width + count * entries + r] = Double(values[row * columns + j])
                }
            }
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(columns), Int32(width), Int32(columns), 1, correlation.matrix, Int32(columns),
                        stacked, Int32(width), 0, &product, Int32(width))
            for r in 0..<count {
                let row = start + r
                let group = EncodingLayout.group(of: row * columns, granularity, shape: shape)
                let scale = Double(channelScales?[row] ?? 1)
                for i in 0..<columns {
                    let entryI = Int(indices[row * columns + i])
                    let line = i * width + r * entries, target = (group * entries + entryI) * entries
                    for entry in 0..<entries { a[target + entry] += scale * scale * product[line + entry] }
                    b[group * entries + entryI] += scale * product[i * width + count * entries + r]
                }
            }
        }
        var refitted = luts
        for group in 0..<groups {
            let system = Array(a[(group * entries * entries)..<((group + 1) * entries * entries)])
            let rhs = Array(b[(group * entries)..<((group + 1) * entries)])
            let used = (0..<entries).filter { system[$0 * entries + $0] > 0 }
            guard !used.isEmpty else { continue }
            // Restrict to the used entries, add the ridge, and solve by Cholesky.
            let n = used.count
            var m = [Double](repeating: 0, count: n * n), y = [Double](repeating: 0, count: n)
            let meanDiagonal = used.reduce(0.0) { $0 + system[$1 * entries + $1] } / Double(n)
            for (p, ep) in used.enumerated() {
                y[p] = rhs[ep]
                for (q, eq) in used.enumerated() { m[p * n + q] = system[ep * entries + eq] }
                m[p * n + p] += 1e-6 * meanDiagonal
            }
            guard choleskyInPlace(&m, n) else { continue }
            for p in 0..<n {
                var sum = y[p]
                for q in 0..<p { sum -= m[p * n + q] * y[q] }
                y[p] = sum / m[p * n + p]
            }
            for p in stride(from: n - 1, through: 0, by: -1) {
                var sum = y[p]
                for q in (p + 1)..<max(p + 1, n) { sum -= m[q * n + p] * y[q] }
                y[p] = sum / m[p * n + p]
            }
            for (p, entry) in used.enumerated() where y[p].isFinite {
                refitted[group * entries + entry] = StoredPrecision.round(Float(y[p]), to: dtype)
            }
        }
        return refitted
    }

    /// The GPTQ sweep: every row independently (rows split over `threads`), columns in order (of
    /// decreasing input energy with `actOrder`), each rounded by `rounder` and its error spread
    /// over the columns still to come.
    static func solve<Rounder: ColumnRounder>(_ values: [Float], shape: [Int], correlation: InputCorrelation, damping: Double, actOrder: Bool,
                                              threads: Int, tensor: String, rounder: Rounder) throws(CompressionError) {
        precondition(shape.count == 2 && values.count == shape[0] * shape[1])
        let (rows, columns) = (shape[0], shape[1])
        guard correlation.size == columns else {
            throw .invalidWeight(tensor: tensor, reason: "the calibration correlation is \(correlation.size) wide, the weight has \(columns) inputs")
        }
        let order = actOrder
            ? (0..<columns).sorted { (correlation.matrix[$0 * columns + $0], $1) > (correlation.matrix[$1 * columns + $1], $0) }
            : Array(0..<columns)
        let factor = try inverseFactor(actOrder ? correlation.permuted(order) : correlation, damping: damping, tensor: tensor)
        let failure = FirstFailure()
        Parallel.forEachRange(rows, threads: threads) { range in
            var weights = [Float](repeating: 0, count: columns)
            var rounder = rounder
            do throws(CompressionError) {
                for row in range {
                    try rounder.begin(row: row, original: values[(row * columns)..<((row + 1) * columns)])
                    for position in 0..<columns { weights[position] = values[row * columns + order[position]] }
                    try weights.withUnsafeMutableBufferPointer { (pending) throws(CompressionError) in
                        try factor.withUnsafeBufferPointer { (u) throws(CompressionError) in
                            for position in 0..<columns {
                                let decoded = try rounder.round(row: row, column: order[position], pending: pending, position: position)
                                let error = (pending[position] - decoded) / u[position * columns + position]
                                guard error != 0 else { continue }
                                let later = position + 1
                                guard later < columns else { continue }
                                cblas_saxpy(Int32(columns - later), -error, u.baseAddress! + position * columns + later, 1, pending.baseAddress! + later, 1)
                            }
                        }
                    }
                }
            } catch {
                failure.record(error)
            }
        }
        if let error = failure.error { throw error }
    }

    /// `U`, the upper Cholesky factor of `(H + λI)⁻¹`, row-major `n × n` (zeros below the diagonal).
    ///
    /// With `J` the reversal permutation, the Cholesky factor `L` of `J·H·J` gives `H = V·Vᵀ` for
    /// the upper triangular `V = J·L·J`, so `H⁻¹ = V⁻ᵀ·V⁻¹` and `U = V⁻¹ = J·L⁻¹·J`: one Cholesky
    /// factorisation and one triangular inverse, about `n³/2` multiply-adds in doubles.
    static func inverseFactor(_ correlation: InputCorrelation, damping: Double, tensor: String) throws(CompressionError) -> [Float] {
        let n = correlation.size
        let matrix = correlation.matrix
        let meanDiagonal = (0..<n).reduce(0.0) { $0 + matrix[$1 * n + $1] } / Double(n)
        guard meanDiagonal.isFinite else { throw .invalidWeight(tensor: tensor, reason: "the calibration inputs are not finite") }
        // Inputs that were always zero are decoupled: their rows and columns become the identity's.
        let dead = (0..<n).map { matrix[$0 * n + $0] <= 0 }
        var reversed = [Double](repeating: 0, count: n * n)
        for i in 0..<n {
            let (source, target) = (n - 1 - i, i * n)
            for j in 0..<n {
                let column = n - 1 - j
                reversed[target + j] = dead[source] || dead[column] ? 0 : matrix[source * n + column]
            }
            reversed[target + i] = (dead[source] ? 1 : reversed[target + i]) + damping * (meanDiagonal > 0 ? meanDiagonal : 1)
        }
        guard choleskyInPlace(&reversed, n) else {
            throw .invalidWeight(tensor: tensor, reason: "the damped input correlation is not positive definite; raise \"damping\"")
        }
        let inverse = lowerTriangularInverse(reversed, n)
        var upper = [Float](repeating: 0, count: n * n)
        for i in 0..<n { for j in i..<n { upper[i * n + j] = Float(inverse[(n - 1 - i) * n + (n - 1 - j)]) } }
        return upper
    }

    /// Replaces the lower triangle of the symmetric `a` (`n × n`, row-major) with `L`, `a = L·Lᵀ`;
    /// `false` when `a` is not positive definite. The upper triangle is left as it was.
    /// Right-looking in blocks of 64: each diagonal block is factored in place, the panel below it
    /// solved against it (BLAS `dtrsm`) and the trailing matrix updated (`dsyrk`); `n³/6`
    /// multiply-adds, nearly all in BLAS.
    static func choleskyInPlace(_ a: inout [Double], _ n: Int) -> Bool {
        let block = 64
        return a.withUnsafeMutableBufferPointer { buffer in
            let m = buffer.baseAddress!
            for start in stride(from: 0, to: n, by: block) {
                let width = min(block, n - start), below = n - start - width
                let diagonal = m + start * n + start
                guard choleskyBlock(diagonal, width, leading: n) else { return false }
                guard below > 0 else { continue }
                let panel = diagonal + width * n
                cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, Int32(below), Int32(width), 1,
                            diagonal, Int32(n), panel, Int32(n))
                cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, Int32(below), Int32(width), -1, panel, Int32(n), 1,
                            panel + width, Int32(n))
            }
            return true
        }
    }

    /// The unblocked Cholesky factorisation of the `n × n` block at `m` (rows `leading` apart),
    /// into its lower triangle.
    static func choleskyBlock(_ m: UnsafeMutablePointer<Double>, _ n: Int, leading: Int) -> Bool {
        for j in 0..<n {
            let rowJ = m + j * leading
            var diagonal = rowJ[j]
            for k in 0..<j { diagonal -= rowJ[k] * rowJ[k] }
            guard diagonal > 0, diagonal.isFinite else { return false }
            let pivot = diagonal.squareRoot()
            rowJ[j] = pivot
            for i in (j + 1)..<max(j + 1, n) {
                let rowI = m + i * leading
                var sum = rowI[j]
                for k in 0..<j { sum -= rowI[k] * rowJ[k] }
                rowI[j] = sum / pivot
            }
        }
        return true
    }

    /// `L⁻¹` (lower triangular, row-major, zeros above the diagonal) from the lower triangle of
    /// `factor`: `L · X = I` solved by BLAS `dtrsm`.
    static func lowerTriangularInverse(_ factor: [Double], _ n: Int) -> [Double] {
        var inverse = [Double](repeating: 0, count: n * n)
        for i in 0..<n { inverse[i * n + i] = 1 }
        cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, Int32(n), Int32(n), 1, factor, Int32(n), &inverse, Int32(n))
        return inverse
    }
}

/// Picks the code of one weight in a GPTQ sweep and records it (each worker thread has its own copy).
protocol ColumnRounder: Sendable {
    /// Called before the columns of `row`, with its original weights.
    mutating func begin(row: Int, original: ArraySlice<Float>) throws(CompressionError)
    /// Rounds `pending[position]`, the updated weight of `column` (`pending[position...]` are the
    /// columns still to come, in sweep order), records its code and returns the decoded value.
    mutating func round(row: Int, column: Int, pending: UnsafeMutableBufferPointer<Float>, position: Int) throws(CompressionError) -> Float
}

/// Affine codes with scale groups per tensor, per row or per block of the row. In column order a
/// block's scale is chosen from the updated weights when its first column is reached; out of
/// order (`staticGroups`) every block's scale is fixed from the original row first. Integer block
/// scales take their row scale from the original row's blocks.
struct AffineRounder: ColumnRounder, @unchecked Sendable {
    let config: QuantizationConfig
    let layout: AffineEncoding
    let tensor: String
    let columns, blockSize, blocksPerRow: Int
    let staticGroups: Bool
    let tensorParameters: LinearQuantizer.GroupParameters?
    let codes: UnsafeMutablePointer<UInt8>
    let parameters: UnsafeMutablePointer<LinearQuantizer.GroupParameters>
    /// One per row with integer block scales, else nil.
    let rowScales: UnsafeMutablePointer<Float>?
    /// `LinearQuantizer.codeRange(config)`, once rather than per weight.
    let qMin, qMax: Int

    func begin(row: Int, original: ArraySlice<Float>) throws(CompressionError) {
        guard tensorParameters == nil, staticGroups || rowScales != nil else { return }
        func block(_ index: Int) -> [Float] {
            let begin = original.startIndex + index * blockSize
            return Array(original[begin..<min(begin + blockSize, original.endIndex)])
        }
        var ideal: [LinearQuantizer.GroupParameters] = []
        for index in 0..<blocksPerRow {
            ideal.append(try LinearQuantizer.chooseParameters(block(index), importance: nil, config: config, layout: layout, tensor: tensor))
        }
        if let rowScales {
            rowScales[row] = try LinearQuantizer.rowScale(largestBlockScale: ideal.map(\.scale).max() ?? 0, config: config, tensor: tensor)
        }
        guard staticGroups else { return }
        for index in 0..<blocksPerRow {
            parameters[row * blocksPerRow + index] = rowScales.map {
                LinearQuantizer.snapped(ideal[index], values: block(index), rowScale: $0[row], config: config, layout: layout)
            } ?? ideal[index]
        }
    }

    func round(row: Int, column: Int, pending: UnsafeMutableBufferPointer<Float>, position: Int) throws(CompressionError) -> Float {
        var group = tensorParameters ?? parameters[row * blocksPerRow + column / blockSize]
        if tensorParameters == nil, !staticGroups, column % blockSize == 0 {
            let values = Array(pending[position..<min(position + blockSize, columns)])
            group = try LinearQuantizer.chooseParameters(values, importance: nil, config: config, layout: layout, tensor: tensor)
            if let rowScales { group = LinearQuantizer.snapped(group, values: values, rowScale: rowScales[row], config: config, layout: layout) }
            parameters[row * blocksPerRow + column / blockSize] = group
        }
        let q = LinearQuantizer.quantize(pending[position], group, layout: layout, qMin: qMin, qMax: qMax)
        codes[row * columns + column] = UInt8(q + layout.codeOffset)
        return group.scale * Float(q - LinearQuantizer.effectiveZeroPoint(group, layout))
    }
}

/// Nearest entries of fixed scalar LUTs (one per LUT group of the palettization), times the
/// weight's channel scale when the palette has them.
struct PaletteRounder: ColumnRounder, @unchecked Sendable {
    let luts: [Float]
    let entries: Int
    let granularity: PaletteGranularity
    let shape: [Int]
    let channelScales: [Float]?
    let channelAxis: Int
    let indices: UnsafeMutablePointer<UInt8>

    func begin(row: Int, original: ArraySlice<Float>) {}

    func round(row: Int, column: Int, pending: UnsafeMutableBufferPointer<Float>, position: Int) -> Float {
        let flat = row * shape[1] + column
        let base = EncodingLayout.group(of: flat, granularity, shape: shape) * entries
        let scale = channelScales.map { $0[channelAxis == 0 ? row : column] } ?? 1
        let value = pending[position]
        var best = 0
        var bestDistance = Float.infinity
        for entry in 0..<entries {
            let distance = abs(value - luts[base + entry] * scale)
            if distance < bestDistance { bestDistance = distance; best = entry }
        }
        indices[flat] = UInt8(best)
        return luts[base + best] * scale
    }
}
