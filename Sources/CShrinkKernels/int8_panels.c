// Integer dot products on u8 weight codes and int8 activations (AVX-512 VNNI `vpdpbusd`).
// Layouts and arithmetic are described in shrink_kernels.h; the Swift twins live in
// ShrinkKernels/Int8PanelKernels.swift and are tested against these.
#include "shrink_kernels.h"
#include "tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

// int8_panels_vbmi.c includes this file with SHRINK_VBMI defined: the kernels compiled for AVX-512
// VBMI as well, under the name shrink_gemm_u8s8_panels_vbmi (quad panels look their entries up
// with `vpermi2b` there, and gather them here; the same results).
#ifdef SHRINK_VBMI
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi")))
#define GEMM_PANELS shrink_gemm_u8s8_panels_vbmi
#else
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define GEMM_PANELS shrink_gemm_u8s8_panels
#endif
#define INLINE static inline __attribute__((always_inline))
#define AVX512_READ __attribute__((target("avx512f")))

#ifndef SHRINK_VBMI
int shrink_cpu_has_avx512_vnni(void) {
    __builtin_cpu_init();
    return shrink_cpu_has_avx512() && __builtin_cpu_supports("avx512vnni");
}

int shrink_cpu_has_avx512_vbmi(void) {
    __builtin_cpu_init();
    return shrink_cpu_has_avx512_vnni() && __builtin_cpu_supports("avx512vbmi");
}

VNNI void shrink_quantize_rows_s8(const float *x, size_t rows, size_t k, size_t ldx, size_t kpad, int8_t *xq,
                                  float *scales, float *sums, int32_t *integer_sums) {
    const size_t blocks = kpad / 32;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (size_t m = 0; m < rows; m++) {
        const float *row = x + m * ldx;
        for (size_t b = 0; b < blocks; b++) {
            size_t start = b * 32;
            size_t count = start >= k ? 0 : (k - start < 32 ? k - start : 32);
            __mmask16 mask0 = count >= 16 ? 0xFFFF : (__mmask16)((1u << count) - 1);
            __mmask16 mask1 = count <= 16 ? 0 : (count >= 32 ? 0xFFFF : (__mmask16)((1u << (count - 16)) - 1));
            __m512 v0 = _mm512_maskz_loadu_ps(mask0, row + start);
            __m512 v1 = _mm512_maskz_loadu_ps(mask1, row + start + 16);
            __m512 magnitude = _mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1));
            float largest = _mm512_reduce_max_ps(magnitude);
            float inverse = largest > 0 ? 127.0f / largest : 0.0f;
            __m512 factor = _mm512_set1_ps(inverse);
            __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, factor));
            __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, factor));
            _mm_storeu_si128((__m128i *)(xq + m * kpad + start), _mm512_cvtsepi32_epi8(q0));
            _mm_storeu_si128((__m128i *)(xq + m * kpad + start + 16), _mm512_cvtsepi32_epi8(q1));
            float scale = largest / 127.0f;
            scales[m * blocks + b] = scale;
            int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
            integer_sums[m * blocks + b] = sum;
            sums[m * blocks + b] = scale * (float)sum;
        }
    }
}
#endif

/// The most rows one register tile holds. Packed (2-, 3- and 4-bit) panels are unpacked in every tile, so they go in
/// tiles of one panel and up to this many rows (MiniLM batch 1, ~9 tokens, 1 thread: palette 4-bit
/// 1,200–1,230 sentences/s against 1,090–1,100 in tiles of 4 rows by 2 panels; 12 rows no faster).
#define MAX_TILE_ROWS 8

/// The channel of each byte of a 64-byte group of codes (byte 4r + i belongs to channel r).
static const uint8_t channel_of_byte[64] = {0,  0,  0,  0,  1,  1,  1,  1,  2,  2,  2,  2,  3,  3,  3,  3,  4,  4,  4,  4,  5,  5,
                                             5,  5,  6,  6,  6,  6,  7,  7,  7,  7,  8,  8,  8,  8,  9,  9,  9,  9,  10, 10, 10, 10,
                                             11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15};

/// One byte per channel (16) spread over a 64-byte group of codes: byte 4r + i gets channel r's.
VNNI INLINE __m512i channel_bytes(__m128i values) {
    // vpshufb picks within 128-bit lanes, each of which holds all 16 values.
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(values), _mm512_loadu_si512(channel_of_byte));
}

/// Bit `from` of every byte of `v` moved to bit 2 (other bits: anything). Byte-wise because a
/// 16-bit shift by at most 2 left or 5 right moves bit 2 within its byte.
VNNI INLINE __m512i bit_to_2(__m512i v, int from) {
    return from >= 2 ? _mm512_srli_epi16(v, (unsigned)(from - 2)) : _mm512_slli_epi16(v, (unsigned)(2 - from));
}

/// A panel's table as the kernels hold it: 16 bytes in each 128-bit lane (`vpshufb`); for pair
/// panels their 16 entries of two bytes, twice (`vpermw` reads 5 bits of each index); for 64-entry
/// pair panels entries 0..31 (`upper`: 32..63, for `vpermi2w`, which reads 6 bits); for 2:4 panels
/// the 16 bytes in each lane and (`upper`) the pruned weights' code in every byte.
VNNI INLINE __m512i panel_table(const uint8_t *lut, int bits, __m512i *upper) {
    if (bits == SHRINK_QUAD_PANELS || bits == SHRINK_PAIR256_PANELS) return *upper = _mm512_setzero_si512();
    *upper = bits == SHRINK_PAIR64_PANELS ? _mm512_loadu_si512(lut + 64)
             : bits == SHRINK_SPARSE24_PANELS ? _mm512_set1_epi8((char)lut[16]) : _mm512_setzero_si512();
    if (bits == SHRINK_PAIR64_PANELS) return _mm512_loadu_si512(lut);
    if (bits == SHRINK_PAIR_PANELS) return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)lut));
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)lut));
}

/// The low plane's table of panel `panel` (two planes): for 2:4 panels laid out like their LUT
/// (`panel_table`, `upper` the pruned code's low byte), else its 16 bytes in each 128-bit lane.
VNNI INLINE __m512i low_panel_table(const uint8_t *low, int bits, size_t panel, __m512i *upper) {
    if (bits == SHRINK_SPARSE24_PANELS) return panel_table(low + panel * shrink_low_plane_bytes(0, bits), bits, upper);
    *upper = _mm512_setzero_si512();
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(low + panel * shrink_low_plane_bytes(0, bits))));
}

