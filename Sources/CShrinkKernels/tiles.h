// What the vector kernels share across instruction sets: the walk over register tiles of the panel
// kernels and the attention kernels' key transposition.
#ifndef SHRINK_TILES_H
#define SHRINK_TILES_H

/// How far ahead of its loads a panel kernel prefetches its weight stream, in code bytes (the
/// per-block scales, offsets and multipliers about as many weights ahead). The AVX-512 integer
/// kernels prefetch only those side streams and leave the codes, one sequential stream, to the
/// hardware prefetcher: on AMD Zen 4 class CPUs (1 thread, weights from memory) prefetching the codes
/// too was slower, Q8_0 11008×4096 2.75 against 2.12 ms, int8 per channel 1.94–2.02 against 1.68,
/// SmolLM2 decode 8-bit 133 against 163 tokens/s and 4.5-bit 204 against 224 (on an earlier
/// machine it had helped, Q8_0 4096×11008 2.6–2.8 ms without, 2.2–2.4 with; 512 and 1536–4096
/// bytes ahead no better than 1024).
#define SHRINK_PREFETCH_BYTES 1024

/// Calls TILE(MR, NP) with `panel` and `m` set, over panels [begin, end) and rows [0, rows):
/// pairs of panels (NP = 2, sharing each activation broadcast) when there are at least 4 rows,
/// then single panels; rows in tiles of TOP (6 or 4), 4, 2 and 1. Below 4 rows a product streams
/// its weight, and one panel at a time (one sequential stream) measured 5–25 % faster.
#define SHRINK_FOR_EACH_TILE(rows, begin, end, TOP, TILE)                      \
    do {                                                                       \
        size_t panel = (begin);                                                \
        if ((rows) >= 4)                                                       \
            for (; panel + 2 <= (end); panel += 2) {                           \
                size_t m = 0;                                                  \
                for (; m + (TOP) <= (rows); m += (TOP)) TILE(TOP, 2);          \
                for (; m + 4 <= (rows); m += 4) TILE(4, 2);                    \
                for (; m + 2 <= (rows); m += 2) TILE(2, 2);                    \
                for (; m < (rows); m++) TILE(1, 2);                            \
            }                                                                  \
        for (; panel < (end); panel++) {                                       \
            size_t m = 0;                                                      \
            for (; m + (TOP) <= (rows); m += (TOP)) TILE(TOP, 1);              \
            for (; m + 4 <= (rows); m += 4) TILE(4, 1);                        \
            for (; m + 2 <= (rows); m += 2) TILE(2, 1);                        \
            for (; m < (rows); m++) TILE(1, 1);                                \
        }                                                                      \
    } while (0)

/// Keys of one attention head transposed: keys[d * padded + j] = k[j * stride + d] for d < head_size
/// and j < length, zero for length <= j < padded (so that a vector of scores takes one FMA per dimension).
static inline void shrink_transpose_keys(const float *k, size_t length, size_t head_size, size_t stride, size_t padded, float *keys) {
    for (size_t d = 0; d < head_size; d++) {
        for (size_t j = 0; j < length; j++) keys[d * padded + j] = k[j * stride + d];
        for (size_t j = length; j < padded; j++) keys[d * padded + j] = 0;
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

/// Stores rows [0, mr) of panels [0, np) of a tile's accumulators at y + m * ldy + n0 + 16 p,
/// adding bias (may be NULL) and masking channels from n on.
__attribute__((target("avx512f"), always_inline)) static inline void store_tile(__m512 (*acc)[2], int mr, int np, float *y, size_t ldy,
                                                                                 size_t n0, size_t n, const float *bias) {
    for (int p = 0; p < np; p++) {
        size_t first = n0 + p * 16;
        size_t count = n - first < 16 ? n - first : 16;
        __mmask16 mask = count == 16 ? 0xFFFF : (__mmask16)((1u << count) - 1);
        __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + first) : _mm512_setzero_ps();
        for (int m = 0; m < mr; m++) _mm512_mask_storeu_ps(y + m * ldy + first, mask, _mm512_add_ps(acc[m][p], b));
    }
}

static const int32_t shrink_lane_masks[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/// The 8 float lanes below `remaining` (capped at 8) set, as a mask for `vmaskmovps`.
__attribute__((target("avx2"), always_inline)) static inline __m256i tail_mask8(size_t remaining) {
    return _mm256_loadu_si256((const __m256i *)(shrink_lane_masks + 8 - (remaining < 8 ? remaining : 8)));
}

/// Stores rows [0, mr) of one 8-channel accumulator column at y + m * ldy + first, adding bias
/// (may be NULL) and masking channels from n on (the AVX2 kernels' store_tile).
__attribute__((target("avx2"), always_inline)) static inline void store_tile8(const __m256 *acc, int mr, float *y, size_t ldy,
                                                                               size_t first, size_t n, const float *bias) {
    __m256i mask = tail_mask8(n - first);
    __m256 b = bias ? _mm256_maskload_ps(bias + first, mask) : _mm256_setzero_ps();
    for (int m = 0; m < mr; m++) _mm256_maskstore_ps(y + m * ldy + first, mask, _mm256_add_ps(acc[m], b));
}
#endif

#endif
