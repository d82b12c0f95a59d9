// The randomized Hadamard rotation of activation rows (HadamardRotation in ShrinkCore), in the
// same per-element order of operations as its Swift reference, so both give the same floats.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "shrink_kernels.h"

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))
/// Keeps a register block's stores stores: clang otherwise spills the vectors and copies them out
/// with memcpy.
#define NO_MEMCPY __attribute__((no_builtin("memcpy")))

/// Sylvester stages `half = 1, 2, …` below `below` on every 16-float chunk of b[0..<block]; each
/// butterfly gives `a + c` and `a − c` exactly as the scalar loop does.
typedef void (*small_stages_fn)(float *b, size_t block, size_t below);

/// H_12 along the axis of stride `inner` of b[0..<block] (viewed as [block / (12·inner), 12, inner])
/// into place, `scratch` holding `block` floats; 0 when it does not take this shape.
typedef int (*paley_fn)(float *b, size_t block, size_t inner, const int8_t *paley, float *scratch);

/// Runs `x ← R·x` per row; the Sylvester stages below `fused_below` are left to `small_stages`.
INLINE void rotate_rows(float *restrict x, size_t rows, size_t size, size_t block, size_t twelves, size_t power_of_two,
                        const float *restrict signs, const int8_t *restrict paley, float *restrict scratch,
                        small_stages_fn small_stages, size_t fused_below, paley_fn vector_paley) {
    const float scale = 1.0f / sqrtf((float)block);
    for (size_t r = 0; r < rows; r++) {
        float *row = x + r * size;
        for (size_t i = 0; i < size; i++) row[i] *= signs[i];
        for (size_t start = 0; start < size; start += block) {
            float *b = row + start;
            if (fused_below > 1) small_stages(b, block, fused_below);
            for (size_t half = fused_below; half < power_of_two; half *= 2) {
                for (size_t s = 0; s < block; s += 2 * half) {
                    for (size_t i = s; i < s + half; i++) {
                        const float a = b[i], c = b[i + half];
                        b[i] = a + c;
                        b[i + half] = a - c;
                    }
                }
            }
            size_t inner = power_of_two;
            for (size_t t = 0; t < twelves; t++) {
                const size_t span = 12 * inner;
                for (size_t g = vector_paley(b, block, inner, paley, scratch) ? block : 0; g < block; g += span) {
                    const float *group = b + g;
                    for (size_t out = 0; out < 12; out++) {
                        float *restrict target = scratch + out * inner;
                        const int8_t *h = paley + out * 12;
                        for (size_t i = 0; i < inner; i++) {
                            // t + (±1 · s) is t ± s exactly, fused or not.
                            float sum = 0;
                            for (size_t in = 0; in < 12; in++) sum += (float)h[in] * group[in * inner + i];
                            target[i] = sum;
                        }
                    }
                    memcpy(b + g, scratch, span * sizeof(float));
                }
                inner *= 12;
            }
            for (size_t i = 0; i < block; i++) b[i] *= scale;
        }
    }
}

/// The stages `half = 1, 2, …` below `below` (at most 16) of one vector: lane i takes
/// v[i ^ half] + (i & half ? −v[i] : v[i]).
AVX512 INLINE __m512 small_stages_vector(__m512 v, size_t below) {
    static const __mmask16 high[4] = {0xAAAA, 0xCCCC, 0xF0F0, 0xFF00};
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    for (size_t half = 1, stage = 0; half < below; half *= 2, stage++) {
        const __m512 partner = _mm512_permutexvar_ps(_mm512_xor_si512(lanes, _mm512_set1_epi32((int)half)), v);
        const __m512i bits = _mm512_castps_si512(v);
        v = _mm512_add_ps(partner, _mm512_castsi512_ps(_mm512_mask_xor_epi32(bits, high[stage], bits, sign)));
    }
    return v;
}

/// In registers, 16 floats at a time (`small_stages_vector`).
AVX512 static void small_stages_avx512(float *b, size_t block, size_t below) {
    for (size_t s = 0; s < block; s += 16) _mm512_storeu_ps(b + s, small_stages_vector(_mm512_loadu_ps(b + s), below));
}

/// Sum over inputs of (±1 · source), the scalar loop's order: 0 + h_0 s_0 + h_1 s_1 + …
AVX512 static inline __m512 paley_row(const __m512 *sources, const int8_t *h) {
    __m512 sum = _mm512_setzero_ps();
    for (size_t in = 0; in < 12; in++) sum = h[in] > 0 ? _mm512_add_ps(sum, sources[in]) : _mm512_sub_ps(sum, sources[in]);
    return sum;
}

/// 16 lanes at a time: contiguous when `inner` is a multiple of 16, else 16 / inner groups of
/// `inner` lanes gathered and scattered (inner 1, 2, 4, 8 with a multiple of 16 / inner groups).
AVX512 static int paley_avx512(float *b, size_t block, size_t inner, const int8_t *paley, float *scratch) {
    const size_t span = 12 * inner;
    __m512 sources[12];
    if (inner % 16 == 0) {
        for (size_t g = 0; g < block; g += span) {
            for (size_t i = 0; i < inner; i += 16) {
                for (size_t in = 0; in < 12; in++) sources[in] = _mm512_loadu_ps(b + g + in * inner + i);
                for (size_t out = 0; out < 12; out++) _mm512_storeu_ps(scratch + g + out * inner + i, paley_row(sources, paley + out * 12));
            }
        }
    } else if (16 % inner == 0 && (block / span) % (16 / inner) == 0) {
        int lanes[16];
        for (int l = 0; l < 16; l++) lanes[l] = (int)((size_t)l / inner * span + (size_t)l % inner);
        const __m512i index = _mm512_loadu_si512(lanes);
        for (size_t g = 0; g < block; g += span * (16 / inner)) {
            for (size_t in = 0; in < 12; in++) sources[in] = _mm512_i32gather_ps(index, b + g + in * inner, 4);
            for (size_t out = 0; out < 12; out++) _mm512_i32scatter_ps(scratch + g + out * inner, index, paley_row(sources, paley + out * 12), 4);
        }
    } else {
        return 0;
    }
    memcpy(b, scratch, block * sizeof(float));
    return 1;
}

