#include "shrink_kernels.h"
#include "tiles.h"
#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>

int shrink_cpu_has_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

float shrink_dot_f32(const float *a, const float *b, size_t n) AVX512;

AVX512 static inline __m512 widen_u8(const uint8_t *codes) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)codes)));
}

/// The 16 four-bit values of 8 packed bytes, low nibble first, as 32-bit lanes.
AVX512 static inline __m512i widen_u4(const uint8_t *packed) {
    __m128i bytes = _mm_loadl_epi64((const __m128i *)packed);
    __m128i low = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
    __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F));
    return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(low, high));
}

AVX512 void shrink_decode_affine_u8(const uint8_t *codes, size_t n, const float *scales, const float *offsets,
                                    size_t block, float *out) {
    size_t i = 0;
    if (block % 16 == 0) {
        for (; i + 16 <= n; i += 16) {
            __m512 s = _mm512_set1_ps(scales[i / block]), o = _mm512_set1_ps(offsets[i / block]);
            _mm512_storeu_ps(out + i, _mm512_fmsub_ps(widen_u8(codes + i), s, o));
        }
    }
    for (; i < n; i++) out[i] = scales[i / block] * (float)codes[i] - offsets[i / block];
}

AVX512 void shrink_decode_affine_u4(const uint8_t *packed, size_t n, const float *scales, const float *offsets,
                                    size_t block, float *out) {
    size_t i = 0;
    if (block % 16 == 0) {
        for (; i + 16 <= n; i += 16) {
            __m512 s = _mm512_set1_ps(scales[i / block]), o = _mm512_set1_ps(offsets[i / block]);
            _mm512_storeu_ps(out + i, _mm512_fmsub_ps(_mm512_cvtepi32_ps(widen_u4(packed + i / 2)), s, o));
        }
    }
    for (; i < n; i++) {
        uint8_t code = (packed[i / 2] >> ((i & 1) * 4)) & 0x0F;
        out[i] = scales[i / block] * (float)code - offsets[i / block];
    }
}

AVX512 void shrink_decode_lut_u8(const uint8_t *indices, size_t n, const float *lut, float *out) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i index = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(indices + i)));
        _mm512_storeu_ps(out + i, _mm512_i32gather_ps(index, lut, 4));
    }
    for (; i < n; i++) out[i] = lut[indices[i]];
}

AVX512 void shrink_decode_lut_u4(const uint8_t *packed, size_t n, const float *lut, float *out) {
    __m512 table = _mm512_loadu_ps(lut);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(out + i, _mm512_permutexvar_ps(widen_u4(packed + i / 2), table));
    }
    for (; i < n; i++) out[i] = lut[(packed[i / 2] >> ((i & 1) * 4)) & 0x0F];
}

AVX512 float shrink_dot_affine_u8(const uint8_t *codes, const float *x, size_t n, const float *scales,
                                  const float *offsets, size_t block) {
    __m512 sum = _mm512_setzero_ps();
    size_t i = 0;
    if (block % 16 == 0) {
        for (; i + 16 <= n; i += 16) {
            __m512 w = _mm512_fmsub_ps(widen_u8(codes + i), _mm512_set1_ps(scales[i / block]), _mm512_set1_ps(offsets[i / block]));
            sum = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + i), sum);
        }
    }
    float total = _mm512_reduce_add_ps(sum);
    for (; i < n; i++) total += (scales[i / block] * (float)codes[i] - offsets[i / block]) * x[i];
    return total;
}

AVX512 float shrink_dot_affine_u4(const uint8_t *packed, const float *x, size_t n, const float *scales,
                                  const float *offsets, size_t block) {
    __m512 sum = _mm512_setzero_ps();
    size_t i = 0;
    if (block % 16 == 0) {
        for (; i + 16 <= n; i += 16) {
            __m512 code = _mm512_cvtepi32_ps(widen_u4(packed + i / 2));
            __m512 w = _mm512_fmsub_ps(code, _mm512_set1_ps(scales[i / block]), _mm512_set1_ps(offsets[i / block]));
            sum = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + i), sum);
        }
    }
    float total = _mm512_reduce_add_ps(sum);
    for (; i < n; i++) {
        uint8_t code = (packed[i / 2] >> ((i & 1) * 4)) & 0x0F;
        total += (scales[i / block] * (float)code - offsets[i / block]) * x[i];
    }
    return total;
}