#ifdef SHRINK_VBMI
/// A quad panel's LUT (entry e's codes at 4e..4e + 3) as four planes of 256 bytes (plane i: code i
/// of every entry), what `quad_plane` looks up.
VNNI INLINE void quad_planes(const uint8_t *lut, uint8_t *planes) {
    // Per 16 entries: code i of each to bytes 16i..16i + 15.
    const __m512i split = _mm512_set_epi32(0x3F3B3733, 0x2F2B2723, 0x1F1B1713, 0x0F0B0703, 0x3E3A3632, 0x2E2A2622, 0x1E1A1612,
                                           0x0E0A0602, 0x3D393531, 0x2D292521, 0x1D191511, 0x0D090501, 0x3C383430, 0x2C282420,
                                           0x1C181410, 0x0C080400);
    for (int m = 0; m < 16; m++) {
        const __m512i codes = _mm512_permutexvar_epi8(split, _mm512_loadu_si512(lut + 64 * m));
        _mm_storeu_si128((__m128i *)(planes + 16 * m), _mm512_castsi512_si128(codes));
        _mm_storeu_si128((__m128i *)(planes + 256 + 16 * m), _mm512_extracti32x4_epi32(codes, 1));
        _mm_storeu_si128((__m128i *)(planes + 512 + 16 * m), _mm512_extracti32x4_epi32(codes, 2));
        _mm_storeu_si128((__m128i *)(planes + 768 + 16 * m), _mm512_extracti32x4_epi32(codes, 3));
    }
}

/// Per 32 entries of a 256-entry pair LUT, the first codes to bytes 0..31 and the second to 32..63.
static const uint8_t pair_split[64] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42,
                                       44, 46, 48, 50, 52, 54, 56, 58, 60, 62, 1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23,
                                       25, 27, 29, 31, 33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};

/// A 256-entry pair panel's LUT (entry e's codes at 2e, 2e + 1) as two planes of 256 bytes.
VNNI INLINE void pair_planes(const uint8_t *lut, uint8_t *planes) {
    const __m512i split = _mm512_loadu_si512(pair_split);
    for (int m = 0; m < 8; m++) {
        const __m512i codes = _mm512_permutexvar_epi8(split, _mm512_loadu_si512(lut + 64 * m));
        _mm256_storeu_si256((__m256i *)(planes + 32 * m), _mm512_castsi512_si256(codes));
        _mm256_storeu_si256((__m256i *)(planes + 256 + 32 * m), _mm512_extracti64x4_epi64(codes, 1));
    }
}

/// Code plane i of the 64 entries `indices` from `planes` (`quad_planes`, `pair_planes`): two
/// `vpermi2b` over 128 bytes each, chosen by the indices' top bit.
VNNI INLINE __m512i code_plane(const uint8_t *planes, int i, __m512i indices, __mmask64 upper_half) {
    const uint8_t *plane = planes + 256 * i;
    const __m512i low = _mm512_permutex2var_epi8(_mm512_loadu_si512(plane), indices, _mm512_loadu_si512(plane + 64));
    const __m512i high = _mm512_permutex2var_epi8(_mm512_loadu_si512(plane + 128), indices, _mm512_loadu_si512(plane + 192));
    return _mm512_mask_blend_epi8(upper_half, low, high);
}
#else
/// Quad k of a quad panel's group of 16 inputs (64 index bytes at `group`): each of the 16 channels'
/// entries gathered from the LUT's dwords, so that byte 4r + i is code i of channel r's entry.
VNNI INLINE __m512i quad_codes(const uint8_t *group, const uint8_t *lut, int k) {
    // Channel 4l + c's entry is byte 16l + 4k + c: dwords k, 4 + k, 8 + k, 12 + k, in order.
    const __m512i entries = _mm512_permutexvar_epi32(_mm512_setr_epi32(k, 4 + k, 8 + k, 12 + k, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                                                     _mm512_loadu_si512(group));
    return _mm512_i32gather_epi32(_mm512_cvtepu8_epi32(_mm512_castsi512_si128(entries)), lut, 4);
}
#endif

/// The four quads (inputs 4k..4k + 3, k = 0..3) of a quad panel's group of 16 inputs (64 index
/// bytes at `group`), from `lut` (with VBMI: its planes, `quad_planes`).
VNNI INLINE void quad_group(const uint8_t *group, const uint8_t *lut, __m512i quads[4]) {
#ifdef SHRINK_VBMI
    const __m512i indices = _mm512_loadu_si512(group);
    const __mmask64 upper_half = _mm512_movepi8_mask(indices);
    const __m512i p0 = code_plane(lut, 0, indices, upper_half), p1 = code_plane(lut, 1, indices, upper_half);
    const __m512i p2 = code_plane(lut, 2, indices, upper_half), p3 = code_plane(lut, 3, indices, upper_half);
    // The planes' bytes interleaved into dwords: per 128-bit lane l, entries 16l + 4k..16l + 4k + 3 in quad k.
    const __m512i low01 = _mm512_unpacklo_epi8(p0, p1), low23 = _mm512_unpacklo_epi8(p2, p3);
    const __m512i high01 = _mm512_unpackhi_epi8(p0, p1), high23 = _mm512_unpackhi_epi8(p2, p3);
    quads[0] = _mm512_unpacklo_epi16(low01, low23);
    quads[1] = _mm512_unpackhi_epi16(low01, low23);
    quads[2] = _mm512_unpacklo_epi16(high01, high23);
    quads[3] = _mm512_unpackhi_epi16(high01, high23);
#else
    for (int k = 0; k < 4; k++) quads[k] = quad_codes(group, lut, k);
#endif
}

/// Octet t of a 256-entry pair panel (64 index bytes at `octet`), from `lut` (entry e's two codes
/// at 2e, 2e + 1; with VBMI its planes, `pair_planes`).
VNNI INLINE void pair256_octet(const uint8_t *octet, const uint8_t *lut, __m512i *lo, __m512i *hi) {
    const __m512i v = _mm512_loadu_si512(octet);
#ifdef SHRINK_VBMI
    // Both codes of all 64 entries, then interleaved: per 128-bit lane, bytes 0..7 make the first quad's words.
    const __mmask64 upper_half = _mm512_movepi8_mask(v);
    const __m512i first = code_plane(lut, 0, v, upper_half), second = code_plane(lut, 1, v, upper_half);
    *lo = _mm512_unpacklo_epi8(first, second);
    *hi = _mm512_unpackhi_epi8(first, second);
#else
    // Each half's 32 indices widened to words and looked up in the LUT's 256 words, 64 at a time
    // (`vpermi2w`), chosen by the indices' two top bits. Per 128-bit lane l, bytes 0..7 are the
    // first quad's and 8..15 the second's.
    const __m512i halves = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), v);
    const __m512i indices[2] = {_mm512_cvtepu8_epi16(_mm512_castsi512_si256(halves)), _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(halves, 1))};
    __m512i *out[2] = {lo, hi};
    for (int q = 0; q < 2; q++) {
        __m512i codes[4];
        for (int j = 0; j < 4; j++)
            codes[j] = _mm512_permutex2var_epi16(_mm512_loadu_si512(lut + 128 * j), indices[q], _mm512_loadu_si512(lut + 128 * j + 64));
        const __mmask32 second = _mm512_test_epi16_mask(indices[q], _mm512_set1_epi16(0x40));
        const __mmask32 upper = _mm512_test_epi16_mask(indices[q], _mm512_set1_epi16(0x80));
        *out[q] = _mm512_mask_blend_epi16(upper, _mm512_mask_blend_epi16(second, codes[0], codes[1]), _mm512_mask_blend_epi16(second, codes[2], codes[3]));
    }
#endif
}

