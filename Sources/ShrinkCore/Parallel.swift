import Dispatch
import Foundation

/// Runs independent work items on a fixed number of threads.
public enum Parallel {
    /// `body(i)` for every `i` in `0..<count` on at most `threads` workers (each claims the next
    /// unclaimed index); results in index order. After the first failure no new index is claimed,
    /// and the failure with the lowest index is rethrown once all workers stop.
    public static func map<T>(_ count: Int, threads: Int, _ body: @Sendable (Int) throws -> T) throws -> [T] {
        try map(count, threads: threads, shares: Array(repeating: 0, count: count), budget: 0, body)
    }

    /// `body(i)` for every `i` in `0..<count` on at most `threads` workers, where item `i` holds
    /// `shares[i]` of a resource while it runs and the items running at once hold at most `budget`
    /// together. A free worker claims the first unclaimed index that fits beside the running ones
    /// (any index when none runs, so an item over the budget runs alone) and otherwise waits for
    /// one to finish; results in index order. Failure as in `map(_:threads:_:)`.
    /// - Precondition: `shares.count == count`.
    public static func map<T>(_ count: Int, threads: Int, shares: [Int], budget: Int, _ body: @Sendable (Int) throws -> T) throws -> [T] {
        precondition(shares.count == count, "one share per item")
        let results = BudgetedClaims<T>(shares: shares, budget: budget)
        DispatchQueue.concurrentPerform(iterations: max(1, min(threads, count))) { _ in
            while let index = results.claim() {
                let result: Result<T, any Error>
                do { result = .success(try body(index)) } catch { result = .failure(error) }
                results.finish(index, result)
            }
        }
        return try results.collect()
    }
}

extension Parallel {
    /// `body(range)` over `0..<count` split into at most `threads` contiguous ranges, with at least
    /// `minimumPerThread` items in each before a range is handed to another thread. The split
    /// depends only on `count` and the worker count, never on timing.
    public static func forEachRange(_ count: Int, threads: Int, minimumPerThread: Int = 1, _ body: @Sendable (Range<Int>) -> Void) {
        let workers = workers(count, threads: threads, minimumPerThread: minimumPerThread)
        if workers == 1 {
            body(0..<count)
            return
        }
        WorkerPool.shared.run(workers) { worker in body(range(worker: worker, of: workers, count: count)) }
    }
}

extension Parallel {
    /// How many workers `forEachRange` uses for `count` items.
    public static func workers(_ count: Int, threads: Int, minimumPerThread: Int = 1) -> Int {
        max(1, min(threads, count / max(1, minimumPerThread)))
    }

    /// Worker `worker`'s contiguous share of `0..<count` split over `workers` (as `forEachRange` splits).
    @inlinable
    public static func range(worker: Int, of workers: Int, count: Int) -> Range<Int> {
        (count * worker / workers)..<(count * (worker + 1) / workers)
    }
}

/// Indices claimed under a shared budget and results stored by concurrent workers.
private final class BudgetedClaims<T>: @unchecked Sendable {
    private let condition = NSCondition()
    private let shares: [Int]
    private let budget: Int
    private var unclaimed: [Int]
    private var held = 0
    private var running = 0
    private var failed = false
    private var slots: [Result<T, any Error>?]

    init(shares: [Int], budget: Int) {
        self.shares = shares
        self.budget = budget
        unclaimed = Array(shares.indices)
        slots = Array(repeating: nil, count: shares.count)
    }

    /// The first unclaimed index that fits beside the running items, waiting while none does;
    /// nil once every index is claimed or an item failed.
    func claim() -> Int? {
        condition.lock()
        defer { condition.unlock() }
        while !failed, !unclaimed.isEmpty {
            if let position = unclaimed.firstIndex(where: { running == 0 || held + shares[$0] <= budget }) {
                let index = unclaimed.remove(at: position)
                held += shares[index]
                running += 1
                return index
            }
            condition.wait()
        }
        return nil
    }

    func finish(_ index: Int, _ result: Result<T, any Error>) {
        condition.lock()
        slots[index] = result
        if case .failure = result { failed = true }
        held -= shares[index]
        running -= 1
        condition.broadcast()
        condition.unlock()
    }

    func collect() throws -> [T] {
        try slots.compactMap { slot in try slot.map { try $0.get() } }
    }
}
