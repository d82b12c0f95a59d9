import CShrinkKernels
import Foundation
import ShrinkCore

/// The implementations of the decode and dot loops. Tests and benchmarks iterate over
/// `available`; `best` is chosen once from what the CPU reports.
public enum KernelVariant: String, CaseIterable, Sendable {
    /// Portable Swift loops (the reference twins of the vector kernels).
    case swift
    /// C with AVX2 and FMA (`kernels_avx2.c`) for what a BERT forward pass spends its time in
    /// (fp32 panels, attention, GELU, LayerNorm, dot products); the Swift loops for the rest
    /// (decoding for the fp32-activation path).
    case avx2
    /// C with AVX-512 F/BW intrinsics (`CShrinkKernels`).
    case avx512

    /// The variants this CPU can run, slowest first.
    public static let available: [KernelVariant] =
        [.swift] + (shrink_cpu_has_avx2() != 0 ? [.avx2] : []) + (shrink_cpu_has_avx512() != 0 ? [.avx512] : [])

    /// The variant models run with: the fastest this CPU can run, unless the environment variable
    /// `SHRINK_KERNELS` names another available one (`swift`, `avx2`, `avx512`; any other value: a
    /// warning on standard error).
    public static let best: KernelVariant = KernelChoice.fromEnvironment("SHRINK_KERNELS", available: available)

    /// `out[i] = scales[i / block] · codes[i] − offsets[i / block]` (8-bit codes).
    @inline(__always)
    func decodeAffine8(_ codes: UnsafePointer<UInt8>, _ n: Int, _ scales: UnsafePointer<Float>, _ offsets: UnsafePointer<Float>,
                       _ block: Int, _ out: UnsafeMutablePointer<Float>) {
        switch self {
        case .avx512: shrink_decode_affine_u8(codes, n, scales, offsets, block, out)
        case .swift, .avx2:
            for i in 0..<n { out[i] = scales[i / block] * Float(codes[i]) - offsets[i / block] }
        }
    }

    /// The same for 4-bit codes packed two per byte, low nibble first.
    @inline(__always)
    func decodeAffine4(_ packed: UnsafePointer<UInt8>, _ n: Int, _ scales: UnsafePointer<Float>, _ offsets: UnsafePointer<Float>,
                       _ block: Int, _ out: UnsafeMutablePointer<Float>) {
        switch self {
        case .avx512: shrink_decode_affine_u4(packed, n, scales, offsets, block, out)
        case .swift, .avx2:
            for i in 0..<n {
                let code = (packed[i >> 1] >> UInt8((i & 1) * 4)) & 0x0F
                out[i] = scales[i / block] * Float(code) - offsets[i / block]
            }
        }
    }

    /// `out[i] = values[i]` widened from F16, or from BF16 when `bf16`.
    @inline(__always)
    func decodeHalf(_ values: UnsafePointer<UInt16>, _ n: Int, bf16: Bool, _ out: UnsafeMutablePointer<Float>) {
        switch self {
        case .avx512: shrink_decode_half(values, n, bf16 ? 1 : 0, out)
        case .swift, .avx2:
            for i in 0..<n {
                out[i] = bf16 ? FloatingPointConversion.float(fromBFloat16Bits: values[i]) : FloatingPointConversion.float(fromHalfBits: values[i])
            }
        }
    }

    /// `Σ values[i] · x[i]` with F16 (or BF16) values; the Swift twin decodes into `scratch` and dots.
    @inline(__always)
    func dotHalf(_ values: UnsafePointer<UInt16>, _ x: UnsafePointer<Float>, _ n: Int, bf16: Bool, scratch: UnsafeMutablePointer<Float>) -> Float {
        switch self {
        case .avx512: return shrink_dot_half(values, x, n, bf16 ? 1 : 0)
        case .swift, .avx2:
            decodeHalf(values, n, bf16: bf16, scratch)
            return dot(scratch, x, n)
        }
    }

    /// Each of `rows` rows of `x` (`rotation.size` apart) ← `R · s_r`, `s_r` the rows of `source`
    /// (which may be `x`), the same floats in every variant (`HadamardRotation.rotate` is the
    /// reference).
    public func rotate(_ rotation: HadamardRotation, from source: UnsafePointer<Float>, into x: UnsafeMutablePointer<Float>, rows: Int) {
        switch self {
        case .swift:
            if source != UnsafePointer(x) { x.update(from: source, count: rows * rotation.size) }
            for row in 0..<rows { rotation.rotate(x + row * rotation.size) }
        case .avx2, .avx512:
            // Only Paley blocks use scratch: Sylvester ones run without (and allocate nothing).
            withUnsafeTemporaryAllocation(of: Float.self, capacity: rotation.twelves > 0 ? rotation.blockSize : 0) { scratch in
                rotation.signs.withUnsafeBufferPointer { signs in
                    HadamardRotation.paley12.withUnsafeBufferPointer { paley in
                        (self == .avx512 ? shrink_hadamard_rotate : shrink_hadamard_rotate_avx2)(
                            source, x, rows, rotation.size, rotation.blockSize, rotation.twelves, rotation.powerOfTwo, signs.baseAddress!,
                            paley.baseAddress!, scratch.baseAddress)
                    }
                }
            }
        }
    }