AVX512 float shrink_dot_lut_u4(const uint8_t *packed, const float *x, size_t n, const float *lut) {
    __m512 table = _mm512_loadu_ps(lut);
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        sum0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(widen_u4(packed + i / 2), table), _mm512_loadu_ps(x + i), sum0);
        sum1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(widen_u4(packed + i / 2 + 8), table), _mm512_loadu_ps(x + i + 16), sum1);
    }
    for (; i + 16 <= n; i += 16) {
        sum0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(widen_u4(packed + i / 2), table), _mm512_loadu_ps(x + i), sum0);
    }
    float total = _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
    for (; i < n; i++) total += lut[(packed[i / 2] >> ((i & 1) * 4)) & 0x0F] * x[i];
    return total;
}

AVX512 void shrink_decode_sparse(const uint8_t *mask, const uint8_t *kept, size_t n, const float *lut, size_t lut_size,
                                 const float *scales, const float *offsets, size_t block, float *out) {
    __m512 table = lut != NULL && lut_size == 16 ? _mm512_loadu_ps(lut) : _mm512_setzero_ps();
    size_t i = 0;
    if (lut != NULL || block % 16 == 0) {
        for (; i + 16 <= n; i += 16) {
            __mmask16 keep = (__mmask16)(mask[i / 8] | (mask[i / 8 + 1] << 8));
            __m512i codes = _mm512_maskz_expand_epi32(keep, _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)kept)));
            __m512 values;
            if (lut != NULL && lut_size == 16) {
                values = _mm512_permutexvar_ps(codes, table);
            } else if (lut != NULL) {
                values = _mm512_i32gather_ps(codes, lut, 4);
            } else {
                values = _mm512_fmsub_ps(_mm512_cvtepi32_ps(codes), _mm512_set1_ps(scales[i / block]), _mm512_set1_ps(offsets[i / block]));
            }
            _mm512_storeu_ps(out + i, _mm512_maskz_mov_ps(keep, values));
            kept += __builtin_popcount((unsigned)keep);
        }
    }
    for (; i < n; i++) {
        if ((mask[i / 8] >> (i % 8)) & 1) {
            uint8_t code = *kept++;
            out[i] = lut != NULL ? lut[code] : scales[i / block] * (float)code - offsets[i / block];
        } else {
            out[i] = 0;
        }
    }
}

/// e^x for x in [-87, 88] (inputs outside are clamped to it): x = k ln 2 + r, e^r by its Taylor
/// polynomial of degree 6 (relative error about 2e-7 for |r| <= ln 2 / 2).
AVX512 static inline __m512 exp_clamped(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}

AVX512 static inline __m512 gelu16(__m512 x) {
    __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
    __m512 a = _mm512_abs_ps(z);
    __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(a, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.0f)));
    __m512 poly = _mm512_set1_ps(1.061405429f);
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-1.453152027f));
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(1.421413741f));
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-0.284496736f));
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(0.254829592f));
    poly = _mm512_mul_ps(poly, t);
    __m512 erf_abs = _mm512_fnmadd_ps(poly, exp_clamped(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a)), _mm512_set1_ps(1.0f));
    // erf is odd: give the result the sign of z.
    __m512 erf_z = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(erf_abs),
                                                       _mm512_and_si512(_mm512_castps_si512(z), _mm512_set1_epi32((int)0x80000000))));
    return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), _mm512_add_ps(erf_z, _mm512_set1_ps(1.0f)));
}

AVX512 static inline __mmask16 tail_mask(size_t remaining) {
    return remaining >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << remaining) - 1);
}

/// silu(g) * u = g / (1 + e^-g) * u, e^-g from exp_clamped (for g < -88 the quotient is about
/// g * e^-88 instead of -0).
AVX512 static inline __m512 swiglu16(__m512 g, __m512 u) {
    __m512 denominator = _mm512_add_ps(_mm512_set1_ps(1.0f), exp_clamped(_mm512_sub_ps(_mm512_setzero_ps(), g)));
    return _mm512_mul_ps(_mm512_div_ps(g, denominator), u);
}

AVX512 void shrink_swiglu_f32(float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 mask = tail_mask(n - i);
        _mm512_mask_storeu_ps(gate + i, mask, swiglu16(_mm512_maskz_loadu_ps(mask, gate + i), _mm512_maskz_loadu_ps(mask, up + i)));
    }
}

AVX512 void shrink_gelu_f32(float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, gelu16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 mask = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(x + i, mask, gelu16(_mm512_maskz_loadu_ps(mask, x + i)));
    }
}


