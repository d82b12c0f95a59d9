// Integer dot products for weights whose block multipliers change every 16 inputs (ggml's Q6_K, Q2_K):
// byte or nibble panels as in shrink_kernels.h, one int8 multiplier per channel and 16 inputs, one float
// scale per channel and super-block, codes centered by an integer zero. Arithmetic in
// shrink_kernels.h (shrink_gemm_u8s8_half_blocks); the Swift twin is in Int8PanelKernels.swift.
#include "shrink_kernels.h"
#include "tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define AVX2 __attribute__((target("avx2,fma")))

/// The integer sum of each 16 activations of a row (kpad / 16 of them).
static void half_sums(const int8_t *xq, size_t kpad, int32_t *sums) {
    for (size_t h = 0; h < kpad / 16; h++) {
        int32_t sum = 0;
        for (size_t i = 0; i < 16; i++) sum += xq[h * 16 + i];
        sums[h] = sum;
    }
}

#define INLINE static inline __attribute__((always_inline))

/// The integer dots of 16 channels with activation block `b` (32 inputs at `x`): `d0` over its
/// first 16 inputs, `d1` over the last 16, from byte panels (8 groups of 4 inputs) or nibble panels
/// (4 octets, each low nibbles then high nibbles).
VNNI INLINE void block_dots(const uint8_t *panel, int four_bit, size_t b, const int8_t *x, __m512i *d0, __m512i *d1) {
    __m512i first = _mm512_setzero_si512(), second = _mm512_setzero_si512();
    if (four_bit) {
        const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
        for (size_t j = 0; j < 4; j++) {
            _mm_prefetch((const char *)(panel + (b * 4 + j) * 64 + SHRINK_PREFETCH_BYTES), _MM_HINT_T0);
            __m512i v = _mm512_loadu_si512(panel + (b * 4 + j) * 64);
            int32_t x_low, x_high;
            __builtin_memcpy(&x_low, x + 8 * j, 4);
            __builtin_memcpy(&x_high, x + 8 * j + 4, 4);
            __m512i *d = j < 2 ? &first : &second;
            *d = _mm512_dpbusd_epi32(*d, _mm512_and_si512(v, low_nibbles), _mm512_set1_epi32(x_low));
            *d = _mm512_dpbusd_epi32(*d, _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibbles), _mm512_set1_epi32(x_high));
        }
    } else {
        for (size_t j = 0; j < 4; j++) {
            _mm_prefetch((const char *)(panel + (b * 8 + j) * 64 + SHRINK_PREFETCH_BYTES), _MM_HINT_T0);
            _mm_prefetch((const char *)(panel + (b * 8 + 4 + j) * 64 + SHRINK_PREFETCH_BYTES), _MM_HINT_T0);
            int32_t x0, x1;
            __builtin_memcpy(&x0, x + 4 * j, 4);
            __builtin_memcpy(&x1, x + 16 + 4 * j, 4);
            first = _mm512_dpbusd_epi32(first, _mm512_loadu_si512(panel + (b * 8 + j) * 64), _mm512_set1_epi32(x0));
            second = _mm512_dpbusd_epi32(second, _mm512_loadu_si512(panel + (b * 8 + 4 + j) * 64), _mm512_set1_epi32(x1));
        }
    }
    *d0 = first;
    *d1 = second;
}

