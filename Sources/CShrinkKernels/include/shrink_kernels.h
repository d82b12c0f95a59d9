// Decode and dot loops that need x86 vector instructions Swift cannot select per function.
// Every function has a Swift reference twin in ShrinkKernels and the same tests; callers check
// shrink_cpu_has_avx512() once and use the Swift path otherwise.
#ifndef SHRINK_KERNELS_H
#define SHRINK_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/// 1 when the CPU and OS support AVX-512 F, BW and VL (the kernels below), else 0.
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

/// out[i] = values[i] widened from F16 (bf16 = 0) or BF16 (bf16 = 1).
void shrink_decode_half(const uint16_t *values, size_t n, int bf16, float *out);

/// Sum over i of values[i] (F16, or BF16 when bf16 = 1) * x[i], in 32 float lanes.
float shrink_dot_half(const uint16_t *values, const float *x, size_t n, int bf16);

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

/// Scaled dot-product attention of one head over one sequence, fused: for each query row i, the
/// scores s_j = (scale * q_i) . k_j over all `length` keys, softmax (max subtracted, exp, sum),
/// and out_i = (sum over j of e_j * v_j) / (sum over j of e_j). q, k, v and out point at the
/// head's first column of token 0, rows `stride` floats apart; head_size <= 128. `scratch` holds
/// (head_size + 4) * padded floats, padded = length rounded up to 16 (the scores of 4 query rows,
/// taken 4 at a time, and the keys transposed so that 16 scores take one FMA per dimension). The
/// Swift twin (KernelVariant.attentionHead) computes the same.
void shrink_attention_head_f32(const float *q, const float *k, const float *v, size_t length, size_t head_size, size_t stride,
                               float scale, float *scratch, float *out);

/// Causal attention of the `group` query heads that share one key/value head, over a cache:
/// query row r of rows [row_begin, row_end) sits at position start + r and sees cache positions
/// 0…start + r, with the arithmetic of shrink_attention_head_f32 (scores of (scale * q) . k_j,
/// softmax with its maximum subtracted, context divided by the sum). The query of row r and head
/// g of the group starts at q + r * q_stride + g * head_size, its context at the same offset from
/// out. The cache's keys are transposed in tiles of 16 positions, each tile head_size rows of 16:
/// dimension d of position j at keys[(j / 16) * 16 * head_size + d * 16 + j % 16], readable up to
/// start + row_end rounded up to 16 (positions past start + row_end may hold anything: their scores
/// are masked), so that a decoded token reads its head's keys as one contiguous run; the value of
/// position j starts at v + j * v_stride. head_size <= 128; `scratch` holds 4 * padded floats,
/// padded = start + row_end rounded up to 16.
void shrink_causal_attention_f32(const float *q, size_t q_stride, const float *keys, const float *v, size_t v_stride, size_t head_size,
                                 size_t group, size_t start, size_t row_begin, size_t row_end, float scale, float *scratch, float *out);

/// In place GELU, x * (1 + erf(x / sqrt 2)) / 2, with erf from Abramowitz & Stegun 7.1.26
/// (|error| <= 1.5e-7) and exp from a degree-6 polynomial after range reduction by ln 2.
void shrink_gelu_f32(float *x, size_t n);

/// In place SwiGLU, gate[i] = gate[i] / (1 + e^-gate[i]) * up[i], with the exp of the attention
/// kernels (a degree-6 polynomial after range reduction by ln 2, arguments clamped to [-87, 88]).
void shrink_swiglu_f32(float *gate, const float *up, size_t n);

/// Per row of n floats: x = x + residual (residual may be NULL), then x = (x - mean) / sqrt(var +
/// epsilon) * gamma + beta, with the mean and variance summed in 16 float lanes.
void shrink_add_layer_norm_f32(float *x, const float *residual, size_t rows, size_t n, const float *gamma,
                               const float *beta, float epsilon);

/// Sum of a[i] * b[i], accumulated in 16 float lanes then reduced.
float shrink_dot_f32(const float *a, const float *b, size_t n);

// ---- Quantizer scores (quantizer_error.c) ----

