/// Helpers for tensor shapes: arrays of non-negative dimension sizes, outermost first.
public enum Shape {
    /// The number of elements of `shape`, or `nil` when a dimension is negative or the product
    /// does not fit in `Int`. The empty shape is a scalar with one element.
    public static func elementCount(_ shape: [Int]) -> Int? {
        var count = 1
        for dimension in shape {
            guard dimension >= 0 else { return nil }
            let (product, overflow) = count.multipliedReportingOverflow(by: dimension)
            guard !overflow else { return nil }
            count = product
        }
        return count
    }

    /// The byte size of `shape` elements of `dtype`, or `nil` on a negative dimension or overflow.
    public static func byteCount(_ shape: [Int], dtype: DType) -> Int? {
        guard let count = elementCount(shape) else { return nil }
        let (bytes, overflow) = count.multipliedReportingOverflow(by: dtype.byteSize)
        return overflow ? nil : bytes
    }

    /// `[2, 3, 4]` → `"[2, 3, 4]"`.
    public static func describe(_ shape: [Int]) -> String {
        "[" + shape.map(String.init).joined(separator: ", ") + "]"
    }
}