/// The contexts of query vectors [0, R) for head chunks [c0, c0 + CN) (CN <= 2): R × CN context sums
/// in registers, each value vector loaded once for the R vectors (scores past a vector's length are 0).
AVX512 static inline __attribute__((always_inline)) void attention_context(const float *v, size_t v_stride, float *const *outputs, int R,
                                                                          int CN, size_t c0, size_t length, const __mmask16 *masks,
                                                                          const float *scores, size_t score_stride, const __m512 *inverse) {
    __m512 context[4][2];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < CN; c++) context[r][c] = _mm512_setzero_ps();
    for (size_t j = 0; j < length; j++) {
        for (int c = 0; c < CN; c++) {
            __m512 value = _mm512_maskz_loadu_ps(masks[c0 + c], v + j * v_stride + (c0 + c) * 16);
            for (int r = 0; r < R; r++) context[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(scores[r * score_stride + j]), value, context[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < CN; c++)
            _mm512_mask_storeu_ps(outputs[r] + (c0 + c) * 16, masks[c0 + c], _mm512_mul_ps(context[r][c], inverse[r]));
}

/// Lanes j, …, j + 15 of a vector that sees `length` keys.
AVX512 static inline __mmask16 key_mask(size_t length, size_t j) { return j < length ? tail_mask(length - j) : 0; }

/// Query vectors [0, R) of one head (or of the heads sharing one key/value head), vector r at
/// queries[r] seeing keys [0, lengths[r]) and written to outputs[r]: each key and value vector
/// loaded once serves the R vectors, whose dependency chains (R × 4 partial scores, R × chunks
/// context sums) run side by side. Per vector the arithmetic is that of one vector alone. Keys are
/// transposed in tiles of 16 positions: dimension d of position j at
/// keys[(j / 16) * tile_stride + d * row_stride + j % 16] (readable up to the lengths rounded up to
/// 16); the scores of vector r go to scores + r * score_stride.
AVX512 static inline __attribute__((always_inline)) void attention_rows(const float *const *queries, float *const *outputs,
                                                                       const size_t *lengths, int R, const float *v, size_t v_stride,
                                                                       size_t head_size, float scale, const float *keys, size_t row_stride,
                                                                       size_t tile_stride, size_t score_stride, const __mmask16 *masks,
                                                                       float *scores) {
    const size_t chunks = (head_size + 15) / 16;
    size_t length = 0;
    for (int r = 0; r < R; r++) length = lengths[r] > length ? lengths[r] : length;
    const size_t scored = (length + 15) & ~(size_t)15;
    float query[4][128];
    for (int r = 0; r < R; r++) {
        for (size_t c = 0; c < chunks; c++) {
            _mm512_storeu_ps(query[r] + c * 16, _mm512_mul_ps(_mm512_maskz_loadu_ps(masks[c], queries[r] + c * 16), _mm512_set1_ps(scale)));
        }
    }
    __m512 largest[4];
    for (int r = 0; r < R; r++) largest[r] = _mm512_set1_ps(-INFINITY);
    for (size_t j = 0; j < scored; j += 16) {
        const float *tile = keys + j / 16 * tile_stride;
        // Four partial sums per row, so that the FMAs do not wait on one another.
        __m512 sum[4][4];
        for (int r = 0; r < R; r++)
            for (int u = 0; u < 4; u++) sum[r][u] = _mm512_setzero_ps();
        size_t d = 0;
        for (; d + 4 <= head_size; d += 4) {
            for (int u = 0; u < 4; u++) {
                __m512 key = _mm512_loadu_ps(tile + (d + u) * row_stride);
                for (int r = 0; r < R; r++) sum[r][u] = _mm512_fmadd_ps(_mm512_set1_ps(query[r][d + u]), key, sum[r][u]);
            }
        }
        for (; d < head_size; d++) {
            __m512 key = _mm512_loadu_ps(tile + d * row_stride);
            for (int r = 0; r < R; r++) sum[r][0] = _mm512_fmadd_ps(_mm512_set1_ps(query[r][d]), key, sum[r][0]);
        }
        for (int r = 0; r < R; r++) {
            __m512 total = _mm512_add_ps(_mm512_add_ps(sum[r][0], sum[r][1]), _mm512_add_ps(sum[r][2], sum[r][3]));
            _mm512_storeu_ps(scores + r * score_stride + j, total);
            largest[r] = _mm512_mask_max_ps(largest[r], key_mask(lengths[r], j), largest[r], total);
        }
    }
    __m512 inverse[4];
    for (int r = 0; r < R; r++) {
        __m512 maximum = _mm512_set1_ps(_mm512_reduce_max_ps(largest[r]));
        __m512 total = _mm512_setzero_ps();
        for (size_t j = 0; j < length; j += 16) {
            __mmask16 mask = key_mask(lengths[r], j);
            __m512 e = _mm512_maskz_mov_ps(mask, exp_clamped(_mm512_sub_ps(_mm512_loadu_ps(scores + r * score_stride + j), maximum)));
            _mm512_storeu_ps(scores + r * score_stride + j, e);
            total = _mm512_add_ps(total, e);
        }
        inverse[r] = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(total));
    }
    for (size_t c0 = 0; c0 < chunks; c0 += 2) {
        if (chunks - c0 >= 2) {
            attention_context(v, v_stride, outputs, R, 2, c0, length, masks, scores, score_stride, inverse);
        } else {
            attention_context(v, v_stride, outputs, R, 1, c0, length, masks, scores, score_stride, inverse);
        }
    }
}

/// attention_rows for `count` query vectors in blocks of 4 (the last of 1–3): vector t at
/// queries[t], seeing lengths[t] keys, written to outputs[t].
AVX512 static void attention_vectors(const float *const *queries, float *const *outputs, const size_t *lengths, size_t count,
                                     const float *v, size_t v_stride, size_t head_size, float scale, const float *keys, size_t row_stride,
                                     size_t tile_stride, size_t score_stride, float *scores) {
    __mmask16 masks[8];
    for (size_t c = 0; c < (head_size + 15) / 16; c++) masks[c] = tail_mask(head_size - c * 16);
    size_t t = 0;
#define ATTENTION_ROWS(R) \
    attention_rows(queries + t, outputs + t, lengths + t, R, v, v_stride, head_size, scale, keys, row_stride, tile_stride, score_stride, masks, \
                   scores)
    for (; t + 4 <= count; t += 4) ATTENTION_ROWS(4);
    switch (count - t) {
    case 3: ATTENTION_ROWS(3); break;
    case 2: ATTENTION_ROWS(2); break;
    case 1: ATTENTION_ROWS(1); break;
    default: break;
    }
#undef ATTENTION_ROWS
}

/// The most query vectors one call of attention_vectors takes.
#define ATTENTION_VECTORS 64

/// Rows [row_begin, row_end) of `group` heads sharing keys and values: the query of row r and
/// head g at q + r * q_stride + g * head_size (its context at the same offset from out), seeing
/// start + r + 1 keys when `causal`, else all `visible`; keys transposed in tiles (see
/// attention_rows), the scores of 4 vectors in `scores` (4 × visible rounded up to 16 floats).
AVX512 static void attention_over_keys(const float *q, size_t q_stride, const float *keys, size_t row_stride, size_t tile_stride,
                                       const float *v, size_t v_stride,
                                       size_t head_size, size_t group, int causal, size_t start, size_t visible, size_t row_begin,
                                       size_t row_end, float scale, float *scores, float *out) {
    const size_t score_stride = (visible + 15) & ~(size_t)15;
    const float *queries[ATTENTION_VECTORS];
    float *outputs[ATTENTION_VECTORS];
    size_t lengths[ATTENTION_VECTORS];
    size_t count = 0;
    for (size_t row = row_begin; row < row_end; row++) {
        for (size_t g = 0; g < group; g++) {
            queries[count] = q + row * q_stride + g * head_size;
            outputs[count] = out + row * q_stride + g * head_size;
            lengths[count] = causal ? start + row + 1 : visible;
            if (++count == ATTENTION_VECTORS) {
                attention_vectors(queries, outputs, lengths, count, v, v_stride, head_size, scale, keys, row_stride, tile_stride, score_stride,
                                  scores);
                count = 0;
            }
        }
    }
    attention_vectors(queries, outputs, lengths, count, v, v_stride, head_size, scale, keys, row_stride, tile_stride, score_stride,
                                  scores);
}

AVX512 void shrink_attention_head_f32(const float *q, const float *k, const float *v, size_t length, size_t head_size, size_t stride,
                                      float scale, float *scratch, float *out) {
    const size_t padded = (length + 15) & ~(size_t)15;
    float *keys = scratch + 4 * padded;
    shrink_transpose_keys(k, length, head_size, stride, padded, keys);
    attention_over_keys(q, stride, keys, padded, 16, v, stride, head_size, 1, 0, 0, length, 0, length, scale, scratch, out);
}

AVX512 void shrink_causal_attention_f32(const float *q, size_t q_stride, const float *keys, const float *v, size_t v_stride,
                                        size_t head_size, size_t group, size_t start, size_t row_begin, size_t row_end, float scale,
                                        float *scratch, float *out) {
    attention_over_keys(q, q_stride, keys, 16, 16 * head_size, v, v_stride, head_size, group, 1, start, start + row_end, row_begin, row_end,
                        scale, scratch, out);
}

AVX512 void shrink_gemm_nt_f32(const float *w, size_t rows_w, const float *x, size_t rows_x, size_t n, float *out, size_t ldo) {
    size_t r = 0;
    for (; r + 4 <= rows_w; r += 4) {
        size_t m = 0;
        for (; m + 4 <= rows_x; m += 4) {
            __m512 acc[4][4];
            for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
            for (size_t k = 0; k < n; k += 16) {
                __mmask16 mask = tail_mask(n - k);
                __m512 wv[4], xv[4];
                for (int i = 0; i < 4; i++) wv[i] = _mm512_maskz_loadu_ps(mask, w + (r + i) * n + k);
                for (int j = 0; j < 4; j++) xv[j] = _mm512_maskz_loadu_ps(mask, x + (m + j) * n + k);
                for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) acc[i][j] = _mm512_fmadd_ps(wv[i], xv[j], acc[i][j]);
            }
            for (int i = 0; i < 4; i++) for (int j = 0; j < 4; j++) out[(m + j) * ldo + r + i] = _mm512_reduce_add_ps(acc[i][j]);
        }
        for (; m < rows_x; m++) {
            for (int i = 0; i < 4; i++) out[m * ldo + r + i] = shrink_dot_f32(w + (r + i) * n, x + m * n, n);
        }
    }
    for (; r < rows_w; r++) {
        for (size_t m = 0; m < rows_x; m++) out[m * ldo + r] = shrink_dot_f32(w + r * n, x + m * n, n);
    }
}

