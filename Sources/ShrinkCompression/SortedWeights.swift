import ShrinkCore

/// The distinct values of a weight tensor in ascending order with their total importance, and
/// prefix sums that give any range's weighted sum of squared deviations in O(1).
///
/// Values are centred on their weighted mean before the sums are taken, which keeps the range
/// costs accurate in `Double` for tensors of millions of elements.
struct SortedWeights {
    /// Distinct values, ascending.
    let values: [Float]
    /// Total importance of each distinct value (its multiplicity when no importance is given).
    let weights: [Double]
    let center: Double
    /// Prefix sums over distinct values: Σw, Σw·(x−center), Σw·(x−center)².
    let sumWeight: [Double]
    let sumFirst: [Double]
    let sumSecond: [Double]

    /// Sorts `values` (all finite) with optional per-element `importance` (non-negative).
    /// Unweighted values that all fit 10 mantissa bits (from F16 or BF16 weights) are counted in
    /// 2^19 buckets instead (`counted`): the same result in O(n) time and 4 MB, where sorting
    /// needs three more arrays of `n` elements.
    init(_ input: [Float], importance: [Float]? = nil) {
        let (values, weights) = importance == nil
            ? Self.counted(input) ?? Self.runs(input, importance: nil)
            : Self.runs(input, importance: importance)
        let total = weights.reduce(0, +)
        let center = total > 0 ? zip(values, weights).reduce(0) { $0 + Double($1.0) * $1.1 } / total : 0
        var sumWeight = [Double](repeating: 0, count: values.count + 1)
        var sumFirst = sumWeight, sumSecond = sumWeight
        for index in values.indices {
            let x = Double(values[index]) - center, w = weights[index]
            sumWeight[index + 1] = sumWeight[index] + w
            sumFirst[index + 1] = sumFirst[index] + w * x
            sumSecond[index + 1] = sumSecond[index] + w * x * x
        }
        self.values = values
        self.weights = weights
        self.center = center
        self.sumWeight = sumWeight
        self.sumFirst = sumFirst
        self.sumSecond = sumSecond
    }

    /// Distinct values, ascending, with their total importance, from a radix sort.
    static func runs(_ input: [Float], importance: [Float]?) -> (values: [Float], weights: [Double]) {
        let (sorted, payload) = RadixSort.sorted(input, payload: importance)
        var values: [Float] = []
        var weights: [Double] = []
        if let payload {
            for (value, weight) in zip(sorted, payload) { appendRun(value, Double(weight), &values, &weights) }
        } else {
            var index = 0
            while index < sorted.count {
                var end = index + 1
                while end < sorted.count && sorted[end] == sorted[index] { end += 1 }
                values.append(sorted[index])
                weights.append(Double(end - index))
                index = end
            }
        }
        return (values, weights)
    }

    /// Adds `weight` to the last run when `value` equals its value (`-0 == +0`), else starts a run.
    @inline(__always)
    static func appendRun(_ value: Float, _ weight: Double, _ values: inout [Float], _ weights: inout [Double]) {
        if let last = values.last, last == value {
            weights[weights.count - 1] += weight
        } else {
            values.append(value)
            weights.append(weight)
        }
    }

    /// Distinct values, ascending, with their multiplicities, counted in one bucket per
    /// order-preserving key shifted right by 13 bits; nil unless every value's 13 low mantissa bits
    /// are zero (each bucket then holds one value) and there are at least 2^16 values. `-0` and
    /// `+0` share an entry, as equal values do when sorted.
    static func counted(_ input: [Float]) -> (values: [Float], weights: [Double])? {
        let shift: UInt32 = 13
        guard input.count >= 1 << 16, input.allSatisfy({ $0.bitPattern & (1 << shift - 1) == 0 }) else { return nil }
        var counts = [Int](repeating: 0, count: 1 << (32 - shift))
        for value in input { counts[Int(RadixSort.key(value) >> shift)] += 1 }
        var values: [Float] = []
        var weights: [Double] = []
        for (bucket, count) in counts.enumerated() where count > 0 {
            // A negative value's key is its complement: its low bits, zero in the value, are ones.
            let key = UInt32(bucket) << shift
            appendRun(RadixSort.value(key & 0x8000_0000 != 0 ? key : key | (1 << shift - 1)), Double(count), &values, &weights)
        }
        return (values, weights)
    }

    var count: Int { values.count }

    /// Weighted sum of squared deviations from their mean of distinct values `[begin, end)`.
    @inline(__always)
    func cost(_ begin: Int, _ end: Int) -> Double {
        let weight = sumWeight[end] - sumWeight[begin]
        guard weight > 0 else { return 0 }
        let first = sumFirst[end] - sumFirst[begin]
        return max(0, sumSecond[end] - sumSecond[begin] - first * first / weight)
    }

    /// Weighted mean of distinct values `[begin, end)`; the midpoint of the range when it has no weight.
    func mean(_ begin: Int, _ end: Int) -> Float {
        let weight = sumWeight[end] - sumWeight[begin]
        guard weight > 0 else { return (values[begin] + values[end - 1]) / 2 }
        return Float((sumFirst[end] - sumFirst[begin]) / weight + center)
    }
}

/// Least-significant-digit radix sort of `Float`s (three passes of 11 bits over an order-preserving
/// integer key), optionally carrying a payload along. O(n), stable.
enum RadixSort {
    /// Maps a float's bits to an unsigned key with the same order (negative values reversed).
    @inline(__always)
    static func key(_ value: Float) -> UInt32 {
        let bits = value.bitPattern
        return bits & 0x8000_0000 != 0 ? ~bits : bits | 0x8000_0000
    }

    @inline(__always)
    static func value(_ key: UInt32) -> Float {
        Float(bitPattern: key & 0x8000_0000 != 0 ? key & 0x7FFF_FFFF : ~key)
    }

    static func sorted(_ input: [Float], payload: [Float]?) -> ([Float], [Float]?) {
        let count = input.count
        var keys = input.map(key)
        var scratch = [UInt32](repeating: 0, count: count)
        var carried = payload
        var carriedScratch = payload.map { [Float](repeating: 0, count: $0.count) }
        for shift in stride(from: 0, to: 32, by: 11) {
            var histogram = [Int](repeating: 0, count: 2049)
            for key in keys { histogram[Int((key >> UInt32(shift)) & 0x7FF) + 1] += 1 }
            for bucket in 1..<2049 { histogram[bucket] += histogram[bucket - 1] }
            if carried == nil {
                for key in keys {
                    let bucket = Int((key >> UInt32(shift)) & 0x7FF)
                    scratch[histogram[bucket]] = key
                    histogram[bucket] += 1
                }
            } else {
                for index in 0..<count {
                    let key = keys[index]
                    let bucket = Int((key >> UInt32(shift)) & 0x7FF)
                    scratch[histogram[bucket]] = key
                    carriedScratch![histogram[bucket]] = carried![index]
                    histogram[bucket] += 1
                }
                swap(&carried, &carriedScratch)
            }
            swap(&keys, &scratch)
        }
        return (keys.map(value), carried)
    }
}
