// The encoder's float kernels for CPUs with AVX2 and FMA but without AVX-512: the same algorithms
// as their AVX-512 versions (kernels.c, f32_panels.c) in 8 float lanes. Declarations and contracts
// are in shrink_kernels.h; the Swift twins are in ShrinkKernels/KernelVariant.swift.
#include "shrink_kernels.h"
#include "tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

AVX2 INLINE float sum8(__m256 v) {
    __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    half = _mm_add_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_add_ss(half, _mm_movehdup_ps(half)));
}

AVX2 INLINE float max8(__m256 v) {
    __m128 half = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    half = _mm_max_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_max_ss(half, _mm_movehdup_ps(half)));
}

/// e^x for x <= 0 as in kernels.c (down to -87, Taylor polynomial of degree 6 on r = x - k ln 2),
/// with 2^k built in the exponent bits (k >= -126, so 2^k is a normal float).
AVX2 INLINE __m256 exp_nonpositive8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i power = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(power));
}

AVX2 INLINE __m256 gelu8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
    __m256 a = _mm256_andnot_ps(sign, z);
    __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(a, _mm256_set1_ps(0.3275911f), _mm256_set1_ps(1.0f)));
    __m256 poly = _mm256_set1_ps(1.061405429f);
    poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-1.453152027f));
    poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(1.421413741f));
    poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-0.284496736f));
    poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(0.254829592f));
    poly = _mm256_mul_ps(poly, t);
    __m256 erf_abs = _mm256_fnmadd_ps(poly, exp_nonpositive8(_mm256_mul_ps(_mm256_xor_ps(a, sign), a)), _mm256_set1_ps(1.0f));
    // erf is odd: give the result the sign of z.
    __m256 erf_z = _mm256_or_ps(erf_abs, _mm256_and_ps(z, sign));
    return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)), _mm256_add_ps(erf_z, _mm256_set1_ps(1.0f)));
}

AVX2 void shrink_gelu_f32_avx2(float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, gelu8(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i mask = tail_mask8(n - i);
        _mm256_maskstore_ps(x + i, mask, gelu8(_mm256_maskload_ps(x + i, mask)));
    }
}

AVX2 void shrink_add_layer_norm_f32_avx2(float *x, const float *residual, size_t rows, size_t n, const float *gamma, const float *beta,
                                         float epsilon) {
    for (size_t row = 0; row < rows; row++) {
        float *line = x + row * n;
        const float *extra = residual ? residual + row * n : NULL;
        __m256 sum = _mm256_setzero_ps();
        for (size_t i = 0; i < n; i += 8) {
            __m256i mask = tail_mask8(n - i);
            __m256 v = _mm256_maskload_ps(line + i, mask);
            if (extra) v = _mm256_add_ps(v, _mm256_maskload_ps(extra + i, mask));
            _mm256_maskstore_ps(line + i, mask, v);
            sum = _mm256_add_ps(sum, v);
        }
        float mean = sum8(sum) / (float)n;
        __m256 center = _mm256_set1_ps(mean), squares = _mm256_setzero_ps();
        for (size_t i = 0; i < n; i += 8) {
            __m256i mask = tail_mask8(n - i);
            __m256 delta = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(line + i, mask), center), _mm256_castsi256_ps(mask));
            squares = _mm256_fmadd_ps(delta, delta, squares);
        }
        __m256 inverse = _mm256_set1_ps(1.0f / sqrtf(sum8(squares) / (float)n + epsilon));
        for (size_t i = 0; i < n; i += 8) {
            __m256i mask = tail_mask8(n - i);
            __m256 normalized = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(line + i, mask), center), inverse);
            __m256 y = _mm256_fmadd_ps(normalized, _mm256_maskload_ps(gamma + i, mask), _mm256_maskload_ps(beta + i, mask));
            _mm256_maskstore_ps(line + i, mask, y);
        }
    }
}

AVX2 float shrink_dot_f32_avx2(const float *a, const float *b, size_t n) {
    __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        sum0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), sum0);
        sum1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), sum1);
    }
    for (; i < n; i += 8) {
        __m256i mask = tail_mask8(n - i);
        sum0 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, mask), _mm256_maskload_ps(b + i, mask), sum0);
    }
    return sum8(_mm256_add_ps(sum0, sum1));
}