/// 16 half-precision (F16, or BF16 when bf16 is set) values as floats.
AVX512 static inline __m512 widen_half(const uint16_t *values, int bf16, __mmask16 mask) {
    __m256i bits = _mm256_maskz_loadu_epi16(mask, values);
    if (bf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
    return _mm512_cvtph_ps(bits);
}

AVX512 void shrink_decode_half(const uint16_t *values, size_t n, int bf16, float *out) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 mask = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(out + i, mask, widen_half(values + i, bf16, mask));
    }
}

AVX512 float shrink_dot_half(const uint16_t *values, const float *x, size_t n, int bf16) {
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        sum0 = _mm512_fmadd_ps(widen_half(values + i, bf16, 0xFFFF), _mm512_loadu_ps(x + i), sum0);
        sum1 = _mm512_fmadd_ps(widen_half(values + i + 16, bf16, 0xFFFF), _mm512_loadu_ps(x + i + 16), sum1);
    }
    for (; i < n; i += 16) {
        __mmask16 mask = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        sum0 = _mm512_fmadd_ps(widen_half(values + i, bf16, mask), _mm512_maskz_loadu_ps(mask, x + i), sum0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
}

AVX512 void shrink_add_layer_norm_f32(float *x, const float *residual, size_t rows, size_t n, const float *gamma,
                                      const float *beta, float epsilon) {
    for (size_t row = 0; row < rows; row++) {
        float *line = x + row * n;
        const float *extra = residual ? residual + row * n : NULL;
        __m512 sum = _mm512_setzero_ps();
        for (size_t i = 0; i < n; i += 16) {
            __mmask16 mask = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
            __m512 v = _mm512_maskz_loadu_ps(mask, line + i);
            if (extra) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, extra + i));
            _mm512_mask_storeu_ps(line + i, mask, v);
            sum = _mm512_add_ps(sum, v);
        }
        float mean = _mm512_reduce_add_ps(sum) / (float)n;
        __m512 center = _mm512_set1_ps(mean), squares = _mm512_setzero_ps();
        for (size_t i = 0; i < n; i += 16) {
            __mmask16 mask = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
            __m512 delta = _mm512_maskz_sub_ps(mask, _mm512_maskz_loadu_ps(mask, line + i), center);
            squares = _mm512_fmadd_ps(delta, delta, squares);
        }
        __m512 inverse = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(squares) / (float)n + epsilon));
        for (size_t i = 0; i < n; i += 16) {
            __mmask16 mask = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
            __m512 normalized = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, line + i), center), inverse);
            __m512 y = _mm512_fmadd_ps(normalized, _mm512_maskz_loadu_ps(mask, gamma + i), _mm512_maskz_loadu_ps(mask, beta + i));
            _mm512_mask_storeu_ps(line + i, mask, y);
        }
    }
}