/// One block of N·16 floats (a power of two, Sylvester only) read from `s`, rotated in registers
/// and written to `b`: the signs' product, the stages below 16 within each vector, the stages
/// from 16 on between vectors (`half` = 16h: vector i and i + h give a + c and a − c), then, when
/// `scaled`, the scale; per element the same operations in the same order as `rotate_rows`, with
/// one load and one store.
#define BLOCK_IN_REGISTERS(N)                                                                                              \
    AVX512 NO_MEMCPY static void block_in_registers_##N(const float *s, float *b, const float *signs, __m512 scale, int scaled) { \
        __m512 v[N];                                                                                                       \
        for (size_t j = 0; j < N; j++) v[j] = _mm512_mul_ps(_mm512_loadu_ps(s + 16 * j), _mm512_loadu_ps(signs + 16 * j)); \
        for (size_t j = 0; j < N; j++) v[j] = small_stages_vector(v[j], 16);                                               \
        for (size_t h = 1; h < N; h *= 2)                                                                                  \
            for (size_t j = 0; j < N; j += 2 * h)                                                                          \
                for (size_t i = j; i < j + h; i++) {                                                                       \
                    const __m512 a = v[i], c = v[i + h];                                                                   \
                    v[i] = _mm512_add_ps(a, c);                                                                            \
                    v[i + h] = _mm512_sub_ps(a, c);                                                                        \
                }                                                                                                          \
        for (size_t j = 0; j < N; j++) _mm512_storeu_ps(b + 16 * j, scaled ? _mm512_mul_ps(v[j], scale) : v[j]);           \
    }
BLOCK_IN_REGISTERS(1)
BLOCK_IN_REGISTERS(2)
BLOCK_IN_REGISTERS(4)
BLOCK_IN_REGISTERS(8)
BLOCK_IN_REGISTERS(16)

/// A block of 512 floats: each half of 256 in registers up to the stage of half 128, then the
/// last stage (half 256) and the scale in one pass (32 vectors do not fit the registers).
AVX512 static void block_in_registers_32(const float *s, float *b, const float *signs, __m512 scale, int scaled) {
    block_in_registers_16(s, b, signs, scale, 0);
    block_in_registers_16(s + 256, b + 256, signs + 256, scale, 0);
    for (size_t i = 0; i < 256; i += 16) {
        const __m512 a = _mm512_loadu_ps(b + i), c = _mm512_loadu_ps(b + 256 + i);
        const __m512 sum = _mm512_add_ps(a, c), difference = _mm512_sub_ps(a, c);
        _mm512_storeu_ps(b + i, scaled ? _mm512_mul_ps(sum, scale) : sum);
        _mm512_storeu_ps(b + 256 + i, scaled ? _mm512_mul_ps(difference, scale) : difference);
    }
}

/// Rows of `source` rotated into `x`, Sylvester blocks of 16 to 512 floats each in registers; 0
/// (nothing done) for other blocks.
AVX512 static int rotate_rows_in_registers(const float *source, float *x, size_t rows, size_t size, size_t block, size_t twelves,
                                           const float *signs) {
    void (*rotate_block)(const float *, float *, const float *, __m512, int) = NULL;
    switch (twelves == 0 ? block : 0) {
    case 16: rotate_block = block_in_registers_1; break;
    case 32: rotate_block = block_in_registers_2; break;
    case 64: rotate_block = block_in_registers_4; break;
    case 128: rotate_block = block_in_registers_8; break;
    case 256: rotate_block = block_in_registers_16; break;
    case 512: rotate_block = block_in_registers_32; break;
    default: return 0;
    }
    const __m512 scale = _mm512_set1_ps(1.0f / sqrtf((float)block));
    for (size_t r = 0; r < rows; r++)
        for (size_t start = 0; start < size; start += block)
            rotate_block(source + r * size + start, x + r * size + start, signs + start, scale, 1);
    return 1;
}

static void no_small_stages(float *b, size_t block, size_t below) {
    (void)b;
    (void)block;
    (void)below;
}

static int no_vector_paley(float *b, size_t block, size_t inner, const int8_t *paley, float *scratch) {
    (void)b;
    (void)block;
    (void)inner;
    (void)paley;
    (void)scratch;
    return 0;
}

AVX512 void shrink_hadamard_rotate(const float *source, float *x, size_t rows, size_t size, size_t block, size_t twelves, size_t power_of_two,
                                   const float *signs, const int8_t *paley, float *scratch) {
    if (rotate_rows_in_registers(source, x, rows, size, block, twelves, signs)) return;
    if (source != x) memcpy(x, source, rows * size * sizeof(float));
    const size_t fused = block % 16 == 0 ? (power_of_two < 16 ? power_of_two : 16) : 1;
    rotate_rows(x, rows, size, block, twelves, power_of_two, signs, paley, scratch, small_stages_avx512, fused, paley_avx512);
}

AVX2 void shrink_hadamard_rotate_avx2(const float *source, float *x, size_t rows, size_t size, size_t block, size_t twelves, size_t power_of_two,
                                      const float *signs, const int8_t *paley, float *scratch) {
    if (source != x) memcpy(x, source, rows * size * sizeof(float));
    rotate_rows(x, rows, size, block, twelves, power_of_two, signs, paley, scratch, no_small_stages, 1, no_vector_paley);
}
