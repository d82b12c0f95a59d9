// The integer panel kernels of int8_panels.c compiled for AVX-512 VBMI too
// (shrink_gemm_u8s8_panels_vbmi; see there).
#define SHRINK_VBMI 1
#include "int8_panels.c"
