#include "shrink_core_support.h"

#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>

int shrink_release_free_heap(void) { return malloc_trim(0); }
#else
int shrink_release_free_heap(void) { return 0; }
#endif

static __thread int buffer_slot = 0;

int shrink_buffer_slot(void) { return buffer_slot; }

void shrink_set_buffer_slot(int slot) { buffer_slot = slot; }
