// Integer dot products on u8 weight codes and int8 activations for CPUs with AVX2 but without
// AVX-512 VNNI: `vpmaddubsw` (u8 x s8 -> pairs summed in int16) then `vpmaddwd` by ones (-> int32).
// Layouts and arithmetic are those of shrink_kernels.h; the integer sums are exact and the float
// operations are those of the Swift twin, in its order, so results equal it bit for bit.
//
// `vpmaddubsw` saturates a pair sum above 32767. Nibble and crumb codes (0..15) times activations in
// [-127, 127] stay far below it; byte codes (up to 255) are taken as s = q - 128 in [-128, 127]
// and multiplied as |s| * (x signed by s), at most 128 * 127 * 2 = 32512 per pair, with
// 128 * sum(q_x) added back to each dot.
#include "shrink_kernels.h"
#include "tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

int shrink_cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

AVX2 void shrink_quantize_rows_s8_avx2(const float *x, size_t rows, size_t k, size_t ldx, size_t kpad, int8_t *xq, float *scales,
                                       float *sums, int32_t *integer_sums) {
    const size_t blocks = kpad / 32;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (size_t m = 0; m < rows; m++) {
        const float *row = x + m * ldx;
        for (size_t b = 0; b < blocks; b++) {
            size_t start = b * 32;
            size_t count = start >= k ? 0 : (k - start < 32 ? k - start : 32);
            __m256 v[4];
            __m256 magnitude = _mm256_setzero_ps();
            for (int j = 0; j < 4; j++) {
                // Masked loads read nothing past the row's end; the padding lanes are 0.
                size_t lane = 8 * (size_t)j;
                v[j] = _mm256_maskload_ps(row + start + lane, tail_mask8(count > lane ? count - lane : 0));
                magnitude = _mm256_max_ps(magnitude, _mm256_andnot_ps(sign, v[j]));
            }
            __m128 half = _mm_max_ps(_mm256_castps256_ps128(magnitude), _mm256_extractf128_ps(magnitude, 1));
            half = _mm_max_ps(half, _mm_movehl_ps(half, half));
            half = _mm_max_ss(half, _mm_shuffle_ps(half, half, 1));
            float largest = _mm_cvtss_f32(half);
            float inverse = largest > 0 ? 127.0f / largest : 0.0f;
            __m256 factor = _mm256_set1_ps(inverse);
            __m256i q[4];
            __m256i total = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], factor));
                total = _mm256_add_epi32(total, q[j]);
            }
            // Pack with signed saturation (as the AVX-512 kernel does), then undo the lane interleave.
            __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(xq + m * kpad + start), _mm256_permutevar8x32_epi32(bytes, order));
            __m128i sum4 = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
            sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 0x4E));
            sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 0xB1));
            int32_t sum = _mm_cvtsi128_si32(sum4);
            float scale = largest / 127.0f;
            scales[m * blocks + b] = scale;
            integer_sums[m * blocks + b] = sum;
            sums[m * blocks + b] = scale * (float)sum;
        }
    }
}

/// One register tile: `mr` (<= 4) activation rows times the 8 channels of half `h` of one panel
/// (bytes 32h..32h+31 of every 64-byte group), over the whole input. Zero points and multipliers
/// change every `zm_blocks` activation blocks (the codes' weight blocks; in the integer-scaled form
/// the scales have one block per row). With `low` (two planes: the panel's low LUT, or its low byte
/// panel), a second dot takes the low bytes and each block's integer is (high << 8) + low.
/// Bit `from` of every byte of `v` moved to bit 2 (other bits: anything), as in int8_panels.c.
AVX2 INLINE __m256i bit_to_2(__m256i v, int from) {
    return from >= 2 ? _mm256_srli_epi16(v, from - 2) : _mm256_slli_epi16(v, 2 - from);
}

/// Pair panels' codes of 16 pairs (two bytes each, in pair order) from their 4-bit entries
/// (`entries`, one per byte): the entries' first and second codes, `first` and `second` (16 bytes
/// each), interleaved.
AVX2 INLINE __m256i pair_codes(__m128i entries, __m128i first, __m128i second) {
    const __m128i a = _mm_shuffle_epi8(first, entries), b = _mm_shuffle_epi8(second, entries);
    return _mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b));
}

/// The same for 64 entries: entry 16k + e (e from `entries`, k from `groups`, one per byte) from
/// the k-th 16 entries' first and second codes.
AVX2 INLINE __m256i pair64_codes(__m128i entries, __m128i groups, const __m128i *first, const __m128i *second) {
    __m128i a = _mm_setzero_si128(), b = _mm_setzero_si128();
    for (int k = 0; k < 4; k++) {
        const __m128i chosen = _mm_cmpeq_epi8(groups, _mm_set1_epi8((char)k));
        a = _mm_blendv_epi8(a, _mm_shuffle_epi8(first[k], entries), chosen);
        b = _mm_blendv_epi8(b, _mm_shuffle_epi8(second[k], entries), chosen);
    }
    return _mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b));
}