    /// `out[i] = lut[indices[i]]` (8-bit indices, 256-entry LUT).
    @inline(__always)
    func decodeLUT8(_ indices: UnsafePointer<UInt8>, _ n: Int, _ lut: UnsafePointer<Float>, _ out: UnsafeMutablePointer<Float>) {
        switch self {
        case .avx512: shrink_decode_lut_u8(indices, n, lut, out)
        case .swift, .avx2: for i in 0..<n { out[i] = lut[Int(indices[i])] }
        }
    }

    /// `out[i] = lut[index i]` (4-bit indices packed two per byte, 16-entry LUT).
    @inline(__always)
    func decodeLUT4(_ packed: UnsafePointer<UInt8>, _ n: Int, _ lut: UnsafePointer<Float>, _ out: UnsafeMutablePointer<Float>) {
        switch self {
        case .avx512: shrink_decode_lut_u4(packed, n, lut, out)
        case .swift, .avx2: for i in 0..<n { out[i] = lut[Int((packed[i >> 1] >> UInt8((i & 1) * 4)) & 0x0F)] }
        }
    }

    /// Fused decode and dot of one row, `Σ (s·c − o)·x`, for 8-bit (`fourBit == false`) or packed
    /// 4-bit codes. The Swift twin decodes into `scratch` and dots.
    @inline(__always)
    func dotAffine(_ codes: UnsafePointer<UInt8>, fourBit: Bool, _ x: UnsafePointer<Float>, _ n: Int, _ scales: UnsafePointer<Float>,
                   _ offsets: UnsafePointer<Float>, _ block: Int, scratch: UnsafeMutablePointer<Float>) -> Float {
        switch self {
        case .avx512:
            return fourBit ? shrink_dot_affine_u4(codes, x, n, scales, offsets, block) : shrink_dot_affine_u8(codes, x, n, scales, offsets, block)
        case .swift, .avx2:
            if fourBit { decodeAffine4(codes, n, scales, offsets, block, scratch) } else { decodeAffine8(codes, n, scales, offsets, block, scratch) }
            return dot(scratch, x, n)
        }
    }

    /// Fused decode and dot of one row with a 16-entry LUT and packed 4-bit indices.
    @inline(__always)
    func dotLUT4(_ packed: UnsafePointer<UInt8>, _ x: UnsafePointer<Float>, _ n: Int, _ lut: UnsafePointer<Float>,
                 scratch: UnsafeMutablePointer<Float>) -> Float {
        switch self {
        case .avx512: return shrink_dot_lut_u4(packed, x, n, lut)
        case .swift, .avx2:
            decodeLUT4(packed, n, lut, scratch)
            return dot(scratch, x, n)
        }
    }

    /// `out[m · ldo + r] = Σ_k w[r · n + k] · x[m · n + k]` for a block of decoded weight rows and
    /// a block of input rows.
    @inline(__always)
    public func gemmNT(_ w: UnsafePointer<Float>, _ rowsW: Int, _ x: UnsafePointer<Float>, _ rowsX: Int, _ n: Int,
                _ out: UnsafeMutablePointer<Float>, _ ldo: Int) {
        switch self {
        case .avx512: shrink_gemm_nt_f32(w, rowsW, x, rowsX, n, out, ldo)
        case .swift, .avx2:
            for r in 0..<rowsW { for m in 0..<rowsX { out[m * ldo + r] = dot(w + r * n, x + m * n, n) } }
        }
    }