/// Sum over i < n of (v_i - scale * clamp(round(v_i / scale), below, above))^2, rounding to
/// nearest (ties to even) by adding and subtracting 1.5 * 2^23 after clamping v_i / scale to
/// [below - 1, above + 1]; four partial sums (lane k takes the indices = k mod 4 in order, the
/// tail goes to lane 0) added as (s0 + s1) + (s2 + s3). LinearQuantizer.squaredError's loop;
/// PassTests check it against the formula in doubles.
float shrink_affine_squared_error(const float *values, size_t n, float scale, float below, float above);

// ---- fp32 panels (f32_panels.c) ----
// Weights [n, k] packed in panels of 16 output channels: for input i, 16 floats (channel 16p + r
// at float i * 16 + r of panel p); a panel is k * 16 floats, channels past n are zero.

/// y[m * ldy + c] = bias[c] + sum over i of w[c][i] * x[m * ldx + i], for m < rows and the channels
/// of panels [panel_begin, panel_end), each sum one FMA per input in input order (bias may be NULL).
void shrink_gemm_f32_panels(const float *panels, size_t n, size_t k, size_t panel_begin, size_t panel_end, const float *x,
                            size_t rows, size_t ldx, float *y, size_t ldy, const float *bias);

// ---- Integer dot products (int8_panels.c) ----
//
// Weights are u8 codes q with value a * q - o, where the scale a and offset o are per output
// channel and per weight block (a run of 32 * blocks_per_wblock inputs). They are packed in
// panels of 16 output channels over kpad inputs (kpad a multiple of 32, padded with code 0):
// - byte panels: for input quad j (inputs 4j..4j+3), 64 bytes, byte 4r + i = code of channel r
//   at input 4j + i; a panel is kpad * 16 bytes;
// - nibble panels: for input octet t (inputs 8t..8t+7), 64 bytes, byte 4r + i holds the code of
//   channel r at input 8t + i in its low nibble and at input 8t + 4 + i in its high nibble; a
//   panel is kpad * 8 bytes;
// - crumb panels (2-bit codes): for input group g (inputs 16g..16g+15), 64 bytes, byte 4r + i
//   holds the code of channel r at input 16g + 4c + i in bits 2c..2c+1 (c = 0..3); a panel is
//   kpad * 4 bytes. Crumbs 0 and 1 of group g hold the inputs the low and high nibbles of octet
//   2g would, crumbs 2 and 3 those of octet 2g + 1, so both run through one octet loop;
// - tribit panels (3-bit codes): per block of 32 inputs, 192 bytes: the codes' low two bits as the
//   block's two crumb groups (128 bytes), then 64 bytes of their third bits, byte 4r + i holding
//   in bit j that of channel r at input 32b + 4j + i; a panel is kpad * 6 bytes;
// - pair panels (code_bits = SHRINK_PAIR_PANELS: vector palettes whose entries are two adjacent
//   inputs' codes, at most 16 entries): for input octet t, 32 bytes, byte 2r + h holding in its low
//   nibble the entry of channel r's pair at inputs 8t + 2h, 8t + 2h + 1 and in its high nibble the
//   pair at 8t + 4 + 2h, 8t + 5 + 2h; a panel is kpad * 4 bytes. The LUT is 32 bytes per panel,
//   entry e's two codes (first input first) at bytes 2e, 2e + 1; there is no low plane;
// - 64-entry pair panels (code_bits = SHRINK_PAIR64_PANELS, 6-bit entry indices): per block b of
//   32 inputs, 192 bytes: the indices' low 4 bits as the block's 4 octets of a pair panel (128
//   bytes), then their high 2 bits, 32 bytes per two octets: byte 2r + h of octets 2u, 2u + 1
//   holds in bits 2c..2c + 1 those of the pair of channel r at inputs 32b + 16u + 4c + 2h,
//   32b + 16u + 4c + 2h + 1 (c = 0..3); a panel is kpad * 6 bytes, its LUT 128 bytes;
// - 2:4 panels (code_bits = SHRINK_SPARSE24_PANELS: scalar palettes of at most 16 entries with at
//   most 2 of every 4 inputs kept): per input octet, 48 bytes: 16 bytes of masks, byte r holding
//   in its low nibble which of channel r's inputs 8t..8t+3 are kept (bit i: input 8t + i) and in
//   its high nibble which of 8t+4..8t+7; then 32 bytes of kept indices, byte 8l + j holding in its
//   low nibble the index of slot j % 2 of channel 4l + j / 2 in the first quad, in its high nibble
//   in the second (slot 0: the first kept input, slot 1: the second; unused slots 0). A panel is
//   kpad * 6 bytes; its LUT 32 bytes, the 16 entries' codes then, at byte 16, the code of a
//   pruned weight;
// - 256-entry pair panels (code_bits = SHRINK_PAIR256_PANELS: pairs of at most 256 entries, one
//   byte per index): for input octet t, 64 bytes, byte 16l + 8q + 2c + h holding the entry of
//   channel 4l + c at inputs 8t + 4q + 2h, 8t + 4q + 2h + 1 (the order in which widening the octet's
//   two halves to words yields its quads); a panel is kpad * 8 bytes. The LUT is 576 bytes per
//   panel, entry e's two codes at bytes 2e, 2e + 1, then 64 bytes of padding (the AVX2 kernel's
//   gathers read 2 bytes past the last entry);
// - quad panels (code_bits = SHRINK_QUAD_PANELS: vector palettes whose entries are four adjacent
//   inputs' codes, at most 256 entries, one byte per index): per group g of 16 inputs, 64 bytes,
//   byte 16l + 4k + c holding the entry of channel 4l + c at inputs 16g + 4k..16g + 4k + 3 (the
//   order in which byte unpacking of four looked-up code planes yields quad k); a panel is
//   kpad * 4 bytes. The LUT is 1,024 bytes per panel, entry e's four codes (first input first) at
//   bytes 4e..4e + 3, so that a gather of dwords by entry yields a quad of codes;
// With a LUT (16 bytes per panel), a packed code is an index and its code is lut[index].
// Two planes (`low` not NULL): codes are 16 bits, q = 256 * high + low, where high is the code the
// panels above give and low comes from a second table of the same layout: for nibble panels with
// a LUT (nibble, tribit or crumb panels), 16 more bytes per panel (low[index]); for 2:4 panels,
// 32 more bytes per panel laid out like their LUT (the 16 entries' low bytes, then the pruned
// code's); for byte panels, a second panel array. Each
// activation block's integer sum is (sum(q_x * high) << 8) + sum(q_x * low), exact in int32
// (|sum| <= 32 * 65535 * 128 < 2^31); everything else is as for one plane. Palette LUTs that an
// 8-bit grid does not hold exactly run so, on a 16-bit grid.
// scales and offsets hold, per panel and weight block, 16 floats (one per channel).
// Activations are quantized per row in blocks of 32 inputs: x ~ s * q with s = max|x| / 127,
// q = round-to-nearest-even(x * (127 / max|x|)) in [-127, 127] (q = 0, s = 0 for an all-zero
// block); per block the integer sum(q) and the block sum s * sum(q).
// Then y[m][n] = bias[n] + sum over weight blocks of (a * sum over its activation blocks of
// (s * sum(q_x * q_w)) - o * sum over its activation blocks of s * sum(q_x)).
// In that order: per weight block, the activation blocks' s * sum(q_x * q_w) are summed (one FMA
// each, in block order), the sum is multiplied by a and added (one FMA), then the offset term.
// Centered form (2-, 3- and 4-bit affine codes with integer zero points z, o = a * z, from
// SHRINK_WIDEN_FROM_ROWS rows on): the codes are widened to bytes q - z + 128, each activation
// block's integer sum is sum(q_x * (q_w - z + 128)) - 128 * sum(q_x), and there is no offset term.
// Byte panels may hold their codes centered already (offsets NULL: each code stored as q - z + 128
// for its channel's and weight block's integer z, o = a * z): the same sums, no offset term.
// Integer-scaled form (4-bit affine codes whose weight-block scales are a = m * S, an integer
// multiplier m per channel and weight block times a scale S per channel, with z * m <= 128 and
// (15 - z) * m <= 127; at every row count, so a row's result does not depend on how many rows
// come with it): each activation block's integer sum is sum(q_x * ((q_w - z) * m + 128)) -
// 128 * sum(q_x), the whole row is one weight block of scale S, and there is no offset term. From
// SHRINK_WIDEN_FROM_ROWS rows on the codes are widened to those bytes; below, the VNNI kernel
// centers them in registers (q - z + 16, dot starting at -16 * sum(q_x)) and multiplies each
// block's sum by m, which is the same integer.

