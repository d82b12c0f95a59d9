extension Array where Element == ClosedRange<UInt32> {
    /// Whether these sorted, disjoint ranges hold `scalar`: a binary search, O(log count).
    func holds(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        var low = 0, high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle].upperBound < value { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low].contains(value)
    }
}