/// The codes of octet t (inputs 8t..8t+3 in `lo`, 8t+4..8t+7 in `hi`, one byte each) of activation
/// block `block` of a nibble, crumb or tribit panel (indices, for the caller's LUT), or of a pair
/// panel (codes: its entries looked up in `pairs` and `upper`, a `panel_table`); quad panels decode
/// two octets at a time (`quad_group`).
VNNI INLINE void octet_quads(const uint8_t *panel, int bits, __m512i pairs, __m512i upper, size_t block, int t, __m512i *lo, __m512i *hi) {
    if (bits == SHRINK_SPARSE24_PANELS) {
        const uint8_t *octet = panel + block * 192 + (size_t)t * 48;
        const __m512i nibble = _mm512_set1_epi8(0x0F);
        // Per channel, the byte of each input: its kept slot (0, 1) or 8, the pruned code's place;
        // plus 2c for the channel's slots in its 128-bit lane (c = channel % 4).
        const __m512i places = _mm512_setr_epi32(0x08080808, 0x08080800, 0x08080008, 0x08080100, 0x08000808, 0x08010800, 0x08010008, 0x08080808,
                                                 0x00080808, 0x01080800, 0x01080008, 0x08080808, 0x01000808, 0x08080808, 0x08080808, 0x08080808);
        const __m512i slots = _mm512_setr_epi32(0, 0x02020202, 0x04040404, 0x06060606, 0, 0x02020202, 0x04040404, 0x06060606, 0,
                                                0x02020202, 0x04040404, 0x06060606, 0, 0x02020202, 0x04040404, 0x06060606);
        const __m512i masks = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)octet));
        const __m512i lo_places = _mm512_add_epi8(_mm512_permutexvar_epi32(masks, places), slots);
        const __m512i hi_places = _mm512_add_epi8(_mm512_permutexvar_epi32(_mm512_srli_epi32(masks, 4), places), slots);
        // Kept indices of lane l (bytes 8l..8l+7) to bytes 0..7 of lane l, their codes through the
        // LUT, bytes 8..15 the pruned code.
        const __m512i kept = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3),
                                                      _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(octet + 16))));
        const __mmask64 low_halves = 0x00FF00FF00FF00FFull;
        const __m512i lo_codes = _mm512_mask_blend_epi8(low_halves, upper, _mm512_shuffle_epi8(pairs, _mm512_and_si512(kept, nibble)));
        const __m512i hi_codes =
            _mm512_mask_blend_epi8(low_halves, upper, _mm512_shuffle_epi8(pairs, _mm512_and_si512(_mm512_srli_epi16(kept, 4), nibble)));
        *lo = _mm512_shuffle_epi8(lo_codes, lo_places);
        *hi = _mm512_shuffle_epi8(hi_codes, hi_places);
        return;
    }
    if (bits == SHRINK_PAIR64_PANELS) {
        // Index bits 0..3 as in a pair panel; bits 4..5 from crumb 2 (t % 2) + quad of the pair's byte.
        const uint8_t *base = panel + block * 192;
        const __m512i words = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(base + (size_t)t * 32)));
        const __m512i crumbs = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(base + 128 + (size_t)(t / 2) * 32)));
        const __m512i nibble = _mm512_set1_epi16(0x000F);
        const int c = 2 * (t % 2);
        // Crumb c to bits 4..5: left by 4 - 2c (c = 0, 2), and crumb c + 1 left by 2 - 2c.
        const __m512i first = c == 0 ? _mm512_slli_epi16(crumbs, 4) : crumbs;
        const __m512i second = c == 0 ? _mm512_slli_epi16(crumbs, 2) : _mm512_srli_epi16(crumbs, 2);
        // (a & 0xF) | (b & ~0xF): ternary logic 0xE4 is "c ? a : b".
        *lo = _mm512_permutex2var_epi16(pairs, _mm512_ternarylogic_epi32(words, first, nibble, 0xE4), upper);
        *hi = _mm512_permutex2var_epi16(pairs, _mm512_ternarylogic_epi32(_mm512_srli_epi16(words, 4), second, nibble, 0xE4), upper);
        return;
    }
    if (bits == SHRINK_PAIR_PANELS) {
        // Word 2r + h: channel r's pairs at inputs 8t + 2h (low nibble) and 8t + 4 + 2h (high).
        const __m512i words = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(panel + block * 128 + (size_t)t * 32)));
        *lo = _mm512_permutexvar_epi16(words, pairs);
        *hi = _mm512_permutexvar_epi16(_mm512_srli_epi16(words, 4), pairs);
        return;
    }
    if (bits == 4) {
        const __m512i v = _mm512_loadu_si512(panel + block * 256 + (size_t)t * 64), mask = _mm512_set1_epi8(0x0F);
        *lo = _mm512_and_si512(v, mask);
        *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
        return;
    }
    const uint8_t *crumbs = panel + block * (bits == 2 ? 128 : 192);
    const __m512i v = _mm512_srli_epi16(_mm512_loadu_si512(crumbs + (size_t)(t / 2) * 64), 4 * (unsigned)(t % 2)), mask = _mm512_set1_epi8(0x03);
    *lo = _mm512_and_si512(v, mask);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 2), mask);
    if (bits == 3) {
        // Bit 2 of quad j's codes is bit j of the block's 64 high-bit bytes.
        const __m512i high = _mm512_loadu_si512(crumbs + 128), bit2 = _mm512_set1_epi8(0x04);
        *lo = _mm512_or_si512(*lo, _mm512_and_si512(bit_to_2(high, 2 * t), bit2));
        *hi = _mm512_or_si512(*hi, _mm512_and_si512(bit_to_2(high, 2 * t + 1), bit2));
    }
}

/// The low codes of the octet whose high codes (2:4 panels) or LUT indices (nibble, tribit and
/// crumb panels) `octet_quads` gave in `lo`, `hi`.
VNNI INLINE void low_octet_quads(const uint8_t *panel, int bits, __m512i low_table, __m512i low_upper, size_t block, int t, __m512i lo,
                                 __m512i hi, __m512i *low_lo, __m512i *low_hi) {
    if (bits == SHRINK_SPARSE24_PANELS) {
        octet_quads(panel, bits, low_table, low_upper, block, t, low_lo, low_hi);
        return;
    }
    *low_lo = _mm512_shuffle_epi8(low_table, lo);
    *low_hi = _mm512_shuffle_epi8(low_table, hi);
}

