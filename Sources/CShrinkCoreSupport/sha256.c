// SHA-256 block compression with the x86 SHA extensions (FIPS 180-4 rounds, two per
// sha256rnds2); the Swift SHA256 type is the reference it is tested against.
#include <stddef.h>
#include <stdint.h>

#include "shrink_core_support.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

#define SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

int shrink_sha256_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    const int sha = (ebx >> 29) & 1;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    return sha && ((ecx >> 19) & 1) && ((ecx >> 9) & 1);  // SHA, SSE4.1, SSSE3
}

// The state as the rounds want it: `abef` holds (a, b, e, f) and `cdgh` (c, d, g, h), highest
// lane first. Message words are kept in four registers of four, group `r` in m[r % 4]; for
// r ≥ 4, W[t..t+3] = msg2(msg1(W[t−16..], W[t−12..]) + W[t−7..t−4], W[t−4..t−1]).
SHA_TARGET void shrink_sha256_blocks(uint32_t state[8], const uint8_t *data, size_t blocks) {
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)state);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)(state + 4));
    const __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (size_t block = 0; block < blocks; block++, data += 64) {
        const __m128i abef_start = abef, cdgh_start = cdgh;
        __m128i m[4];
        for (int j = 0; j < 4; j++) m[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * j)), byte_swap);
        for (int r = 0; r < 16; r++) {
            __m128i *words = &m[r & 3];
            if (r >= 4) {
                *words = _mm_sha256msg1_epu32(*words, m[(r + 1) & 3]);
                *words = _mm_add_epi32(*words, _mm_alignr_epi8(m[(r + 3) & 3], m[(r + 2) & 3], 4));
                *words = _mm_sha256msg2_epu32(*words, m[(r + 3) & 3]);
            }
            const __m128i scheduled = _mm_add_epi32(*words, _mm_loadu_si128((const __m128i *)(shrink_sha256_round_constants + 4 * r)));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, scheduled);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(scheduled, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef_start);
        cdgh = _mm_add_epi32(cdgh, cdgh_start);
    }
    const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    dcba = _mm_blend_epi16(feba, dchg, 0xF0);
    hgfe = _mm_alignr_epi8(dchg, feba, 8);
    _mm_storeu_si128((__m128i *)state, dcba);
    _mm_storeu_si128((__m128i *)(state + 4), hgfe);
}
#else
int shrink_sha256_available(void) { return 0; }
void shrink_sha256_blocks(uint32_t state[8], const uint8_t *data, size_t blocks) {
    (void)state;
    (void)data;
    (void)blocks;
}
#endif
