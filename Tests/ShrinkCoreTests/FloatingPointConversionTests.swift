import Testing
import ShrinkCore

/// The compiler's own `Float16` conversions are the reference for binary16; bfloat16 is checked
/// against an independent nearest-candidate search in `Double`.
@Suite struct FloatingPointConversionTests {
    @Test func halfToFloatMatchesTheReferenceForEveryBitPattern() {
        var mismatches: [UInt16] = []
        for bits in 0...UInt16.max {
            let value = FloatingPointConversion.float(fromHalfBits: bits)
            let expected = Float(Float16(bitPattern: bits))
            if expected.isNaN {
                if !value.isNaN || value.sign != expected.sign { mismatches.append(bits) }
            } else if value.bitPattern != expected.bitPattern {
                mismatches.append(bits)
            }
        }
        #expect(mismatches.isEmpty, "first mismatching f16 patterns: \(mismatches.prefix(5))")
    }

    @Test func floatToHalfRoundTripsAndRoundsTiesToEvenForEveryBitPattern() {
        var failures: [String] = []
        for bits in 0...UInt16.max {
            let value = FloatingPointConversion.float(fromHalfBits: bits)
            if value.isNaN {
                let back = FloatingPointConversion.halfBits(from: value)
                if back & 0x7C00 != 0x7C00 || back & 0x3FF == 0 || back & 0x8000 != bits & 0x8000 { failures.append("NaN \(bits)") }
                continue
            }
            if FloatingPointConversion.halfBits(from: value) != bits { failures.append("round trip \(bits)") }
            // Midpoint to the next pattern of larger magnitude, and its neighbours one Float ulp away.
            guard bits & 0x7FFF < 0x7C00 else { continue }
            let next = FloatingPointConversion.float(fromHalfBits: bits + 1)
            let midpoint = Float((Double(value) + Double(next)) / 2)
            for probe in [midpoint, midpoint.nextDown, midpoint.nextUp, -midpoint] where probe.isFinite {
                let expected = Float16(probe).bitPattern
                if FloatingPointConversion.halfBits(from: probe) != expected { failures.append("probe \(probe) near \(bits)") }
            }
        }
        #expect(failures.isEmpty, "failures: \(failures.prefix(5)) of \(failures.count)")
    }

    @Test func halfEdgeCases() {
        #expect(FloatingPointConversion.halfBits(from: 65504) == 0x7BFF)
        #expect(FloatingPointConversion.halfBits(from: 65519.996) == 0x7BFF)
        #expect(FloatingPointConversion.halfBits(from: 65520) == 0x7C00)
        #expect(FloatingPointConversion.halfBits(from: -.infinity) == 0xFC00)
        #expect(FloatingPointConversion.halfBits(from: 0x1p-24) == 0x0001)
        #expect(FloatingPointConversion.halfBits(from: 0x1p-25) == 0x0000)
        #expect(FloatingPointConversion.halfBits(from: 0x1.000002p-25) == 0x0001)
        #expect(FloatingPointConversion.halfBits(from: -0.0) == 0x8000)
        #expect(FloatingPointConversion.halfBits(from: .greatestFiniteMagnitude) == 0x7C00)
        // A NaN whose payload lies only in the low bits must stay NaN, not become infinity.
        #expect(FloatingPointConversion.halfBits(from: Float(bitPattern: 0x7F80_0001)) == 0x7E00)
        #expect(FloatingPointConversion.halfBits(from: Float(bitPattern: 0xFFC0_0000)) == 0xFE00)
    }

