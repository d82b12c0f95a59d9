import CShrinkKernels

/// The implementations of the integer kernels (activations quantized to int8, u8 weight codes);
/// see `shrink_kernels.h` for the layouts and the arithmetic both follow.
public enum IntegerKernelVariant: String, CaseIterable, Sendable {
    /// Portable Swift loops, the reference twins of the vector kernels (same arithmetic, same
    /// order of float operations).
    case swift
    /// C with AVX2 `vpmaddubsw` (`CShrinkKernels/int8_panels_avx2.c`), for CPUs without VNNI.
    case avx2
    /// C with AVX-512 VNNI `vpdpbusd` (`CShrinkKernels/int8_panels.c`).
    case avx512vnni
    /// The same compiled for AVX-512 VBMI as well (`CShrinkKernels/int8_panels_vbmi.c`): quad panels
    /// look their entries up with `vpermi2b`, 64 at a time, instead of gathering 16.
    case avx512vbmi

    /// The variants this CPU can run, slowest first.
    public static let available: [IntegerKernelVariant] =
        [.swift] + (shrink_cpu_has_avx2() != 0 ? [.avx2] : []) + (shrink_cpu_has_avx512_vnni() != 0 ? [.avx512vnni] : [])
            + (shrink_cpu_has_avx512_vbmi() != 0 ? [.avx512vbmi] : [])

    /// The variant models run with: the fastest this CPU can run, unless the environment variable
    /// `SHRINK_INTEGER_KERNELS` names another available one (`swift`, `avx2`, `avx512vnni`, `avx512vbmi`), which
    /// lets a benchmark measure a slower CPU's path here (any other value: a warning on standard error).
    public static let best: IntegerKernelVariant = KernelChoice.fromEnvironment("SHRINK_INTEGER_KERNELS", available: available)

    /// Quantizes `rows` rows of `k` floats (stride `ldx`) into int8 rows of `kpad` inputs, with one
    /// scale, one block sum and one integer block sum per 32 inputs.
    func quantizeRows(_ x: UnsafePointer<Float>, rows: Int, k: Int, ldx: Int, kpad: Int, into xq: UnsafeMutablePointer<Int8>,
                      scales: UnsafeMutablePointer<Float>, sums: UnsafeMutablePointer<Float>, integerSums: UnsafeMutablePointer<Int32>) {
        switch self {
        case .avx512vnni, .avx512vbmi: shrink_quantize_rows_s8(x, rows, k, ldx, kpad, xq, scales, sums, integerSums)
        case .avx2: shrink_quantize_rows_s8_avx2(x, rows, k, ldx, kpad, xq, scales, sums, integerSums)
        case .swift:
            let blocks = kpad / 32
            for m in 0..<rows {
                for block in 0..<blocks {
                    let start = block * 32, end = min(max(k, start), start + 32)
                    var largest: Float = 0
                    for i in start..<end { largest = max(largest, abs(x[m * ldx + i])) }
                    let inverse: Float = largest > 0 ? 127 / largest : 0
                    var sum: Int32 = 0
                    for i in start..<(start + 32) {
                        let value = i < end ? (x[m * ldx + i] * inverse).rounded(.toNearestOrEven) : 0
                        let q = Int8(max(-128, min(127, value)))
                        xq[m * kpad + i] = q
                        sum += Int32(q)
                    }
                    let scale = largest / 127
                    scales[m * blocks + block] = scale
                    integerSums[m * blocks + block] = sum
                    sums[m * blocks + block] = scale * Float(sum)
                }
            }
        }
    }