/// One register tile: `mr` activation rows times `np` panels of 16 output channels, over the
/// whole input. Integer sums per 32-input block are summed as floats times the activation block's
/// scale; each weight block's sum is multiplied by its weight scale and loses its offset times
/// the activations' block sums (centered byte panels run `centered_byte_tile`). Scaling once per weight block instead of once per activation
/// block: MiniLM int8 and palettes 5–7 % faster (1 thread, batch 1 and 32). With `low` (two planes:
/// the low LUTs of nibble panels, or the low byte panels, at the panels' offsets), a second dot per
/// row and panel takes the low bytes and each block's integer is (high << 8) + low.
VNNI INLINE void tile(const uint8_t *w, size_t panel_bytes, int np, int bits, const uint8_t *luts, const uint8_t *low,
                      size_t kpad, size_t blocks_per_wblock, const float *scales, const float *offsets, size_t panel_floats,
                      const int8_t *xq, const float *xscales, const float *xsums, int mr, float *y, size_t ldy, size_t n0, size_t n,
                      const float *bias) {
    const size_t blocks = kpad / 32;
    __m512i table[2], upper[2], low_table[2], low_upper[2];
    // What quad and 256-entry pair panels look their entries up in: their LUTs, or with VBMI their planes.
    const uint8_t *entries[2] = {NULL, NULL};
#ifdef SHRINK_VBMI
    uint8_t planes[2][1024] __attribute__((aligned(64)));
#endif
    for (int p = 0; p < np; p++) {
        if (bits == SHRINK_QUAD_PANELS || bits == SHRINK_PAIR256_PANELS) {
            entries[p] = luts + p * shrink_lut_bytes(bits);
#ifdef SHRINK_VBMI
            if (bits == SHRINK_QUAD_PANELS) quad_planes(entries[p], planes[p]);
            else pair_planes(entries[p], planes[p]);
            entries[p] = planes[p];
#endif
        }
        table[p] = luts ? panel_table(luts + p * shrink_lut_bytes(bits), bits, &upper[p]) : _mm512_setzero_si512();
        low_table[p] = luts && low ? low_panel_table(low, bits, (size_t)p, &low_upper[p]) : (low_upper[p] = _mm512_setzero_si512());
    }
    __m512 acc[MAX_TILE_ROWS][2];
    for (int m = 0; m < mr; m++)
        for (int p = 0; p < np; p++) acc[m][p] = _mm512_setzero_ps();
    size_t block = 0;
    for (size_t wb = 0; block < blocks; wb++) {
        __m512 scale[2];
        for (int p = 0; p < np; p++) scale[p] = _mm512_loadu_ps(scales + p * panel_floats + wb * 16);
        for (int p = 0; p < np; p++) _mm_prefetch((const char *)(scales + p * panel_floats + wb * 16 + SHRINK_PREFETCH_BYTES / 32), _MM_HINT_T0);
        for (int p = 0; p < np; p++) _mm_prefetch((const char *)(offsets + p * panel_floats + wb * 16 + SHRINK_PREFETCH_BYTES / 32), _MM_HINT_T0);
        float block_sum[MAX_TILE_ROWS];
        __m512 partial[MAX_TILE_ROWS][2];
        for (int m = 0; m < mr; m++) {
            block_sum[m] = 0;
            for (int p = 0; p < np; p++) partial[m][p] = _mm512_setzero_ps();
        }
        size_t end = block + blocks_per_wblock < blocks ? block + blocks_per_wblock : blocks;
        for (; block < end; block++) {
            __m512i dot[MAX_TILE_ROWS][2], low_dot[MAX_TILE_ROWS][2];
            for (int m = 0; m < mr; m++)
                for (int p = 0; p < np; p++) dot[m][p] = low_dot[m][p] = _mm512_setzero_si512();
            const int8_t *xb = xq + block * 32;
            if (bits < 8) {
                __m512i group_quads[2][4];
                for (int t = 0; t < 4; t++) {
                    __m512i lo[2], hi[2], low_lo[2], low_hi[2];
                    for (int p = 0; p < np; p++) {
                        if (bits == SHRINK_PAIR256_PANELS) {
                            pair256_octet(w + p * panel_bytes + (block * 4 + (size_t)t) * 64, entries[p], &lo[p], &hi[p]);
                        } else if (bits == SHRINK_QUAD_PANELS) {
                            // A group's four quads serve two octets.
                            if (t % 2 == 0) quad_group(w + p * panel_bytes + (block * 2 + (size_t)t / 2) * 64, entries[p], group_quads[p]);
                            lo[p] = group_quads[p][2 * (t % 2)];
                            hi[p] = group_quads[p][2 * (t % 2) + 1];
                        } else {
                            octet_quads(w + p * panel_bytes, bits, table[p], upper[p], block, t, &lo[p], &hi[p]);
                        }
                        if (luts && low)
                            low_octet_quads(w + p * panel_bytes, bits, low_table[p], low_upper[p], block, t, lo[p], hi[p], &low_lo[p], &low_hi[p]);
                        if (luts && !shrink_decodes_codes(bits)) {
                            lo[p] = _mm512_shuffle_epi8(table[p], lo[p]);
                            hi[p] = _mm512_shuffle_epi8(table[p], hi[p]);
                        }
                    }
                    for (int m = 0; m < mr; m++) {
                        __m512i x0 = _mm512_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8));
                        __m512i x1 = _mm512_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8 + 4));
                        for (int p = 0; p < np; p++) {
                            dot[m][p] = _mm512_dpbusd_epi32(dot[m][p], lo[p], x0);
                            dot[m][p] = _mm512_dpbusd_epi32(dot[m][p], hi[p], x1);
                            if (luts && low) {
                                low_dot[m][p] = _mm512_dpbusd_epi32(low_dot[m][p], low_lo[p], x0);
                                low_dot[m][p] = _mm512_dpbusd_epi32(low_dot[m][p], low_hi[p], x1);
                            }
                        }
                    }
                }
            } else {
                for (int q = 0; q < 8; q++) {
                    __m512i v[2], low_v[2];
                    for (int p = 0; p < np; p++) {
                        v[p] = _mm512_loadu_si512(w + p * panel_bytes + block * 512 + q * 64);
                        if (low) low_v[p] = _mm512_loadu_si512(low + p * panel_bytes + block * 512 + q * 64);
                    }
                    for (int m = 0; m < mr; m++) {
                        __m512i xv = _mm512_set1_epi32(*(const int32_t *)(xb + m * kpad + q * 4));
                        for (int p = 0; p < np; p++) {
                            dot[m][p] = _mm512_dpbusd_epi32(dot[m][p], v[p], xv);
                            if (low) low_dot[m][p] = _mm512_dpbusd_epi32(low_dot[m][p], low_v[p], xv);
                        }
                    }
                }
            }
            if (low)
                for (int m = 0; m < mr; m++)
                    for (int p = 0; p < np; p++) dot[m][p] = _mm512_add_epi32(_mm512_slli_epi32(dot[m][p], 8), low_dot[m][p]);
            for (int m = 0; m < mr; m++) {
                __m512 xs = _mm512_set1_ps(xscales[m * blocks + block]);
                block_sum[m] += xsums[m * blocks + block];
                for (int p = 0; p < np; p++) partial[m][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[m][p]), xs, partial[m][p]);
            }
        }
        for (int m = 0; m < mr; m++)
            for (int p = 0; p < np; p++) acc[m][p] = _mm512_fmadd_ps(partial[m][p], scale[p], acc[m][p]);
        for (int p = 0; p < np; p++) {
            __m512 offset = _mm512_loadu_ps(offsets + p * panel_floats + wb * 16);
            for (int m = 0; m < mr; m++) acc[m][p] = _mm512_fnmadd_ps(offset, _mm512_set1_ps(block_sum[m]), acc[m][p]);
        }
    }
    store_tile(acc, mr, np, y, ldy, n0, n, bias);
}

