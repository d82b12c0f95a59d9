/// The element types a tensor can be stored in, named as in the safetensors format.
///
/// Every type converts to `Float` for computation (`F64` and the 64-bit integers lose precision
/// beyond 24 bits of mantissa). The two 8-bit float types follow the OCP FP8 specification:
/// `F8_E4M3` is the "FN" variant (bias 7, no infinities, `S.1111.111` is NaN, largest finite 448)
/// and `F8_E5M2` is IEEE-like (bias 15, with infinities and NaNs).
public enum DType: String, CaseIterable, Sendable, Codable, Hashable {
    case f64 = "F64"
    case f32 = "F32"
    case f16 = "F16"
    case bf16 = "BF16"
    case f8E4M3 = "F8_E4M3"
    case f8E5M2 = "F8_E5M2"
    case i64 = "I64"
    case i32 = "I32"
    case i16 = "I16"
    case i8 = "I8"
    case u64 = "U64"
    case u32 = "U32"
    case u16 = "U16"
    case u8 = "U8"
    case bool = "BOOL"

    /// Bytes per element.
    public var byteSize: Int {
        switch self {
        case .f64, .i64, .u64: 8
        case .f32, .i32, .u32: 4
        case .f16, .bf16, .i16, .u16: 2
        case .f8E4M3, .f8E5M2, .i8, .u8, .bool: 1
        }
    }

    /// Whether the type holds floating-point values.
    public var isFloatingPoint: Bool {
        switch self {
        case .f64, .f32, .f16, .bf16, .f8E4M3, .f8E5M2: true
        default: false
        }
    }
}
