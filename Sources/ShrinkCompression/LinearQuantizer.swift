import CShrinkKernels
import ShrinkCore

/// Linear quantization of weights: per group, `w ≈ scale · (q − zeroPoint)` with integer `q` (see
/// `AffineEncoding` for the stored layout).
///
/// Symmetric: `scale = r · max|w| / (2^(bits−1) − 1)`, `q = clamp(round(w / scale), −2^(bits−1),
/// 2^(bits−1) − 1)`. Affine: the range `[min, max]` (shrunk by `r` around its centre) maps to the
/// `2^bits` codes with an integer zero point. `r = 1` unless `clipSearch` tries `r ∈ {1, 0.98, …,
/// 0.5}` per group and keeps the one with the least (importance-weighted) squared error. Scales are
/// rounded to their stored dtype before codes are chosen. A group of zeros gets scale 0; a constant
/// group is stored exactly.
///
/// Integer block scales (`scale_dtype` u8): each block's scale is a multiple `m · S` of an f16
/// scale `S` per row, with every `(q − zeroPoint) · m` in int8 (`multiplierLimit`: `m ≤ 8` for a
/// 4-bit block whose zero point is at an end of the code range, up to 16 for a centred one). `S` is
/// the smallest f16 with `S · limit(z_b) ≥ s_b` for every block `b` of the row (`s_b`, `z_b` its
/// own scale and zero point), so every block can reach at least its own step. Each block then
/// takes the `m` (the multiple just above `s_b` and its two neighbours) and, if affine, the zero
/// point (centred on the block's range and its two neighbours) with the least squared error.
enum LinearQuantizer {
    static let clipRatios: [Float] = (0...25).map { 1 - Float($0) * 0.02 }

    struct GroupParameters {
        var scale: Float
        var zeroPoint: Int
    }

    /// Encodes `values` (the encoded elements; element `k` sits at flat index `positions[k]`, or `k`).
    static func encode(_ values: [Float], positions: [Int]?, shape: [Int], config: QuantizationConfig,
                       importance: [Float]?, tensor: String) throws(CompressionError) -> (layout: AffineEncoding, parts: [String: DenseTensor]) {
        let layout = layout(config)
        let groupCount = EncodingLayout.groupCount(config.granularity, shape: shape)
        var contiguous: ElementGroups?
        if positions == nil {
            switch config.granularity {
            case .perTensor: contiguous = .contiguous(shape: shape, vectorSize: 1, perTensor: true, axis0GroupSize: nil, blockSize: nil)
            case .perChannel(0): contiguous = .contiguous(shape: shape, vectorSize: 1, perTensor: false, axis0GroupSize: 1, blockSize: nil)
            case .perBlock(let size): contiguous = .contiguous(shape: shape, vectorSize: 1, perTensor: false, axis0GroupSize: nil, blockSize: size)
            default: break
            }
        }
        let groups = contiguous ?? ElementGroups(count: values.count, groupCount: groupCount) { k in
            EncodingLayout.group(of: positions?[k] ?? k, config.granularity, shape: shape)
        }
        let (qMin, qMax) = codeRange(config)
        var parameters = [GroupParameters](repeating: GroupParameters(scale: 0, zeroPoint: 0), count: groupCount)
        var codes = [UInt8](repeating: 0, count: values.count)
        var groupValues: [Float] = [], groupImportance: [Float] = []
        func collect(_ group: Int) {
            groupValues.removeAll(keepingCapacity: true)
            groupImportance.removeAll(keepingCapacity: true)
            for slot in groups.offsets[group]..<groups.offsets[group + 1] {
                let k = groups.member(slot)
                groupValues.append(values[k])
                if let importance { groupImportance.append(importance[k]) }
            }
        }
        for group in 0..<groupCount where groups.offsets[group] < groups.offsets[group + 1] {
            collect(group)
            parameters[group] = try chooseParameters(groupValues, importance: importance == nil ? nil : groupImportance, config: config,
                                                     layout: layout, tensor: tensor)
        }
        var rowScales: [Float]?
        if config.scaleDType == .u8 {
            let rows = max(EncodingLayout.rowCount(shape), 1), blocksPerRow = groupCount / rows
            let scales = try (0..<rows).map { (row) throws(CompressionError) in
                try rowScale(blocks: parameters[(row * blocksPerRow)..<((row + 1) * blocksPerRow)], config: config, layout: layout, tensor: tensor)
            }
            for group in 0..<groupCount where groups.offsets[group] < groups.offsets[group + 1] {
                collect(group)
                parameters[group] = snapped(parameters[group], values: groupValues, rowScale: scales[group / blocksPerRow], config: config,
                                            layout: layout)
            }
            rowScales = scales
        }
        for group in 0..<groupCount {
            for slot in groups.offsets[group]..<groups.offsets[group + 1] {
                let k = groups.member(slot)
                codes[k] = UInt8(quantize(values[k], parameters[group], layout: layout, qMin: qMin, qMax: qMax) + layout.codeOffset)
            }
        }
        return (layout, try parts(codes: codes, parameters: parameters, config: config, rowScales: rowScales, tensor: tensor))
    }