VNNI INLINE void half_blocks(const uint8_t *w, int four_bit, const int8_t *multipliers, const float *super_scales, int32_t zero,
                             const uint8_t *offset_multipliers, const float *super_offsets,
                             size_t n, size_t kpad, size_t blocks_per_super, size_t panel_begin, size_t panel_end,
                             const int8_t *xq, const float *xscales, size_t rows, float *y, size_t ldy, const float *bias) {
    const size_t blocks = kpad / 32, supers = blocks / blocks_per_super;
    const size_t panel_bytes = four_bit ? kpad * 8 : kpad * 16;
    int32_t sums[kpad / 16];
    for (size_t m = 0; m < rows; m++) {
        const int8_t *row = xq + m * kpad;
        half_sums(row, kpad, sums);
        for (size_t p = panel_begin; p < panel_end; p++) {
            const uint8_t *panel = w + p * panel_bytes;
            const int8_t *panel_multipliers = multipliers + p * (kpad / 16) * 16;
            __m512 acc = _mm512_setzero_ps();
            for (size_t s = 0; s < supers; s++) {
                __m512 part = _mm512_setzero_ps(), offset_part = _mm512_setzero_ps();
                for (size_t b = s * blocks_per_super; b < (s + 1) * blocks_per_super; b++) {
                    __m512i d0, d1;
                    _mm_prefetch((const char *)(panel_multipliers + 2 * b * 16 + SHRINK_PREFETCH_BYTES / 16), _MM_HINT_T0);
                    block_dots(panel, four_bit, b, row + b * 32, &d0, &d1);
                    d0 = _mm512_sub_epi32(d0, _mm512_set1_epi32(zero * sums[2 * b]));
                    d1 = _mm512_sub_epi32(d1, _mm512_set1_epi32(zero * sums[2 * b + 1]));
                    __m512i m0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(panel_multipliers + 2 * b * 16)));
                    __m512i m1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(panel_multipliers + (2 * b + 1) * 16)));
                    __m512i dot = _mm512_add_epi32(_mm512_mullo_epi32(d0, m0), _mm512_mullo_epi32(d1, m1));
                    part = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(xscales[m * blocks + b]), part);
                    if (offset_multipliers) {
                        const uint8_t *k = offset_multipliers + p * (kpad / 16) * 16;
                        __m512i k0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(k + 2 * b * 16)));
                        __m512i k1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(k + (2 * b + 1) * 16)));
                        __m512i sum = _mm512_add_epi32(_mm512_mullo_epi32(k0, _mm512_set1_epi32(sums[2 * b])),
                                                       _mm512_mullo_epi32(k1, _mm512_set1_epi32(sums[2 * b + 1])));
                        offset_part = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(xscales[m * blocks + b]), offset_part);
                    }
                }
                acc = _mm512_fmadd_ps(part, _mm512_loadu_ps(super_scales + (p * supers + s) * 16), acc);
                if (offset_multipliers) {
                    acc = _mm512_fnmadd_ps(offset_part, _mm512_loadu_ps(super_offsets + (p * supers + s) * 16), acc);
                }
            }
            size_t valid = n - p * 16 < 16 ? n - p * 16 : 16;
            __mmask16 mask = (__mmask16)((1u << valid) - 1);
            if (bias) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(mask, bias + p * 16));
            _mm512_mask_storeu_ps(y + m * ldy + p * 16, mask, acc);
        }
    }
}

VNNI void shrink_gemm_u8s8_half_blocks(const uint8_t *w, int four_bit, const int8_t *multipliers, const float *super_scales, int32_t zero,
                                       const uint8_t *offset_multipliers, const float *super_offsets,
                                       size_t n, size_t kpad, size_t blocks_per_super, size_t panel_begin, size_t panel_end,
                                       const int8_t *xq, const float *xscales, size_t rows, float *y, size_t ldy, const float *bias) {
    if (four_bit) {
        half_blocks(w, 1, multipliers, super_scales, zero, offset_multipliers, super_offsets, n, kpad, blocks_per_super, panel_begin,
                    panel_end, xq, xscales, rows, y, ldy, bias);
    } else {
        half_blocks(w, 0, multipliers, super_scales, zero, offset_multipliers, super_offsets, n, kpad, blocks_per_super, panel_begin,
                    panel_end, xq, xscales, rows, y, ldy, bias);
    }
}

/// 8 channels' dot of half `h` (16 inputs at `x`) of activation block `b`: `vpmaddubsw` (codes
/// ≤ 63, so no pair sum saturates), then `vpmaddwd` by ones; from byte panels (4 groups of 4
/// inputs) or nibble panels (2 octets, each low nibbles then high nibbles).
AVX2 static inline __m256i half_dot8(const uint8_t *panel, int four_bit, size_t b, size_t h, size_t lane_offset, const int8_t *x) {
    __m256i dot = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
    for (size_t j = 0; j < (four_bit ? 2 : 4); j++) {
        int32_t word;
        __builtin_memcpy(&word, x + (four_bit ? 8 : 4) * j, 4);
        __m256i pairs;
        if (four_bit) {
            int32_t high_word;
            __builtin_memcpy(&high_word, x + 8 * j + 4, 4);
            __m256i codes = _mm256_loadu_si256((const __m256i *)(panel + (b * 4 + 2 * h + j) * 64 + lane_offset));
            pairs = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(codes, low_nibbles), _mm256_set1_epi32(word)),
                                     _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(codes, 4), low_nibbles),
                                                          _mm256_set1_epi32(high_word)));
        } else {
            __m256i codes = _mm256_loadu_si256((const __m256i *)(panel + (b * 8 + 4 * h + j) * 64 + lane_offset));
            pairs = _mm256_maddubs_epi16(codes, _mm256_set1_epi32(word));
        }
        dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, ones));
    }
    return dot;
}