/// The code_bits of pair panels and of 64-entry pair panels.
#define SHRINK_PAIR_PANELS 1
#define SHRINK_PAIR64_PANELS 5
/// The code_bits of 2:4 panels.
#define SHRINK_SPARSE24_PANELS 6
/// The code_bits of quad panels and of 256-entry pair panels.
#define SHRINK_QUAD_PANELS 7
#define SHRINK_PAIR256_PANELS 0

/// Bytes of one panel of codes over kpad inputs, code_bits as for shrink_gemm_u8s8_panels.
static inline size_t shrink_panel_bytes(size_t kpad, int code_bits) {
    if (code_bits == SHRINK_PAIR_PANELS || code_bits == SHRINK_QUAD_PANELS) return kpad * 4;
    if (code_bits == SHRINK_PAIR256_PANELS) return kpad * 8;
    if (code_bits == SHRINK_PAIR64_PANELS || code_bits == SHRINK_SPARSE24_PANELS) return kpad * 6;
    return kpad * 2 * (size_t)code_bits;
}

/// Bytes of one panel's LUT: 32 for pair and 2:4 panels, 128 for 64-entry pair panels, 576 for
/// 256-entry pair panels, 1,024 for quad panels, else 16.
static inline size_t shrink_lut_bytes(int code_bits) {
    return code_bits == SHRINK_PAIR_PANELS || code_bits == SHRINK_SPARSE24_PANELS ? 32
           : code_bits == SHRINK_PAIR64_PANELS ? 128 : code_bits == SHRINK_PAIR256_PANELS ? 576 : code_bits == SHRINK_QUAD_PANELS ? 1024 : 16;
}

