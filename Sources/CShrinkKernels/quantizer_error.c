// The score LinearQuantizer gives an affine candidate, in vector registers (Swift does not
// vectorize its clamps).
#include "shrink_kernels.h"

/// (v - scale * clamp(round(v / scale), below, above))^2 with the rounding of
/// shrink_affine_squared_error.
static inline float squared_delta(float v, float inverse, float scale, float below, float above) {
    const float magic = 12582912.0f;
    float t = v * inverse;
    t = t < below - 1 ? below - 1 : t;
    t = t > above + 1 ? above + 1 : t;
    float step = (t + magic) - magic;
    step = step < below ? below : step;
    step = step > above ? above : step;
    const float d = v - scale * step;
    return d * d;
}

float shrink_affine_squared_error(const float *values, size_t n, float scale, float below, float above) {
    const float inverse = 1.0f / scale;
    float sums[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        for (size_t k = 0; k < 4; k++) sums[k] += squared_delta(values[i + k], inverse, scale, below, above);
    }
    for (; i < n; i++) sums[0] += squared_delta(values[i], inverse, scale, below, above);
    return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}
