import Foundation
import Synchronization
import Testing
import ShrinkCore
import ShrinkTestSupport

@Suite struct WorkerPoolTests {
    @Test(arguments: [1, 2, 3, 5])
    func runsEveryIndexOnceAndWaitsForAll(count: Int) {
        let pool = WorkerPool.shared
        for _ in 0..<200 {
            let hits = LockedValue([Int](repeating: 0, count: count))
            pool.run(count) { index in hits.withLock { $0[index] += 1 } }
            #expect(hits.withLock { $0 } == [Int](repeating: 1, count: count))
        }
    }

    /// Jobs narrower than the pool, between wider ones: a worker past one job's count must not
    /// read the next job's fields early and run its index twice (each job is acknowledged by every
    /// worker before the next is published).
    @Test func narrowAndWideJobsAlternate() {
        let pool = WorkerPool()
        for iteration in 0..<2_000 {
            let count = [2, 5, 3][iteration % 3]
            let hits = LockedValue([Int](repeating: 0, count: count))
            pool.run(count) { index in hits.withLock { $0[index] += 1 } }
            #expect(hits.withLock { $0 } == [Int](repeating: 1, count: count))
        }
    }

    @Test func indexZeroRunsOnTheCallerAndOthersElsewhere() {
        let caller = Thread.current
        let onCaller = LockedValue<[Bool]>([false, false, false])
        // A pool of its own: the shared one may be busy with other tests, and then runs serially.
        WorkerPool().run(3) { index in
            let here = Thread.current == caller
            onCaller.withLock { $0[index] = here }
        }
        #expect(onCaller.withLock { $0 } == [true, false, false])
    }

    @Test func nestedAndConcurrentCallsComplete() {
        let total = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            WorkerPool.shared.run(2) { _ in
                WorkerPool.shared.run(2) { _ in total.add(1, ordering: .relaxed) }
            }
        }
        #expect(total.load(ordering: .relaxed) == 16)
    }

    @Test func wakesSleepingWorkers() {
        WorkerPool.shared.run(2) { _ in }
        Thread.sleep(forTimeInterval: Double(WorkerPool.spinNanoseconds) / 1e9 * 5)
        let hits = Atomic<Int>(0)
        WorkerPool.shared.run(2) { _ in hits.add(1, ordering: .relaxed) }
        #expect(hits.load(ordering: .relaxed) == 2)
    }
}
