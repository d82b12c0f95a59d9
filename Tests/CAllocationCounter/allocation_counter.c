// Counts heap allocations made by the calling thread between begin and end, for the tests that
// check that a forward pass allocates nothing. It replaces malloc, calloc, realloc,
// posix_memalign and aligned_alloc in the test executable (glibc exports its own as __libc_*,
// which these forward to; free stays glibc's, which accepts their blocks). In a build with
// AddressSanitizer or ThreadSanitizer, whose runtimes own malloc, nothing is replaced and nothing
// is counted (shrink_allocations_counted() is 0).
#include "allocation_counter.h"

#include <errno.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SHRINK_SANITIZED 1
#endif
#endif

#ifdef SHRINK_SANITIZED

int shrink_sanitized_build(void) { return 1; }
int shrink_allocations_counted(void) { return 0; }
void shrink_count_allocations_begin(void) {}
long shrink_count_allocations_end(void) { return -1; }

#else

int shrink_sanitized_build(void) { return 0; }
int shrink_allocations_counted(void) { return 1; }

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static __thread long counted = -1;

static inline void note(void) {
    if (counted >= 0) counted++;
}

void *malloc(size_t size) {
    note();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    note();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    note();
    return __libc_realloc(pointer, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    note();
    void *pointer = __libc_memalign(alignment, size);
    if (!pointer) return ENOMEM;
    *out = pointer;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
    note();
    return __libc_memalign(alignment, size);
}

void shrink_count_allocations_begin(void) { counted = 0; }

long shrink_count_allocations_end(void) {
    long result = counted;
    counted = -1;
    return result;
}

#endif
