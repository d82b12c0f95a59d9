#if canImport(Glibc)
import Foundation
import Glibc
import Testing
import ShrinkCore

/// Freed heap blocks below glibc's mmap threshold stay resident until `Heap.releaseFreeMemory`.
@Suite struct HeapTests {
    /// This process's resident bytes (`/proc/self/statm`, second field, in pages).
    static func residentBytes() throws -> Int {
        let fields = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
        return try #require(Int(fields[1])) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Whether glibc's allocator serves `malloc`: AddressSanitizer and ThreadSanitizer bring their own.
    static let glibcAllocator = ["__asan_init", "__tsan_init"].allSatisfy { (symbol: String) in dlsym(UnsafeMutableRawPointer(bitPattern: 0), symbol) == nil }

    @Test(.enabled(if: glibcAllocator)) func releaseReturnsFreedHeapPages() throws {
        // Freeing a 30 MiB mapped block (written and read, so that the compiler keeps it) raises the
        // mmap threshold to 30 MiB: 8 MiB blocks then come from the heap. Each is followed by a
        // 256 KiB block that stays, so that the freed ones are holes the heap cannot give back
        // from its top (measured here: 222 MiB resident after the frees, 30 MiB after the release).
        let large = malloc(30 << 20)!
        memset(large, 1, 30 << 20)
        let sample = large.load(fromByteOffset: Int(getpid()) % (30 << 20), as: UInt8.self)
        free(large)
        #expect(sample == 1)
        var blocks: [UnsafeMutableRawPointer] = [], kept: [UnsafeMutableRawPointer] = []
        for _ in 0..<24 {
            blocks.append(malloc(8 << 20)!)
            kept.append(malloc(256 << 10)!)
        }
        for block in blocks { memset(block, 1, 8 << 20) }
        let touched = try Self.residentBytes()
        for block in blocks { free(block) }
        let before = try Self.residentBytes()
        Heap.releaseFreeMemory()
        let after = try Self.residentBytes()
        for block in kept { free(block) }
        // 192 MiB were freed; other tests of the process allocate meanwhile, so ask for half.
        #expect(before - after > 96 << 20, "resident \(touched >> 20) MiB touched, \(before >> 20) MiB before, \(after >> 20) MiB after")
    }
}
#endif