    /// The half-block form (`shrink_gemm_u8s8_half_blocks`): two multipliers per activation block.
    func halfBlockGemm(_ w: Int8PanelWeights, _ half: Int8PanelWeights.HalfBlocks, panels: Range<Int>, xq: UnsafePointer<Int8>,
                       xScales: UnsafePointer<Float>, rows: Int, y: UnsafeMutablePointer<Float>, ldy: Int, bias: UnsafePointer<Float>?) {
        let codes = UnsafePointer(w.codes.baseAddress!), multipliers = UnsafePointer(half.multipliers.baseAddress!)
        let superScales = UnsafePointer(half.superScales.baseAddress!)
        let offsetMultipliers = half.offsets.map { UnsafePointer($0.multipliers.baseAddress!) }
        let superOffsets = half.offsets.map { UnsafePointer($0.superScales.baseAddress!) }
        switch self {
        case .avx512vnni, .avx512vbmi:
            shrink_gemm_u8s8_half_blocks(codes, w.packedBits == 4 ? 1 : 0, multipliers, superScales, half.zero, offsetMultipliers, superOffsets, w.rows, w.paddedColumns,
                                         half.blocksPerSuper, panels.lowerBound, panels.upperBound, xq, xScales, rows, y, ldy, bias)
        case .avx2:
            shrink_gemm_u8s8_half_blocks_avx2(codes, w.packedBits == 4 ? 1 : 0, multipliers, superScales, half.zero, offsetMultipliers, superOffsets, w.rows,
                                              w.paddedColumns, half.blocksPerSuper, panels.lowerBound, panels.upperBound, xq, xScales, rows,
                                              y, ldy, bias)
        case .swift:
            let kpad = w.paddedColumns, blocks = kpad / 32, halves = kpad / 16, supers = blocks / half.blocksPerSuper
            for panel in panels {
                for lane in 0..<16 where panel * 16 + lane < w.rows {
                    for m in 0..<rows {
                        var acc: Float = 0
                        for s in 0..<supers {
                            var part: Float = 0, offsetPart: Float = 0
                            for block in (s * half.blocksPerSuper)..<((s + 1) * half.blocksPerSuper) {
                                var dot: Int32 = 0, offset: Int32 = 0
                                for h in 0..<2 {
                                    var d: Int32 = 0, sum: Int32 = 0
                                    for i in 0..<16 {
                                        let input = block * 32 + h * 16 + i
                                        let x = Int32(xq[m * kpad + input])
                                        d += Int32(w.code(panel: panel, lane: lane, input: input, codes: codes, luts: nil)) * x
                                        sum += x
                                    }
                                    let index = (panel * halves + 2 * block + h) * 16 + lane
                                    dot += Int32(multipliers[index]) * (d - half.zero * sum)
                                    offset += Int32(offsetMultipliers?[index] ?? 0) * sum
                                }
                                part = part.addingProduct(Float(dot), xScales[m * blocks + block])
                                offsetPart = offsetPart.addingProduct(Float(offset), xScales[m * blocks + block])
                            }
                            acc = acc.addingProduct(part, superScales[(panel * supers + s) * 16 + lane])
                            if let superOffsets { acc = acc.addingProduct(-offsetPart, superOffsets[(panel * supers + s) * 16 + lane]) }
                        }
                        y[m * ldy + panel * 16 + lane] = acc + (bias?[panel * 16 + lane] ?? 0)
                    }
                }
            }
        }
    }

