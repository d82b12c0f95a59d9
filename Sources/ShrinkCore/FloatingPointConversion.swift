/// Bit-exact conversions between `Float` and the narrow floating-point formats tensors are stored in.
///
/// All narrowing conversions round to nearest, ties to even, as IEEE 754 requires. Values beyond
/// the target's largest finite number round to infinity; NaN stays NaN (made quiet, sign and the
/// payload's top bits kept) and never becomes infinity; subnormals are produced and consumed exactly.
public enum FloatingPointConversion {
    /// Widens IEEE binary16 bits to `Float`. Exact for every one of the 65,536 patterns.
    @inlinable
    public static func float(fromHalfBits half: UInt16) -> Float {
        let sign = UInt32(half & 0x8000) << 16
        let exponent = UInt32(half >> 10) & 0x1F
        let mantissa = UInt32(half & 0x3FF)
        if exponent == 0x1F {
            return Float(bitPattern: sign | 0x7F80_0000 | (mantissa << 13))
        }
        if exponent == 0 {
            // Zero or subnormal: mantissa × 2⁻²⁴, exact in Float.
            let magnitude = Float(mantissa) * 0x1p-24
            return Float(bitPattern: sign | magnitude.bitPattern)
        }
        return Float(bitPattern: sign | ((exponent + 112) << 23) | (mantissa << 13))
    }

    /// Narrows `Float` to IEEE binary16 bits, rounding to nearest even.
    @inlinable
    public static func halfBits(from value: Float) -> UInt16 {
        let bits = value.bitPattern
        let sign = UInt16((bits >> 16) & 0x8000)
        let magnitude = bits & 0x7FFF_FFFF
        if magnitude >= 0x7F80_0000 {
            if magnitude == 0x7F80_0000 { return sign | 0x7C00 }
            return sign | 0x7E00 | UInt16((magnitude >> 13) & 0x3FF)
        }
        // 65520 is the midpoint between 65504 (largest finite, odd mantissa) and 2¹⁶: ties go up.
        if magnitude >= 0x477F_F000 { return sign | 0x7C00 }
        let exponent = magnitude >> 23
        if exponent < 113 {
            // Result is subnormal or zero: round mantissa × 2^(exponent − 126) to an integer.
            if magnitude <= 0x3300_0000 { return sign }  // ≤ 2⁻²⁵ rounds to zero (the tie is even).
            let significand = (magnitude & 0x7F_FFFF) | 0x80_0000
            let shift = 126 - exponent
            return sign | UInt16(roundShiftingRight(significand, by: shift))
        }
        let rebased = ((exponent - 112) << 10) | ((magnitude & 0x7F_FFFF) >> 13)
        let remainder = magnitude & 0x1FFF
        let roundUp = remainder > 0x1000 || (remainder == 0x1000 && rebased & 1 == 1)
        return sign | UInt16(rebased + (roundUp ? 1 : 0))
    }

    /// Widens bfloat16 bits to `Float` (exact: bfloat16 is the top half of a binary32).
    @inlinable
    public static func float(fromBFloat16Bits bits: UInt16) -> Float {
        Float(bitPattern: UInt32(bits) << 16)
    }

    /// Narrows `Float` to bfloat16 bits, rounding to nearest even; NaN stays a quiet NaN.
    @inlinable
    public static func bfloat16Bits(from value: Float) -> UInt16 {
        let bits = value.bitPattern
        if bits & 0x7FFF_FFFF > 0x7F80_0000 {
            return UInt16(truncatingIfNeeded: bits >> 16) | 0x0040
        }
        let rounded = bits &+ 0x7FFF &+ ((bits >> 16) & 1)
        return UInt16(truncatingIfNeeded: rounded >> 16)
    }

    /// Widens OCP FP8 E4M3 ("FN": no infinities, `S.1111.111` is NaN) to `Float`.
    @inlinable
    public static func float(fromE4M3 byte: UInt8) -> Float {
        let negative = byte & 0x80 != 0
        let exponent = Int((byte >> 3) & 0xF)
        let mantissa = Float(byte & 0x7)
        let magnitude: Float
        if exponent == 0xF && byte & 0x7 == 0x7 {
            return negative ? -Float.nan : Float.nan
        } else if exponent == 0 {
            magnitude = mantissa * 0x1p-9
        } else {
            magnitude = (1 + mantissa / 8) * Float(sign: .plus, exponent: exponent - 7, significand: 1)
        }
        return negative ? -magnitude : magnitude
    }

    /// Widens OCP FP8 E5M2 to `Float`. E5M2 is the upper byte of a binary16, so this is exact.
    @inlinable
    public static func float(fromE5M2 byte: UInt8) -> Float {
        float(fromHalfBits: UInt16(byte) << 8)
    }

    @usableFromInline
    static func roundShiftingRight(_ value: UInt32, by shift: UInt32) -> UInt32 {
        let kept = value >> shift
        let remainder = value & ((1 << shift) - 1)
        let half: UInt32 = 1 << (shift - 1)
        return kept + ((remainder > half || (remainder == half && kept & 1 == 1)) ? 1 : 0)
    }
}
