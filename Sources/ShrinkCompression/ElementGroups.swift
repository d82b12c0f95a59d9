import ShrinkCore

/// The encoded elements of a tensor bucketed by group (scale group or LUT group), so a pass can
/// work on each group's values contiguously. Built with a counting sort: O(n).
struct ElementGroups {
    /// Group `g`'s members are `members[offsets[g]..<offsets[g + 1]]` (indices into the encoded
    /// elements, in order); `members == nil` means the identity (groups are contiguous runs).
    let offsets: [Int]
    let members: [Int]?

    /// Contiguous groups: group `g` is elements `offsets[g]..<offsets[g + 1]`.
    init(contiguousOffsets offsets: [Int]) {
        self.offsets = offsets
        self.members = nil
    }

    /// Groups of `elements` (all encoded in flat order, vectors of `vectorSize`) when each group is
    /// a contiguous run of flat indices: per tensor, along axis 0, or per block of the last axis.
    static func contiguous(shape: [Int], vectorSize: Int, perTensor: Bool, axis0GroupSize: Int?, blockSize: Int?) -> ElementGroups? {
        let count = shape.reduce(1, *) / vectorSize
        if perTensor { return ElementGroups(contiguousOffsets: [0, count]) }
        let rowLength = shape.dropFirst().reduce(1, *) / vectorSize
        if let size = axis0GroupSize {
            return ElementGroups(contiguousOffsets: Array(stride(from: 0, through: count, by: rowLength * size)))
        }
        if let blockSize, vectorSize == 1 {
            let last = shape.last ?? 1
            var offsets = [0]
            for row in 0..<(count / last) {
                var start = row * last
                while start < (row + 1) * last {
                    start = min(start + blockSize, (row + 1) * last)
                    offsets.append(start)
                }
            }
            return ElementGroups(contiguousOffsets: offsets)
        }
        return nil
    }

    /// `groupOf(k)` is the group of encoded element `k`, in `0..<groupCount`; it is called twice
    /// per element (counting, then placing), so the only O(n) memory is `members`.
    init(count: Int, groupCount: Int, groupOf: (Int) -> Int) {
        var offsets = [Int](repeating: 0, count: groupCount + 1)
        for k in 0..<count { offsets[groupOf(k) + 1] += 1 }
        for group in 0..<groupCount { offsets[group + 1] += offsets[group] }
        var cursor = offsets
        var members = [Int](repeating: 0, count: count)
        for k in 0..<count {
            let group = groupOf(k)
            members[cursor[group]] = k
            cursor[group] += 1
        }
        self.offsets = offsets
        self.members = members
    }

    var groupCount: Int { offsets.count - 1 }

    /// The encoded element at position `slot` of the group order.
    @inline(__always)
    func member(_ slot: Int) -> Int { members?[slot] ?? slot }
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
