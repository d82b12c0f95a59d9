import ShrinkCore

/// Lloyd's k-means with k-means++ seeding (Arthur & Vassilvitskii 2007) on points of `dimension`
/// coordinates: the vector-palette clustering, and the baseline the optimal 1-D clustering is
/// compared against. Deterministic for a given seed.
public enum LloydKMeans {
    /// A clustering: `k × dimension` centroids and the total weighted squared error.
    public struct Result: Sendable {
        public let centroids: [Float]
        public let squaredError: Double
    }

    /// Clusters `points` (`count × dimension`, row-major) with optional per-point importance.
    ///
    /// In one dimension the same algorithm runs on the sorted distinct values with prefix sums
    /// (assignment by midpoints between centroids, means in O(1) per cluster): identical iterates,
    /// O(k log n) per iteration after an O(n) sort.
    public static func cluster(_ points: [Float], dimension: Int, importance: [Float]? = nil, k: Int,
                               seed: UInt64 = 0, maximumIterations: Int = 100) -> Result {
        if dimension == 1 {
            return cluster1D(SortedWeights(points, importance: importance), k: k, seed: seed, maximumIterations: maximumIterations)
        }
        let count = points.count / dimension
        precondition(count > 0 && k >= 1)
        let weights = importance.map { $0.map(Double.init) }
        return points.withUnsafeBufferPointer { points in
            guard let weights else {
                return clusterVectors(points.baseAddress!, count: count, dimension: dimension, weights: nil, k: k, seed: seed,
                                      maximumIterations: maximumIterations)
            }
            return weights.withUnsafeBufferPointer {
                clusterVectors(points.baseAddress!, count: count, dimension: dimension, weights: $0.baseAddress!, k: k, seed: seed,
                               maximumIterations: maximumIterations)
            }
        }
    }

    /// `cluster` for `count` points of `dimension > 1` coordinates at `points`, each of weight
    /// `weights[i]` (1 without): k-means++ seeding in O(k · count · dimension), then each Lloyd
    /// iteration in O(k · count · dimension). Loops over raw buffers (no per-element checks).
    static func clusterVectors(_ points: UnsafePointer<Float>, count: Int, dimension: Int, weights: UnsafePointer<Double>?, k: Int,
                               seed: UInt64, maximumIterations: Int) -> Result {
        var generator = SplitMix64(seed: seed)
        func weight(_ index: Int) -> Double { weights?[index] ?? 1 }
        let clusters = min(k, count)
        let centroids = UnsafeMutablePointer<Float>.allocate(capacity: clusters * dimension)
        let nearest = UnsafeMutablePointer<Float>.allocate(capacity: count)
        let assignment = UnsafeMutablePointer<Int>.allocate(capacity: count)
        let sums = UnsafeMutablePointer<Double>.allocate(capacity: clusters * dimension)
        let totals = UnsafeMutablePointer<Double>.allocate(capacity: clusters)
        defer { for pointer in [UnsafeMutableRawPointer(centroids), UnsafeMutableRawPointer(nearest), UnsafeMutableRawPointer(assignment),
                                UnsafeMutableRawPointer(sums), UnsafeMutableRawPointer(totals)] { pointer.deallocate() } }
        func distance(_ index: Int, _ c: Int) -> Float {
            var sum: Float = 0
            for d in 0..<dimension {
                let delta = points[index * dimension + d] - centroids[c * dimension + d]
                sum += delta * delta
            }
            return sum
        }
        // k-means++: each next centroid drawn with probability proportional to weighted squared distance.
        centroids.update(from: points + Int.random(in: 0..<count, using: &generator) * dimension, count: dimension)
        for index in 0..<count { nearest[index] = distance(index, 0) }
        for c in 1..<max(clusters, 1) {
            var total = 0.0
            for index in 0..<count { total += Double(nearest[index]) * weight(index) }
            var chosen = Int.random(in: 0..<count, using: &generator)
            if total > 0 {
                var target = Double.random(in: 0..<total, using: &generator)
                for index in 0..<count {
                    target -= Double(nearest[index]) * weight(index)
                    if target < 0 { chosen = index; break }
                }
            }
            (centroids + c * dimension).update(from: points + chosen * dimension, count: dimension)
            for index in 0..<count { nearest[index] = min(nearest[index], distance(index, c)) }
        }
        assignment.initialize(repeating: -1, count: count)
        var error = Double.infinity
        var distances = [Float](repeating: 0, count: clusters)
        for _ in 0..<maximumIterations {
            let table = LaneMajorTable(Array(UnsafeBufferPointer(start: centroids, count: clusters * dimension)), dimension: dimension)
            var changed = false
            var newError = 0.0
            for index in 0..<count {
                let (best, bestDistance) = table.nearest(points + index * dimension, distances: &distances)
                if assignment[index] != best { assignment[index] = best; changed = true }
                newError += Double(bestDistance) * weight(index)
            }
            error = newError
            if !changed { break }
            sums.initialize(repeating: 0, count: clusters * dimension)
            totals.initialize(repeating: 0, count: clusters)
            for index in 0..<count {
                let c = assignment[index], w = weight(index)
                totals[c] += w
                for d in 0..<dimension { sums[c * dimension + d] += Double(points[index * dimension + d]) * w }
            }
            for c in 0..<clusters where totals[c] > 0 {
                for d in 0..<dimension { centroids[c * dimension + d] = Float(sums[c * dimension + d] / totals[c]) }
            }
        }
        return Result(centroids: Array(UnsafeBufferPointer(start: centroids, count: clusters * dimension)), squaredError: error)
    }

