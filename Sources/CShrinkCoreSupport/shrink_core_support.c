#include "shrink_core_support.h"

#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>

int shrink_release_free_heap(void) { return malloc_trim(0); }
#else
int shrink_release_free_heap(void) { return 0; }
#endif
