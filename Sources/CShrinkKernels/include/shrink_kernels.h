// Decode and dot loops that need x86 vector instructions Swift cannot select per function.
// Every function has a Swift reference twin in ShrinkKernels and the same tests; callers check
// shrink_cpu_has_avx512() once and use the Swift path otherwise.
#ifndef SHRINK_KERNELS_H
#define SHRINK_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/// 1 when the CPU and OS support AVX-512 F and BW (the kernels below), else 0.
int shrink_cpu_has_avx512(void);

/// out[i] = scales[i / block] * codes[i] - offsets[i / block] for i in [0, n): 8-bit codes.
void shrink_decode_affine_u8(const uint8_t *codes, size_t n, const float *scales, const float *offsets,
                             size_t block, float *out);

/// Same with 4-bit codes packed two per byte, element 2k in the low nibble of byte k; n even.
void shrink_decode_affine_u4(const uint8_t *packed, size_t n, const float *scales, const float *offsets,
                             size_t block, float *out);

/// out[i] = lut[indices[i]] for 8-bit indices (lut has 256 entries).
void shrink_decode_lut_u8(const uint8_t *indices, size_t n, const float *lut, float *out);

/// out[i] = lut[index i] for 4-bit indices packed two per byte, low nibble first (lut has 16
/// entries); n even.
void shrink_decode_lut_u4(const uint8_t *packed, size_t n, const float *lut, float *out);

/// Fused decode and dot of one weight row: sum over i of (scales[i / block] * code_i -
/// offsets[i / block]) * x[i], for 8-bit codes.
float shrink_dot_affine_u8(const uint8_t *codes, const float *x, size_t n, const float *scales, const float *offsets,
                           size_t block);

/// The same for 4-bit codes packed two per byte, low nibble first; n even.
float shrink_dot_affine_u4(const uint8_t *packed, const float *x, size_t n, const float *scales, const float *offsets,
                           size_t block);

/// Fused decode and dot with a 16-entry LUT: sum over i of lut[index_i] * x[i], 4-bit packed indices.
float shrink_dot_lut_u4(const uint8_t *packed, const float *x, size_t n, const float *lut);

/// out[m * ldo + r] = sum over k of w[r * n + k] * x[m * n + k], for r < rows_w and m < rows_x:
/// a block of decoded weight rows times a block of input rows, in 4 x 4 register tiles.
void shrink_gemm_nt_f32(const float *w, size_t rows_w, const float *x, size_t rows_x, size_t n, float *out, size_t ldo);

/// Sparse row decode: mask holds n bits (least significant bit first, 1 = kept); kept holds one
/// code per kept position in order (readable 16 bytes past its end). Kept position i decodes to
/// lut[code] when lut is not NULL (lut_size entries: 16, or 256), else to
/// scales[i / block] * code - offsets[i / block]; pruned positions are 0.
void shrink_decode_sparse(const uint8_t *mask, const uint8_t *kept, size_t n, const float *lut, size_t lut_size,
                          const float *scales, const float *offsets, size_t block, float *out);

/// In place GELU, x * (1 + erf(x / sqrt 2)) / 2, with erf from Abramowitz & Stegun 7.1.26
/// (|error| <= 1.5e-7) and exp from a degree-6 polynomial after range reduction by ln 2.
void shrink_gelu_f32(float *x, size_t n);

/// Sum of a[i] * b[i], accumulated in 16 float lanes then reduced.
float shrink_dot_f32(const float *a, const float *b, size_t n);

#endif
