/// A dense tensor: a dtype, a shape (outermost dimension first, row-major) and its bytes in
/// little-endian order, either owned or viewed in a memory-mapped file.
public struct DenseTensor: Sendable {
    /// The element type of the stored bytes.
    public let dtype: DType
    /// The dimensions, outermost first. `[]` is a scalar.
    public let shape: [Int]
    /// The bytes, exactly `elementCount × dtype.byteSize` of them.
    public let storage: TensorStorage

    /// Wraps existing storage. The storage must hold exactly the bytes of `shape` × `dtype`.
    public init(dtype: DType, shape: [Int], storage: TensorStorage) throws(ShrinkCoreError) {
        guard let expected = Shape.byteCount(shape, dtype: dtype) else { throw .invalidShape(shape) }
        guard expected == storage.bytes.count else {
            throw .byteCountMismatch(shape: shape, dtype: dtype, expected: expected, actual: storage.bytes.count)
        }
        self.dtype = dtype
        self.shape = shape
        self.storage = storage
    }

    /// Copies raw little-endian bytes into a new owned tensor.
    public init(dtype: DType, shape: [Int], bytes: some Collection<UInt8>) throws(ShrinkCoreError) {
        guard let expected = Shape.byteCount(shape, dtype: dtype) else { throw .invalidShape(shape) }
        guard expected == bytes.count else {
            throw .byteCountMismatch(shape: shape, dtype: dtype, expected: expected, actual: bytes.count)
        }
        let storage = TensorStorage(byteCount: expected) { buffer in
            let copied: Void? = bytes.withContiguousStorageIfAvailable { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(source))
            }
            if copied == nil { _ = buffer.initializeMemory(as: UInt8.self, from: bytes) }
        }
        try self.init(dtype: dtype, shape: shape, storage: storage)
    }

    /// Stores `values` as `dtype` (`F32`, `F16` or `BF16`), rounding to nearest even.
    /// - Throws: `ShrinkCoreError.unsupportedDType` for any other dtype.
    public init(converting values: [Float], to dtype: DType = .f32, shape: [Int]) throws(ShrinkCoreError) {
        guard let count = Shape.elementCount(shape) else { throw .invalidShape(shape) }
        guard count == values.count else {
            throw .elementCountMismatch(shape: shape, expected: count, actual: values.count)
        }
        guard [.f32, .f16, .bf16].contains(dtype) else { throw .unsupportedDType(dtype, reason: "only F32, F16 and BF16 are produced from floats") }
        let storage = TensorStorage(byteCount: count * dtype.byteSize) { buffer in
            switch dtype {
            case .f16:
                for (index, value) in values.enumerated() {
                    buffer.storeBytes(of: FloatingPointConversion.halfBits(from: value).littleEndian,
                                      toByteOffset: 2 * index, as: UInt16.self)
                }
            case .bf16:
                for (index, value) in values.enumerated() {
                    buffer.storeBytes(of: FloatingPointConversion.bfloat16Bits(from: value).littleEndian,
                                      toByteOffset: 2 * index, as: UInt16.self)
                }
            default:
                for (index, value) in values.enumerated() {
                    buffer.storeBytes(of: value.bitPattern.littleEndian, toByteOffset: 4 * index, as: UInt32.self)
                }
            }
        }
        try self.init(dtype: dtype, shape: shape, storage: storage)
    }

    /// Stores `values` as `F64`.
    public init(doubles values: [Double], shape: [Int]) throws(ShrinkCoreError) {
        guard let count = Shape.elementCount(shape) else { throw .invalidShape(shape) }
        guard count == values.count else {
            throw .elementCountMismatch(shape: shape, expected: count, actual: values.count)
        }
        let storage = TensorStorage(byteCount: count * 8) { buffer in
            for (index, value) in values.enumerated() {
                buffer.storeBytes(of: value.bitPattern.littleEndian, toByteOffset: 8 * index, as: UInt64.self)
            }
        }
        try self.init(dtype: .f64, shape: shape, storage: storage)
    }

    /// The number of elements (product of the shape).
    public var elementCount: Int { storage.bytes.count / dtype.byteSize }

    /// The number of stored bytes.
    public var byteCount: Int { storage.bytes.count }

    /// The stored bytes (little-endian elements).
    public var bytes: UnsafeRawBufferPointer { storage.bytes }

    /// Every element converted to `Float`. Integers convert by value, `BOOL` to 0 or 1; `F64` and
    /// 64-bit integers round to the nearest `Float`.
    public func floats() -> [Float] {
        [Float](unsafeUninitializedCapacity: elementCount) { output, initialized in
            ElementConversion.convertToFloat(bytes, dtype: dtype, into: output)
            initialized = elementCount
        }
    }

    /// A copy whose bytes live in a new heap allocation (detached from any mapped file).
    public func copied() -> DenseTensor {
        let storage = TensorStorage(byteCount: byteCount) { buffer in buffer.copyMemory(from: bytes) }
        // The shape and size were validated when `self` was created.
        return try! DenseTensor(dtype: dtype, shape: shape, storage: storage)
    }
}

/// Conversion of raw little-endian tensor bytes of any dtype to `Float`.
public enum ElementConversion {
    /// Converts `bytes` (elements of `dtype`, possibly unaligned) into `output`, which must have
    /// room for `bytes.count / dtype.byteSize` values.
    public static func convertToFloat(_ bytes: UnsafeRawBufferPointer, dtype: DType, into output: UnsafeMutableBufferPointer<Float>) {
        let count = bytes.count / dtype.byteSize
        precondition(output.count >= count)
        func each<T>(_ type: T.Type, _ convert: (T) -> Float) {
            let stride = MemoryLayout<T>.size
            for index in 0..<count {
                output[index] = convert(bytes.loadUnaligned(fromByteOffset: index * stride, as: T.self))
            }
        }
        switch dtype {
        case .f32: each(UInt32.self) { Float(bitPattern: UInt32(littleEndian: $0)) }
        case .f64: each(UInt64.self) { Float(Double(bitPattern: UInt64(littleEndian: $0))) }
        case .f16: each(UInt16.self) { FloatingPointConversion.float(fromHalfBits: UInt16(littleEndian: $0)) }
        case .bf16: each(UInt16.self) { FloatingPointConversion.float(fromBFloat16Bits: UInt16(littleEndian: $0)) }
        case .f8E4M3: each(UInt8.self, FloatingPointConversion.float(fromE4M3:))
        case .f8E5M2: each(UInt8.self, FloatingPointConversion.float(fromE5M2:))
        case .i64: each(Int64.self) { Float(Int64(littleEndian: $0)) }
        case .i32: each(Int32.self) { Float(Int32(littleEndian: $0)) }
        case .i16: each(Int16.self) { Float(Int16(littleEndian: $0)) }
        case .i8: each(Int8.self) { Float($0) }
        case .u64: each(UInt64.self) { Float(UInt64(littleEndian: $0)) }
        case .u32: each(UInt32.self) { Float(UInt32(littleEndian: $0)) }
        case .u16: each(UInt16.self) { Float(UInt16(littleEndian: $0)) }
        case .u8: each(UInt8.self) { Float($0) }
        case .bool: each(UInt8.self) { $0 == 0 ? 0 : 1 }
        }
    }
}