/// The codes of half `h` (channels 8h..8h+7) of octet t of activation block `block`, one byte each:
/// inputs 8t..8t+3 in `lo`, 8t+4..8t+7 in `hi`. Indices of a nibble, crumb or tribit panel (for the
/// caller's LUT), codes of a pair panel (its entries' first and second codes, 16 entries per
/// register, in `first` and `second`) or of a 2:4 panel (its LUT in first[0], the pruned code in
/// every byte of second[0]).
/// Quad k of a quad panel's group of 16 inputs (64 index bytes at `group`) for channels 8h..8h+7:
/// their entries gathered from the LUT's dwords, byte 4c + i being code i of channel 8h + c.
AVX2 INLINE __m256i quad_codes(const uint8_t *group, const uint8_t *lut, int h, int k) {
    // Channel 4l + c's entry is byte 16l + 4k + c: channels 8h..8h+3 at 32h + 4k, 8h+4..8h+7 16 bytes on.
    int32_t first, second;
    __builtin_memcpy(&first, group + 32 * h + 4 * k, 4);
    __builtin_memcpy(&second, group + 32 * h + 16 + 4 * k, 4);
    return _mm256_i32gather_epi32((const int *)lut, _mm256_cvtepu8_epi32(_mm_setr_epi32(first, second, 0, 0)), 4);
}

/// Quad q of octet `octet` (64 index bytes) of a 256-entry pair panel for channels 8h..8h+7: each
/// channel's two entries gathered from the LUT's words (a dword read at 2e, its low half kept).
AVX2 INLINE __m256i pair256_codes(const uint8_t *octet, const uint8_t *lut, int h, int q) {
    // Channel 4l + c's pairs are bytes 16l + 8q + 2c and 16l + 8q + 2c + 1: 8 bytes per lane l = 2h, 2h + 1.
    int64_t first, second;
    __builtin_memcpy(&first, octet + 32 * h + 8 * q, 8);
    __builtin_memcpy(&second, octet + 32 * h + 16 + 8 * q, 8);
    const __m256i words = _mm256_cvtepu8_epi16(_mm_set_epi64x(second, first));
    const __m256i low = _mm256_and_si256(words, _mm256_set1_epi32(0xFF)), high = _mm256_srli_epi32(words, 16);
    const __m256i a = _mm256_and_si256(_mm256_i32gather_epi32((const int *)lut, low, 2), _mm256_set1_epi32(0xFFFF));
    const __m256i b = _mm256_slli_epi32(_mm256_i32gather_epi32((const int *)lut, high, 2), 16);
    return _mm256_or_si256(a, b);
}