    /// `y[m · ldy + c] = bias[c] + Σ_i w[c][i] · x[m · ldx + i]` for the channels of `panels` of
    /// fp32 weights packed 16 channels at a time (see `shrink_gemm_f32_panels`); one FMA per input,
    /// in input order, in both implementations.
    @inline(__always)
    func gemmPanels(_ packed: UnsafePointer<Float>, n: Int, k: Int, panels: Range<Int>, _ x: UnsafePointer<Float>, rows: Int, ldx: Int,
                    _ y: UnsafeMutablePointer<Float>, ldy: Int, bias: UnsafePointer<Float>?) {
        switch self {
        case .avx512: shrink_gemm_f32_panels(packed, n, k, panels.lowerBound, panels.upperBound, x, rows, ldx, y, ldy, bias)
        case .avx2: shrink_gemm_f32_panels_avx2(packed, n, k, panels.lowerBound, panels.upperBound, x, rows, ldx, y, ldy, bias)
        case .swift:
            for panel in panels {
                for lane in 0..<16 where panel * 16 + lane < n {
                    let column = packed + panel * k * 16 + lane
                    for m in 0..<rows {
                        var sum: Float = 0
                        for i in 0..<k { sum = sum.addingProduct(column[i * 16], x[m * ldx + i]) }
                        y[m * ldy + panel * 16 + lane] = sum + (bias?[panel * 16 + lane] ?? 0)
                    }
                }
            }
        }
    }

    /// Sparse row decode (see `shrink_decode_sparse`): kept positions from `mask` (LSB-first bits)
    /// take the next code of `kept`, through `lut` when given, else `scales`/`offsets` per `block`.
    @inline(__always)
    func decodeSparse(_ mask: UnsafePointer<UInt8>, _ kept: UnsafePointer<UInt8>, _ n: Int, lut: UnsafePointer<Float>?, lutSize: Int,
                      scales: UnsafePointer<Float>?, offsets: UnsafePointer<Float>?, block: Int, _ out: UnsafeMutablePointer<Float>) {
        switch self {
        case .avx512: shrink_decode_sparse(mask, kept, n, lut, lutSize, scales, offsets, block, out)
        case .swift, .avx2:
            var next = 0
            for i in 0..<n {
                guard (mask[i >> 3] >> UInt8(i & 7)) & 1 == 1 else { out[i] = 0; continue }
                let code = kept[next]
                next += 1
                out[i] = lut.map { $0[Int(code)] } ?? (scales![i / block] * Float(code) - offsets![i / block])
            }
        }
    }

    /// Fused scaled dot-product attention of one head over one sequence (see
    /// `shrink_attention_head_f32`): `q`, `k`, `v` and `out` point at the head's first column of
    /// token 0, rows `stride` floats apart; `headSize` ≤ 128; `scratch` holds
    /// `attentionScratch(length:headSize:)` floats.
    public func attentionHead(q: UnsafePointer<Float>, k: UnsafePointer<Float>, v: UnsafePointer<Float>, length: Int, headSize: Int,
                              stride: Int, scale: Float, scratch: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<Float>) {
        precondition(headSize <= 128)
        switch self {
        case .avx512: shrink_attention_head_f32(q, k, v, length, headSize, stride, scale, scratch, out)
        case .avx2: shrink_attention_head_f32_avx2(q, k, v, length, headSize, stride, scale, scratch, out)
        case .swift:
            for i in 0..<length {
                Self.attend(query: q + i * stride, keys: k, keyStrides: (tile: 16 * stride, position: stride, dimension: 1), values: v,
                            valueStride: stride, length: length, headSize: headSize, scale: scale, scores: scratch, out: out + i * stride)
            }
        }
    }

    /// Causal attention of the `group` query heads that share one key/value head, over a cache (see
    /// `shrink_causal_attention_f32`): batch rows `rows`, row `r` at position `start + r` seeing
    /// cache positions `0…start + r`; the query of row `r` and group head `g` at
    /// `q + r · queryStride + g · headSize` (its context at the same offset from `out`); keys
    /// transposed in tiles of 16 positions, dimension `d` of position `j` at
    /// `keys[(j / 16) · 16 · headSize + d · 16 + j % 16]` (readable up to `start + rows.upperBound`
    /// rounded up to 16), values of position `j` at `v + j · valueStride`;
    /// `scratch` holds `causalAttentionScratch(positions: start + rows.upperBound)` floats. Heads of
    /// more than 128 (past the vector kernels' query buffers) run the Swift twin.
    public func causalAttention(q: UnsafePointer<Float>, queryStride: Int, keys: UnsafePointer<Float>, v: UnsafePointer<Float>,
                                valueStride: Int, headSize: Int, group: Int, start: Int, rows: Range<Int>, scale: Float,
                                scratch: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<Float>) {
        switch self {
        case .avx512 where headSize <= 128:
            shrink_causal_attention_f32(q, queryStride, keys, v, valueStride, headSize, group, start, rows.lowerBound, rows.upperBound,
                                        scale, scratch, out)
        case .avx2 where headSize <= 128:
            shrink_causal_attention_f32_avx2(q, queryStride, keys, v, valueStride, headSize, group, start, rows.lowerBound, rows.upperBound,
                                             scale, scratch, out)
        case .avx512, .swift, .avx2:
            for row in rows {
                for head in 0..<group {
                    let offset = row * queryStride + head * headSize
                    Self.attend(query: q + offset, keys: keys, keyStrides: (tile: 16 * headSize, position: 1, dimension: 16), values: v,
                                valueStride: valueStride, length: start + row + 1, headSize: headSize, scale: scale, scores: scratch, out: out + offset)
                }
            }
        }
    }