/// The most rows a centered byte tile holds.
#define CENTERED_BYTE_TILE_ROWS 4

/// One register tile of centered byte panels (codes q - z + 128, dots that start at -128 * sum(q_x)):
/// `mr` rows times `np` panels, the arithmetic of `tile` with `centered` and 8-bit codes, so the same
/// floats bit for bit. Each shape is a function of its own (`CENTERED_BYTE_TILE`): inlined into the
/// walk with every other kind of panel, the compiler kept the walk's pointers on the stack and the
/// tile reached 133–158 GMAC/s on MiniLM's shapes at 370 rows (AMD Zen 4, 1 thread), against 194–201
/// here. With `one_wblock` (one weight block per row, int8 per channel) the block sums go straight
/// to the store.
VNNI INLINE void centered_byte_tile(const uint8_t *w, size_t panel_bytes, size_t kpad, size_t blocks_per_wblock, const float *scales,
                                    size_t panel_floats, const int8_t *xq, const float *xscales, const int32_t *xisums, int mr, int np,
                                    int one_wblock, float *y, size_t ldy, size_t n0, size_t n, const float *bias) {
    const size_t blocks = kpad / 32;
    if (one_wblock) blocks_per_wblock = blocks;
    __m512 acc[CENTERED_BYTE_TILE_ROWS][2];
    for (int m = 0; m < mr; m++)
        for (int p = 0; p < np; p++) acc[m][p] = _mm512_setzero_ps();
    for (size_t first = 0, wb = 0; first < blocks; first += blocks_per_wblock, wb++) {
        const size_t end = one_wblock ? blocks : (first + blocks_per_wblock < blocks ? first + blocks_per_wblock : blocks);
        __m512 partial[CENTERED_BYTE_TILE_ROWS][2];
        for (int m = 0; m < mr; m++)
            for (int p = 0; p < np; p++) partial[m][p] = _mm512_setzero_ps();
        for (size_t block = first; block < end; block++) {
            __m512i dot[CENTERED_BYTE_TILE_ROWS][2];
            for (int m = 0; m < mr; m++) {
                const __m512i start = _mm512_set1_epi32(-128 * xisums[m * blocks + block]);
                for (int p = 0; p < np; p++) dot[m][p] = start;
            }
            const uint8_t *codes = w + block * 512;
            const int8_t *xb = xq + block * 32;
            for (int q = 0; q < 8; q++) {
                __m512i v[2];
                for (int p = 0; p < np; p++) v[p] = _mm512_loadu_si512(codes + p * panel_bytes + q * 64);
                for (int m = 0; m < mr; m++) {
                    const __m512i x = _mm512_set1_epi32(*(const int32_t *)(xb + m * kpad + q * 4));
                    for (int p = 0; p < np; p++) dot[m][p] = _mm512_dpbusd_epi32(dot[m][p], v[p], x);
                }
            }
            for (int m = 0; m < mr; m++) {
                const __m512 xs = _mm512_set1_ps(xscales[m * blocks + block]);
                for (int p = 0; p < np; p++) partial[m][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[m][p]), xs, partial[m][p]);
            }
        }
        for (int p = 0; p < np; p++) {
            const __m512 scale = _mm512_loadu_ps(scales + p * panel_floats + wb * 16);
            for (int m = 0; m < mr; m++) acc[m][p] = _mm512_fmadd_ps(partial[m][p], scale, acc[m][p]);
        }
    }
    store_tile(acc, mr, np, y, ldy, n0, n, bias);
}

/// centered_byte_tile of MR rows by NP panels, for one or several weight blocks per row.
#define CENTERED_BYTE_TILE(MR, NP)                                                                                                    \
    VNNI __attribute__((noinline)) static void centered_byte_tile_##MR##_##NP(                                                        \
        const uint8_t *w, size_t panel_bytes, size_t kpad, size_t blocks_per_wblock, const float *scales, size_t panel_floats,        \
        const int8_t *xq, const float *xscales, const int32_t *xisums, float *y, size_t ldy, size_t n0, size_t n, const float *bias) { \
        if (blocks_per_wblock >= kpad / 32)                                                                                           \
            centered_byte_tile(w, panel_bytes, kpad, blocks_per_wblock, scales, panel_floats, xq, xscales, xisums, MR, NP, 1, y, ldy, \
                               n0, n, bias);                                                                                          \
        else                                                                                                                          \
            centered_byte_tile(w, panel_bytes, kpad, blocks_per_wblock, scales, panel_floats, xq, xscales, xisums, MR, NP, 0, y, ldy, \
                               n0, n, bias);                                                                                          \
    }

CENTERED_BYTE_TILE(4, 2)
CENTERED_BYTE_TILE(2, 2)
CENTERED_BYTE_TILE(1, 2)
CENTERED_BYTE_TILE(4, 1)
CENTERED_BYTE_TILE(2, 1)
CENTERED_BYTE_TILE(1, 1)

#define CENTERED_BYTE_TILE_CALL(MR, NP)                                                                                          \
    centered_byte_tile_##MR##_##NP(w + panel * panel_bytes, panel_bytes, kpad, blocks_per_wblock, scales + panel * panel_floats, \
                                   panel_floats, xq + m * kpad, xscales + m * blocks, xisums + m * blocks, y + m * ldy, ldy,     \
                                   panel * 16, n, bias)

/// Centered byte panels [panel_begin, panel_end) over `rows` rows, in the tiles `SHRINK_FOR_EACH_TILE` walks (top 4 rows).
VNNI static void centered_byte_panels(const uint8_t *w, size_t n, size_t kpad, size_t blocks_per_wblock, const float *scales,
                                      size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                                      const int32_t *xisums, size_t rows, float *y, size_t ldy, const float *bias) {
    const size_t blocks = kpad / 32;
    const size_t panel_floats = (blocks + blocks_per_wblock - 1) / blocks_per_wblock * 16;
    const size_t panel_bytes = kpad * 16;
    SHRINK_FOR_EACH_TILE(rows, panel_begin, panel_end, 4, CENTERED_BYTE_TILE_CALL);
}

/// The most rows a tile of integer-scaled nibble codes holds: two registers per row, so a sentence
/// of 9–10 tokens shares one unpacking (MiniLM's shapes, 9 rows, weights in cache: 1–7 % faster
/// than tiles of at most 8 rows; 12 rows spill registers and take 1.5×).
#define INTEGER_SCALED_TILE_ROWS 10