    /// The largest block-scale multiplier `m` of integer block scales for a block with (effective)
    /// zero point `z`: `(q − z) · m ∈ [−128, 127]` for every code `q ∈ [qMin, qMax]`, i.e.
    /// `m · (z − qMin) ≤ 128` and `m · (qMax − z) ≤ 127` (at most 255).
    static func multiplierLimit(_ config: QuantizationConfig, zeroPoint z: Int) -> Int {
        let (qMin, qMax) = codeRange(config)
        let below = z > qMin ? 128 / (z - qMin) : 255, above = qMax > z ? 127 / (qMax - z) : 255
        return min(below, above, 255)
    }

    /// The f16 row scale `S` of integer block scales: the smallest with `S · multiplierLimit(z_b) ≥ s_b`
    /// for every block `(s_b, z_b)` of the row.
    static func rowScale(blocks: ArraySlice<GroupParameters>, config: QuantizationConfig, layout: AffineEncoding,
                         tensor: String) throws(CompressionError) -> Float {
        var needed: Float = 0
        for block in blocks {
            needed = max(needed, block.scale / Float(multiplierLimit(config, zeroPoint: effectiveZeroPoint(block, layout))))
        }
        var scale = StoredPrecision.round(needed, to: .f16)
        while scale.isFinite, blocks.contains(where: {
            scale * Float(multiplierLimit(config, zeroPoint: effectiveZeroPoint($0, layout))) < $0.scale
        }) {
            scale = FloatingPointConversion.float(fromHalfBits: FloatingPointConversion.halfBits(from: scale) + 1)
        }
        guard scale.isFinite else { throw .invalidWeight(tensor: tensor, reason: "an integer block scale's row scale overflows F16") }
        return scale
    }

