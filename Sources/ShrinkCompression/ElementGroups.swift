import ShrinkCore

/// The encoded elements of a tensor bucketed by group (scale group or LUT group), so a pass can
/// work on each group's values contiguously. Built with a counting sort: O(n).
struct ElementGroups {
    /// For each group, the indices (into the encoded elements) of its members, in order.
    let offsets: [Int]
    let members: [Int]

    /// `groupOf(k)` is the group of encoded element `k`, in `0..<groupCount`.
    init(count: Int, groupCount: Int, groupOf: (Int) -> Int) {
        var groups = [Int](repeating: 0, count: count)
        var offsets = [Int](repeating: 0, count: groupCount + 1)
        for k in 0..<count {
            let group = groupOf(k)
            groups[k] = group
            offsets[group + 1] += 1
        }
        for group in 0..<groupCount { offsets[group + 1] += offsets[group] }
        var cursor = offsets
        var members = [Int](repeating: 0, count: count)
        for k in 0..<count {
            members[cursor[groups[k]]] = k
            cursor[groups[k]] += 1
        }
        self.offsets = offsets
        self.members = members
    }

    var groupCount: Int { offsets.count - 1 }

    /// The member indices of `group`.
    func members(of group: Int) -> ArraySlice<Int> { members[offsets[group]..<offsets[group + 1]] }
}

/// Values rounded to what a part's dtype stores, so passes choose codes against the stored values.
enum StoredPrecision {
    static func round(_ value: Float, to dtype: DType) -> Float {
        switch dtype {
        case .f16: FloatingPointConversion.float(fromHalfBits: FloatingPointConversion.halfBits(from: value))
        case .bf16: FloatingPointConversion.float(fromBFloat16Bits: FloatingPointConversion.bfloat16Bits(from: value))
        default: value
        }
    }
}