/// One register tile of integer-scaled nibble codes below SHRINK_WIDEN_FROM_ROWS rows: `mr` rows
/// times one panel. Each activation block's dot is sum((q - z) * q_x), multiplied by the block's
/// m: the integer of the widened form exactly, then scaled as per-channel int8. From 4 rows on the
/// codes are centered in registers (q - z + 16, two adds per octet shared by the tile's rows) and
/// the dots start at -16 * sum(q_x); up to 3 rows the dots start at -z * sum(q_x) instead (one
/// multiply per row and block: 1 row 20 %, 2 rows 12 %, 3 rows 2–4 % faster on MiniLM's shapes with
/// the weights in cache; even at 4).
VNNI INLINE void integer_scaled_tile(const uint8_t *w, const uint8_t *zero_points, const uint8_t *multipliers, size_t blocks_per_wblock,
                                     const float *channel_scales, size_t kpad, const int8_t *xq, const float *xscales,
                                     const int32_t *xisums, int mr, float *y, size_t ldy, size_t n0, size_t n, const float *bias) {
    const size_t blocks = kpad / 32;
    const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
    __m512 partial[INTEGER_SCALED_TILE_ROWS];
    for (int m = 0; m < mr; m++) partial[m] = _mm512_setzero_ps();
    const int centered = mr >= 4;
    __m512i zero_point = _mm512_setzero_si512(), factor = _mm512_setzero_si512();
    for (size_t block = 0; block < blocks; block++) {
        if (block % blocks_per_wblock == 0) {
            const size_t wb = block / blocks_per_wblock;
            const __m128i z = _mm_loadu_si128((const __m128i *)(zero_points + wb * 16));
            // Centered: 16 - z in each byte of its channel; else -z per channel.
            zero_point = centered ? channel_bytes(_mm_sub_epi8(_mm_set1_epi8(16), z))
                                  : _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_cvtepu8_epi32(z));
            factor = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(multipliers + wb * 16)));
        }
        __m512i dot[INTEGER_SCALED_TILE_ROWS];
        for (int m = 0; m < mr; m++) {
            const int32_t sum = xisums[m * blocks + block];
            dot[m] = centered ? _mm512_set1_epi32(-16 * sum) : _mm512_mullo_epi32(zero_point, _mm512_set1_epi32(sum));
        }
        const int8_t *xb = xq + block * 32;
        for (int t = 0; t < 4; t++) {
            __m512i v = _mm512_loadu_si512(w + block * 256 + t * 64);
            __m512i lo = _mm512_and_si512(v, low_nibbles);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low_nibbles);
            if (centered) {
                lo = _mm512_add_epi8(lo, zero_point);
                hi = _mm512_add_epi8(hi, zero_point);
            }
            for (int m = 0; m < mr; m++) {
                dot[m] = _mm512_dpbusd_epi32(dot[m], lo, _mm512_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8)));
                dot[m] = _mm512_dpbusd_epi32(dot[m], hi, _mm512_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8 + 4)));
            }
        }
        for (int m = 0; m < mr; m++) {
            __m512 sum = _mm512_cvtepi32_ps(_mm512_mullo_epi32(dot[m], factor));
            partial[m] = _mm512_fmadd_ps(sum, _mm512_set1_ps(xscales[m * blocks + block]), partial[m]);
        }
    }
    const __m512 scale = _mm512_loadu_ps(channel_scales);
    __m512 acc[INTEGER_SCALED_TILE_ROWS][2];
    for (int m = 0; m < mr; m++) acc[m][0] = _mm512_fmadd_ps(partial[m], scale, _mm512_setzero_ps());
    store_tile(acc, mr, 1, y, ldy, n0, n, bias);
}

#define TILE(MR, NP) \
    tile(w + panel * panel_bytes, panel_bytes, NP, bits, luts ? luts + panel * shrink_lut_bytes(bits) : NULL,                       \
         low ? low + panel * shrink_low_plane_bytes(kpad, bits) : NULL, kpad, blocks_per_wblock,                            \
         scales + panel * panel_floats, offsets + panel * panel_floats, panel_floats, xq + m * kpad, xscales + m * blocks, xsums + m * blocks, MR, \
         y + m * ldy, ldy, panel * 16, n, bias)

#define INTEGER_SCALED_TILE(MR)                                                                                          \
    integer_scaled_tile(w + panel * kpad * 8, zero_points + panel * panel_floats, multipliers + panel * panel_floats,          \
                        blocks_per_wblock, channel_scales + panel * 16, kpad, xq + m * kpad, xscales + m * blocks, xisums + m * blocks, \
                        MR, y + m * ldy, ldy, panel * 16, n, bias)

/// Rows in as few tiles of one panel and at most TOP rows as possible, of balanced heights, panel
/// by panel: SWITCH(mr) runs a tile of mr rows with `panel` and `m` set.
#define TALL_TILES(TOP, SWITCH)                                                        \
    do {                                                                               \
        const size_t tiles = (rows + (TOP) - 1) / (TOP);                               \
        for (size_t panel = panel_begin; panel < panel_end; panel++) {                 \
            size_t m = 0;                                                              \
            for (size_t t = 0; t < tiles; t++) {                                       \
                int mr = (int)(rows / tiles + (t < rows % tiles ? 1 : 0));             \
                SWITCH(mr);                                                            \
                m += (size_t)mr;                                                       \
            }                                                                          \
        }                                                                              \
    } while (0)

/// Tiles of one panel and mr rows (the callers' TOP caps mr: 8 for nibble panels, 6 for two planes).
#define ONE_PANEL_TILES(mr)                \
    switch (mr) {                          \
    case 1: TILE(1, 1); break;             \
    case 2: TILE(2, 1); break;             \
    case 3: TILE(3, 1); break;             \
    case 4: TILE(4, 1); break;             \
    case 5: TILE(5, 1); break;             \
    case 6: TILE(6, 1); break;             \
    case 7: TILE(7, 1); break;             \
    default: TILE(8, 1); break;            \
    }

/// The most rows a two-plane tile holds (one panel; a second dot per row and a second table or
/// load per octet).
#define TWO_PLANE_TILE_ROWS 6

#define INTEGER_SCALED_TILES(mr)                     \
    switch (mr) {                                    \
    case 1: INTEGER_SCALED_TILE(1); break;           \
    case 2: INTEGER_SCALED_TILE(2); break;           \
    case 3: INTEGER_SCALED_TILE(3); break;           \
    case 4: INTEGER_SCALED_TILE(4); break;           \
    case 5: INTEGER_SCALED_TILE(5); break;           \
    case 6: INTEGER_SCALED_TILE(6); break;           \
    case 7: INTEGER_SCALED_TILE(7); break;           \
    case 8: INTEGER_SCALED_TILE(8); break;           \
    case 9: INTEGER_SCALED_TILE(9); break;           \
    default: INTEGER_SCALED_TILE(10); break;         \
    }

/// The walk over tiles of one kind of panel: 2-, 3- and 4-bit panels (unpacked in every tile) and
/// two-plane panels in tall tiles of one panel, byte panels (centered or not) in tiles of 4 rows by
/// 2 panels.
VNNI INLINE void gemm_panels(const uint8_t *w, int bits, const uint8_t *luts, const uint8_t *low, int centered, size_t n, size_t kpad,
                             size_t blocks_per_wblock, const float *scales, const float *offsets, size_t panel_begin,
                             size_t panel_end, const int8_t *xq, const float *xscales, const float *xsums, const int32_t *xisums,
                             size_t rows, float *y, size_t ldy, const float *bias) {
    const size_t blocks = kpad / 32;
    const size_t wblocks = (blocks + blocks_per_wblock - 1) / blocks_per_wblock;
    const size_t panel_floats = wblocks * 16;
    const size_t panel_bytes = shrink_panel_bytes(kpad, bits);
    if (low) {
        TALL_TILES(TWO_PLANE_TILE_ROWS, ONE_PANEL_TILES);
    } else if (bits < 8) {
        TALL_TILES(MAX_TILE_ROWS, ONE_PANEL_TILES);
    } else if (centered) {
        centered_byte_panels(w, n, kpad, blocks_per_wblock, scales, panel_begin, panel_end, xq, xscales, xisums, rows, y, ldy, bias);
    } else {
        SHRINK_FOR_EACH_TILE(rows, panel_begin, panel_end, 4, TILE);
    }
}

