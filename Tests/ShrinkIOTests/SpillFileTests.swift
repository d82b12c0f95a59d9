import Foundation
import Testing
import ShrinkCore
@testable import ShrinkIO
import ShrinkTestSupport

@Suite struct SpillFileTests {
    /// Threads append at once; each tensor comes back whole at a 64-byte aligned offset, as a view
    /// of the mapping and through `read`, and the spill file never appears in the folder.
    @Test func concurrentAppendsComeBackAsViews() throws {
        let folder = TemporaryDirectory()
        let spill = try SpillFile(nextTo: folder.file("out.safetensors"))
        let tensors = try (0..<40).map { index in
            var generator = SeededGenerator(seed: UInt64(index))
            return try DenseTensor(converting: generator.floats(1 + index * 37), to: index % 2 == 0 ? .f32 : .bf16, shape: [1 + index * 37])
        }
        let regions = LockedValue<[Int: SpillFile.Region]>([:])
        let failures = LockedValue<[String]>([])
        DispatchQueue.concurrentPerform(iterations: tensors.count) { index in
            do {
                let region = try spill.append(tensors[index])
                regions.withLock { $0[index] = region }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(folder.contents.isEmpty)
        let mapping = try spill.map()
        for (index, region) in regions.withLock({ $0 }) {
            #expect(region.offset % 64 == 0)
            let view = try spill.tensor(region, in: mapping)
            #expect(view.storage.isMapped && view.dtype == tensors[index].dtype && view.shape == tensors[index].shape)
            #expect(Array(view.bytes) == Array(tensors[index].bytes))
            #expect(try spill.read(at: region.offset, count: view.byteCount) == Array(tensors[index].bytes))
        }
        let outside = SpillFile.Region(offset: mapping.bytes.count - 4, dtype: .f32, shape: [2])
        #expect(throws: ShrinkIOError.self) { try spill.tensor(outside, in: mapping) }
    }
}