    /// The block's parameters on the row scale: scale `m · rowScale` and zero point with the least
    /// squared error over `values` (`squaredError`) among these candidates, `m` lowered to
    /// `multiplierLimit` of the zero point where above it: each `m ∈ {⌈s/S⌉ − 1, ⌈s/S⌉, ⌈s/S⌉ + 1}`
    /// (`s` the ideal's scale) with the zero point centred on the values' range for that scale (the
    /// only one if symmetric) and `⌈s/S⌉` with the ideal's zero point; then, if affine, the best
    /// `m` with the two neighbours of its centred zero point. With `S` from `rowScale`,
    /// `(⌈s/S⌉, ideal zero point)` is one of them, so a block's squared error is at most about
    /// `n · (⌈s/S⌉ · S / 2)²` over its `n` values. A block of zeros keeps scale 0.
    static func snapped(_ ideal: GroupParameters, values: [Float], rowScale: Float, config: QuantizationConfig,
                        layout: AffineEncoding) -> GroupParameters {
        let (qMin, qMax) = codeRange(config)
        let zeroScale = GroupParameters(scale: 0, zeroPoint: layout.symmetric ? 0 : qMin)
        guard rowScale > 0, ideal.scale > 0 else { return zeroScale }
        let nearest = Int((ideal.scale / rowScale).rounded(.up))
        let centre = ((values.min() ?? 0) + (values.max() ?? 0)) / 2
        var best = zeroScale, bestError = Float.infinity
        func consider(_ multiple: Int, _ zeroPoint: Int) {
            let z = effectiveZeroPoint(GroupParameters(scale: 0, zeroPoint: zeroPoint), layout)
            let scale = Float(min(multiple, multiplierLimit(config, zeroPoint: z))) * rowScale
            let error = squaredError(values, scale: scale, zeroPoint: z, qMin: qMin, qMax: qMax)
            if error < bestError { (best, bestError) = (GroupParameters(scale: scale, zeroPoint: zeroPoint), error) }
        }
        func centred(_ multiple: Int) -> Int {
            min(max(Int((Float(qMin + qMax) / 2 - centre / (Float(multiple) * rowScale)).rounded(.toNearestOrEven)), qMin), qMax)
        }
        var bestMultiple = nearest
        for multiple in max(nearest - 1, 1)...(nearest + 1) {
            let before = bestError
            consider(multiple, layout.symmetric ? 0 : centred(multiple))
            if multiple == nearest, !layout.symmetric, ideal.zeroPoint != centred(multiple) { consider(multiple, ideal.zeroPoint) }
            if bestError < before { bestMultiple = multiple }
        }
        guard !layout.symmetric else { return best }
        let bestCentred = centred(bestMultiple)
        for zeroPoint in [bestCentred - 1, bestCentred + 1] where (qMin...qMax).contains(zeroPoint) && zeroPoint != ideal.zeroPoint {
            consider(bestMultiple, zeroPoint)
        }
        return best
    }

    /// `Σ (v − scale · (q − z))²` with `q = clamp(round(v / scale) + z, qMin, qMax)`, in float
    /// arithmetic with one reciprocal and four partial sums (so it may round a value exactly halfway
    /// between two codes the other way from `quantize`, and sums in another order: a candidate's
    /// score, not its codes). The rounding adds and subtracts 1.5 · 2²³ (nearest, ties to even, for
    /// the clamped `|v / scale| < 2²²`), which needs no call to `rintf`; the loop is C
    /// (`shrink_affine_squared_error`), which the compiler vectorizes.
    static func squaredError(_ values: [Float], scale: Float, zeroPoint z: Int, qMin: Int, qMax: Int) -> Float {
        values.withUnsafeBufferPointer {
            shrink_affine_squared_error($0.baseAddress, $0.count, scale, Float(qMin - z), Float(qMax - z))
        }
    }

    /// The stored layout of `config`.
    static func layout(_ config: QuantizationConfig) -> AffineEncoding {
        AffineEncoding(bits: config.bits, signed: config.signed, symmetric: config.symmetric,
                       granularity: config.granularity, scaleDType: config.scaleDType)
    }

    /// The smallest and largest integer code of `config`.
    static func codeRange(_ config: QuantizationConfig) -> (qMin: Int, qMax: Int) {
        config.signed ? (-(1 << (config.bits - 1)), (1 << (config.bits - 1)) - 1) : (0, (1 << config.bits) - 1)
    }


    /// The scale and zero point for one group of values: the full range, or with `clipSearch` the
    /// clip ratio with the least (importance-weighted) squared error.
    static func chooseParameters(_ values: [Float], importance: [Float]?, config: QuantizationConfig, layout: AffineEncoding,
                                 tensor: String) throws(CompressionError) -> GroupParameters {
        let (qMin, qMax) = codeRange(config)
        var low = Float.infinity, high = -Float.infinity
        for value in values {
            low = min(low, value)
            high = max(high, value)
        }
        var best = parametersFor(low: low, high: high, ratio: 1, layout: layout, qMin: qMin, qMax: qMax)
        if config.clipSearch {
            var bestError = Double.infinity
            for ratio in clipRatios {
                let candidate = parametersFor(low: low, high: high, ratio: ratio, layout: layout, qMin: qMin, qMax: qMax)
                let zeroPoint = effectiveZeroPoint(candidate, layout)
                var error = 0.0
                for (k, value) in values.enumerated() {
                    let q = quantize(value, candidate, layout: layout, qMin: qMin, qMax: qMax)
                    let delta = Double(value - candidate.scale * Float(q - zeroPoint))
                    error += delta * delta * Double(importance?[k] ?? 1)
                }
                if error < bestError { bestError = error; best = candidate }
            }
        }
        guard best.scale.isFinite else {
            throw .invalidWeight(tensor: tensor, reason: "a quantization scale overflows \(config.scaleDType.rawValue); use \"scale_dtype\": \"f32\"")
        }
        return best
    }

