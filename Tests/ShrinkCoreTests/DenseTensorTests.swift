import Testing
import ShrinkCore

@Suite struct DenseTensorTests {
    @Test func everyDTypeConvertsToFloat() throws {
        func tensor(_ dtype: DType, _ bytes: [UInt8]) throws -> [Float] {
            try DenseTensor(dtype: dtype, shape: [bytes.count / dtype.byteSize], bytes: bytes).floats()
        }
        #expect(try tensor(.f32, [0, 0, 0x80, 0x3F, 0, 0, 0, 0xC0]) == [1, -2])
        #expect(try tensor(.f64, [0, 0, 0, 0, 0, 0, 0xF0, 0x3F]) == [1])
        #expect(try tensor(.f16, [0x00, 0x3C, 0x00, 0xC0]) == [1, -2])
        #expect(try tensor(.bf16, [0x80, 0x3F]) == [1])
        #expect(try tensor(.f8E4M3, [0x38, 0xB8]) == [1, -1])
        #expect(try tensor(.f8E5M2, [0x3C]) == [1])
        #expect(try tensor(.i64, [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]) == [-2])
        #expect(try tensor(.i32, [0xFF, 0xFF, 0xFF, 0x7F]) == [2_147_483_648])
        #expect(try tensor(.i16, [0x00, 0x80]) == [-32768])
        #expect(try tensor(.i8, [0x80, 0x7F]) == [-128, 127])
        #expect(try tensor(.u64, [1, 0, 0, 0, 0, 0, 0, 0]) == [1])
        #expect(try tensor(.u32, [0xFF, 0xFF, 0xFF, 0xFF]) == [4_294_967_296])
        #expect(try tensor(.u16, [0xFF, 0xFF]) == [65535])
        #expect(try tensor(.u8, [0, 255]) == [0, 255])
        #expect(try tensor(.bool, [0, 1, 7]) == [0, 1, 1])
    }

    @Test func narrowFloatStorageRoundsToNearestEven() throws {
        let values: [Float] = [1, 1 + 0x1p-11, 1 + 0x1p-10 + 0x1p-11, 65520, -0x1p-25]
        let half = try DenseTensor(converting: values, to: .f16, shape: [5])
        #expect(half.byteCount == 10)
        #expect(half.floats() == [1, 1, 1 + 0x1p-9, .infinity, -0.0])
        let brain = try DenseTensor(converting: [1 + 0x1p-8, 3.0e38], to: .bf16, shape: [2])
        #expect(brain.floats() == [1, 3.0040553e38])
    }

    @Test func shapeAndByteCountMustAgree() {
        #expect(throws: ShrinkCoreError.byteCountMismatch(shape: [3], dtype: .f32, expected: 12, actual: 8)) {
            try DenseTensor(dtype: .f32, shape: [3], bytes: [UInt8](repeating: 0, count: 8))
        }
        #expect(throws: ShrinkCoreError.invalidShape([-1])) {
            try DenseTensor(dtype: .u8, shape: [-1], bytes: [UInt8]())
        }
        #expect(throws: ShrinkCoreError.invalidShape([Int.max, 2])) {
            try DenseTensor(dtype: .u8, shape: [Int.max, 2], bytes: [UInt8]())
        }
        #expect(throws: ShrinkCoreError.elementCountMismatch(shape: [2, 2], expected: 4, actual: 3)) {
            try DenseTensor(converting: [1, 2, 3], shape: [2, 2])
        }
    }

    @Test func scalarsAndEmptyTensors() throws {
        let scalar = try DenseTensor(converting: [5], shape: [])
        #expect(scalar.elementCount == 1)
        let empty = try DenseTensor(dtype: .f32, shape: [0, 7], bytes: [UInt8]())
        #expect(empty.elementCount == 0 && empty.floats().isEmpty)
        #expect(empty.copied().byteCount == 0)
    }
}
