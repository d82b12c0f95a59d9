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
    /// The correlation's matrix becomes the factor's workspace: pass it with `consume`.
    static func quantize(_ values: [Float], shape: [Int], correlation: consuming InputCorrelation, config: QuantizationConfig, damping: Double,
                         actOrder: Bool, threads: Int, tensor: String) throws(CompressionError) -> (layout: AffineEncoding, parts: [String: DenseTensor]) {
        let factor = try sweepFactor(shape: shape, count: values.count, correlation: consume correlation, width: 1, damping: damping, actOrder: actOrder,
                                     tensor: tensor)
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
                    try solve(values, shape: shape, factor: factor, threads: threads, rounder: rounder)
                }
            }
        }
        if let tensorParameters { parameters[0] = tensorParameters }
        return (layout, try LinearQuantizer.parts(codes: codes, parameters: parameters, config: config,
                                                  rowScales: config.scaleDType == .u8 ? rowScales : nil, tensor: tensor))
    }

    /// Re-chooses the indices of a palettization (`parts` from `Palettizer`) by GPTQ against its
    /// LUTs (times the channel scales, if any): scalar entries column by column, vector entries
    /// (GPTVQ, van Baalen et al. 2024) a vector of consecutive input columns at a time, each the
    /// entry nearest in the output-error metric. For LUTs grouped along the output channels (or
    /// one per tensor), each LUT is then refitted to the output error for the chosen indices
    /// (`refitLUTs`; an int8 LUT then takes a new scale, `max|entry| / 127`, and its entries are
    /// rounded to it) and the indices chosen again. Returns the parts with the new `indices` (and
    /// `lut`, `lut_scales`).
    static func assignPalette(_ values: [Float], shape: [Int], correlation: InputCorrelation, layout: PaletteEncoding,
                              parts: [String: DenseTensor], damping: Double, actOrder: Bool, threads: Int,
                              tensor: String) throws(CompressionError) -> [String: DenseTensor] {
        let entries = layout.entries, width = layout.vectorSize
        guard width == 1 || layout.channelAxis == 0 else {
            throw .invalidWeight(tensor: tensor, reason: "GPTQ assigns vector palettes only along rows (channel axis 0)")
        }
        // One factor for both assignments: the correlation stays for the refit.
        let factor = try sweepFactor(shape: shape, count: values.count, correlation: correlation, width: width, damping: damping, actOrder: actOrder,
                                     tensor: tensor)
        var luts = EncodedTensor.paletteLUTs(parts)
        let channelScales = parts["channel_scales"]?.floats()
        var indices = [UInt8](repeating: 0, count: values.count / width)
        func assign() throws(CompressionError) {
            try indices.withUnsafeMutableBufferPointer { (indexBuffer) throws(CompressionError) in
                if width == 1 {
                    let rounder = PaletteRounder(luts: luts, entries: entries, granularity: layout.granularity, shape: shape,
                                                 channelScales: channelScales, channelAxis: layout.channelAxis, indices: indexBuffer.baseAddress!)
                    try solve(values, shape: shape, factor: factor, threads: threads, rounder: rounder)
                } else {
                    let rounder = VectorPaletteRounder(luts: luts, entries: entries, width: width, granularity: layout.granularity, shape: shape,
                                                       rowScales: channelScales, indices: indexBuffer.baseAddress!)
                    try solve(values, shape: shape, factor: factor, threads: threads, rounder: rounder)
                }
            }
        }
        try assign()
        var result = parts
        if layout.channelAxis == 0 {
            let int8 = layout.lutDType == .i8
            luts = refitLUTs(values, shape: shape, correlation: correlation, luts: luts, indices: indices, entries: entries, width: width,
                             granularity: layout.granularity, channelScales: channelScales, dtype: int8 ? .f32 : layout.lutDType, threads: threads)
            if int8 {
                let tableSize = entries * width
                let grids = (0..<(luts.count / tableSize)).map { group in
                    let range = (group * tableSize)..<((group + 1) * tableSize)
                    let grid = LUTGrid(fitting: Array(luts[range]))
                    for index in range { luts[index] = grid.rounded(luts[index]) }
                    return grid
                }
                try assign()
                result.merge(try LUTGrid.parts(luts: luts, grids: grids, shape: parts["lut"]!.shape, tensor: tensor)) { $1 }
            } else {
                try assign()
                result["lut"] = try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(converting: luts, to: layout.lutDType, shape: parts["lut"]!.shape) }
            }
        }
        result["indices"] = try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(dtype: .u8, shape: [PackedBits.byteCount(count: indices.count, bits: layout.bits)],
                                             bytes: PackedBits.pack(indices, bits: layout.bits)) }
        return result
    }

    /// LUT values minimising the output error `Σ_rows (w − ŵ) H (w − ŵ)ᵀ` for fixed indices. Each
    /// LUT value ("slot": entry `e`, lane `l`) is one unknown; element `j` of row `r` reads slot
    /// `v_r(j) = index(r, j / width) · width + j mod width`. Per LUT, the normal equations
    /// `A · lut = b` with `A_vu = Σ_r s_r² Σ_{v_r(i) = v, v_r(j) = u} H_ij` and
    /// `b_v = Σ_r s_r Σ_{v_r(i) = v} (H w_r)_i` (`s_r` the row's channel scale or 1), with a 1e-6
    /// relative ridge (a larger one pulls entries toward 0: 0.01 cost MiniLM's palette 0.017 of
    /// mean cosine); a slot no weight reads, or a system that does not solve, keeps its value.
    /// Values are rounded to `dtype`.
    ///
    /// Per row, `G_v = Σ_{v_r(j) = v} H_j·` (one pass over `H`, `n²` adds in BLAS `saxpy`), then
    /// `A_vu += Σ_{v_r(i) = u} G_v,i` over the row's slots: `O(rows · n²)` in all, the cost of
    /// the GPTQ sweep itself, rows split over `threads`; `b` from one `sgemm` `W · H`.
    static func refitLUTs(_ values: [Float], shape: [Int], correlation: InputCorrelation, luts: [Float], indices: [UInt8], entries: Int,
                          width: Int, granularity: PaletteGranularity, channelScales: [Float]?, dtype: DType, threads: Int) -> [Float] {
        let (rows, n) = (shape[0], shape[1])
        let slots = entries * width
        let groups = luts.count / slots
        let h = correlation.matrix.map { Float($0) }
        var product = [Float](repeating: 0, count: rows * n)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(rows), Int32(n), Int32(n), 1, values, Int32(n), h, Int32(n), 0, &product, Int32(n))
        let hw = product
        let rowGroup = (0..<rows).map { EncodingLayout.group(of: $0 * n, granularity, shape: shape) }
        let totals = NormalEquations(groups: groups, slots: slots)
        Parallel.forEachRange(rows, threads: threads) { range in
            var local = NormalEquations(groups: 0, slots: slots)
            var localGroup = -1
            var g = [Float](repeating: 0, count: slots * n)
            var slot = [Int](repeating: 0, count: n)
            var used = [Bool](repeating: false, count: slots), usedList: [Int] = []
            for row in range {
                if rowGroup[row] != localGroup {
                    if localGroup >= 0 { totals.add(local, group: localGroup) }
                    local = NormalEquations(groups: 1, slots: slots)
                    localGroup = rowGroup[row]
                }
                let scale = Double(channelScales?[row] ?? 1)
                usedList.removeAll(keepingCapacity: true)
                for j in 0..<n {
                    slot[j] = Int(indices[(row * n + j) / width]) * width + j % width
                    if !used[slot[j]] { used[slot[j]] = true; usedList.append(slot[j]) }
                }
                g.withUnsafeMutableBufferPointer { g in
                    h.withUnsafeBufferPointer { h in
                        for j in 0..<n { cblas_saxpy(Int32(n), 1, h.baseAddress! + j * n, 1, g.baseAddress! + slot[j] * n, 1) }
                    }
                    for v in usedList {
                        let line = v * n
                        local.a.withUnsafeMutableBufferPointer { a in
                            for i in 0..<n { a[v * slots + slot[i]] += scale * scale * Double(g[line + i]) }
                        }
                        for i in 0..<n { g[line + i] = 0 }
                    }
                }
                for i in 0..<n { local.b[slot[i]] += scale * Double(hw[row * n + i]) }
                for v in usedList { used[v] = false }
            }
            if localGroup >= 0 { totals.add(local, group: localGroup) }
        }
        var refitted = luts
        for group in 0..<groups {
            let system = Array(totals.a[(group * slots * slots)..<((group + 1) * slots * slots)])
            let rhs = Array(totals.b[(group * slots)..<((group + 1) * slots)])
            let used = (0..<slots).filter { system[$0 * slots + $0] > 0 }
            guard !used.isEmpty else { continue }
            // Restrict to the used slots, add the ridge, and solve by Cholesky.
            let m = used.count
            var matrix = [Double](repeating: 0, count: m * m), y = [Double](repeating: 0, count: m)
            let meanDiagonal = used.reduce(0.0) { $0 + system[$1 * slots + $1] } / Double(m)
            for (p, sp) in used.enumerated() {
                y[p] = rhs[sp]
                for (q, sq) in used.enumerated() { matrix[p * m + q] = system[sp * slots + sq] }
                matrix[p * m + p] += 1e-6 * meanDiagonal
            }
            guard choleskyInPlace(&matrix, m) else { continue }
            for p in 0..<m {
                var sum = y[p]
                for q in 0..<p { sum -= matrix[p * m + q] * y[q] }
                y[p] = sum / matrix[p * m + p]
            }
            for p in stride(from: m - 1, through: 0, by: -1) {
                var sum = y[p]
                for q in (p + 1)..<max(p + 1, m) { sum -= matrix[q * m + p] * y[q] }
                y[p] = sum / matrix[p * m + p]
            }
            for (p, slot) in used.enumerated() where y[p].isFinite {
                refitted[group * slots + slot] = StoredPrecision.round(Float(y[p]), to: dtype)
            }
        }
        return refitted
    }

    /// What the sweep needs of the calibration correlation: the order it takes blocks of `width`
    /// input columns in, and the factor `U` (see `inverseFactor`) with the columns in that order.
    struct SweepFactor: Sendable {
        let width: Int
        /// Blocks of `width` columns, in the order the sweep rounds them.
        let blockOrder: [Int]
        /// `blockOrder` expanded to columns: sweep position `p` is input column `order[p]`.
        let order: [Int]
        /// `inverseFactor` of the correlation in `order`, `n × n` row-major.
        let upper: [Float]
        /// `blockInverses(upper)`.
        let blockInverses: [Float]
    }

    /// The sweep's factor for a `shape` weight (`count` values) from the layer's `correlation`: blocks
    /// of `width` columns in order, or by decreasing input energy (`Σ H_ii` over the block, ties to
    /// the lower block) with `actOrder`. The correlation's matrix is the workspace, so a caller that
    /// passes it with `consume` holds `12n²` bytes at most (the doubles and the float result) where
    /// a copy would add `8n²`.
    /// - Throws: `CompressionError.invalidWeight` when the weight is not 2-D, its inputs are not a
    ///   whole number of `width`-wide vectors or not the correlation's size, or `inverseFactor` fails.
    static func sweepFactor(shape: [Int], count: Int, correlation: consuming InputCorrelation, width: Int, damping: Double, actOrder: Bool,
                            tensor: String) throws(CompressionError) -> SweepFactor {
        guard shape.count == 2 && count == shape[0] * shape[1] else {
            throw .invalidWeight(tensor: tensor, reason: "GPTQ needs a 2-D weight, not \(Shape.describe(shape))")
        }
        let columns = shape[1]
        guard columns % width == 0 else {
            throw .invalidWeight(tensor: tensor, reason: "\(columns) inputs are not a whole number of \(width)-wide vectors")
        }
        guard correlation.size == columns else {
            throw .invalidWeight(tensor: tensor, reason: "the calibration correlation is \(correlation.size) wide, the weight has \(columns) inputs")
        }
        let energies = correlation.matrix.withUnsafeBufferPointer { h in
            (0..<(columns / width)).map { block in (0..<width).reduce(0.0) { $0 + h[(block * width + $1) * (columns + 1)] } }
        }
        let blockOrder = actOrder ? energies.indices.sorted { (energies[$0], $1) > (energies[$1], $0) } : Array(energies.indices)
        let order = blockOrder.flatMap { ($0 * width)..<(($0 + 1) * width) }
        let upper = try inverseFactor(consume correlation, order: order, damping: damping, tensor: tensor)
        return SweepFactor(width: width, blockOrder: blockOrder, order: order, upper: upper,
                           blockInverses: blockInverses(upper, columns: columns, width: width))
    }

    /// The GPTQ sweep: every row independently, blocks of `rounder.width` consecutive input columns
    /// in order (of decreasing input energy with `actOrder`), each block rounded by `rounder` and its
    /// error spread over the columns still to come. For a block `B` rounded with error
    /// `δ = w_B − ŵ_B`, the remaining columns `R` take `w_R −= (δ · U_BB⁻¹) · U_BR` (the optimal
    /// update, GPTVQ's for vectors, GPTQ's for `|B| = 1`), and the block adds `‖δ · U_BB⁻¹‖²` to the
    /// output error, the metric the rounder minimises.
    ///
    /// Lazily, as GPTQ's authors do: rows go in batches of `rowBatch` (batches split over
    /// `threads`, so results do not depend on it), columns in spans of about 128 (`lazySpan`);
    /// inside a span the updates are applied as each block is rounded, and the span's errors reach
    /// the later columns in one `sgemm` (`rowBatch × span` times `U_span,R`) instead of a `saxpy`
    /// over all of `R` per block and row. The same sums in another order.
    static func solve<Rounder: ColumnRounder>(_ values: [Float], shape: [Int], factor: SweepFactor, threads: Int,
                                              rounder: Rounder) throws(CompressionError) {
        let (rows, columns) = (shape[0], shape[1])
        let width = factor.width, blockOrder = factor.blockOrder, order = factor.order
        let (factor, metrics) = (factor.upper, factor.blockInverses)
        let span = lazySpan(columns: columns, width: width, lookahead: rounder.lookahead)
        let failure = FirstFailure()
        Parallel.forEachRange((rows + rowBatch - 1) / rowBatch, threads: threads) { batches in
            var decoded = [Float](repeating: 0, count: width), scaled = decoded
            var rounder = rounder
            do throws(CompressionError) {
                for batch in batches {
                    let first = batch * rowBatch, count = min(rowBatch, rows - first)
                    // Row r of the batch: its weights in sweep order and its errors in the span.
                    var pending = [Float](repeating: 0, count: count * columns), errors = [Float](repeating: 0, count: count * span)
                    for r in 0..<count {
                        let row = first + r
                        try rounder.begin(row: row, original: values[(row * columns)..<((row + 1) * columns)])
                        for position in 0..<columns { pending[r * columns + position] = values[row * columns + order[position]] }
                    }
                    try pending.withUnsafeMutableBufferPointer { (pending) throws(CompressionError) in
                        try factor.withUnsafeBufferPointer { (u) throws(CompressionError) in
                            try metrics.withUnsafeBufferPointer { (inverses) throws(CompressionError) in
                                for start in stride(from: 0, to: columns, by: span) {
                                    let end = min(start + span, columns)
                                    for r in 0..<count {
                                        let row = UnsafeMutableBufferPointer(rebasing: pending[(r * columns)..<((r + 1) * columns)])
                                        for position in stride(from: start, to: end, by: width) {
                                            let step = position / width
                                            let metric = inverses.baseAddress! + step * width * width
                                            try rounder.round(row: first + r, column: blockOrder[step] * width, pending: row, position: position,
                                                                  metric: metric, decoded: &decoded)
                                            if width == 1 {
                                                scaled[0] = (row[position] - decoded[0]) / u[position * columns + position]
                                            } else {
                                                for lane in 0..<width {
                                                    var sum: Float = 0
                                                    for k in 0...lane { sum += (row[position + k] - decoded[k]) * metric[k * width + lane] }
                                                    scaled[lane] = sum
                                                }
                                            }
                                            let later = position + width
                                            for lane in 0..<width {
                                                errors[r * span + position - start + lane] = scaled[lane]
                                                guard later < end, scaled[lane] != 0 else { continue }
                                                cblas_saxpy(Int32(end - later), -scaled[lane], u.baseAddress! + (position + lane) * columns + later, 1,
                                                            row.baseAddress! + later, 1)
                                            }
                                        }
                                    }
                                    guard end < columns else { continue }
                                    errors.withUnsafeBufferPointer { errors in
                                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(count), Int32(columns - end), Int32(end - start), -1,
                                                    errors.baseAddress!, Int32(span), u.baseAddress! + start * columns + end, Int32(columns), 1,
                                                    pending.baseAddress! + end, Int32(columns))
                                    }
                                }
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

    /// Rows the lazy sweep takes together.
    static let rowBatch = 16

    /// The columns a lazy update spans: about 128, a multiple of `width`, and such that every group
    /// a rounder reads ahead (`lookahead` columns from its first, see `ColumnRounder`) starts at a
    /// span's start or lies inside one span, so that its columns have all earlier updates when read.
    static func lazySpan(columns: Int, width: Int, lookahead: Int) -> Int {
        let span = max(width, 128 / width * width)
        if lookahead <= 1 || lookahead >= columns { return span }
        return lookahead >= span ? lookahead : span / lookahead * lookahead
    }

    /// Per block of `width` columns along the diagonal of the upper triangular `factor`, the
    /// inverse of its diagonal block `U_BB` (upper triangular, `width × width`, row-major), blocks
    /// after blocks; `width³/6` operations per block.
    static func blockInverses(_ factor: [Float], columns: Int, width: Int) -> [Float] {
        var inverses = [Float](repeating: 0, count: columns * width)
        for block in 0..<(columns / width) {
            let base = block * width, target = block * width * width
            // Back substitution, column by column of the inverse: U · X = I.
            for column in 0..<width {
                for row in stride(from: column, through: 0, by: -1) {
                    var sum: Double = row == column ? 1 : 0
                    for k in (row + 1)..<max(row + 1, column + 1) {
                        sum -= Double(factor[(base + row) * columns + base + k]) * Double(inverses[target + k * width + column])
                    }
                    inverses[target + row * width + column] = Float(sum / Double(factor[(base + row) * columns + base + row]))
                }
            }
        }
        return inverses
    }

    /// `U`, the upper Cholesky factor of `(H + λI)⁻¹` with `H`'s inputs taken in `order` (new
    /// input `i` is old input `order[i]`; nil: as stored), row-major `n × n` (zeros below the diagonal).
    ///
    /// With `J` the reversal permutation, the Cholesky factor `L` of `J·H·J` gives `H = V·Vᵀ` for
    /// the upper triangular `V = J·L·J`, so `H⁻¹ = V⁻ᵀ·V⁻¹` and `U = V⁻¹ = J·L⁻¹·J`: one Cholesky
    /// factorisation and one triangular inverse, about `n³/2` multiply-adds in doubles. Every step
    /// works in the correlation's matrix (the permutation by cycles, a row at a time), so its
    /// `8n²` bytes and the result's `4n²` are all it holds; passed with `consume` the matrix is not copied.
    static func inverseFactor(_ correlation: consuming InputCorrelation, order: [Int]? = nil, damping: Double,
                              tensor: String) throws(CompressionError) -> [Float] {
        let n = correlation.size
        let order = order ?? Array(0..<n)
        var matrix = correlation.takeMatrix()
        let meanDiagonal = order.reduce(0.0) { $0 + matrix[$1 * n + $1] } / Double(n)
        guard meanDiagonal.isFinite else { throw .invalidWeight(tensor: tensor, reason: "the calibration inputs are not finite") }
        // J·P·H·Pᵀ·J: new input i is old input order[n − 1 − i].
        let source = (0..<n).map { order[n - 1 - $0] }
        matrix.withUnsafeMutableBufferPointer { permuteSymmetrically($0.baseAddress!, n, source) }
        // Inputs that were always zero are decoupled: their rows and columns become the identity's.
        let dead = (0..<n).map { matrix[$0 * n + $0] <= 0 }
        if dead.contains(true) {
            for i in 0..<n { for j in 0..<n where dead[i] || dead[j] { matrix[i * n + j] = 0 } }
        }
        for i in 0..<n { matrix[i * n + i] = (dead[i] ? 1 : matrix[i * n + i]) + damping * (meanDiagonal > 0 ? meanDiagonal : 1) }
        guard choleskyInPlace(&matrix, n) else {
            throw .invalidWeight(tensor: tensor, reason: "the damped input correlation is not positive definite; raise \"damping\"")
        }
        invertLowerTriangleInPlace(&matrix, n)
        return [Float](unsafeUninitializedCapacity: n * n) { upper, initialized in
            matrix.withUnsafeBufferPointer { inverse in
                for i in 0..<n {
                    for j in 0..<i { upper[i * n + j] = 0 }
                    for j in i..<n { upper[i * n + j] = Float(inverse[(n - 1 - i) * n + (n - 1 - j)]) }
                }
            }
            initialized = n * n
        }
    }

    /// `m` (`n × n`, row-major) replaced by `m[source[i]][source[j]]` at `(i, j)`, `source` a
    /// permutation: rows moved along the permutation's cycles with one row of scratch, then each
    /// row's entries through that scratch row; `O(n²)` moves.
    static func permuteSymmetrically(_ m: UnsafeMutablePointer<Double>, _ n: Int, _ source: [Int]) {
        let scratch = UnsafeMutablePointer<Double>.allocate(capacity: n)
        defer { scratch.deallocate() }
        var placed = [Bool](repeating: false, count: n)
        for start in 0..<n where !placed[start] {
            scratch.update(from: m + start * n, count: n)
            var row = start
            while true {
                placed[row] = true
                let from = source[row]
                if from == start {
                    (m + row * n).update(from: scratch, count: n)
                    break
                }
                (m + row * n).update(from: m + from * n, count: n)
                row = from
            }
        }
        for row in 0..<n {
            let entries = m + row * n
            scratch.update(from: entries, count: n)
            for j in 0..<n { entries[j] = scratch[source[j]] }
        }
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

    /// Replaces the lower triangle of `a` (`n × n`, row-major) holding `L` with `L⁻¹`; the entries
    /// above the diagonal are left undefined. `L · X = I` is solved by BLAS `dtrsm` in column blocks
    /// of 64: column block `j` of `X` is zero above row `j` and solves `L[j…, j…] · X[j…, j] =
    /// I[j…, j]` in a scratch panel (`(n − j) × 64`), which then overwrites `L`'s column block `j`,
    /// no longer read by the blocks after it. About `n³/6` multiply-adds.
    static func invertLowerTriangleInPlace(_ a: inout [Double], _ n: Int) {
        let block = 64
        var panel = [Double](repeating: 0, count: n * block)
        a.withUnsafeMutableBufferPointer { l in
            panel.withUnsafeMutableBufferPointer { x in
                for start in stride(from: 0, to: n, by: block) {
                    let width = min(block, n - start), height = n - start
                    for row in 0..<height { for column in 0..<width { x[row * block + column] = row == column ? 1 : 0 } }
                    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, Int32(height), Int32(width), 1,
                                l.baseAddress! + start * n + start, Int32(n), x.baseAddress!, Int32(block))
                    for row in 0..<height {
                        (l.baseAddress! + (start + row) * n + start).update(from: x.baseAddress! + row * block, count: width)
                    }
                }
            }
        }
    }
}

/// Picks the code of one weight in a GPTQ sweep and records it (each worker thread has its own copy).
protocol ColumnRounder: Sendable {
    /// Consecutive input columns rounded together: 1 for scalar codes, the vector size of a vector palette.
    var width: Int { get }
    /// How far `round` reads ahead: it may read `pending[position..<position + lookahead]` when
    /// `column` is a multiple of `lookahead` (1: only the block it rounds).
    var lookahead: Int { get }
    /// Called before the columns of `row`, with its original weights. The sweep calls it for each
    /// row of a batch (`GPTQ.rowBatch`), then rounds their columns interleaved, so what `round`
    /// keeps between calls must be per row or shared by the batch's rows.
    mutating func begin(row: Int, original: ArraySlice<Float>) throws(CompressionError)
    /// Rounds `pending[position..<position + width]`, the updated weights of input columns
    /// `column..<column + width` (`pending[position...]` are the columns still to come, in sweep
    /// order), records their code and writes their decoded values to `decoded`. `metric` is the
    /// block's `U_BB⁻¹` (`width × width`, upper triangular): the output error of decoding to `ŵ`
    /// is `‖(w − ŵ) · metric‖²`.
    mutating func round(row: Int, column: Int, pending: UnsafeMutableBufferPointer<Float>, position: Int, metric: UnsafePointer<Float>,
                        decoded: inout [Float]) throws(CompressionError)
}

extension ColumnRounder {
    var lookahead: Int { 1 }
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
            rowScales[row] = try LinearQuantizer.rowScale(blocks: ideal[...], config: config, layout: layout, tensor: tensor)
        }
        guard staticGroups else { return }
        for index in 0..<blocksPerRow {
            parameters[row * blocksPerRow + index] = rowScales.map {
                LinearQuantizer.snapped(ideal[index], values: block(index), rowScale: $0[row], config: config, layout: layout)
            } ?? ideal[index]
        }
    }

    var width: Int { 1 }

    /// A block's scale is chosen from its updated weights when its first column is reached.
    var lookahead: Int { tensorParameters == nil && !staticGroups ? blockSize : 1 }

    func round(row: Int, column: Int, pending: UnsafeMutableBufferPointer<Float>, position: Int, metric: UnsafePointer<Float>,
               decoded: inout [Float]) throws(CompressionError) {
        var group = tensorParameters ?? parameters[row * blocksPerRow + column / blockSize]
        if tensorParameters == nil, !staticGroups, column % blockSize == 0 {
            let values = Array(pending[position..<min(position + blockSize, columns)])
            group = try LinearQuantizer.chooseParameters(values, importance: nil, config: config, layout: layout, tensor: tensor)
            if let rowScales { group = LinearQuantizer.snapped(group, values: values, rowScale: rowScales[row], config: config, layout: layout) }
            parameters[row * blocksPerRow + column / blockSize] = group
        }
        let q = LinearQuantizer.quantize(pending[position], group, layout: layout, qMin: qMin, qMax: qMax)
        codes[row * columns + column] = UInt8(q + layout.codeOffset)
        decoded[0] = group.scale * Float(q - LinearQuantizer.effectiveZeroPoint(group, layout))
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

    var width: Int { 1 }

    func begin(row: Int, original: ArraySlice<Float>) {}

    func round(row: Int, column: Int, pending: UnsafeMutableBufferPointer<Float>, position: Int, metric: UnsafePointer<Float>,
               decoded: inout [Float]) {
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
        decoded[0] = luts[base + best] * scale
    }
}

/// Per LUT group, the normal equations of `GPTQ.refitLUTs` (`a`: `slots × slots`, `b`: `slots`),
/// summed from workers under a lock.
final class NormalEquations: @unchecked Sendable {
    let slots: Int
    var a: [Double]
    var b: [Double]
    private let lock = NSLock()

    init(groups: Int, slots: Int) {
        self.slots = slots
        a = [Double](repeating: 0, count: groups * slots * slots)
        b = [Double](repeating: 0, count: groups * slots)
    }

    /// Adds the single group of `other` to group `group`.
    func add(_ other: NormalEquations, group: Int) {
        lock.withLock {
            for index in other.a.indices { a[group * slots * slots + index] += other.a[index] }
            for index in other.b.indices { b[group * slots + index] += other.b[index] }
        }
    }
}

/// Nearest entries of fixed vector LUTs (one per group of output channels, or one per tensor) in
/// the block's output-error metric: with `M = U_BB⁻¹`, the entry `c` minimising
/// `‖w·M − s·c·M‖²` (`s` the row's channel scale or 1). `c·M` is computed once per LUT group and
/// block position and kept while consecutive rows share the group: `entries · width²` per block,
/// then `entries · width` per vector.
struct VectorPaletteRounder: ColumnRounder, @unchecked Sendable {
    let luts: [Float]
    let entries: Int
    let width: Int
    let granularity: PaletteGranularity
    let shape: [Int]
    let rowScales: [Float]?
    let indices: UnsafeMutablePointer<UInt8>
    /// Per LUT group of the rows begun since the last eviction, each entry times each block's
    /// metric, filled as blocks are first reached.
    private var caches: [Int: TransformedEntries] = [:]
    private var target: [Float]

    final class TransformedEntries {
        var values: [Float]
        var ready: [Bool]

        init(columns: Int, entries: Int, width: Int) {
            values = [Float](repeating: 0, count: columns * entries)
            ready = [Bool](repeating: false, count: columns / width)
        }
    }

    init(luts: [Float], entries: Int, width: Int, granularity: PaletteGranularity, shape: [Int], rowScales: [Float]?,
         indices: UnsafeMutablePointer<UInt8>) {
        (self.luts, self.entries, self.width, self.granularity, self.shape, self.rowScales, self.indices) =
            (luts, entries, width, granularity, shape, rowScales, indices)
        target = [Float](repeating: 0, count: width)
    }

    /// At most a batch's worth of groups (`GPTQ.rowBatch`) stays cached; a group evicted while its
    /// rows are still being rounded is filled again.
    mutating func begin(row: Int, original: ArraySlice<Float>) {
        let group = EncodingLayout.group(of: row * shape[1], granularity, shape: shape)
        guard caches[group] == nil else { return }
        if caches.count >= GPTQ.rowBatch { caches.removeAll() }
        caches[group] = TransformedEntries(columns: shape[1], entries: entries, width: width)
    }

    mutating func round(row: Int, column: Int, pending: UnsafeMutableBufferPointer<Float>, position: Int, metric: UnsafePointer<Float>,
                        decoded: inout [Float]) {
        let group = EncodingLayout.group(of: row * shape[1], granularity, shape: shape)
        let cache = caches[group] ?? TransformedEntries(columns: shape[1], entries: entries, width: width)
        caches[group] = cache
        let step = position / width, table = group * entries * width, base = step * entries * width
        if !cache.ready[step] {
            for entry in 0..<entries {
                for lane in 0..<width {
                    var sum: Float = 0
                    for k in 0...lane { sum += luts[table + entry * width + k] * metric[k * width + lane] }
                    cache.values[base + entry * width + lane] = sum
                }
            }
            cache.ready[step] = true
        }
        let scale = rowScales?[row] ?? 1
        for lane in 0..<width {
            var sum: Float = 0
            for k in 0...lane { sum += pending[position + k] * metric[k * width + lane] }
            target[lane] = sum
        }
        var best = 0, bestDistance = Float.infinity
        cache.values.withUnsafeBufferPointer { t in
            for entry in 0..<entries {
                var distance: Float = 0
                for lane in 0..<width {
                    let delta = target[lane] - scale * t[base + entry * width + lane]
                    distance += delta * delta
                }
                if distance < bestDistance { bestDistance = distance; best = entry }
            }
        }
        indices[(row * shape[1] + column) / width] = UInt8(best)
        for lane in 0..<width { decoded[lane] = scale * luts[table + best * width + lane] }
    }
}