AVX2 void shrink_gemm_u8s8_half_blocks_avx2(const uint8_t *w, int four_bit, const int8_t *multipliers, const float *super_scales, int32_t zero,
                                       const uint8_t *offset_multipliers, const float *super_offsets,
                                            size_t n, size_t kpad, size_t blocks_per_super, size_t panel_begin, size_t panel_end,
                                            const int8_t *xq, const float *xscales, size_t rows, float *y, size_t ldy, const float *bias) {
    const size_t blocks = kpad / 32, supers = blocks / blocks_per_super;
    int32_t sums[kpad / 16];
    for (size_t m = 0; m < rows; m++) {
        const int8_t *row = xq + m * kpad;
        half_sums(row, kpad, sums);
        for (size_t p = panel_begin; p < panel_end; p++) {
            const uint8_t *panel = w + p * (four_bit ? kpad * 8 : kpad * 16);
            const int8_t *panel_multipliers = multipliers + p * (kpad / 16) * 16;
            float out[16];
            for (size_t half = 0; half < 2; half++) {
                const size_t lanes = half * 8;
                __m256 acc = _mm256_setzero_ps();
                for (size_t s = 0; s < supers; s++) {
                    __m256 part = _mm256_setzero_ps(), offset_part = _mm256_setzero_ps();
                    for (size_t b = s * blocks_per_super; b < (s + 1) * blocks_per_super; b++) {
                        __m256i d0 = half_dot8(panel, four_bit, b, 0, lanes * 4, row + b * 32);
                        __m256i d1 = half_dot8(panel, four_bit, b, 1, lanes * 4, row + b * 32 + 16);
                        d0 = _mm256_sub_epi32(d0, _mm256_set1_epi32(zero * sums[2 * b]));
                        d1 = _mm256_sub_epi32(d1, _mm256_set1_epi32(zero * sums[2 * b + 1]));
                        __m256i m0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(panel_multipliers + 2 * b * 16 + lanes)));
                        __m256i m1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(panel_multipliers + (2 * b + 1) * 16 + lanes)));
                        __m256i dot = _mm256_add_epi32(_mm256_mullo_epi32(d0, m0), _mm256_mullo_epi32(d1, m1));
                        part = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(xscales[m * blocks + b]), part);
                        if (offset_multipliers) {
                            const uint8_t *k = offset_multipliers + p * (kpad / 16) * 16 + lanes;
                            __m256i k0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(k + 2 * b * 16)));
                            __m256i k1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(k + (2 * b + 1) * 16)));
                            __m256i sum = _mm256_add_epi32(_mm256_mullo_epi32(k0, _mm256_set1_epi32(sums[2 * b])),
                                                           _mm256_mullo_epi32(k1, _mm256_set1_epi32(sums[2 * b + 1])));
                            offset_part = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(xscales[m * blocks + b]), offset_part);
                        }
                    }
                    acc = _mm256_fmadd_ps(part, _mm256_loadu_ps(super_scales + (p * supers + s) * 16 + lanes), acc);
                    if (offset_multipliers) {
                        acc = _mm256_fnmadd_ps(offset_part, _mm256_loadu_ps(super_offsets + (p * supers + s) * 16 + lanes), acc);
                    }
                }
                _mm256_storeu_ps(out + lanes, acc);
            }
            for (size_t lane = 0; lane < 16 && p * 16 + lane < n; lane++) {
                y[m * ldy + p * 16 + lane] = bias ? out[lane] + bias[p * 16 + lane] : out[lane];
            }
        }
    }
}

#else

void shrink_gemm_u8s8_half_blocks(const uint8_t *w, int four_bit, const int8_t *multipliers, const float *super_scales, int32_t zero,
                                  const uint8_t *offset_multipliers, const float *super_offsets, size_t n, size_t kpad, size_t blocks_per_super, size_t panel_begin, size_t panel_end,
                                  const int8_t *xq, const float *xscales, size_t rows, float *y, size_t ldy, const float *bias) {
    (void)w, (void)four_bit, (void)multipliers, (void)super_scales, (void)zero, (void)offset_multipliers, (void)super_offsets, (void)n, (void)kpad, (void)blocks_per_super, (void)panel_begin;
    (void)panel_end, (void)xq, (void)xscales, (void)rows, (void)y, (void)ldy, (void)bias;
}

void shrink_gemm_u8s8_half_blocks_avx2(const uint8_t *w, int four_bit, const int8_t *multipliers, const float *super_scales, int32_t zero,
                                       const uint8_t *offset_multipliers, const float *super_offsets,
                                       size_t n, size_t kpad, size_t blocks_per_super, size_t panel_begin, size_t panel_end,
                                       const int8_t *xq, const float *xscales, size_t rows, float *y, size_t ldy, const float *bias) {
    shrink_gemm_u8s8_half_blocks(w, four_bit, multipliers, super_scales, zero, offset_multipliers, super_offsets, n, kpad, blocks_per_super, panel_begin, panel_end, xq, xscales,
                                 rows, y, ldy, bias);
}

#endif