    /// `y[m · ldy + c]` for `m < rows` and the channels of panels `panels` (see
    /// `shrink_gemm_u8s8_panels`).
    func gemm(_ w: Int8PanelWeights, panels: Range<Int>, xq: UnsafePointer<Int8>, xScales: UnsafePointer<Float>,
              xSums: UnsafePointer<Float>, xIntegerSums: UnsafePointer<Int32>, rows: Int, y: UnsafeMutablePointer<Float>, ldy: Int,
              bias: UnsafePointer<Float>?) {
        let luts = w.luts.map { UnsafePointer($0.baseAddress!) }, low = w.lowPlane.map { UnsafePointer($0.baseAddress!) }
        let codes = UnsafePointer(w.codes.baseAddress!), scales = UnsafePointer(w.scales.baseAddress!)
        // Centered byte codes: no offsets (the kernels' contract).
        let offsets = w.hasCenteredBytes ? nil : UnsafePointer(w.offsets.baseAddress!)
        let zeroPoints = w.zeroPoints.map { UnsafePointer($0.baseAddress!) }
        let multipliers = w.multipliers.map { UnsafePointer($0.baseAddress!) }
        let channelScales = w.channelScales.map { UnsafePointer($0.baseAddress!) }
        if let half = w.halfBlocks {
            halfBlockGemm(w, half, panels: panels, xq: xq, xScales: xScales, rows: rows, y: y, ldy: ldy, bias: bias)
            return
        }
        switch self {
        case .avx512vnni:
            shrink_gemm_u8s8_panels(codes, w.kernelLayout, luts, low, zeroPoints, multipliers, channelScales, w.rows, w.paddedColumns, w.blocksPerWeightBlock, scales,
                                    offsets, panels.lowerBound, panels.upperBound, xq, xScales, xSums, xIntegerSums, rows, y, ldy, bias)
        case .avx512vbmi:
            shrink_gemm_u8s8_panels_vbmi(codes, w.kernelLayout, luts, low, zeroPoints, multipliers, channelScales, w.rows, w.paddedColumns,
                                         w.blocksPerWeightBlock, scales, offsets, panels.lowerBound, panels.upperBound, xq, xScales, xSums, xIntegerSums,
                                         rows, y, ldy, bias)
        case .avx2:
            shrink_gemm_u8s8_panels_avx2(codes, w.kernelLayout, luts, low, zeroPoints, multipliers, channelScales, w.rows, w.paddedColumns, w.blocksPerWeightBlock, scales,
                                         offsets, panels.lowerBound, panels.upperBound, xq, xScales, xSums, xIntegerSums, rows, y, ldy, bias)
        case .swift:
            let kpad = w.paddedColumns, blocks = kpad / 32, panelFloats = w.weightBlocks * 16
            // The centered form: codes q − z + 128 (widened from nibbles or stored so) against
            // −128 · Σ q_x, and no offset term; the integer-scaled form (at every row count): codes
            // (q − z) · m + 128, and one weight block per row of scale S.
            let packedAffine = w.packedBits < 8 && luts == nil && low == nil ? zeroPoints : nil
            let integerScaled = packedAffine == nil ? nil : multipliers.flatMap { m in channelScales.map { (m, $0) } }
            let centered = integerScaled != nil || rows >= Int(SHRINK_WIDEN_FROM_ROWS) ? packedAffine : nil
            let scaleBlocks = integerScaled == nil ? w.blocksPerWeightBlock : blocks
            for panel in panels {
                for lane in 0..<16 where panel * 16 + lane < w.rows {
                    for m in 0..<rows {
                        var acc: Float = 0
                        var block = 0, weightBlock = 0
                        while block < blocks {
                            let scale = integerScaled.map { $0.1[panel * 16 + lane] } ?? scales[panel * panelFloats + weightBlock * 16 + lane]
                            var blockSum: Float = 0, partial: Float = 0
                            let end = min(block + scaleBlocks, blocks)
                            while block < end {
                                let group = panel * panelFloats + block / w.blocksPerWeightBlock * 16 + lane
                                let z = centered.map { Int32($0[group]) } ?? 0
                                let factor = integerScaled.map { Int32($0.0[group]) } ?? 1
                                var dot: Int32 = centered == nil && offsets != nil ? 0 : -128 * xIntegerSums[m * blocks + block]
                                for i in 0..<32 {
                                    let code = w.code(panel: panel, lane: lane, input: block * 32 + i, codes: codes, luts: luts, low: low)
                                    let widened = centered == nil ? code : (code - z) * factor + 128
                                    dot += widened * Int32(xq[m * kpad + block * 32 + i])
                                }
                                partial = partial.addingProduct(Float(dot), xScales[m * blocks + block])
                                blockSum += xSums[m * blocks + block]
                                block += 1
                            }
                            acc = acc.addingProduct(partial, scale)
                            if centered == nil, let offsets {
                                acc = acc.addingProduct(-offsets[panel * panelFloats + weightBlock * 16 + lane], blockSum)
                            }
                            weightBlock += 1
                        }
                        y[m * ldy + panel * 16 + lane] = acc + (bias?[panel * 16 + lane] ?? 0)
                    }
                }
            }
        }
    }
}