/// Bytes of one panel's low plane (two planes): the low table of a 2:4 panel (laid out like its
/// LUT), 16 for other packed panels (a low LUT), a panel of bytes for byte panels.
static inline size_t shrink_low_plane_bytes(size_t kpad, int code_bits) {
    return code_bits == SHRINK_SPARSE24_PANELS ? shrink_lut_bytes(code_bits) : code_bits < 8 ? 16 : shrink_panel_bytes(kpad, code_bits);
}

/// Whether the kernels' octet decoding yields codes (pair, 2:4 and quad panels) rather than LUT indices.
static inline int shrink_decodes_codes(int code_bits) {
    return code_bits == SHRINK_PAIR_PANELS || code_bits == SHRINK_PAIR64_PANELS || code_bits == SHRINK_SPARSE24_PANELS
           || code_bits == SHRINK_QUAD_PANELS || code_bits == SHRINK_PAIR256_PANELS;
}


/// From this many rows on, 2-, 3- and 4-bit panels and pair panels are widened to bytes once per pair of panels (in a
/// per-thread buffer) and run in tiles of 4 rows by 2 panels, instead of being unpacked in every
/// tile of up to 8 rows of one panel. Below it the widening pass costs more than it saves (MiniLM
/// batch 1, ~9 tokens, 1 thread: 4-bit at 1,050–1,120 sentences/s with 16 against 970–1,020 with
/// 8 in the earlier 4-row tiles).
#define SHRINK_WIDEN_FROM_ROWS 16

/// The wrapping sum of count 64-bit values, read with 64-byte loads into eight accumulators: the
/// read-bandwidth probe benchmarks compare kernels against (callers check shrink_cpu_has_avx512).
uint64_t shrink_read_sum_u64(const uint64_t *values, size_t count);

/// 1 when the CPU supports AVX-512 VNNI (and the AVX-512 F/BW the other kernels need), else 0.
int shrink_cpu_has_avx512_vnni(void);

/// 1 when it supports AVX-512 VBMI too (what shrink_gemm_u8s8_panels_vbmi needs), else 0.
int shrink_cpu_has_avx512_vbmi(void);