AVX2 INLINE void octet_quads(const uint8_t *panel, int bits, const __m128i *first, const __m128i *second, const uint8_t *lut, size_t block,
                             int t, int h, __m256i *lo, __m256i *hi) {
    const __m128i nibble = _mm_set1_epi8(0x0F);
    if (bits == SHRINK_PAIR256_PANELS) {
        const uint8_t *octet = panel + (block * 4 + (size_t)t) * 64;
        *lo = pair256_codes(octet, lut, h, 0);
        *hi = pair256_codes(octet, lut, h, 1);
        return;
    }
    if (bits == SHRINK_QUAD_PANELS) {
        const uint8_t *group = panel + (block * 2 + (size_t)t / 2) * 64;
        *lo = quad_codes(group, lut, h, 2 * (t % 2));
        *hi = quad_codes(group, lut, h, 2 * (t % 2) + 1);
        return;
    }
    if (bits == SHRINK_SPARSE24_PANELS) {
        // As in int8_panels.c: per channel the byte of each input (kept slot, or 8: the pruned
        // code), looked up by its 4-bit mask in two halves of 8 dwords, plus 2 (channel % 4).
        const uint8_t *octet = panel + block * 192 + (size_t)t * 48;
        const __m256i low_places = _mm256_setr_epi32(0x08080808, 0x08080800, 0x08080008, 0x08080100, 0x08000808, 0x08010800, 0x08010008,
                                                     0x08080808);
        const __m256i high_places = _mm256_setr_epi32(0x00080808, 0x01080800, 0x01080008, 0x08080808, 0x01000808, 0x08080808, 0x08080808,
                                                      0x08080808);
        const __m256i slots = _mm256_setr_epi32(0, 0x02020202, 0x04040404, 0x06060606, 0, 0x02020202, 0x04040404, 0x06060606);
        const __m256i masks = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(octet + h * 8)));
        const __m256i kept = _mm256_permute4x64_epi64(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(octet + 16 + h * 16))),
                                                      _MM_SHUFFLE(1, 1, 0, 0));
        const __m256i table = _mm256_broadcastsi128_si256(first[0]), pruned = _mm256_broadcastsi128_si256(second[0]);
        const __m256i low_halves = _mm256_setr_epi64x(-1, 0, -1, 0), nibbles = _mm256_set1_epi8(0x0F);
        for (int quad = 0; quad < 2; quad++) {
            const __m256i mask = _mm256_and_si256(_mm256_srli_epi32(masks, 4 * quad), _mm256_set1_epi32(0x0F));
            const __m256i upper = _mm256_cmpgt_epi32(mask, _mm256_set1_epi32(7));
            const __m256i places = _mm256_add_epi8(
                _mm256_blendv_epi8(_mm256_permutevar8x32_epi32(low_places, mask), _mm256_permutevar8x32_epi32(high_places, mask), upper), slots);
            const __m256i indices = _mm256_and_si256(_mm256_srli_epi16(kept, 4 * quad), nibbles);
            const __m256i codes = _mm256_blendv_epi8(pruned, _mm256_shuffle_epi8(table, indices), low_halves);
            *(quad == 0 ? lo : hi) = _mm256_shuffle_epi8(codes, places);
        }
        return;
    }
    if (bits == SHRINK_PAIR64_PANELS) {
        const uint8_t *base = panel + block * 192;
        const __m128i v = _mm_loadu_si128((const __m128i *)(base + (size_t)t * 32 + h * 16));
        const __m128i crumbs = _mm_loadu_si128((const __m128i *)(base + 128 + (size_t)(t / 2) * 32 + h * 16)), mask = _mm_set1_epi8(0x03);
        const int c = 2 * (t % 2);
        *lo = pair64_codes(_mm_and_si128(v, nibble), _mm_and_si128(_mm_srli_epi16(crumbs, 2 * c), mask), first, second);
        *hi = pair64_codes(_mm_and_si128(_mm_srli_epi16(v, 4), nibble), _mm_and_si128(_mm_srli_epi16(crumbs, 2 * c + 2), mask), first, second);
        return;
    }
    if (bits == SHRINK_PAIR_PANELS) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(panel + block * 128 + (size_t)t * 32 + h * 16));
        *lo = pair_codes(_mm_and_si128(v, nibble), first[0], second[0]);
        *hi = pair_codes(_mm_and_si128(_mm_srli_epi16(v, 4), nibble), first[0], second[0]);
        return;
    }
    if (bits == 4) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(panel + block * 256 + (size_t)t * 64 + h * 32)), mask = _mm256_set1_epi8(0x0F);
        *lo = _mm256_and_si256(v, mask);
        *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
        return;
    }
    const uint8_t *crumbs = panel + block * (bits == 2 ? 128 : 192);
    const __m256i v = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(crumbs + (t / 2) * 64 + h * 32)), 4 * (t % 2));
    const __m256i mask = _mm256_set1_epi8(0x03);
    *lo = _mm256_and_si256(v, mask);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 2), mask);
    if (bits == 3) {
        const __m256i high = _mm256_loadu_si256((const __m256i *)(crumbs + 128 + h * 32)), bit2 = _mm256_set1_epi8(0x04);
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(bit_to_2(high, 2 * t), bit2));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(bit_to_2(high, 2 * t + 1), bit2));
    }
}