AVX2 void shrink_attention_head_f32_avx2(const float *q, const float *k, const float *v, size_t length, size_t head_size, size_t stride,
                                         float scale, float *scratch, float *out) {
    const size_t chunks = (head_size + 7) / 8;
    const size_t padded = (length + 7) & ~(size_t)7;
    float *scores = scratch, *keys = scratch + padded;
    shrink_transpose_keys(k, length, head_size, stride, padded, keys);
    __m256i masks[16];
    for (size_t c = 0; c < chunks; c++) masks[c] = tail_mask8(head_size - c * 8);
    float query[128];
    for (size_t i = 0; i < length; i++) {
        for (size_t c = 0; c < chunks; c++) {
            _mm256_storeu_ps(query + c * 8, _mm256_mul_ps(_mm256_maskload_ps(q + i * stride + c * 8, masks[c]), _mm256_set1_ps(scale)));
        }
        __m256 largest = _mm256_set1_ps(-INFINITY);
        for (size_t j = 0; j < padded; j += 8) {
            // Four partial sums, so that the FMAs do not wait on one another.
            __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            size_t d = 0;
            for (; d + 4 <= head_size; d += 4) {
                for (int u = 0; u < 4; u++) {
                    sum[u] = _mm256_fmadd_ps(_mm256_set1_ps(query[d + u]), _mm256_loadu_ps(keys + (d + u) * padded + j), sum[u]);
                }
            }
            for (; d < head_size; d++) sum[0] = _mm256_fmadd_ps(_mm256_set1_ps(query[d]), _mm256_loadu_ps(keys + d * padded + j), sum[0]);
            __m256 total = _mm256_add_ps(_mm256_add_ps(sum[0], sum[1]), _mm256_add_ps(sum[2], sum[3]));
            _mm256_storeu_ps(scores + j, total);
            __m256 valid = _mm256_castsi256_ps(tail_mask8(length - j));
            largest = _mm256_max_ps(largest, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), total, valid));
        }
        __m256 maximum = _mm256_set1_ps(max8(largest));
        __m256 total = _mm256_setzero_ps();
        for (size_t j = 0; j < length; j += 8) {
            __m256 valid = _mm256_castsi256_ps(tail_mask8(length - j));
            __m256 e = _mm256_and_ps(exp_nonpositive8(_mm256_sub_ps(_mm256_loadu_ps(scores + j), maximum)), valid);
            _mm256_storeu_ps(scores + j, e);
            total = _mm256_add_ps(total, e);
        }
        __m256 inverse = _mm256_set1_ps(1.0f / sum8(total));
        __m256 context[16];
        for (size_t c = 0; c < chunks; c++) context[c] = _mm256_setzero_ps();
        for (size_t j = 0; j < length; j++) {
            __m256 weight = _mm256_set1_ps(scores[j]);
            for (size_t c = 0; c < chunks; c++) {
                context[c] = _mm256_fmadd_ps(weight, _mm256_maskload_ps(v + j * stride + c * 8, masks[c]), context[c]);
            }
        }
        for (size_t c = 0; c < chunks; c++) _mm256_maskstore_ps(out + i * stride + c * 8, masks[c], _mm256_mul_ps(context[c], inverse));
    }
}

/// Lanes j, …, j + 7 of a vector that sees `length` keys.
AVX2 INLINE __m256 key_mask8(size_t length, size_t j) {
    return j < length ? _mm256_castsi256_ps(tail_mask8(length - j)) : _mm256_setzero_ps();
}

