import Testing
import ShrinkCore
import ShrinkIO
@testable import ShrinkCompression
import ShrinkTestSupport

@Suite struct KMeansTests {
    /// Counting 16-bit-representable values gives what sorting gives: the same distinct values
    /// (`-0` and `+0` one entry) and multiplicities, for BF16 and F16 values and near the 2^16 floor.
    @Test(arguments: [1 << 16, 300_000])
    func countingMatchesSorting(count: Int) throws {
        var generator = SplitMix64(seed: UInt64(count))
        let bf16 = generator.floats(count).map { Float(bitPattern: ($0 * 0.05).bitPattern & 0xFFFF_0000) }
        let f16 = generator.floats(count).map { Float(Float16($0 * 4)) }
        for var values in [bf16, f16] {
            values[0] = 0
            values[1] = -0.0
            let counted = try #require(SortedWeights.counted(values))
            let sorted = SortedWeights.runs(values, importance: nil)
            #expect(counted.values.map(\.bitPattern) == sorted.values.map(\.bitPattern))
            #expect(counted.weights == sorted.weights)
        }
        #expect(SortedWeights.counted(generator.floats(count)) == nil)
        #expect(SortedWeights.counted(Array(bf16.prefix(1000))) == nil)
    }

    /// The least squared error over every assignment of `values` to `k` clusters.
    static func bruteForce(_ values: [Float], _ weights: [Float], k: Int) -> Double {
        var best = Double.infinity
        var assignment = [Int](repeating: 0, count: values.count)
        while true {
            var error = 0.0
            for cluster in 0..<k {
                let members = values.indices.filter { assignment[$0] == cluster }
                let weight = members.reduce(0.0) { $0 + Double(weights[$1]) }
                guard weight > 0 else { continue }
                let mean = members.reduce(0.0) { $0 + Double(values[$1]) * Double(weights[$1]) } / weight
                error += members.reduce(0.0) { $0 + Double(weights[$1]) * (Double(values[$1]) - mean) * (Double(values[$1]) - mean) }
            }
            best = min(best, error)
            var position = 0
            while position < assignment.count {
                assignment[position] += 1
                if assignment[position] < k { break }
                assignment[position] = 0
                position += 1
            }
            if position == assignment.count { return best }
        }
    }

    @Test(arguments: 0..<40)
    func optimalClusteringMatchesBruteForce(seed: Int) {
        var generator = SeededGenerator(seed: UInt64(seed))
        let count = Int.random(in: 1...8, using: &generator)
        let k = Int.random(in: 1...4, using: &generator)
        // Few distinct values so duplicates are common.
        let values = (0..<count).map { _ in Float(Int.random(in: -6...6, using: &generator)) / 4 }
        let weights = seed % 2 == 0 ? [Float](repeating: 1, count: count) : (0..<count).map { _ in Float.random(in: 0...2, using: &generator) }
        let result = OptimalKMeans1D.cluster(values, importance: weights, k: k)
        let expected = Self.bruteForce(values, weights, k: k)
        #expect(abs(result.squaredError - expected) <= 1e-9 * max(1, expected), "values \(values) weights \(weights) k \(k)")
        #expect(result.centroids.count <= k && result.centroids == result.centroids.sorted())
    }

    @Test(arguments: [2, 4, 16, 64])
    func fallbackIsNoWorseThanLloydAndCloseToExact(k: Int) {
        var generator = SeededGenerator(seed: UInt64(k))
        let values = (0..<20_000).map { _ in Float.random(in: -1...1, using: &generator) * Float.random(in: 0...1, using: &generator) }
        let exact = OptimalKMeans1D.cluster(values, k: k, exactLimit: 1 << 20)
        let fallback = OptimalKMeans1D.cluster(values, k: k)  // 20,000 distinct values > the default exact limit.
        let lloyd = LloydKMeans.cluster(values, dimension: 1, k: k, seed: 1)
        #expect(exact.squaredError <= lloyd.squaredError * (1 + 1e-9))
        #expect(fallback.squaredError <= lloyd.squaredError * (1 + 1e-9), "fallback \(fallback.squaredError) lloyd \(lloyd.squaredError)")
        #expect(fallback.squaredError <= exact.squaredError * 1.01)
    }
}

