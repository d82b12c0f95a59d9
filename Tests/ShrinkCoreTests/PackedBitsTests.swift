import Testing
import ShrinkCore

/// The packed layout is part of the file format: pinned by golden bytes.
@Suite struct PackedBitsTests {
    @Test func goldenBytes() {
        // 3-bit values straddle bytes, least significant bit first.
        #expect(PackedBits.pack([1, 2, 3, 4, 5], bits: 3) == [0xD1, 0x58])
        #expect(PackedBits.pack([1, 2, 3], bits: 4) == [0x21, 0x03])
        #expect(PackedBits.pack([1, 0, 1, 1, 0, 0, 0, 0, 1], bits: 1) == [0x0D, 0x01])
        #expect(PackedBits.pack([63, 1], bits: 6) == [0x7F, 0x00])
        #expect(PackedBits.byteCount(count: 5, bits: 3) == 2)
    }

    @Test(arguments: 1...8)
    func valuesReadBackAtEveryWidth(bits: Int) {
        var generator = SplitMix64(seed: UInt64(bits))
        let values = (0..<37).map { _ in UInt8.random(in: 0...UInt8((1 << bits) - 1), using: &generator) }
        let packed = PackedBits.pack(values, bits: bits)
        #expect(packed.count == PackedBits.byteCount(count: 37, bits: bits))
        packed.withUnsafeBytes { bytes in
            #expect((0..<37).map { PackedBits.value(at: $0, bits: bits, in: bytes) } == values)
        }
    }
}