    /// Nearest bfloat16 to `value` by searching both neighbours in `Double`; ties pick the even one.
    static func referenceBFloat16(_ value: Float) -> UInt16 {
        let truncated = UInt16(truncatingIfNeeded: value.bitPattern >> 16)
        let lower = Double(FloatingPointConversion.float(fromBFloat16Bits: truncated))
        // Past the largest finite value, IEEE rounding continues the pattern as if 2¹²⁸ existed.
        let next = Double(FloatingPointConversion.float(fromBFloat16Bits: truncated &+ 1))
        let upper = next.isInfinite ? (value.sign == .minus ? -0x1p128 : 0x1p128) : next
        let distanceLower = abs(Double(value) - lower)
        let distanceUpper = abs(upper - Double(value))
        if distanceLower < distanceUpper { return truncated }
        if distanceUpper < distanceLower { return truncated &+ 1 }
        return truncated & 1 == 0 ? truncated : truncated &+ 1
    }

    @Test func bfloat16RoundTripsAndRoundsTiesToEvenForEveryBitPattern() {
        var failures: [String] = []
        for bits in 0...UInt16.max {
            let value = FloatingPointConversion.float(fromBFloat16Bits: bits)
            #expect(value.bitPattern == UInt32(bits) << 16)
            if value.isNaN {
                let back = FloatingPointConversion.bfloat16Bits(from: value)
                if back & 0x7F80 != 0x7F80 || back & 0x7F == 0 { failures.append("NaN \(bits)") }
                continue
            }
            if FloatingPointConversion.bfloat16Bits(from: value) != bits { failures.append("round trip \(bits)") }
            guard bits & 0x7FFF < 0x7F80 else { continue }
            let base = value.bitPattern
            for probe in [base | 0x8000, (base | 0x8000) - 1, (base | 0x8000) + 1, base | 0x1234].map(Float.init(bitPattern:)) {
                if FloatingPointConversion.bfloat16Bits(from: probe) != Self.referenceBFloat16(probe) {
                    failures.append("probe \(probe.bitPattern)")
                }
            }
        }
        #expect(failures.isEmpty, "failures: \(failures.prefix(5)) of \(failures.count)")
        #expect(FloatingPointConversion.bfloat16Bits(from: Float(bitPattern: 0x7F80_0001)) & 0x7F != 0)
        #expect(FloatingPointConversion.bfloat16Bits(from: .greatestFiniteMagnitude) == 0x7F80)
    }

    @Test func float8E4M3KnownValuesAndOrder() {
        #expect(FloatingPointConversion.float(fromE4M3: 0x38) == 1)
        #expect(FloatingPointConversion.float(fromE4M3: 0x7E) == 448)
        #expect(FloatingPointConversion.float(fromE4M3: 0xFE) == -448)
        #expect(FloatingPointConversion.float(fromE4M3: 0x08) == 0x1p-6)
        #expect(FloatingPointConversion.float(fromE4M3: 0x01) == 0x1p-9)
        #expect(FloatingPointConversion.float(fromE4M3: 0x07) == 7 * 0x1p-9)
        #expect(FloatingPointConversion.float(fromE4M3: 0x7F).isNaN)
        #expect(FloatingPointConversion.float(fromE4M3: 0xFF).isNaN)
        #expect(FloatingPointConversion.float(fromE4M3: 0x78) == 256)  // E4M3FN has no infinities.
        let positives = (0...0x7E).map { FloatingPointConversion.float(fromE4M3: UInt8($0)) }
        #expect(zip(positives, positives.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test func float8E5M2KnownValuesAndOrder() {
        #expect(FloatingPointConversion.float(fromE5M2: 0x3C) == 1)
        #expect(FloatingPointConversion.float(fromE5M2: 0x7B) == 57344)
        #expect(FloatingPointConversion.float(fromE5M2: 0x7C) == .infinity)
        #expect(FloatingPointConversion.float(fromE5M2: 0xFC) == -.infinity)
        #expect(FloatingPointConversion.float(fromE5M2: 0x7D).isNaN)
        #expect(FloatingPointConversion.float(fromE5M2: 0x01) == 0x1p-16)
        let positives = (0...0x7B).map { FloatingPointConversion.float(fromE5M2: UInt8($0)) }
        #expect(zip(positives, positives.dropFirst()).allSatisfy { $0 < $1 })
    }
}