/// The contexts of query vectors [0, R) for head chunks [c0, c0 + CN) (CN <= 2), as kernels.c's
/// attention_context in 8 lanes: each value vector loaded once for the R vectors.
AVX2 INLINE void causal_context8(const float *v, size_t v_stride, float *const *outputs, int R, int CN, size_t c0, size_t length,
                                 const __m256i *masks, const float *scores, size_t score_stride, const __m256 *inverse) {
    __m256 context[4][2];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < CN; c++) context[r][c] = _mm256_setzero_ps();
    for (size_t j = 0; j < length; j++) {
        for (int c = 0; c < CN; c++) {
            __m256 value = _mm256_maskload_ps(v + j * v_stride + (c0 + c) * 8, masks[c0 + c]);
            for (int r = 0; r < R; r++) context[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(scores[r * score_stride + j]), value, context[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < CN; c++) _mm256_maskstore_ps(outputs[r] + (c0 + c) * 8, masks[c0 + c], _mm256_mul_ps(context[r][c], inverse[r]));
}

/// Query vectors [0, R) (R <= 4) of the heads sharing one key/value head, vector r at queries[r]
/// seeing keys [0, lengths[r]) and written to outputs[r], as kernels.c's attention_rows in 8
/// lanes: each key and value vector loaded once serves the R vectors; keys in the cache's tiles of
/// 16 positions (dimension d of position j at keys[(j / 16) * tile_stride + d * 16 + j % 16]); the
/// scores of vector r in scores + r * score_stride.
AVX2 INLINE void causal_rows8(const float *const *queries, float *const *outputs, const size_t *lengths, int R, const float *v,
                              size_t v_stride, size_t head_size, float scale, const float *keys, size_t tile_stride,
                              size_t score_stride, const __m256i *masks, float *scores) {
    const size_t chunks = (head_size + 7) / 8;
    size_t length = 0;
    for (int r = 0; r < R; r++) length = lengths[r] > length ? lengths[r] : length;
    const size_t scored = (length + 7) & ~(size_t)7;
    float query[4][128];
    for (int r = 0; r < R; r++)
        for (size_t d = 0; d < head_size; d++) query[r][d] = queries[r][d] * scale;
    __m256 largest[4];
    for (int r = 0; r < R; r++) largest[r] = _mm256_set1_ps(-INFINITY);
    for (size_t j = 0; j < scored; j += 8) {
        const float *tile = keys + j / 16 * tile_stride + j % 16;
        // Four partial sums per vector, so that the FMAs do not wait on one another.
        __m256 sum[4][4];
        for (int r = 0; r < R; r++)
            for (int u = 0; u < 4; u++) sum[r][u] = _mm256_setzero_ps();
        size_t d = 0;
        for (; d + 4 <= head_size; d += 4) {
            for (int u = 0; u < 4; u++) {
                __m256 key = _mm256_loadu_ps(tile + (d + u) * 16);
                for (int r = 0; r < R; r++) sum[r][u] = _mm256_fmadd_ps(_mm256_set1_ps(query[r][d + u]), key, sum[r][u]);
            }
        }
        for (; d < head_size; d++) {
            __m256 key = _mm256_loadu_ps(tile + d * 16);
            for (int r = 0; r < R; r++) sum[r][0] = _mm256_fmadd_ps(_mm256_set1_ps(query[r][d]), key, sum[r][0]);
        }
        for (int r = 0; r < R; r++) {
            __m256 total = _mm256_add_ps(_mm256_add_ps(sum[r][0], sum[r][1]), _mm256_add_ps(sum[r][2], sum[r][3]));
            _mm256_storeu_ps(scores + r * score_stride + j, total);
            largest[r] = _mm256_max_ps(largest[r], _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), total, key_mask8(lengths[r], j)));
        }
    }
    __m256 inverse[4];
    for (int r = 0; r < R; r++) {
        __m256 maximum = _mm256_set1_ps(max8(largest[r]));
        __m256 total = _mm256_setzero_ps();
        for (size_t j = 0; j < length; j += 8) {
            __m256 e = _mm256_and_ps(exp_nonpositive8(_mm256_sub_ps(_mm256_loadu_ps(scores + r * score_stride + j), maximum)),
                                     key_mask8(lengths[r], j));
            _mm256_storeu_ps(scores + r * score_stride + j, e);
            total = _mm256_add_ps(total, e);
        }
        inverse[r] = _mm256_set1_ps(1.0f / sum8(total));
    }
    for (size_t c0 = 0; c0 < chunks; c0 += 2) {
        if (chunks - c0 >= 2) {
            causal_context8(v, v_stride, outputs, R, 2, c0, length, masks, scores, score_stride, inverse);
        } else {
            causal_context8(v, v_stride, outputs, R, 1, c0, length, masks, scores, score_stride, inverse);
        }
    }
}

AVX2 void shrink_causal_attention_f32_avx2(const float *q, size_t q_stride, const float *keys, const float *v, size_t v_stride,
                                           size_t head_size, size_t group, size_t start, size_t row_begin, size_t row_end, float scale,
                                           float *scratch, float *out) {
    const size_t score_stride = (start + row_end + 15) & ~(size_t)15;
    __m256i masks[16];
    for (size_t c = 0; c < (head_size + 7) / 8; c++) masks[c] = tail_mask8(head_size - c * 8);
    const float *queries[4];
    float *outputs[4];
    size_t lengths[4];
    int count = 0;
#define CAUSAL_ROWS8(R) \
    causal_rows8(queries, outputs, lengths, R, v, v_stride, head_size, scale, keys, 16 * head_size, score_stride, masks, scratch)
    for (size_t row = row_begin; row < row_end; row++) {
        for (size_t g = 0; g < group; g++) {
            queries[count] = q + row * q_stride + g * head_size;
            outputs[count] = out + row * q_stride + g * head_size;
            lengths[count] = start + row + 1;
            if (++count == 4) {
                CAUSAL_ROWS8(4);
                count = 0;
            }
        }
    }
    switch (count) {
    case 3: CAUSAL_ROWS8(3); break;
    case 2: CAUSAL_ROWS8(2); break;
    case 1: CAUSAL_ROWS8(1); break;
    default: break;
    }
#undef CAUSAL_ROWS8
}