/// Panels of `bits`-bit codes (2, 3 or 4) or pair panels of either size [begin, end) widened to byte panels (LUT applied)
/// in `out`: each octet becomes the two 64-byte quads it holds; with `low` LUTs, the low plane likewise in `out_low`.
/// With `zero_points` (u8, laid out like the scales), each
/// code q becomes q - z + 128 for its channel's and weight block's zero point z ("centered"), and
/// with `multipliers` too, (q - z) * m + 128 ("integer-scaled").
VNNI static void widen_panels(const uint8_t *w, int bits, const uint8_t *luts, const uint8_t *low, const uint8_t *zero_points,
                              const uint8_t *multipliers, size_t blocks_per_wblock, size_t panel_floats, size_t kpad, size_t begin,
                              size_t end, uint8_t *out, uint8_t *out_low) {
    const __m128i bias = _mm_set1_epi8((char)128);
    for (size_t panel = begin; panel < end; panel++) {
        const uint8_t *source = w + panel * shrink_panel_bytes(kpad, bits);
        uint8_t *target = out + (panel - begin) * kpad * 16, *low_target = out_low + (panel - begin) * kpad * 16;
        __m512i upper = _mm512_setzero_si512();
        __m512i table = luts ? panel_table(luts + panel * shrink_lut_bytes(bits), bits, &upper) : _mm512_setzero_si512();
        __m512i low_upper = _mm512_setzero_si512();
        __m512i low_table = low ? low_panel_table(low, bits, panel, &low_upper) : _mm512_setzero_si512();
        __m512i shift = _mm512_setzero_si512(), factor = _mm512_setzero_si512();
        const uint8_t *entries = bits == SHRINK_QUAD_PANELS || bits == SHRINK_PAIR256_PANELS ? luts + panel * shrink_lut_bytes(bits) : NULL;
#ifdef SHRINK_VBMI
        uint8_t planes[1024] __attribute__((aligned(64)));
        if (entries) {
            if (bits == SHRINK_QUAD_PANELS) quad_planes(entries, planes);
            else pair_planes(entries, planes);
            entries = planes;
        }
#endif
        size_t wblock = (size_t)-1;
        __m512i group_quads[4];
        for (size_t octet = 0; octet < kpad / 8; octet++) {
            if (zero_points && octet / 4 / blocks_per_wblock != wblock) {
                wblock = octet / 4 / blocks_per_wblock;
                __m128i z = _mm_loadu_si128((const __m128i *)(zero_points + panel * panel_floats + wblock * 16));
                if (multipliers) {
                    // q * m < 256, so one 16-bit multiply by m gives both bytes' products; then + 128 - z * m.
                    __m128i m = _mm_loadu_si128((const __m128i *)(multipliers + panel * panel_floats + wblock * 16));
                    __m256i zm = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(z), _mm256_cvtepu8_epi16(m));
                    shift = channel_bytes(_mm_sub_epi8(bias, _mm256_cvtepi16_epi8(zm)));
                    factor = _mm512_and_si512(channel_bytes(m), _mm512_set1_epi16(0x00FF));
                } else {
                    shift = channel_bytes(_mm_sub_epi8(bias, z));
                }
            }
            __m512i lo, hi;
            if (bits == SHRINK_PAIR256_PANELS) {
                pair256_octet(source + octet * 64, entries, &lo, &hi);
            } else if (bits == SHRINK_QUAD_PANELS) {
                // A group's four quads serve two octets.
                if (octet % 2 == 0) quad_group(source + (octet / 2) * 64, entries, group_quads);
                lo = group_quads[2 * (octet % 2)];
                hi = group_quads[2 * (octet % 2) + 1];
            } else {
                octet_quads(source, bits, table, upper, octet / 4, (int)(octet % 4), &lo, &hi);
            }
            if (low) {
                __m512i low_lo, low_hi;
                low_octet_quads(source, bits, low_table, low_upper, octet / 4, (int)(octet % 4), lo, hi, &low_lo, &low_hi);
                _mm512_storeu_si512(low_target + octet * 128, low_lo);
                _mm512_storeu_si512(low_target + octet * 128 + 64, low_hi);
            }
            if (luts && !shrink_decodes_codes(bits)) {
                lo = _mm512_shuffle_epi8(table, lo);
                hi = _mm512_shuffle_epi8(table, hi);
            }
            if (multipliers) {
                lo = _mm512_mullo_epi16(lo, factor);
                hi = _mm512_mullo_epi16(hi, factor);
            }
            _mm512_storeu_si512(target + octet * 128, _mm512_add_epi8(lo, shift));
            _mm512_storeu_si512(target + octet * 128 + 64, _mm512_add_epi8(hi, shift));
        }
    }
}

/// gemm_panels with the kind of panel as constants (so that each call site compiles to a kernel of
/// its own), the weights' scales and offsets from panel FIRST on.
#define PANELS(W, BITS, LUTS, LOW, CENTERED, N, FIRST, BEGIN, END, Y, BIAS)                                               \
    gemm_panels(W, BITS, LUTS, LOW, CENTERED, N, kpad, blocks_per_wblock, scales + (FIRST) * panel_floats,                  \
                offsets + (FIRST) * panel_floats, BEGIN, END, xq, xscales, xsums, xisums, rows, Y, ldy, BIAS)

/// Packed panels of BITS-bit codes, with a low plane, LUTs or neither, each a kernel of its own.
#define PACKED_PANELS(BITS)                                                      \
    do {                                                                         \
        if (low) PANELS(w, BITS, luts, low, 0, n, 0, panel_begin, panel_end, y, bias);   \
        else if (luts) PANELS(w, BITS, luts, NULL, 0, n, 0, panel_begin, panel_end, y, bias); \
        else PANELS(w, BITS, NULL, NULL, 0, n, 0, panel_begin, panel_end, y, bias);      \
    } while (0)

