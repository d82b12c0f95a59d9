import CShrinkCoreSupport

/// The process heap.
public enum Heap {
    /// Returns freed heap memory to the system (glibc's `malloc_trim`; nothing with another C
    /// library). Freed blocks smaller than glibc's mmap threshold (which grows to 32 MiB after
    /// large blocks are freed) otherwise stay resident in its per-thread arenas, so a long run of
    /// large, differently sized temporaries ratchets the resident set up. It walks the arenas,
    /// locking each: call it between units of work, not inside them.
    public static func releaseFreeMemory() {
        _ = shrink_release_free_heap()
    }
}
