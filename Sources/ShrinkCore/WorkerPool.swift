import CShrinkCoreSupport
import Foundation
import Synchronization

/// Persistent worker threads for the kernels' fork-join parallelism, with a hand-off cost of a
/// few microseconds: a caller publishes a job by bumping a generation counter that idle workers
/// spin on (for `spinNanoseconds`, then they sleep on a condition variable until woken).
///
/// `run(count, body)` calls `body(0)` on the calling thread and `body(i)` on worker `i` for
/// `0 < i < count`, and returns when all have returned and every other worker has seen the job;
/// which index runs where is fixed, so
/// work split by index is split the same way on every call. While the pool runs a job, other
/// callers (and calls from inside a job) run their indices on their own thread instead of waiting.
public final class WorkerPool: @unchecked Sendable {
    /// The pool the kernels share; it grows to the largest `count` asked for.
    public static let shared = WorkerPool()

    /// How long an idle worker spins before it sleeps: long enough to bridge the gaps between
    /// the layers of one forward pass, short enough not to steal a core from other work.
    public static let spinNanoseconds: UInt64 = 200_000

    private let generation = Atomic<Int>(0)
    private let remaining = Atomic<Int>(0)
    private let sleepers = Atomic<Int>(0)
    private let condition = NSCondition()
    /// Serializes callers: one job at a time.
    private let callerLock = NSLock()
    /// Guards `workers` growth.
    private let growthLock = NSLock()
    private var workers = 0
    nonisolated(unsafe) private var jobFunction: ParallelJobFunction?
    nonisolated(unsafe) private var jobContext: UnsafeRawPointer?
    nonisolated(unsafe) private var jobCount = 0

    /// A pool of its own (its workers live as long as the process); kernels use `shared`.
    public init() {}

    /// Runs `body(i)` for every `i` in `0..<count` (index 0 on the calling thread) and waits for all.
    /// Handing a closure to the workers boxes it (one heap allocation per call); `run(_:_:)` with a
    /// `ParallelJob` does not allocate.
    public func run(_ count: Int, _ body: (Int) -> Void) {
        guard count > 1 else {
            if count == 1 { body(0) }
            return
        }
        withoutActuallyEscaping(body) { body in
            withUnsafePointer(to: body) { pointer in
                run(count, function: { context, index, _ in context.assumingMemoryBound(to: ((Int) -> Void).self).pointee(index) },
                    context: UnsafeRawPointer(pointer))
            }
        }
    }

    /// Runs `job` as workers `0..<count` (worker 0 on the calling thread) and waits for all, without
    /// allocating: the workers get a pointer to `job` on this thread's stack.
    @inlinable
    public func run<Job: ParallelJob>(_ count: Int, _ job: Job) {
        guard count > 1 else {
            if count == 1 { job.run(worker: 0, of: 1) }
            return
        }
        withUnsafePointer(to: job) { pointer in run(count, function: Job.function, context: UnsafeRawPointer(pointer)) }
    }

    /// Calls `function(context, i, count)` for every `i` in `0..<count` (0 on the calling thread)
    /// and waits for all; `context` must stay valid until then.
    public func run(_ count: Int, function: ParallelJobFunction, context: UnsafeRawPointer) {
        guard count > 1 else {
            if count == 1 { function(context, 0, 1) }
            return
        }
        ensureWorkers(count - 1)
        // Busy with another caller's job (or called from inside one): run the indices here, in order.
        guard callerLock.try() else {
            for index in 0..<count { function(context, index, count) }
            return
        }
        defer { callerLock.unlock() }
        jobFunction = function
        jobContext = context
        jobCount = count
        // Every worker acknowledges every job, those past `count` without running anything: so no
        // worker can still be reading this job's fields when the next caller rewrites them. Workers
        // started meanwhile see the new generation as already seen (`ensureWorkers`), so the count
        // and the generation are published together under `growthLock`.
        growthLock.lock()
        remaining.store(workers, ordering: .sequentiallyConsistent)
        generation.add(1, ordering: .sequentiallyConsistent)
        growthLock.unlock()
        if sleepers.load(ordering: .sequentiallyConsistent) > 0 {
            condition.lock()
            condition.broadcast()
            condition.unlock()
        }
        function(context, 0, count)
        while remaining.load(ordering: .acquiring) > 0 { shrink_cpu_relax() }
        jobFunction = nil
        jobContext = nil
    }

    private func ensureWorkers(_ count: Int) {
        growthLock.lock()
        defer { growthLock.unlock() }
        while workers < count {
            workers += 1
            let index = workers, seen = generation.load(ordering: .sequentiallyConsistent)
            let thread = Thread { [unowned self] in self.work(index: index, seen: seen) }
            thread.name = "shrink-worker-\(index)"
            thread.start()
        }
    }

    private func work(index: Int, seen start: Int) {
        var seen = start
        while true {
            var current = generation.load(ordering: .acquiring)
            if current == seen {
                let deadline = DispatchTime.now().uptimeNanoseconds + Self.spinNanoseconds
                var spins = 0
                while current == seen {
                    shrink_cpu_relax()
                    current = generation.load(ordering: .acquiring)
                    spins += 1
                    if spins & 255 == 0 && DispatchTime.now().uptimeNanoseconds > deadline {
                        condition.lock()
                        sleepers.add(1, ordering: .sequentiallyConsistent)
                        while generation.load(ordering: .sequentiallyConsistent) == seen { condition.wait() }
                        sleepers.subtract(1, ordering: .sequentiallyConsistent)
                        condition.unlock()
                        current = generation.load(ordering: .acquiring)
                    }
                }
            }
            seen = current
            if index < jobCount, let jobFunction, let jobContext { jobFunction(jobContext, index, jobCount) }
            remaining.subtract(1, ordering: .releasing)
        }
    }
}

/// What the pool calls for each worker of a job: `(context, worker, workers)`.
public typealias ParallelJobFunction = @convention(c) (UnsafeRawPointer, Int, Int) -> Void

/// Work split over a fixed number of workers that the pool runs without a closure, so without a
/// heap allocation (the kernels' forward passes use these). A conforming type supplies `function`
/// as `{ context, worker, workers in context.assumingMemoryBound(to: Self.self).pointee.run(worker: worker, of: workers) }`
/// (a C function pointer cannot be formed generically, so each type writes its own).
public protocol ParallelJob {
    static var function: ParallelJobFunction { get }
    /// Runs worker `worker`'s share of `workers`.
    func run(worker: Int, of workers: Int)
}