    /// The stored parts (`codes` packed to `bits`, `scales`, and `zero_points` unless symmetric;
    /// with integer block scales, `scales` holds the multipliers and `channel_scales` the row scales).
    static func parts(codes: [UInt8], parameters: [GroupParameters], config: QuantizationConfig, rowScales: [Float]?,
                      tensor: String) throws(CompressionError) -> [String: DenseTensor] {
        var parts: [String: DenseTensor] = [
            "codes": try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(dtype: .u8, shape: [PackedBits.byteCount(count: codes.count, bits: config.bits)],
                                      bytes: PackedBits.pack(codes, bits: config.bits)) },
        ]
        if let rowScales {
            let blocksPerRow = parameters.count / rowScales.count
            let multipliers = parameters.indices.map { group in
                let rowScale = rowScales[group / blocksPerRow]
                return UInt8(rowScale > 0 ? Int((parameters[group].scale / rowScale).rounded()) : 0)
            }
            parts["scales"] = try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(dtype: .u8, shape: [parameters.count], bytes: multipliers) }
            parts["channel_scales"] = try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(converting: rowScales, to: .f16, shape: [rowScales.count]) }
        } else {
            parts["scales"] = try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(converting: parameters.map(\.scale), to: config.scaleDType, shape: [parameters.count]) }
        }
        if !config.symmetric {
            let bytes = parameters.map { UInt8(truncatingIfNeeded: $0.zeroPoint) }
            parts["zero_points"] = try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(dtype: config.signed ? .i8 : .u8, shape: [parameters.count], bytes: bytes) }
        }
        return parts
    }

    static func effectiveZeroPoint(_ parameters: GroupParameters, _ layout: AffineEncoding) -> Int {
        layout.symmetric ? layout.implicitZeroPoint : parameters.zeroPoint
    }

    static func parametersFor(low: Float, high: Float, ratio: Float, layout: AffineEncoding, qMin: Int, qMax: Int) -> GroupParameters {
        if layout.symmetric {
            let maximum = max(abs(low), abs(high)) * ratio
            let positiveLevels = Float((1 << (layout.bits - 1)) - 1)
            return GroupParameters(scale: StoredPrecision.round(maximum / positiveLevels, to: layout.scaleDType), zeroPoint: 0)
        }
        let centre = (low + high) / 2, half = (high - low) / 2 * ratio
        guard half > 0 else {
            // A constant group c is exact as scale |c| and q − zeroPoint = ±1 (scale 0 when c = 0).
            return GroupParameters(scale: StoredPrecision.round(abs(centre), to: layout.scaleDType),
                                   zeroPoint: centre > 0 ? qMin : qMin + 1)
        }
        let scale = StoredPrecision.round(2 * half / Float(qMax - qMin), to: layout.scaleDType)
        guard scale > 0 else { return GroupParameters(scale: 0, zeroPoint: qMin) }
        let zeroPoint = min(max(Int((Float(qMin) - (centre - half) / scale).rounded(.toNearestOrEven)), qMin), qMax)
        return GroupParameters(scale: scale, zeroPoint: zeroPoint)
    }

    @inline(__always)
    static func quantize(_ value: Float, _ parameters: GroupParameters, layout: AffineEncoding, qMin: Int, qMax: Int) -> Int {
        guard parameters.scale > 0 else { return min(max(effectiveZeroPoint(parameters, layout), qMin), qMax) }
        let q = Int((value / parameters.scale).rounded(.toNearestOrEven)) + effectiveZeroPoint(parameters, layout)
        return min(max(q, qMin), qMax)
    }
}
