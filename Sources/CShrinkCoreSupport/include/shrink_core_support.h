// What Swift cannot reach: the worker pool's spin hint, the SHA extensions, the C allocator's trim.
#ifndef SHRINK_CORE_SUPPORT_H
#define SHRINK_CORE_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/// SHA-256's round constants K_0 … K_63 (FIPS 180-4, 4.2.2).
static const uint32_t shrink_sha256_round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/// 1 when the CPU has the SHA extensions (with SSE4.1 and SSSE3) that `shrink_sha256_blocks` needs.
int shrink_sha256_available(void);

/// Runs the SHA-256 compression function over `blocks` 64-byte blocks at `data`, updating the
/// eight state words (FIPS 180-4 order, a first). Only when `shrink_sha256_available()`.
void shrink_sha256_blocks(uint32_t state[8], const uint8_t *data, size_t blocks);

/// Returns the C allocator's free memory to the system: glibc's `malloc_trim(0)`, which also
/// releases the whole free pages inside its arenas (freed blocks below its mmap threshold, up to
/// 32 MiB, otherwise stay resident). 1 when memory was released; 0 otherwise, and always with
/// another C library.
int shrink_release_free_heap(void);

/// The calling thread's buffer slot (0 unless set): which of a layer's kept buffers it uses first,
/// so that concurrent groups of one forward pass each keep to buffers of their own.
int shrink_buffer_slot(void);

/// Sets the calling thread's buffer slot.
void shrink_set_buffer_slot(int slot);

/// A spin-wait hint (x86 `pause`): lets the sibling hyper-thread and the memory system breathe
/// while a worker polls for work.
static inline void shrink_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#endif
