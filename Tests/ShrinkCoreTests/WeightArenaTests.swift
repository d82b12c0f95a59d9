import Foundation
import Testing
import ShrinkCore
import ShrinkTestSupport

@Suite struct WeightArenaTests {
    @Test func allocationsAreAlignedZeroedAndDisjoint() {
        let arena = WeightArena(chunkBytes: 1 << 20)
        let counts = [1, 3, 64, 65, 1000, 4096, 77]
        var buffers: [UnsafeMutableBufferPointer<UInt8>] = []
        for (tag, count) in counts.enumerated() {
            let buffer = arena.allocate(UInt8.self, count: count)
            #expect(Int(bitPattern: buffer.baseAddress!) % WeightArena.alignment == 0)
            #expect(buffer.allSatisfy { $0 == 0 })
            for index in buffer.indices { buffer[index] = UInt8(tag + 1) }
            buffers.append(buffer)
        }
        // No allocation overwrote another.
        for (tag, buffer) in buffers.enumerated() { #expect(buffer.allSatisfy { $0 == UInt8(tag + 1) }) }
        #expect(arena.mappedBytes == 1 << 20)
    }

    @Test func largeRequestsGetHugePageAlignedMappingsOfTheirOwn() {
        let arena = WeightArena(chunkBytes: 1 << 20)
        let small = arena.allocate(Float.self, count: 10)
        let large = arena.allocate(Float.self, count: 3 << 20)
        #expect(Int(bitPattern: large.baseAddress!) % WeightArena.hugePageBytes == 0)
        #expect(arena.mappedBytes == (1 << 20) + (12 << 20))
        large[large.count - 1] = 5
        small[0] = 1
        #expect(large[large.count - 1] == 5 && large[0] == 0)
    }

    @Test func chunkOfZeroMapsOnlyWhatRequestsNeed() {
        let arena = WeightArena(chunkBytes: 0)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        _ = arena.allocate(UInt8.self, count: 10)
        _ = arena.allocate(UInt8.self, count: 10)
        #expect(arena.mappedBytes == page)
        _ = arena.allocate(UInt8.self, count: page + 1)
        #expect(arena.mappedBytes == 3 * page)
    }

    @Test func copiesArraysAndServesConcurrentCallers() {
        let arena = WeightArena(chunkBytes: 64 << 10)
        let copy = arena.copy([1.5, -2, 3] as [Float])
        #expect(Array(copy) == [1.5, -2, 3])
        // Each caller's allocation, by address.
        let starts = LockedValue<[Int: Int]>([:])
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            let buffer = arena.allocate(Int.self, count: 100 + index)
            for slot in buffer.indices { buffer[slot] = index }
            starts.withLock { $0[index] = Int(bitPattern: buffer.baseAddress!) }
        }
        let all = starts.withLock { $0 }
        #expect(all.count == 64)
        for (index, start) in all {
            let buffer = UnsafeBufferPointer(start: UnsafePointer<Int>(bitPattern: start), count: 100 + index)
            #expect(buffer.allSatisfy { $0 == index })
        }
    }
}