AVX2 INLINE void tile(const uint8_t *w, int bits, const uint8_t *lut, const uint8_t *low, const uint8_t *zero_points, const uint8_t *multipliers,
                      size_t zm_blocks, int h, size_t kpad,
                      size_t blocks_per_wblock, const float *scales, const float *offsets, const int8_t *xq, const float *xscales,
                      const float *xsums, const int32_t *xisums, int mr, float *y, size_t ldy, size_t first, size_t n,
                      const float *bias) {
    const size_t blocks = kpad / 32;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i table = lut ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lut)) : _mm256_setzero_si256();
    // Pair panels' entries, 16 at a time: the first codes (even bytes of the LUT), then the second codes.
    __m128i firsts[4], seconds[4];
    for (int k = 0; k < 4; k++) firsts[k] = seconds[k] = _mm_setzero_si128();
    if (bits == SHRINK_SPARSE24_PANELS) {
        firsts[0] = _mm_loadu_si128((const __m128i *)lut);
        seconds[0] = _mm_set1_epi8((char)lut[16]);
    } else if (shrink_decodes_codes(bits) && bits != SHRINK_QUAD_PANELS && bits != SHRINK_PAIR256_PANELS) {
        const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        for (int k = 0; k < (bits == SHRINK_PAIR64_PANELS ? 4 : 1); k++) {
            const __m128i a = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(lut + 32 * k)), split);
            const __m128i b = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(lut + 32 * k + 16)), split);
            firsts[k] = _mm_unpacklo_epi64(a, b);
            seconds[k] = _mm_unpackhi_epi64(a, b);
        }
    }
    const __m256i low_table = lut && low ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)low)) : _mm256_setzero_si256();
    // A 2:4 panel's low plane: its low table laid out like the LUT (16 codes, then the pruned code).
    __m128i low_firsts[1] = {_mm_setzero_si128()}, low_seconds[1] = {_mm_setzero_si128()};
    if (bits == SHRINK_SPARSE24_PANELS && low) {
        low_firsts[0] = _mm_loadu_si128((const __m128i *)low);
        low_seconds[0] = _mm_set1_epi8((char)low[16]);
    }
    // Codes that can exceed 15 go through the signed form (q - 128); see the top of the file.
    const int signed_form = bits == 8 || lut != NULL;
    // Centered byte codes (no offsets): the signed form's q - 128 is the weight's integer itself.
    const int centered_bytes = bits == 8 && offsets == NULL;
    __m256 acc[4];
    for (int m = 0; m < mr; m++) acc[m] = _mm256_setzero_ps();
    size_t block = 0;
    for (size_t wb = 0; block < blocks; wb++) {
        const __m256 scale = _mm256_loadu_ps(scales + wb * 16 + h * 8);
        float block_sum[4] = {0, 0, 0, 0};
        __m256 partial[4];
        for (int m = 0; m < mr; m++) partial[m] = _mm256_setzero_ps();
        size_t end = block + blocks_per_wblock < blocks ? block + blocks_per_wblock : blocks;
        for (; block < end; block++) {
            // Centered (zero points given): sum((q - z) * q_x) = sum(q * q_x) - z * sum(q_x), times m
            // when integer-scaled.
            const size_t zm = (block / zm_blocks) * 16 + (size_t)h * 8;
            const __m256i z = zero_points ? _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zero_points + zm)))
                                          : _mm256_setzero_si256();
            __m256i dot[4], low_dot[4];
            for (int m = 0; m < mr; m++) {
                int32_t integer_sum = xisums[m * blocks + block];
                dot[m] = centered_bytes ? _mm256_setzero_si256()
                         : signed_form ? _mm256_set1_epi32(128 * integer_sum)
                         : zero_points ? _mm256_mullo_epi32(z, _mm256_set1_epi32(-integer_sum))
                                       : _mm256_setzero_si256();
                low_dot[m] = _mm256_set1_epi32(128 * integer_sum);
            }
            const int8_t *xb = xq + block * 32;
            if (bits < 8) {
                for (int t = 0; t < 4; t++) {
                    __m256i lo, hi;
                    octet_quads(w, bits, firsts, seconds, lut, block, t, h, &lo, &hi);
                    __m256i low_lo = _mm256_setzero_si256(), low_hi = _mm256_setzero_si256();
                    if (lut && low && bits == SHRINK_SPARSE24_PANELS) {
                        octet_quads(w, bits, low_firsts, low_seconds, low, block, t, h, &low_lo, &low_hi);
                        low_lo = _mm256_xor_si256(low_lo, flip);
                        low_hi = _mm256_xor_si256(low_hi, flip);
                    } else if (lut && low) {
                        low_lo = _mm256_xor_si256(_mm256_shuffle_epi8(low_table, lo), flip);
                        low_hi = _mm256_xor_si256(_mm256_shuffle_epi8(low_table, hi), flip);
                    }
                    if (lut) {
                        lo = _mm256_xor_si256(shrink_decodes_codes(bits) ? lo : _mm256_shuffle_epi8(table, lo), flip);
                        hi = _mm256_xor_si256(shrink_decodes_codes(bits) ? hi : _mm256_shuffle_epi8(table, hi), flip);
                    }
                    const __m256i lo_magnitude = lut ? _mm256_abs_epi8(lo) : lo, hi_magnitude = lut ? _mm256_abs_epi8(hi) : hi;
                    const __m256i low_lo_magnitude = _mm256_abs_epi8(low_lo), low_hi_magnitude = _mm256_abs_epi8(low_hi);
                    for (int m = 0; m < mr; m++) {
                        __m256i x0 = _mm256_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8));
                        __m256i x1 = _mm256_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8 + 4));
                        if (lut) {
                            __m256i p0 = _mm256_maddubs_epi16(lo_magnitude, _mm256_sign_epi8(x0, lo));
                            __m256i p1 = _mm256_maddubs_epi16(hi_magnitude, _mm256_sign_epi8(x1, hi));
                            dot[m] = _mm256_add_epi32(dot[m], _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones)));
                            if (low) {
                                __m256i q0 = _mm256_maddubs_epi16(low_lo_magnitude, _mm256_sign_epi8(x0, low_lo));
                                __m256i q1 = _mm256_maddubs_epi16(low_hi_magnitude, _mm256_sign_epi8(x1, low_hi));
                                low_dot[m] = _mm256_add_epi32(low_dot[m], _mm256_add_epi32(_mm256_madd_epi16(q0, ones), _mm256_madd_epi16(q1, ones)));
                            }
                        } else {
                            // Nibble products: the two int16 pair sums add up to at most 4 * 15 * 127.
                            __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x0), _mm256_maddubs_epi16(hi, x1));
                            dot[m] = _mm256_add_epi32(dot[m], _mm256_madd_epi16(pairs, ones));
                        }
                    }
                }
            } else {
                for (int q = 0; q < 8; q++) {
                    __m256i s = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + block * 512 + q * 64 + h * 32)), flip);
                    __m256i magnitude = _mm256_abs_epi8(s);
                    __m256i low_s = low ? _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(low + block * 512 + q * 64 + h * 32)), flip)
                                        : _mm256_setzero_si256();
                    __m256i low_magnitude = _mm256_abs_epi8(low_s);
                    for (int m = 0; m < mr; m++) {
                        __m256i x = _mm256_set1_epi32(*(const int32_t *)(xb + m * kpad + q * 4));
                        dot[m] = _mm256_add_epi32(dot[m], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(x, s)), ones));
                        if (low) {
                            __m256i products = _mm256_maddubs_epi16(low_magnitude, _mm256_sign_epi8(x, low_s));
                            low_dot[m] = _mm256_add_epi32(low_dot[m], _mm256_madd_epi16(products, ones));
                        }
                    }
                }
            }
            if (low)
                for (int m = 0; m < mr; m++) dot[m] = _mm256_add_epi32(_mm256_slli_epi32(dot[m], 8), low_dot[m]);
            if (multipliers) {
                const __m256i factor = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(multipliers + zm)));
                for (int m = 0; m < mr; m++) dot[m] = _mm256_mullo_epi32(dot[m], factor);
            }
            for (int m = 0; m < mr; m++) {
                block_sum[m] += xsums[m * blocks + block];
                partial[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[m]), _mm256_set1_ps(xscales[m * blocks + block]), partial[m]);
            }
        }
        for (int m = 0; m < mr; m++) acc[m] = _mm256_fmadd_ps(partial[m], scale, acc[m]);
        if (offsets) {
            const __m256 offset = _mm256_loadu_ps(offsets + wb * 16 + h * 8);
            for (int m = 0; m < mr; m++) acc[m] = _mm256_fnmadd_ps(offset, _mm256_set1_ps(block_sum[m]), acc[m]);
        }
    }
    store_tile8(acc, mr, y, ldy, first, n, bias);
}