VNNI void GEMM_PANELS(const uint8_t *w, int code_bits, const uint8_t *luts, const uint8_t *low, const uint8_t *zero_points,
                      const uint8_t *multipliers, const float *channel_scales, size_t n,
                      size_t kpad, size_t blocks_per_wblock, const float *scales, const float *offsets,
                      size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                      const float *xsums, const int32_t *xisums, size_t rows, float *y, size_t ldy, const float *bias) {
    const size_t blocks = kpad / 32;
    const size_t wblocks = (blocks + blocks_per_wblock - 1) / blocks_per_wblock;
    const size_t panel_floats = wblocks * 16;
    if (code_bits < 8 && !luts) low = NULL;
    if (code_bits == 8 || luts || low) zero_points = NULL;
    if (code_bits != 4 || !zero_points || !channel_scales) multipliers = NULL;
    if (code_bits < 8 && rows >= SHRINK_WIDEN_FROM_ROWS) {
        // A pair of widened panels, and the pair's low plane after it.
        static __thread uint8_t *widened = NULL;
        static __thread size_t capacity = 0;
        if (capacity < 4 * kpad * 16) {
            free(widened);
            widened = aligned_alloc(64, 4 * kpad * 16);
            capacity = widened ? 4 * kpad * 16 : 0;
        }
        if (widened) {
            uint8_t *widened_low = widened + 2 * kpad * 16;
            for (size_t first = panel_begin; first < panel_end; first += 2) {
                size_t last = first + 2 < panel_end ? first + 2 : panel_end;
                widen_panels(w, code_bits, luts, low, zero_points, multipliers, blocks_per_wblock, panel_floats, kpad, first, last, widened, widened_low);
                // The pair as panels 0 and 1 of their own: channels, tables and outputs from `first`.
                const float *pair_bias = bias ? bias + first * 16 : NULL;
                if (multipliers) {
                    // One weight block per row, scaled by the channel scales.
                    const float *pair_scales = channel_scales + first * 16;
                    gemm_panels(widened, 8, NULL, NULL, 1, n - first * 16, kpad, blocks, pair_scales, pair_scales, 0, last - first, xq,
                                xscales, xsums, xisums, rows, y + first * 16, ldy, pair_bias);
                } else if (zero_points) {
                    PANELS(widened, 8, NULL, NULL, 1, n - first * 16, first, 0, last - first, y + first * 16, pair_bias);
                } else if (low) {
                    PANELS(widened, 8, NULL, widened_low, 0, n - first * 16, first, 0, last - first, y + first * 16, pair_bias);
                } else {
                    PANELS(widened, 8, NULL, NULL, 0, n - first * 16, first, 0, last - first, y + first * 16, pair_bias);
                }
            }
            return;
        }
    }
    if (multipliers) {
        TALL_TILES(INTEGER_SCALED_TILE_ROWS, INTEGER_SCALED_TILES);
    } else if (code_bits == 8 && !offsets) {
        gemm_panels(w, 8, NULL, NULL, 1, n, kpad, blocks_per_wblock, scales, NULL, panel_begin, panel_end, xq, xscales, xsums, xisums, rows,
                    y, ldy, bias);
    } else if (code_bits == 8 && low) {
        PANELS(w, 8, NULL, low, 0, n, 0, panel_begin, panel_end, y, bias);
    } else if (code_bits == 8) {
        PANELS(w, 8, NULL, NULL, 0, n, 0, panel_begin, panel_end, y, bias);
    } else if (code_bits == 4) {
        PACKED_PANELS(4);
    } else if (code_bits == 3) {
        PACKED_PANELS(3);
    } else if (code_bits == SHRINK_PAIR_PANELS) {
        PANELS(w, SHRINK_PAIR_PANELS, luts, NULL, 0, n, 0, panel_begin, panel_end, y, bias);
    } else if (code_bits == SHRINK_PAIR64_PANELS) {
        PANELS(w, SHRINK_PAIR64_PANELS, luts, NULL, 0, n, 0, panel_begin, panel_end, y, bias);
    } else if (code_bits == SHRINK_SPARSE24_PANELS && low) {
        PANELS(w, SHRINK_SPARSE24_PANELS, luts, low, 0, n, 0, panel_begin, panel_end, y, bias);
    } else if (code_bits == SHRINK_SPARSE24_PANELS) {
        PANELS(w, SHRINK_SPARSE24_PANELS, luts, NULL, 0, n, 0, panel_begin, panel_end, y, bias);
    } else if (code_bits == SHRINK_QUAD_PANELS) {
        PANELS(w, SHRINK_QUAD_PANELS, luts, NULL, 0, n, 0, panel_begin, panel_end, y, bias);
    } else if (code_bits == SHRINK_PAIR256_PANELS) {
        PANELS(w, SHRINK_PAIR256_PANELS, luts, NULL, 0, n, 0, panel_begin, panel_end, y, bias);
    } else {
        PACKED_PANELS(2);
    }
}

#ifndef SHRINK_VBMI
AVX512_READ uint64_t shrink_read_sum_u64(const uint64_t *values, size_t count) {
    __m512i sum[8];
    for (int j = 0; j < 8; j++) sum[j] = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 64 <= count; i += 64) {
        for (int j = 0; j < 8; j++) sum[j] = _mm512_add_epi64(sum[j], _mm512_loadu_si512(values + i + 8 * j));
    }
    for (int j = 1; j < 8; j++) sum[0] = _mm512_add_epi64(sum[0], sum[j]);
    uint64_t total = (uint64_t)_mm512_reduce_add_epi64(sum[0]);
    for (; i < count; i++) total += values[i];
    return total;
}
#endif

#elif !defined(SHRINK_VBMI)

int shrink_cpu_has_avx512_vnni(void) { return 0; }

int shrink_cpu_has_avx512_vbmi(void) { return 0; }

void shrink_gemm_u8s8_panels_vbmi(const uint8_t *w, int code_bits, const uint8_t *luts, const uint8_t *low, const uint8_t *zero_points,
                                  const uint8_t *multipliers, const float *channel_scales, size_t n,
                                  size_t kpad, size_t blocks_per_wblock, const float *scales, const float *offsets,
                                  size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                                  const float *xsums, const int32_t *xisums, size_t rows, float *y, size_t ldy, const float *bias) {
    shrink_gemm_u8s8_panels(w, code_bits, luts, low, zero_points, multipliers, channel_scales, n, kpad, blocks_per_wblock, scales, offsets, panel_begin,
                            panel_end, xq, xscales, xsums, xisums, rows, y, ldy, bias);
}

uint64_t shrink_read_sum_u64(const uint64_t *values, size_t count) {
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++) total += values[i];
    return total;
}

void shrink_quantize_rows_s8(const float *x, size_t rows, size_t k, size_t ldx, size_t kpad, int8_t *xq,
                             float *scales, float *sums, int32_t *integer_sums) {
    (void)x, (void)rows, (void)k, (void)ldx, (void)kpad, (void)xq, (void)scales, (void)sums, (void)integer_sums;
}

void shrink_gemm_u8s8_panels(const uint8_t *w, int code_bits, const uint8_t *luts, const uint8_t *low, const uint8_t *zero_points,
                             const uint8_t *multipliers, const float *channel_scales, size_t n,
                             size_t kpad, size_t blocks_per_wblock, const float *scales, const float *offsets,
                             size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                             const float *xsums, const int32_t *xisums, size_t rows, float *y, size_t ldy, const float *bias) {
    (void)w, (void)code_bits, (void)luts, (void)low, (void)zero_points, (void)multipliers, (void)channel_scales, (void)n, (void)kpad, (void)blocks_per_wblock, (void)scales, (void)offsets;
    (void)panel_begin, (void)panel_end, (void)xq, (void)xscales, (void)xsums, (void)xisums, (void)rows, (void)y, (void)ldy, (void)bias;
}

#endif
