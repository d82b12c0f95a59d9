/// Unsigned integers of 1 to 8 bits packed densely into bytes.
///
/// Layout: value `i` occupies bits `[i·bits, (i+1)·bits)` of the byte stream, least significant
/// bit first (bit `k` of the stream is bit `k mod 8` of byte `k / 8`); a value may straddle two
/// bytes (3- and 6-bit codes do). The last byte is zero-padded. `count` values take
/// `ceil(count · bits / 8)` bytes.
public enum PackedBits {
    /// Bytes needed for `count` values of `bits` bits.
    public static func byteCount(count: Int, bits: Int) -> Int { (count * bits + 7) / 8 }

    /// Packs `values` (each `< 2^bits`).
    public static func pack(_ values: [UInt8], bits: Int) -> [UInt8] {
        precondition((1...8).contains(bits))
        if bits == 8 { return values }
        if bits == 4 {
            return (0..<byteCount(count: values.count, bits: 4)).map { byte in
                let low = values[2 * byte], high = 2 * byte + 1 < values.count ? values[2 * byte + 1] : 0
                precondition(low < 16 && high < 16, "value does not fit in 4 bits")
                return low | high << 4
            }
        }
        var bytes = [UInt8](repeating: 0, count: byteCount(count: values.count, bits: bits))
        var bitPosition = 0
        for value in values {
            precondition(Int(value) >> bits == 0, "value \(value) does not fit in \(bits) bits")
            let byte = bitPosition >> 3, shift = bitPosition & 7
            let wide = UInt16(value) << shift
            bytes[byte] |= UInt8(truncatingIfNeeded: wide)
            if shift + bits > 8 { bytes[byte + 1] |= UInt8(truncatingIfNeeded: wide >> 8) }
            bitPosition += bits
        }
        return bytes
    }

    /// The value at `index` in packed `bytes`.
    @inlinable
    public static func value(at index: Int, bits: Int, in bytes: UnsafeRawBufferPointer) -> UInt8 {
        let bitPosition = index * bits
        let byte = bitPosition >> 3, shift = bitPosition & 7
        var wide = UInt16(bytes[byte])
        if shift + bits > 8 { wide |= UInt16(bytes[byte + 1]) << 8 }
        return UInt8(truncatingIfNeeded: (wide >> shift) & ((1 << bits) - 1))
    }
}