/// Calls TILE(MR) with `m` set over rows [0, rows): tiles of 4 rows, then one of 3, 2 or 1.
#define FOR_ROW_TILES(rows, TILE)                 \
    do {                                          \
        size_t m = 0;                             \
        for (; m + 4 <= (rows); m += 4) TILE(4);  \
        switch ((rows) - m) {                     \
        case 3: TILE(3); break;                   \
        case 2: TILE(2); break;                   \
        case 1: TILE(1); break;                   \
        default: break;                           \
        }                                         \
    } while (0)

/// The end of an activation block in a 16-channel tile: each row's integer dots (two halves)
/// times the block's activation scale (`xscales[m * stride]`) added to its partial sums, and
/// the block's activation sum (`xsums[m * stride]`) to its `block_sum`, in `tile`'s order.
AVX2 INLINE void add_activation_block(const __m256i *dot0, const __m256i *dot1, int mr, const float *xscales, const float *xsums,
                                      size_t stride, float *block_sum, __m256 *partial0, __m256 *partial1) {
    for (int m = 0; m < mr; m++) {
        const __m256 xscale = _mm256_set1_ps(xscales[m * stride]);
        block_sum[m] += xsums[m * stride];
        partial0[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot0[m]), xscale, partial0[m]);
        partial1[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot1[m]), xscale, partial1[m]);
    }
}

