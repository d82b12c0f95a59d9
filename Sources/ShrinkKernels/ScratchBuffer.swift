import Foundation
import ShrinkCore

/// How many callers at once the reused buffers serve without allocating: an encoder that runs a
/// batch's sentences in groups on several threads calls each layer from each of them.
let keptBufferSlots = 4

/// Bytes reused across calls: grow-only, 64-byte aligned buffers, each lent to one caller at a
/// time. A caller takes the buffer of its `BufferSlot` (so concurrent groups of a forward pass keep
/// to the buffers they grew), else any free one, else a temporary one: steady-state forward passes
/// do not allocate.
final class ScratchBuffer: @unchecked Sendable {
    private final class Slot: @unchecked Sendable {
        let lock = NSLock()
        var storage: UnsafeMutableRawPointer?
        var capacity = 0
        deinit { storage?.deallocate() }
    }

    private let slots = (0..<keptBufferSlots).map { _ in Slot() }

    /// Runs `body` with at least `count` bytes of scratch.
    func withBytes<Result>(_ count: Int, _ body: (UnsafeMutableRawPointer) -> Result) -> Result {
        let preferred = slots[BufferSlot.current % slots.count]
        guard let slot = preferred.lock.try() ? preferred : slots.first(where: { $0.lock.try() }) else {
            let temporary = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 64)
            defer { temporary.deallocate() }
            return body(temporary)
        }
        defer { slot.lock.unlock() }
        if slot.capacity < count {
            slot.storage?.deallocate()
            slot.storage = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 64)
            slot.capacity = count
        }
        return body(slot.storage ?? UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 64))
    }
}

/// A float array reused across calls, for kernels whose callees take `[Float]`: one kept per
/// `BufferSlot`, lent to one caller at a time and grown as needed (a concurrent caller of the same
/// slot gets a new one).
final class KeptFloats: @unchecked Sendable {
    private let lock = NSLock()
    private var kept = [[Float]](repeating: [], count: keptBufferSlots)

    /// Runs `body` with an array of at least `count` floats (contents unspecified) that it may
    /// fill and read.
    func with<Result>(_ count: Int, _ body: (inout [Float]) -> Result) -> Result {
        let slot = BufferSlot.current % keptBufferSlots
        var array = lock.withLock { () -> [Float] in
            defer { kept[slot] = [] }
            return kept[slot]
        }
        if array.count < count {
            // Grown by half at least, so that batches of rising length do not reallocate each time;
            // not zeroed, the caller overwrites what it reads.
            let capacity = Swift.max(count, array.count + array.count / 2)
            array = [Float](unsafeUninitializedCapacity: capacity) { _, initialized in initialized = capacity }
        }
        defer { lock.withLock { if kept[slot].count < array.count { kept[slot] = array } } }
        return body(&array)
    }
}