/// Quantizes `rows` rows of `k` floats (row stride `ldx`) into int8 rows of `kpad` (zero padded),
/// with `kpad / 32` scales, block sums and integer block sums per row.
void shrink_quantize_rows_s8(const float *x, size_t rows, size_t k, size_t ldx, size_t kpad, int8_t *xq,
                             float *scales, float *sums, int32_t *integer_sums);

/// y[m * ldy + c] for m < rows and the channels c < n of panels [panel_begin, panel_end), codes of
/// code_bits bits (8: byte panels, 4: nibble, 3: tribit, 2: crumb panels), pair panels of any size, 2:4 panels or quad
/// panels (bias may be NULL; luts is NULL unless nibble, tribit or crumb indices go through per-panel LUTs, and
/// holds the pair and quad panels' entries; low is NULL unless the
/// codes have two planes (then there are no zero points or multipliers); zero_points, laid
/// out like the scales, is NULL unless the nibble codes are affine with o = a * z, which allows the
/// centered form; multipliers (laid out like the zero points) and channel_scales (16 floats per
/// panel) are NULL unless they allow the integer-scaled form, which nibble panels alone take;
/// offsets is NULL for centered byte codes).
void shrink_gemm_u8s8_panels(const uint8_t *w, int code_bits, const uint8_t *luts, const uint8_t *low, const uint8_t *zero_points,
                             const uint8_t *multipliers, const float *channel_scales, size_t n,
                             size_t kpad, size_t blocks_per_wblock, const float *scales, const float *offsets,
                             size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                             const float *xsums, const int32_t *xisums, size_t rows, float *y, size_t ldy, const float *bias);

/// shrink_gemm_u8s8_panels compiled for AVX-512 VBMI as well (int8_panels_vbmi.c; callers check
/// shrink_cpu_has_avx512_vbmi): quad panels look their entries up with `vpermi2b`, 64 at a time,
/// instead of gathering 16; the same results.
void shrink_gemm_u8s8_panels_vbmi(const uint8_t *w, int code_bits, const uint8_t *luts, const uint8_t *low, const uint8_t *zero_points,
                                  const uint8_t *multipliers, const float *channel_scales, size_t n,
                                  size_t kpad, size_t blocks_per_wblock, const float *scales, const float *offsets,
                                  size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                                  const float *xsums, const int32_t *xisums, size_t rows, float *y, size_t ldy, const float *bias);


/// Half-block form (half_blocks.c; ggml's Q6_K, Q2_K): byte panels of codes q <= 63 (nibble
/// panels when four_bit, as for shrink_gemm_u8s8_panels), and per
/// channel an int8 multiplier m for every 16 inputs and a float scale S for every super-block of
/// blocks_per_super activation blocks, w = S * m * (q - zero), or with offsets (offset_multipliers
/// not NULL: a u8 k per channel and 16 inputs, laid out like the multipliers, and a float S_o per
/// channel and super-block) w = S * m * (q - zero) - S_o * k. multipliers holds, per panel and 16
/// inputs, 16 int8s; super_scales (and super_offsets), per panel and super-block, 16 floats (zero
/// past the last channel). Per row and activation block b (halves h0, h1 of 16 inputs, sums
/// sum_h(q_x)): the integer d_h = sum(q_x * q_w) - zero * sum_h(q_x) over the half,
/// dot = m_h0 * d_h0 + m_h1 * d_h1, and with offsets o = k_h0 * sum_h0(q_x) + k_h1 * sum_h1(q_x);
/// per super-block part = sum over its blocks, in order, of fma(float(dot), s_b, part) (and
/// offset_part the same of o); then acc = fma(part, S, acc), then acc = fma(-offset_part, S_o, acc),
/// in super-block order; y = acc (+ bias).
void shrink_gemm_u8s8_half_blocks(const uint8_t *w, int four_bit, const int8_t *multipliers, const float *super_scales, int32_t zero,
                                  const uint8_t *offset_multipliers, const float *super_offsets, size_t n, size_t kpad,
                                  size_t blocks_per_super, size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                                  size_t rows, float *y, size_t ldy, const float *bias);