/// The end of a weight block in a 16-channel tile: partial sums times the 16 channels' scales added
/// to the accumulators, then offset times the rows' activation sums subtracted (`offsets` may be NULL).
AVX2 INLINE void add_weight_block(const __m256 *partial0, const __m256 *partial1, const float *block_sum, int mr, const float *scales,
                                  const float *offsets, __m256 *acc0, __m256 *acc1) {
    const __m256 scale0 = _mm256_loadu_ps(scales), scale1 = _mm256_loadu_ps(scales + 8);
    for (int m = 0; m < mr; m++) {
        acc0[m] = _mm256_fmadd_ps(partial0[m], scale0, acc0[m]);
        acc1[m] = _mm256_fmadd_ps(partial1[m], scale1, acc1[m]);
    }
    if (offsets) {
        const __m256 offset0 = _mm256_loadu_ps(offsets), offset1 = _mm256_loadu_ps(offsets + 8);
        for (int m = 0; m < mr; m++) {
            acc0[m] = _mm256_fnmadd_ps(offset0, _mm256_set1_ps(block_sum[m]), acc0[m]);
            acc1[m] = _mm256_fnmadd_ps(offset1, _mm256_set1_ps(block_sum[m]), acc1[m]);
        }
    }
}

/// Byte panels (`bits` 8: int8 per channel, no LUT) and nibble panels (`bits` 4: 4-bit codes, or
/// indices into the panel's 16-entry int8 `lut`, which may be NULL), without a low plane: `mr` (<= 4) rows times both 8-channel halves of a panel, so that
/// each activation broadcast serves 16 channels and the tile's 8 integer accumulators stay in
/// registers. Zero points (centered or integer-scaled nibbles; may be NULL) and multipliers
/// (integer-scaled nibbles; may be NULL) change every `zm_blocks` activation blocks, scales and
/// offsets (may be NULL) every `scale_blocks`. Per channel the integer sums and the float
/// operations, in their order, are those of `tile`.
AVX2 INLINE void wide_tile(int bits, const uint8_t *w, const uint8_t *lut, const uint8_t *zero_points, const uint8_t *multipliers, size_t zm_blocks, size_t kpad,
                           size_t scale_blocks, const float *scales, const float *offsets, const int8_t *xq, const float *xscales,
                           const float *xsums, const int32_t *xisums, int mr, float *y, size_t ldy, size_t first, size_t n,
                           const float *bias) {
    const size_t blocks = kpad / 32;
    const __m256i flip = _mm256_set1_epi8((char)0x80), nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc0[4], acc1[4];
    for (int m = 0; m < mr; m++) acc0[m] = acc1[m] = _mm256_setzero_ps();
    size_t block = 0;
    for (size_t wb = 0; block < blocks; wb++) {
        float block_sum[4] = {0, 0, 0, 0};
        __m256 partial0[4], partial1[4];
        for (int m = 0; m < mr; m++) partial0[m] = partial1[m] = _mm256_setzero_ps();
        size_t end = block + scale_blocks < blocks ? block + scale_blocks : blocks;
        for (; block < end; block++) {
            const size_t zm = (block / zm_blocks) * 16;
            const int8_t *xb = xq + block * 32;
            __m256i dot0[4], dot1[4];
            if (bits == 8) {
                // Signed codes s = q - 128: sum(s * q_x), plus 128 * sum(q_x) when offsets make it sum(q * q_x).
                for (int m = 0; m < mr; m++)
                    dot0[m] = dot1[m] = offsets ? _mm256_set1_epi32(128 * xisums[m * blocks + block]) : _mm256_setzero_si256();
                const uint8_t *codes = w + block * 512;
                for (int q = 0; q < 8; q++) {
                    const __m256i s0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(codes + q * 64)), flip);
                    const __m256i s1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(codes + q * 64 + 32)), flip);
                    const __m256i magnitude0 = _mm256_abs_epi8(s0), magnitude1 = _mm256_abs_epi8(s1);
                    for (int m = 0; m < mr; m++) {
                        const __m256i x = _mm256_set1_epi32(*(const int32_t *)(xb + m * kpad + q * 4));
                        dot0[m] = _mm256_add_epi32(dot0[m], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude0, _mm256_sign_epi8(x, s0)), ones));
                        dot1[m] = _mm256_add_epi32(dot1[m], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude1, _mm256_sign_epi8(x, s1)), ones));
                    }
                }
            } else {
                // sum((q - z) * q_x) = sum(q * q_x) - z * sum(q_x), times m when integer-scaled.
                if (zero_points) {
                    const __m256i z0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zero_points + zm)));
                    const __m256i z1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zero_points + zm + 8)));
                    for (int m = 0; m < mr; m++) {
                        const __m256i negated_sum = _mm256_set1_epi32(-xisums[m * blocks + block]);
                        dot0[m] = _mm256_mullo_epi32(z0, negated_sum);
                        dot1[m] = _mm256_mullo_epi32(z1, negated_sum);
                    }
                } else {
                    for (int m = 0; m < mr; m++) dot0[m] = dot1[m] = _mm256_setzero_si256();
                }
                const uint8_t *codes = w + block * 256;
                if (lut) {
                    // LUT entries e (stored e + 128) as signed bytes, times the activations by sign
                    // and magnitude; each pair sum reaches 2 * 128 * 127, so pairs widen one by one.
                    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lut));
                    for (int m = 0; m < mr; m++) dot0[m] = dot1[m] = _mm256_set1_epi32(128 * xisums[m * blocks + block]);
                    for (int t = 0; t < 4; t++) {
                        const __m256i v0 = _mm256_loadu_si256((const __m256i *)(codes + t * 64));
                        const __m256i v1 = _mm256_loadu_si256((const __m256i *)(codes + t * 64 + 32));
                        const __m256i lo0 = _mm256_xor_si256(_mm256_shuffle_epi8(table, _mm256_and_si256(v0, nibble)), flip);
                        const __m256i hi0 = _mm256_xor_si256(_mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v0, 4), nibble)), flip);
                        const __m256i lo1 = _mm256_xor_si256(_mm256_shuffle_epi8(table, _mm256_and_si256(v1, nibble)), flip);
                        const __m256i hi1 = _mm256_xor_si256(_mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v1, 4), nibble)), flip);
                        const __m256i lo0_magnitude = _mm256_abs_epi8(lo0), hi0_magnitude = _mm256_abs_epi8(hi0);
                        const __m256i lo1_magnitude = _mm256_abs_epi8(lo1), hi1_magnitude = _mm256_abs_epi8(hi1);
                        for (int m = 0; m < mr; m++) {
                            const __m256i x0 = _mm256_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8));
                            const __m256i x1 = _mm256_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8 + 4));
                            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo0_magnitude, _mm256_sign_epi8(x0, lo0)), ones);
                            const __m256i q0 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi0_magnitude, _mm256_sign_epi8(x1, hi0)), ones);
                            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo1_magnitude, _mm256_sign_epi8(x0, lo1)), ones);
                            const __m256i q1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi1_magnitude, _mm256_sign_epi8(x1, hi1)), ones);
                            dot0[m] = _mm256_add_epi32(dot0[m], _mm256_add_epi32(p0, q0));
                            dot1[m] = _mm256_add_epi32(dot1[m], _mm256_add_epi32(p1, q1));
                        }
                    }
                }
                for (int t = 0; t < 4 && !lut; t++) {
                    const __m256i v0 = _mm256_loadu_si256((const __m256i *)(codes + t * 64));
                    const __m256i v1 = _mm256_loadu_si256((const __m256i *)(codes + t * 64 + 32));
                    const __m256i lo0 = _mm256_and_si256(v0, nibble), hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), nibble);
                    const __m256i lo1 = _mm256_and_si256(v1, nibble), hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), nibble);
                    for (int m = 0; m < mr; m++) {
                        const __m256i x0 = _mm256_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8));
                        const __m256i x1 = _mm256_set1_epi32(*(const int32_t *)(xb + m * kpad + t * 8 + 4));
                        // Nibble products: the two int16 pair sums add up to at most 4 * 15 * 127.
                        const __m256i pairs0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, x0), _mm256_maddubs_epi16(hi0, x1));
                        const __m256i pairs1 = _mm256_add_epi16(_mm256_maddubs_epi16(lo1, x0), _mm256_maddubs_epi16(hi1, x1));
                        dot0[m] = _mm256_add_epi32(dot0[m], _mm256_madd_epi16(pairs0, ones));
                        dot1[m] = _mm256_add_epi32(dot1[m], _mm256_madd_epi16(pairs1, ones));
                    }
                }
                if (multipliers) {
                    const __m256i factor0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(multipliers + zm)));
                    const __m256i factor1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(multipliers + zm + 8)));
                    for (int m = 0; m < mr; m++) {
                        dot0[m] = _mm256_mullo_epi32(dot0[m], factor0);
                        dot1[m] = _mm256_mullo_epi32(dot1[m], factor1);
                    }
                }
            }
            add_activation_block(dot0, dot1, mr, xscales + block, xsums + block, blocks, block_sum, partial0, partial1);
        }
        add_weight_block(partial0, partial1, block_sum, mr, scales + wb * 16, offsets ? offsets + wb * 16 : NULL, acc0, acc1);
    }
    store_tile8(acc0, mr, y, ldy, first, n, bias);
    if (first + 8 < n) store_tile8(acc1, mr, y, ldy, first + 8, n, bias);
}

