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
/// Integer block scales (`scale_dtype` u8): each row gets an f16 scale `S`, the smallest with
/// `S · limit` at least the row's largest block scale (`multiplierLimit`), and each block's scale
/// is rounded up to a multiple `m · S`, `m ∈ 0…limit`, with the affine zero point re-centred on the
/// block's range. Every `(q − zeroPoint) · m` then fits in int8.
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
                try rowScale(largestBlockScale: parameters[(row * blocksPerRow)..<((row + 1) * blocksPerRow)].map(\.scale).max() ?? 0,
                             config: config, tensor: tensor)
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
        return (layout, parts(codes: codes, parameters: parameters, config: config, rowScales: rowScales))
    }

    /// The largest block-scale multiplier of integer block scales: `(q − zeroPoint) · m` fits in int8
    /// for every code `q` (symmetric: `|q| ≤ 2^(bits−1)`, affine: `|q − zeroPoint| ≤ 2^bits − 1`).
    static func multiplierLimit(_ config: QuantizationConfig) -> Int {
        config.symmetric ? 128 >> (config.bits - 1) : 127 / ((1 << config.bits) - 1)
    }

    /// The f16 row scale `S` of integer block scales: the smallest with `S · limit ≥ largestBlockScale`.
    static func rowScale(largestBlockScale: Float, config: QuantizationConfig, tensor: String) throws(CompressionError) -> Float {
        let limit = Float(multiplierLimit(config))
        var scale = StoredPrecision.round(largestBlockScale / limit, to: .f16)
        while scale.isFinite, scale * limit < largestBlockScale {
            scale = FloatingPointConversion.float(fromHalfBits: FloatingPointConversion.halfBits(from: scale) + 1)
        }
        guard scale.isFinite else { throw .invalidWeight(tensor: tensor, reason: "an integer block scale's row scale overflows F16") }
        return scale
    }

    /// `ideal` (chosen for `values`) with its scale rounded up to a multiple `m · rowScale`, `m` at
    /// most the limit, and an affine zero point re-centred on the values' range.
    static func snapped(_ ideal: GroupParameters, values: [Float], rowScale: Float, config: QuantizationConfig,
                        layout: AffineEncoding) -> GroupParameters {
        let (qMin, qMax) = codeRange(config)
        guard rowScale > 0 else { return GroupParameters(scale: 0, zeroPoint: layout.symmetric ? 0 : qMin) }
        let scale = Float(min(Int((ideal.scale / rowScale).rounded(.up)), multiplierLimit(config))) * rowScale
        guard !layout.symmetric, scale > 0 else { return GroupParameters(scale: scale, zeroPoint: layout.symmetric ? 0 : qMin) }
        let centre = ((values.min() ?? 0) + (values.max() ?? 0)) / 2
        let zeroPoint = Int((Float(qMin + qMax) / 2 - centre / scale).rounded(.toNearestOrEven))
        return GroupParameters(scale: scale, zeroPoint: min(max(zeroPoint, qMin), qMax))
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
    static func parts(codes: [UInt8], parameters: [GroupParameters], config: QuantizationConfig, rowScales: [Float]?) -> [String: DenseTensor] {
        var parts: [String: DenseTensor] = [
            "codes": try! DenseTensor(dtype: .u8, shape: [PackedBits.byteCount(count: codes.count, bits: config.bits)],
                                      bytes: PackedBits.pack(codes, bits: config.bits)),
        ]
        if let rowScales {
            let blocksPerRow = parameters.count / rowScales.count
            let multipliers = parameters.indices.map { group in
                let rowScale = rowScales[group / blocksPerRow]
                return UInt8(rowScale > 0 ? Int((parameters[group].scale / rowScale).rounded()) : 0)
            }
            parts["scales"] = try! DenseTensor(dtype: .u8, shape: [parameters.count], bytes: multipliers)
            parts["channel_scales"] = try! DenseTensor(converting: rowScales, to: .f16, shape: [rowScales.count])
        } else {
            parts["scales"] = try! DenseTensor(converting: parameters.map(\.scale), to: config.scaleDType, shape: [parameters.count])
        }
        if !config.symmetric {
            let bytes = parameters.map { UInt8(truncatingIfNeeded: $0.zeroPoint) }
            parts["zero_points"] = try! DenseTensor(dtype: config.signed ? .i8 : .u8, shape: [parameters.count], bytes: bytes)
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
