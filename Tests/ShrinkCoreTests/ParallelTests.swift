import Foundation
import Testing
import ShrinkCore

/// Budgeted `Parallel.map`: the items running at once never hold more than the budget, an item
/// over it runs alone, every item runs once, results come back in index order.
@Suite struct ParallelTests {
    /// What the running items hold, sampled as each one starts.
    final class Holdings: @unchecked Sendable {
        private let lock = NSLock()
        private var held = 0, running = 0
        private(set) var peakHeld = 0, peakRunning = 0
        private(set) var startedBeside: [Int: Int] = [:]

        func start(_ index: Int, _ share: Int) {
            lock.withLock {
                held += share
                running += 1
                peakHeld = max(peakHeld, held)
                peakRunning = max(peakRunning, running)
                startedBeside[index] = running - 1
            }
        }

        func end(_ share: Int) { lock.withLock { held -= share; running -= 1 } }
    }

    @Test(arguments: [1, 2, 3, 4])
    func runningItemsStayWithinTheBudget(threads: Int) throws {
        let shares = [9, 6, 6, 0, 3, 12, 2, 0, 5, 1, 4, 0]
        let budget = 9
        let holdings = Holdings()
        let results = try Parallel.map(shares.count, threads: threads, shares: shares, budget: budget) { index -> Int in
            holdings.start(index, shares[index])
            Thread.sleep(forTimeInterval: 0.002 * Double(1 + index % 3))
            holdings.end(shares[index])
            return index * index
        }
        #expect(results == shares.indices.map { $0 * $0 })
        #expect(holdings.peakRunning <= threads)
        // Item 5 is over the budget: it ran with nothing beside it, and only it exceeded the budget.
        #expect(holdings.startedBeside[5] == 0)
        #expect(holdings.peakHeld <= max(budget, shares[5]))
        #expect(holdings.startedBeside.keys.sorted() == Array(shares.indices))
    }

    /// The first failure (lowest index) is rethrown; items after it are not claimed.
    @Test func aFailureStopsClaimingAndIsRethrown() {
        struct Failure: Error, Equatable { let index: Int }
        let ran = Holdings()
        #expect(throws: Failure(index: 1)) {
            _ = try Parallel.map(6, threads: 1, shares: [1, 1, 1, 1, 1, 1], budget: 1) { index -> Int in
                ran.start(index, 0)
                ran.end(0)
                if index == 1 { throw Failure(index: index) }
                return index
            }
        }
        #expect(ran.startedBeside.keys.sorted() == [0, 1])
    }
}