#define WIDE_TILE_BYTES(MR) WIDE_TILE_AVX2(8, MR)
#define WIDE_TILE_NIBBLES(MR) WIDE_TILE_AVX2(4, MR)
#define WIDE_TILE_AVX2(BITS, MR)                                                                                                      \
    wide_tile(BITS, w + panel * panel_bytes, luts ? luts + panel * shrink_lut_bytes(BITS) : NULL, zero_points ? zero_points + panel * panel_floats : NULL,                          \
              multipliers ? multipliers + panel * panel_floats : NULL, blocks_per_wblock, kpad, scale_blocks,                        \
              scale_table + panel * scale_floats, offset_table ? offset_table + panel * panel_floats : NULL, xq + m * kpad,        \
              xscales + m * blocks, xsums + m * blocks, xisums + m * blocks, MR, y + m * ldy, ldy, panel * 16, n, bias)

#define TILE_AVX2(MR)                                                                                                                 \
    tile(w + panel * panel_bytes, code_bits, luts ? luts + panel * shrink_lut_bytes(code_bits) : NULL,                                                       \
         low ? low + panel * shrink_low_plane_bytes(kpad, code_bits) : NULL, zero_points ? zero_points + panel * panel_floats : NULL,          \
         multipliers ? multipliers + panel * panel_floats : NULL, blocks_per_wblock, h, kpad, scale_blocks,                          \
         scale_table + panel * scale_floats, offset_table ? offset_table + panel * panel_floats : NULL, xq + m * kpad,             \
         xscales + m * blocks, xsums + m * blocks,                                                                                  \
         xisums + m * blocks, MR, y + m * ldy, ldy, panel * 16 + h * 8, n, bias)