    /// The scratch floats `causalAttention` needs for `positions` cache positions.
    public static func causalAttentionScratch(positions: Int) -> Int { 4 * ((positions + 15) / 16 * 16) }

    /// One query's attention, plainly: `s_j = Σ_d q_d · scale · k_jd` for `j < length` (`k_jd` at
    /// `keys[(j / 16) · keyStrides.tile + (j % 16) · keyStrides.position + d · keyStrides.dimension]`), softmax with its maximum
    /// subtracted (`expf`), `out_d = Σ_j e_j · v_jd / Σ_j e_j`; `scores` holds `length` floats.
    static func attend(query: UnsafePointer<Float>, keys: UnsafePointer<Float>, keyStrides: (tile: Int, position: Int, dimension: Int),
                       values: UnsafePointer<Float>, valueStride: Int, length: Int, headSize: Int, scale: Float,
                       scores: UnsafeMutablePointer<Float>, out: UnsafeMutablePointer<Float>) {
        var largest = -Float.infinity
        for j in 0..<length {
            var sum: Float = 0
            let key = keys + j / 16 * keyStrides.tile + j % 16 * keyStrides.position
            for d in 0..<headSize { sum += query[d] * scale * key[d * keyStrides.dimension] }
            scores[j] = sum
            largest = max(largest, sum)
        }
        var total: Float = 0
        for j in 0..<length {
            scores[j] = expf(scores[j] - largest)
            total += scores[j]
        }
        for d in 0..<headSize {
            var sum: Float = 0
            for j in 0..<length { sum += scores[j] * values[j * valueStride + d] }
            out[d] = sum / total
        }
    }

    /// The scratch floats `attentionHead` needs.
    public static func attentionScratch(length: Int, headSize: Int) -> Int { (headSize + 4) * ((length + 15) / 16 * 16) }

    /// In-place GELU, `x · (1 + erf(x / √2)) / 2`. The Swift twin uses the C library's `erff`; the
    /// vector kernel a polynomial erf (absolute error ≤ 1.5e-7, see `shrink_gelu_f32`).
    public func gelu(_ x: UnsafeMutablePointer<Float>, _ n: Int) {
        switch self {
        case .avx512: shrink_gelu_f32(x, n)
        case .avx2: shrink_gelu_f32_avx2(x, n)
        case .swift:
            for i in 0..<n { x[i] = 0.5 * x[i] * (1 + erff(x[i] * 0.70710678118654752)) }
        }
    }

    /// Per row of `n` floats: `x += residual` (when given), then LayerNorm,
    /// `(x − mean) / sqrt(var + ε) · γ + β`. The Swift twin sums in `Double`.
    public func addLayerNorm(_ x: UnsafeMutablePointer<Float>, residual: UnsafePointer<Float>?, rows: Int, _ n: Int,
                             gamma: UnsafePointer<Float>, beta: UnsafePointer<Float>, epsilon: Float) {
        switch self {
        case .avx512: shrink_add_layer_norm_f32(x, residual, rows, n, gamma, beta, epsilon)
        case .avx2: shrink_add_layer_norm_f32_avx2(x, residual, rows, n, gamma, beta, epsilon)
        case .swift:
            for row in 0..<rows {
                let line = x + row * n
                if let residual { for i in 0..<n { line[i] += residual[row * n + i] } }
                var sum = 0.0
                for i in 0..<n { sum += Double(line[i]) }
                let mean = Float(sum / Double(n))
                var squares = 0.0
                for i in 0..<n { squares += Double(line[i] - mean) * Double(line[i] - mean) }
                let inverse = 1 / (Float(squares / Double(n)) + epsilon).squareRoot()
                for i in 0..<n { line[i] = (line[i] - mean) * inverse * gamma[i] + beta[i] }
            }
        }
    }

    /// `Σ a[i] · b[i]`.
    @inline(__always)
    func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ n: Int) -> Float {
        switch self {
        case .avx512: return shrink_dot_f32(a, b, n)
        case .avx2: return shrink_dot_f32_avx2(a, b, n)
        case .swift:
            var sum: Float = 0
            for i in 0..<n { sum += a[i] * b[i] }
            return sum
        }
    }
}
