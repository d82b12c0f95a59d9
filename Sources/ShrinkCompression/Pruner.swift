import ShrinkCore

/// Pruning masks (`true` = kept). Ties in magnitude are broken by position (the earlier element is
/// pruned first for magnitude and block pruning, kept first for n:m), so masks are deterministic.
enum Pruner {
    static func mask(_ values: [Float], shape: [Int], config: PruningConfig) -> [Bool] {
        let last = shape.last ?? 1
        switch config {
        case .magnitude(let sparsity):
            return pruneSmallest(scores: values.map(abs), count: Int((sparsity * Double(values.count)).rounded()))
        case .nOfM(let n, let m):
            var keep = [Bool](repeating: false, count: values.count)
            for start in stride(from: 0, to: values.count, by: m) {
                let order = (start..<min(start + m, values.count)).sorted { (abs(values[$0]), -$0) > (abs(values[$1]), -$1) }
                for index in order.prefix(n) { keep[index] = true }
            }
            _ = last
            return keep
        case .block(let blockSize, let sparsity):
            let blockCount = values.count / blockSize
            let scores = (0..<blockCount).map { block in
                (0..<blockSize).reduce(Float(0)) { $0 + values[block * blockSize + $1] * values[block * blockSize + $1] }
            }
            let keptBlocks = pruneSmallest(scores: scores, count: Int((sparsity * Double(blockCount)).rounded()))
            return (0..<values.count).map { keptBlocks[$0 / blockSize] }
        }
    }

    /// Keeps all but the `count` smallest scores.
    static func pruneSmallest(scores: [Float], count: Int) -> [Bool] {
        guard count > 0 else { return [Bool](repeating: true, count: scores.count) }
        let (sorted, _) = RadixSort.sorted(scores, payload: nil)
        let threshold = sorted[count - 1]
        var below = 0
        for score in scores where score < threshold { below += 1 }
        var tiesToPrune = count - below
        return scores.map { score in
            if score < threshold { return false }
            if score == threshold && tiesToPrune > 0 { tiesToPrune -= 1; return false }
            return true
        }
    }
}
