// fp32 products with weights packed in panels of 16 output channels (layout in shrink_kernels.h):
// the few-row (latency) path of dense layers. Swift twin: ShrinkKernels/DenseLinear (`.swift`).
#include "shrink_kernels.h"
#include "tiles.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512F __attribute__((target("avx512f")))
#define INLINE static inline __attribute__((always_inline))

/// `MR` input rows times `NP` panels over all k: one FMA per weight vector and row, in k order.
AVX512F INLINE void f32_tile(const float *w, size_t panel_floats, int np, size_t k, const float *x, size_t ldx, int mr, float *y,
                             size_t ldy, size_t n0, size_t n, const float *bias) {
    __m512 acc[6][2];
    for (int m = 0; m < mr; m++)
        for (int p = 0; p < np; p++) acc[m][p] = _mm512_setzero_ps();
    for (size_t i = 0; i < k; i++) {
        __m512 v[2];
        for (int p = 0; p < np; p++) v[p] = _mm512_loadu_ps(w + p * panel_floats + i * 16);
        for (int m = 0; m < mr; m++) {
            __m512 xv = _mm512_set1_ps(x[m * ldx + i]);
            for (int p = 0; p < np; p++) acc[m][p] = _mm512_fmadd_ps(v[p], xv, acc[m][p]);
        }
    }
    store_tile(acc, mr, np, y, ldy, n0, n, bias);
}

#define F32_TILE(MR, NP) \
    f32_tile(panels + panel * panel_floats, panel_floats, NP, k, x + m * ldx, ldx, MR, y + m * ldy, ldy, panel * 16, n, bias)

AVX512F void shrink_gemm_f32_panels(const float *panels, size_t n, size_t k, size_t panel_begin, size_t panel_end, const float *x,
                                    size_t rows, size_t ldx, float *y, size_t ldy, const float *bias) {
    const size_t panel_floats = k * 16;
    SHRINK_FOR_EACH_TILE(rows, panel_begin, panel_end, 6, F32_TILE);
}

#else

void shrink_gemm_f32_panels(const float *panels, size_t n, size_t k, size_t panel_begin, size_t panel_end, const float *x,
                            size_t rows, size_t ldx, float *y, size_t ldy, const float *bias) {
    (void)panels, (void)n, (void)k, (void)panel_begin, (void)panel_end, (void)x, (void)rows, (void)ldx, (void)y, (void)ldy, (void)bias;
}

#endif