/// `mr` (<= 6) input rows times one panel of 16 channels (two halves of 8) over all k: one FMA per
/// weight and row, in k order (as the Swift twin).
AVX2 INLINE void f32_tile(const float *w, size_t k, const float *x, size_t ldx, int mr, float *y, size_t ldy, size_t n0, size_t n,
                          const float *bias) {
    __m256 acc[6][2];
    for (int m = 0; m < mr; m++) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
    for (size_t i = 0; i < k; i++) {
        __m256 v0 = _mm256_loadu_ps(w + i * 16), v1 = _mm256_loadu_ps(w + i * 16 + 8);
        for (int m = 0; m < mr; m++) {
            __m256 xv = _mm256_broadcast_ss(x + m * ldx + i);
            acc[m][0] = _mm256_fmadd_ps(v0, xv, acc[m][0]);
            acc[m][1] = _mm256_fmadd_ps(v1, xv, acc[m][1]);
        }
    }
    for (int h = 0; h < 2 && n0 + h * 8 < n; h++) {
        __m256 column[6];
        for (int m = 0; m < mr; m++) column[m] = acc[m][h];
        store_tile8(column, mr, y, ldy, n0 + h * 8, n, bias);
    }
}

#define F32_TILE_AVX2(MR) f32_tile(panels + panel * k * 16, k, x + m * ldx, ldx, MR, y + m * ldy, ldy, panel * 16, n, bias)

AVX2 void shrink_gemm_f32_panels_avx2(const float *panels, size_t n, size_t k, size_t panel_begin, size_t panel_end, const float *x,
                                      size_t rows, size_t ldx, float *y, size_t ldy, const float *bias) {
    for (size_t panel = panel_begin; panel < panel_end; panel++) {
        size_t m = 0;
        for (; m + 6 <= rows; m += 6) F32_TILE_AVX2(6);
        switch (rows - m) {
        case 5: F32_TILE_AVX2(5); break;
        case 4: F32_TILE_AVX2(4); break;
        case 3: F32_TILE_AVX2(3); break;
        case 2: F32_TILE_AVX2(2); break;
        case 1: F32_TILE_AVX2(1); break;
        default: break;
        }
    }
}

#else

// Never called (the CPU check says no AVX2); they forward to the portable stubs.
void shrink_gelu_f32_avx2(float *x, size_t n) { shrink_gelu_f32(x, n); }

void shrink_add_layer_norm_f32_avx2(float *x, const float *residual, size_t rows, size_t n, const float *gamma, const float *beta,
                                    float epsilon) {
    shrink_add_layer_norm_f32(x, residual, rows, n, gamma, beta, epsilon);
}

float shrink_dot_f32_avx2(const float *a, const float *b, size_t n) { return shrink_dot_f32(a, b, n); }

void shrink_attention_head_f32_avx2(const float *q, const float *k, const float *v, size_t length, size_t head_size, size_t stride,
                                    float scale, float *scratch, float *out) {
    shrink_attention_head_f32(q, k, v, length, head_size, stride, scale, scratch, out);
}

void shrink_causal_attention_f32_avx2(const float *q, size_t q_stride, const float *keys, const float *v, size_t v_stride,
                                      size_t head_size, size_t group, size_t start, size_t row_begin, size_t row_end, float scale,
                                      float *scratch, float *out) {
    shrink_causal_attention_f32(q, q_stride, keys, v, v_stride, head_size, group, start, row_begin, row_end, scale, scratch, out);
}

void shrink_gemm_f32_panels_avx2(const float *panels, size_t n, size_t k, size_t panel_begin, size_t panel_end, const float *x,
                                 size_t rows, size_t ldx, float *y, size_t ldy, const float *bias) {
    shrink_gemm_f32_panels(panels, n, k, panel_begin, panel_end, x, rows, ldx, y, ldy, bias);
}

#endif
