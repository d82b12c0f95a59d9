import ShrinkCore

/// Optimal one-dimensional k-means: the `k` centroids minimising the (importance-weighted) sum of
/// squared distances of every value to its nearest centroid.
///
/// In one dimension an optimal clustering splits the sorted values into contiguous runs, so the
/// optimum is found by dynamic programming over the sorted distinct values (Wang & Song 2011,
/// "Ckmeans.1d.dp"): `D[c][j] = min_i D[c−1][i] + cost(i, j)`, where `cost` is a run's weighted
/// squared deviation from its mean (O(1) from prefix sums). The cost matrix is totally monotone,
/// so each row is filled by divide and conquer in O(n log n): O(k · n log n) in all.
///
/// **Fallback for large tensors.** When there are more than `exactLimit` distinct values, run
/// boundaries are restricted to `exactLimit` candidate positions chosen at equal steps of
/// cumulative importance (never splitting equal values). The DP is then exactly optimal among
/// clusterings with boundaries at those positions (costs still computed over every value), and
/// Lloyd iterations over all distinct values refine it (each iteration never increases the
/// error). Centroids are always exact weighted means of their runs.
public enum OptimalKMeans1D {
    /// The default limit of distinct values clustered exactly.
    public static let defaultExactLimit = 4096

    /// A clustering: ascending centroids and the total weighted squared error.
    public struct Result: Sendable {
        public let centroids: [Float]
        public let squaredError: Double
    }

    /// Clusters `values` (finite) into at most `k` centroids; `importance` (non-negative, one per
    /// value) weights each value's squared error. With fewer distinct values than `k` each
    /// distinct value is its own centroid and the error is 0.
    public static func cluster(_ values: [Float], importance: [Float]? = nil, k: Int,
                               exactLimit: Int = defaultExactLimit) -> Result {
        precondition(k >= 1 && !values.isEmpty)
        let data = SortedWeights(values, importance: importance)
        return cluster(data, k: k, exactLimit: exactLimit)
    }

    static func cluster(_ data: SortedWeights, k: Int, exactLimit: Int) -> Result {
        let n = data.count
        if n <= k {
            return Result(centroids: data.values, squaredError: 0)
        }
        let candidates = n <= exactLimit ? Array(0...n) : candidateBoundaries(data, count: exactLimit)
        var starts = dynamicProgram(data, candidates: candidates, k: k)
        if n > exactLimit { starts = refine(data, starts: starts) }
        return result(data, starts: starts)
    }

    /// Run starts (indices into distinct values, first is 0) from the centroids of each run.
    static func result(_ data: SortedWeights, starts: [Int]) -> Result {
        var centroids: [Float] = []
        var error = 0.0
        for (index, start) in starts.enumerated() {
            let end = index + 1 < starts.count ? starts[index + 1] : data.count
            centroids.append(data.mean(start, end))
            error += data.cost(start, end)
        }
        return Result(centroids: centroids, squaredError: error)
    }

    /// `count + 1` boundary positions (first 0, last n) at equal steps of cumulative weight.
    static func candidateBoundaries(_ data: SortedWeights, count: Int) -> [Int] {
        let n = data.count
        let total = data.sumWeight[n]
        var boundaries = [0]
        var position = 0
        for step in 1..<count {
            let target = total * Double(step) / Double(count)
            // First prefix index whose cumulative weight reaches the target.
            var low = position + 1, high = n
            while low < high {
                let middle = (low + high) / 2
                if data.sumWeight[middle] < target { low = middle + 1 } else { high = middle }
            }
            if low > boundaries.last!, low < n {
                boundaries.append(low)
                position = low
            }
        }
        // Spread boundaries over positions if weight is concentrated (few candidates survived).
        if boundaries.count < min(count, n) {
            let stride = max(1, n / count)
            boundaries = Array(Set(boundaries + Array(Swift.stride(from: 0, to: n, by: stride)))).sorted()
        }
        boundaries.append(n)
        return boundaries
    }

    /// Optimal split of distinct values into `k` runs with boundaries among `candidates`.
    static func dynamicProgram(_ data: SortedWeights, candidates: [Int], k: Int) -> [Int] {
        let m = candidates.count - 1  // Number of candidate units.
        let clusters = min(k, m)
        var previous = [Double](repeating: .infinity, count: m + 1)
        var current = previous
        // split[c][j]: where the last run starts for c+1 runs covering units [0, j).
        var split = [[Int32]](repeating: [Int32](repeating: 0, count: m + 1), count: clusters)
        for j in 1...m { previous[j] = data.cost(0, candidates[j]) }
        previous[0] = 0
        for c in 1..<max(clusters, 1) {
            current = [Double](repeating: .infinity, count: m + 1)
            fill(c, data, candidates, previous, &current, &split[c], low: c + 1, high: m, optLow: c, optHigh: m - 1)
            swap(&previous, &current)
        }
        var starts: [Int] = []
        var end = m
        for c in stride(from: clusters - 1, through: 1, by: -1) {
            let start = Int(split[c][end])
            starts.append(candidates[start])
            end = start
        }
        starts.append(0)
        return starts.reversed()
    }

    /// Divide and conquer: fills `current[j]` for `j ∈ [low, high]` knowing the optimal split lies
    /// in `[optLow, optHigh]` and is monotone in `j`.
    private static func fill(_ c: Int, _ data: SortedWeights, _ candidates: [Int], _ previous: [Double],
                             _ current: inout [Double], _ split: inout [Int32], low: Int, high: Int, optLow: Int, optHigh: Int) {
        guard low <= high else { return }
        let middle = (low + high) / 2
        var best = Double.infinity
        var bestSplit = optLow
        for i in optLow...min(optHigh, middle - 1) {
            let value = previous[i] + data.cost(candidates[i], candidates[middle])
            if value < best {
                best = value
                bestSplit = i
            }
        }
        current[middle] = best
        split[middle] = Int32(bestSplit)
        fill(c, data, candidates, previous, &current, &split, low: low, high: middle - 1, optLow: optLow, optHigh: bestSplit)
        fill(c, data, candidates, previous, &current, &split, low: middle + 1, high: high, optLow: bestSplit, optHigh: optHigh)
    }

    /// Lloyd iterations on sorted distinct values: runs end where the next centroid becomes nearer.
    static func refine(_ data: SortedWeights, starts initial: [Int], iterations: Int = 100) -> [Int] {
        var starts = initial
        var error = result(data, starts: starts).squaredError
        for _ in 0..<iterations {
            let centroids = result(data, starts: starts).centroids
            var next = [0]
            for index in 1..<centroids.count {
                let midpoint = (centroids[index - 1] + centroids[index]) / 2
                var low = next.last!, high = data.count
                while low < high {
                    let middle = (low + high) / 2
                    if data.values[middle] <= midpoint { low = middle + 1 } else { high = middle }
                }
                next.append(low)
            }
            // Drop runs that became empty.
            var compact: [Int] = []
            for (index, start) in next.enumerated() where index == 0 || start > compact.last! { compact.append(start) }
            compact = compact.filter { $0 < data.count }
            let newError = result(data, starts: compact).squaredError
            if compact == starts || newError >= error { break }
            starts = compact
            error = newError
        }
        return starts
    }
}
