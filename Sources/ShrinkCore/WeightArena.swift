#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Memory for weights repacked at load, carved in order from anonymous mappings of at least
/// `chunkBytes`; mappings of 2 MiB or more start on a 2 MiB boundary and ask the kernel for
/// transparent huge pages (`madvise(MADV_HUGEPAGE)`, honoured where THP is `always` or
/// `madvise`). A decoded token streams every weight once, and with 4 KiB pages that is a TLB miss
/// every 4 KiB (SmolLM2: ~23,000 per token); huge pages cut that to one per 2 MiB (a 90 MB read
/// loop on AMD EPYC Zen 4, interleaved: +9–36 % GB/s).
///
/// Everything allocated lives until the arena is freed, so a model's layers share one arena that
/// each of them retains. Pages are zero-filled and committed when first touched, so the unused tail
/// of a chunk costs address space, not memory. Thread-safe.
public final class WeightArena: @unchecked Sendable {
    public static let hugePageBytes = 2 << 20
    /// Every allocation's alignment (one cache line).
    public static let alignment = 64

    /// The size of the mappings allocations are carved from (a larger request gets one of its own).
    public let chunkBytes: Int
    private let lock = NSLock()
    private var mappings: [(base: UnsafeMutableRawPointer, bytes: Int)] = []
    private var next: UnsafeMutableRawPointer?
    private var remaining = 0

    /// An arena carving mappings of `chunkBytes` (rounded up to pages; 0: each mapping just large
    /// enough for the request that did not fit, so a lone small weight takes its own pages).
    public init(chunkBytes: Int = 16 << 20) {
        self.chunkBytes = chunkBytes
    }

    /// An arena that owns `bytes` at `base`, mapped elsewhere with `mmap` (a cache file), and
    /// unmaps them when it goes; its own allocations take new mappings.
    public init(adopting base: UnsafeMutableRawPointer, bytes: Int) {
        chunkBytes = 0
        mappings = [(base, bytes)]
    }

    /// `count` zeroed values of `T`, 64-byte aligned, valid as long as the arena.
    public func allocate<T>(_ type: T.Type = T.self, count: Int) -> UnsafeMutableBufferPointer<T> {
        precondition(MemoryLayout<T>.alignment <= Self.alignment, "WeightArena: \(T.self) needs more than 64-byte alignment")
        let bytes = max(1, count * MemoryLayout<T>.stride)
        let rounded = (bytes + Self.alignment - 1) / Self.alignment * Self.alignment
        lock.lock()
        defer { lock.unlock() }
        if rounded > remaining { map(max(rounded, chunkBytes)) }
        let start = next!
        next = start + rounded
        remaining -= rounded
        return UnsafeMutableBufferPointer(start: start.bindMemory(to: T.self, capacity: count), count: count)
    }

    /// A copy of `values` in the arena.
    public func copy<T>(_ values: [T]) -> UnsafeMutableBufferPointer<T> {
        let buffer = allocate(T.self, count: values.count)
        _ = buffer.initialize(from: values)
        return buffer
    }

    /// Bytes of address space the arena has mapped.
    public var mappedBytes: Int {
        lock.lock()
        defer { lock.unlock() }
        return mappings.reduce(0) { $0 + $1.bytes }
    }

    /// Maps a chunk of at least `bytes` and makes it the one allocations are carved from.
    private func map(_ bytes: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let huge = bytes >= Self.hugePageBytes
        let granule = huge ? Self.hugePageBytes : page
        let size = (bytes + granule - 1) / granule * granule
        // Over-map by one huge page and trim both ends, so the chunk starts on a 2 MiB boundary.
        let extra = huge ? Self.hugePageBytes : 0
        guard let raw = mmap(nil, size + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), raw != MAP_FAILED else {
            fatalError("WeightArena: cannot map \(size) bytes (errno \(errno))")
        }
        let address = Int(bitPattern: raw)
        let aligned = huge ? (address + extra - 1) / extra * extra : address
        if aligned > address { munmap(raw, aligned - address) }
        if extra - (aligned - address) > 0 { munmap(UnsafeMutableRawPointer(bitPattern: aligned + size), extra - (aligned - address)) }
        let base = UnsafeMutableRawPointer(bitPattern: aligned)!
        #if os(Linux)
        if huge { _ = madvise(base, size, MADV_HUGEPAGE) }
        #endif
        mappings.append((base, size))
        next = base
        remaining = size
    }

    deinit {
        for mapping in mappings { munmap(mapping.base, mapping.bytes) }
    }
}
