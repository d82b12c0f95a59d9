// The one instruction Swift cannot emit that the worker pool needs.
#ifndef SHRINK_CORE_SUPPORT_H
#define SHRINK_CORE_SUPPORT_H

/// A spin-wait hint (x86 `pause`): lets the sibling hyper-thread and the memory system breathe
/// while a worker polls for work.
static inline void shrink_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

#endif