AVX2 void shrink_gemm_u8s8_panels_avx2(const uint8_t *w, int code_bits, const uint8_t *luts, const uint8_t *low, const uint8_t *zero_points,
                                       const uint8_t *multipliers, const float *channel_scales, size_t n,
                                       size_t kpad, size_t blocks_per_wblock, const float *scales, const float *offsets,
                                       size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                                       const float *xsums, const int32_t *xisums, size_t rows, float *y, size_t ldy,
                                       const float *bias) {
    const size_t blocks = kpad / 32;
    const size_t wblocks = (blocks + blocks_per_wblock - 1) / blocks_per_wblock;
    const size_t panel_floats = wblocks * 16;
    const size_t panel_bytes = shrink_panel_bytes(kpad, code_bits);
    // The same choice of arithmetic as the other variants: integer-scaled at every row count,
    // otherwise centered from SHRINK_WIDEN_FROM_ROWS rows.
    if (code_bits < 8 && !luts) low = NULL;
    if (code_bits == 8 || luts || low) zero_points = NULL;
    if (code_bits != 4 || !zero_points || !channel_scales) multipliers = NULL;
    if (!multipliers && rows < SHRINK_WIDEN_FROM_ROWS) zero_points = NULL;
    // Integer-scaled: one weight block per row, scaled by the channel scales.
    const size_t scale_blocks = multipliers ? blocks : blocks_per_wblock, scale_floats = multipliers ? 16 : panel_floats;
    const float *scale_table = multipliers ? channel_scales : scales;
    // Centered codes have no offset term (integer-scaled weights keep no offsets at all).
    const float *offset_table = zero_points ? NULL : offsets;
    // Byte and nibble panels without a low plane: 16-channel tiles, each width compiled apart.
    if (code_bits == 8 && !luts && !low) {
        for (size_t panel = panel_begin; panel < panel_end; panel++) FOR_ROW_TILES(rows, WIDE_TILE_BYTES);
        return;
    }
    if (code_bits == 4 && !low) {
        for (size_t panel = panel_begin; panel < panel_end; panel++) FOR_ROW_TILES(rows, WIDE_TILE_NIBBLES);
        return;
    }
    for (size_t panel = panel_begin; panel < panel_end; panel++) {
        for (int h = 0; h < 2 && panel * 16 + h * 8 < n; h++) {
            FOR_ROW_TILES(rows, TILE_AVX2);
        }
    }
}

#else

// Never called (the CPU check says no); they forward to the portable stubs.
int shrink_cpu_has_avx2(void) { return 0; }

void shrink_quantize_rows_s8_avx2(const float *x, size_t rows, size_t k, size_t ldx, size_t kpad, int8_t *xq, float *scales,
                                  float *sums, int32_t *integer_sums) {
    shrink_quantize_rows_s8(x, rows, k, ldx, kpad, xq, scales, sums, integer_sums);
}

void shrink_gemm_u8s8_panels_avx2(const uint8_t *w, int code_bits, const uint8_t *luts, const uint8_t *low, const uint8_t *zero_points,
                                  const uint8_t *multipliers, const float *channel_scales, size_t n,
                                  size_t kpad, size_t blocks_per_wblock, const float *scales, const float *offsets,
                                  size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                                  const float *xsums, const int32_t *xisums, size_t rows, float *y, size_t ldy, const float *bias) {
    shrink_gemm_u8s8_panels(w, code_bits, luts, low, zero_points, multipliers, channel_scales, n, kpad, blocks_per_wblock, scales, offsets, panel_begin, panel_end, xq,
                            xscales, xsums, xisums, rows, y, ldy, bias);
}

#endif