    static func cluster1D(_ data: SortedWeights, k: Int, seed: UInt64, maximumIterations: Int) -> Result {
        var generator = SplitMix64(seed: seed)
        let n = data.count
        // k-means++ over distinct values weighted by total importance (equal to seeding over all points).
        func draw(_ weights: [Double]) -> Int {
            let total = weights.reduce(0, +)
            guard total > 0 else { return Int.random(in: 0..<n, using: &generator) }
            var target = Double.random(in: 0..<total, using: &generator)
            for index in 0..<n {
                target -= weights[index]
                if target < 0 { return index }
            }
            return n - 1
        }
        var centroids = [data.values[draw(data.weights)]]
        var nearest = data.values.map { ($0 - centroids[0]) * ($0 - centroids[0]) }
        while centroids.count < min(k, n) {
            let chosen = data.values[draw((0..<n).map { Double(nearest[$0]) * data.weights[$0] })]
            centroids.append(chosen)
            for index in 0..<n { nearest[index] = min(nearest[index], (data.values[index] - chosen) * (data.values[index] - chosen)) }
        }
        centroids.sort()
        var starts: [Int] = []
        for _ in 0..<maximumIterations {
            var next = [0]
            for index in 1..<centroids.count {
                let midpoint = (centroids[index - 1] + centroids[index]) / 2
                var low = next.last!, high = n
                while low < high {
                    let middle = (low + high) / 2
                    if data.values[middle] <= midpoint { low = middle + 1 } else { high = middle }
                }
                next.append(low)
            }
            if next == starts { break }
            starts = next
            // Empty clusters keep their centroid, as in Lloyd's algorithm.
            centroids = starts.indices.map { index in
                let end = index + 1 < starts.count ? starts[index + 1] : n
                return starts[index] < end ? data.mean(starts[index], end) : centroids[index]
            }.sorted()
        }
        var error = 0.0
        for index in starts.indices {
            let end = index + 1 < starts.count ? starts[index + 1] : n
            if starts[index] < end { error += data.cost(starts[index], end) }
        }
        return Result(centroids: centroids, squaredError: error)
    }
}

/// Entries of `dimension` values laid out lane by lane (`lanes[l · count + e]`), so that the
/// squared distances from one point to every entry accumulate over contiguous entries.
struct LaneMajorTable {
    let lanes: [Float]
    let count: Int
    let dimension: Int

    init(_ entries: [Float], dimension: Int) {
        count = entries.count / dimension
        self.dimension = dimension
        var lanes = [Float](repeating: 0, count: entries.count)
        for entry in 0..<count { for lane in 0..<dimension { lanes[lane * count + entry] = entries[entry * dimension + lane] } }
        self.lanes = lanes
    }

    /// The entry nearest `point` and its squared distance `Σ_l (x_l − c_l)²` (lanes summed in
    /// order, the same floats as entry by entry; ties go to the lower index). `distances` holds
    /// at least `count` values of scratch. `count · dimension` operations.
    func nearest(_ point: UnsafePointer<Float>, distances: inout [Float]) -> (Int, Float) {
        distances.withUnsafeMutableBufferPointer { distances in
            lanes.withUnsafeBufferPointer { lanes in
                for entry in 0..<count { distances[entry] = 0 }
                for lane in 0..<dimension {
                    let x = point[lane], column = lanes.baseAddress! + lane * count
                    for entry in 0..<count {
                        let delta = x - column[entry]
                        distances[entry] += delta * delta
                    }
                }
                var best = 0
                var bestDistance = Float.infinity
                for entry in 0..<count where distances[entry] < bestDistance { bestDistance = distances[entry]; best = entry }
                return (best, bestDistance)
            }
        }
    }
}