AVX512 float shrink_dot_f32(const float *a, const float *b, size_t n) {
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        sum0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), sum0);
        sum1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), sum1);
    }
    if (i + 16 <= n) {
        sum0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), sum0);
        i += 16;
    }
    if (i < n) {
        __mmask16 mask = (__mmask16)((1u << (n - i)) - 1);
        sum1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i), _mm512_maskz_loadu_ps(mask, b + i), sum1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
}

#else

int shrink_cpu_has_avx512(void) { return 0; }
void shrink_decode_affine_u8(const uint8_t *c, size_t n, const float *s, const float *o, size_t b, float *out) {
    (void)c; (void)n; (void)s; (void)o; (void)b; (void)out;
}
void shrink_decode_affine_u4(const uint8_t *c, size_t n, const float *s, const float *o, size_t b, float *out) {
    (void)c; (void)n; (void)s; (void)o; (void)b; (void)out;
}
void shrink_decode_lut_u8(const uint8_t *i, size_t n, const float *l, float *out) { (void)i; (void)n; (void)l; (void)out; }
void shrink_decode_lut_u4(const uint8_t *i, size_t n, const float *l, float *out) { (void)i; (void)n; (void)l; (void)out; }
float shrink_dot_f32(const float *a, const float *b, size_t n) { (void)a; (void)b; (void)n; return 0; }
void shrink_gelu_f32(float *x, size_t n) { (void)x; (void)n; }
void shrink_swiglu_f32(float *gate, const float *up, size_t n) { (void)gate; (void)up; (void)n; }
void shrink_decode_half(const uint16_t *v, size_t n, int bf16, float *out) { (void)v; (void)n; (void)bf16; (void)out; }
float shrink_dot_half(const uint16_t *v, const float *x, size_t n, int bf16) { (void)v; (void)x; (void)n; (void)bf16; return 0; }
void shrink_add_layer_norm_f32(float *x, const float *r, size_t rows, size_t n, const float *g, const float *b, float e) {
    (void)x; (void)r; (void)rows; (void)n; (void)g; (void)b; (void)e;
}
float shrink_dot_affine_u8(const uint8_t *c, const float *x, size_t n, const float *s, const float *o, size_t b) {
    (void)c; (void)x; (void)n; (void)s; (void)o; (void)b; return 0;
}
float shrink_dot_affine_u4(const uint8_t *c, const float *x, size_t n, const float *s, const float *o, size_t b) {
    (void)c; (void)x; (void)n; (void)s; (void)o; (void)b; return 0;
}
float shrink_dot_lut_u4(const uint8_t *i, const float *x, size_t n, const float *l) { (void)i; (void)x; (void)n; (void)l; return 0; }
void shrink_gemm_nt_f32(const float *w, size_t rw, const float *x, size_t rx, size_t n, float *out, size_t ldo) {
    (void)w; (void)rw; (void)x; (void)rx; (void)n; (void)out; (void)ldo;
}
void shrink_attention_head_f32(const float *q, const float *k, const float *v, size_t length, size_t head_size, size_t stride,
                               float scale, float *scratch, float *out) {
    (void)q; (void)k; (void)v; (void)length; (void)head_size; (void)stride; (void)scale; (void)scratch; (void)out;
}
void shrink_causal_attention_f32(const float *q, size_t q_stride, const float *keys, const float *v, size_t v_stride, size_t head_size,
                                 size_t group, size_t start, size_t row_begin, size_t row_end, float scale, float *scratch, float *out) {
    (void)q; (void)q_stride; (void)keys; (void)v; (void)v_stride; (void)head_size; (void)group; (void)start;
    (void)row_begin; (void)row_end; (void)scale; (void)scratch; (void)out;
}
void shrink_decode_sparse(const uint8_t *m, const uint8_t *k, size_t n, const float *l, size_t ls, const float *s, const float *o,
                          size_t b, float *out) {
    (void)m; (void)k; (void)n; (void)l; (void)ls; (void)s; (void)o; (void)b; (void)out;
}

#endif