/// Needs the real model (`scripts/fetch-models.py minilm`).
@Suite struct MiniLMKMeansTests {
    /// On random subsets of 8 values of real layers (few enough to try every assignment, not only
    /// contiguous runs), the clustering is the optimum, with and without importance weights.
    @Test func matchesBruteForceOnSubsetsOfRealLayers() throws {
        let file = try SafetensorsFile(path: TestModels.miniLM + "/model.safetensors")
        var generator = SeededGenerator(seed: 2024)
        for name in ["encoder.layer.0.attention.self.query.weight", "encoder.layer.2.intermediate.dense.weight", "encoder.layer.5.output.dense.weight"] {
            let values = try file.tensor(named: name).floats()
            for trial in 0..<12 {
                let subset = (0..<8).map { _ in values[Int.random(in: 0..<values.count, using: &generator)] }
                let weights = trial % 2 == 0 ? [Float](repeating: 1, count: 8) : (0..<8).map { _ in Float.random(in: 0.1...2, using: &generator) }
                let k = 2 + trial % 3
                let expected = KMeansTests.bruteForce(subset, weights, k: k)
                let result = OptimalKMeans1D.cluster(subset, importance: weights, k: k)
                #expect(abs(result.squaredError - expected) <= 1e-9 * max(expected, 1e-30), "\(name) trial \(trial): \(result.squaredError) vs \(expected)")
            }
        }
    }

    /// Above `defaultExactLimit` distinct values the clustering is a heuristic; on real layers it
    /// stays within 1e-4 (k ≤ 16) and 2e-3 (k = 64) of the exact program run over every distinct
    /// value (on all 36 layers: 0 at k = 4, at most 1.0e-5 at 8, 2.7e-5 at 16, 8.9e-4 at 64).
    @Test(arguments: [4, 16, 64])
    func largeTensorsStayCloseToTheExactOptimum(k: Int) throws {
        let file = try SafetensorsFile(path: TestModels.miniLM + "/model.safetensors")
        let values = try file.tensor(named: "encoder.layer.3.attention.self.query.weight").floats()
        #expect(Set(values).count > OptimalKMeans1D.defaultExactLimit)
        let exact = OptimalKMeans1D.cluster(values, k: k, exactLimit: Int.max)
        let fallback = OptimalKMeans1D.cluster(values, k: k)
        #expect(exact.squaredError <= fallback.squaredError * (1 + 1e-12))
        #expect(fallback.squaredError <= exact.squaredError * (1 + (k <= 16 ? 1e-4 : 2e-3)), "gap \(fallback.squaredError / exact.squaredError - 1)")
    }

    /// The optimal clustering (with its large-tensor fallback) is never worse than Lloyd's
    /// algorithm seeded by k-means++ on any encoder linear layer of all-MiniLM-L6-v2.
    @Test(arguments: [2, 3, 4])
    func noWorseThanLloydOnEveryLinearLayer(bits: Int) throws {
        let file = try SafetensorsFile(path: TestModels.miniLM + "/model.safetensors")
        let layers = file.entries.filter { $0.name.hasPrefix("encoder.layer.") && $0.name.hasSuffix(".weight") && $0.shape.count == 2 }
        #expect(layers.count == 36)
        let worse = try Parallel.map(layers.count, threads: 2) { index -> String? in
            let values = file.tensor(for: layers[index]).floats()
            let optimal = OptimalKMeans1D.cluster(values, k: 1 << bits)
            let lloyd = LloydKMeans.cluster(values, dimension: 1, k: 1 << bits, seed: 0)
            return optimal.squaredError <= lloyd.squaredError * (1 + 1e-12) ? nil
                : "\(layers[index].name): \(optimal.squaredError) > \(lloyd.squaredError)"
        }.compactMap { $0 }
        #expect(worse.isEmpty, "\(worse)")
    }
}
