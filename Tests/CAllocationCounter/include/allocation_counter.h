#ifndef SHRINK_ALLOCATION_COUNTER_H
#define SHRINK_ALLOCATION_COUNTER_H

#include <stddef.h>

/// 1 in a build with AddressSanitizer or ThreadSanitizer, 0 otherwise.
int shrink_sanitized_build(void);

/// 1 when allocations are counted; 0 in a sanitized build, where `end` returns -1.
int shrink_allocations_counted(void);

/// Starts counting the calling thread's heap allocations (malloc, calloc, realloc, posix_memalign,
/// aligned_alloc).
void shrink_count_allocations_begin(void);

/// Stops counting and returns how many allocations the calling thread made since `begin`.
long shrink_count_allocations_end(void);

#endif