/// shrink_gemm_u8s8_half_blocks with AVX2 `vpmaddubsw` (codes <= 63: no pair sum saturates; same results).
void shrink_gemm_u8s8_half_blocks_avx2(const uint8_t *w, int four_bit, const int8_t *multipliers, const float *super_scales, int32_t zero,
                                       const uint8_t *offset_multipliers, const float *super_offsets, size_t n, size_t kpad,
                                       size_t blocks_per_super, size_t panel_begin, size_t panel_end, const int8_t *xq,
                                       const float *xscales, size_t rows, float *y, size_t ldy, const float *bias);

// ---- The same integer dot products with AVX2 (int8_panels_avx2.c), for CPUs without AVX-512 VNNI ----

/// 1 when the CPU supports AVX2 and FMA, else 0.
int shrink_cpu_has_avx2(void);

/// shrink_quantize_rows_s8 with AVX2 (same results).
void shrink_quantize_rows_s8_avx2(const float *x, size_t rows, size_t k, size_t ldx, size_t kpad, int8_t *xq, float *scales,
                                  float *sums, int32_t *integer_sums);

/// shrink_gemm_u8s8_panels with AVX2 `vpmaddubsw` (same results: the arithmetic of the Swift twin,
/// centered from SHRINK_WIDEN_FROM_ROWS rows and integer-scaled at every row count like the other
/// variants, without widening).
void shrink_gemm_u8s8_panels_avx2(const uint8_t *w, int code_bits, const uint8_t *luts, const uint8_t *low, const uint8_t *zero_points,
                                  const uint8_t *multipliers, const float *channel_scales, size_t n,
                                  size_t kpad, size_t blocks_per_wblock, const float *scales, const float *offsets,
                                  size_t panel_begin, size_t panel_end, const int8_t *xq, const float *xscales,
                                  const float *xsums, const int32_t *xisums, size_t rows, float *y, size_t ldy, const float *bias);

// ---- The encoder's float kernels with AVX2 and FMA (kernels_avx2.c), for CPUs without AVX-512 ----
// Same contracts as the AVX-512 functions of the same name without the suffix, in 8 float lanes.

void shrink_gelu_f32_avx2(float *x, size_t n);

void shrink_add_layer_norm_f32_avx2(float *x, const float *residual, size_t rows, size_t n, const float *gamma, const float *beta,
                                    float epsilon);

float shrink_dot_f32_avx2(const float *a, const float *b, size_t n);

/// `scratch` as for shrink_attention_head_f32 (keys padded to 8 here, so its size suffices).
void shrink_attention_head_f32_avx2(const float *q, const float *k, const float *v, size_t length, size_t head_size, size_t stride,
                                    float scale, float *scratch, float *out);

/// shrink_causal_attention_f32 in 8 lanes (same contract and scratch; its own summation order).
void shrink_causal_attention_f32_avx2(const float *q, size_t q_stride, const float *keys, const float *v, size_t v_stride,
                                      size_t head_size, size_t group, size_t start, size_t row_begin, size_t row_end, float scale,
                                      float *scratch, float *out);

/// One FMA per input in input order per output, like shrink_gemm_f32_panels (same results).
void shrink_gemm_f32_panels_avx2(const float *panels, size_t n, size_t k, size_t panel_begin, size_t panel_end, const float *x,
                                 size_t rows, size_t ldx, float *y, size_t ldy, const float *bias);

// ---- The randomized Hadamard rotation of activation rows (hadamard.c) ----

/// x[r·size + i] ← (R · s_r)[i] for each of `rows` rows s_r of `source` (which may be x itself):
/// R = (1/√block)(I ⊗ H)·diag(signs), H = H_12^{⊗twelves} ⊗ H_{power_of_two} over each run of
/// `block` elements, `paley` the 12 × 12 ±1 matrix row-major, `scratch` at least `block` floats
/// (unused, and may be NULL, when twelves = 0). Same floats as HadamardRotation.rotate. Sylvester
/// blocks of 16 to 512 go through registers with one load and one store per element.
void shrink_hadamard_rotate(const float *source, float *x, size_t rows, size_t size, size_t block, size_t twelves, size_t power_of_two,
                            const float *signs, const int8_t *paley, float *scratch);

/// The same in AVX2 (8 float lanes).
void shrink_hadamard_rotate_avx2(const float *source, float *x, size_t rows, size_t size, size_t block, size_t twelves, size_t power_of_two,
                                 const float *signs, const int8_t *paley, float *scratch);

#endif
