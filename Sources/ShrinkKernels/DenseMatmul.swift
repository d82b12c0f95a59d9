import CBLAS

/// Dense fp32 matrix products `y = x · Wᵀ (+ bias)`, the layout of a linear layer: `x` is
/// `rows × inFeatures`, `W` is `outFeatures × inFeatures`, both row-major, and `y` is
/// `rows × outFeatures`. This is the fp32 baseline every compressed kernel is measured against.
public enum DenseMatmul {
    /// Computes the product with the system BLAS: `cblas_sgemv` for one row, `cblas_sgemm` otherwise.
    public static func blas(x: UnsafePointer<Float>, rows: Int, weights: UnsafePointer<Float>, outFeatures: Int,
                            inFeatures: Int, bias: UnsafePointer<Float>?, output: UnsafeMutablePointer<Float>) {
        precondition(rows > 0 && outFeatures > 0 && inFeatures > 0)
        if let bias {
            for row in 0..<rows { (output + row * outFeatures).update(from: bias, count: outFeatures) }
        }
        let beta: Float = bias == nil ? 0 : 1
        if rows == 1 {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, Int32(outFeatures), Int32(inFeatures), 1, weights,
                        Int32(inFeatures), x, 1, beta, output, 1)
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(rows), Int32(outFeatures), Int32(inFeatures), 1,
                        x, Int32(inFeatures), weights, Int32(inFeatures), beta, output, Int32(outFeatures))
        }
    }

    /// The scalar reference: each output is a `Double`-accumulated dot product, rounded once to `Float`.
    public static func reference(x: UnsafePointer<Float>, rows: Int, weights: UnsafePointer<Float>, outFeatures: Int,
                                 inFeatures: Int, bias: UnsafePointer<Float>?, output: UnsafeMutablePointer<Float>) {
        for row in 0..<rows {
            for column in 0..<outFeatures {
                var sum = Double(bias?[column] ?? 0)
                for index in 0..<inFeatures {
                    sum += Double(x[row * inFeatures + index]) * Double(weights[column * inFeatures + index])
                }
                output[row * outFeatures + column] = Float(sum)
            }
        }
    }

    /// `Xᵀ·X` of `rows × width` inputs (row-major) into `output` (`width × width`), with the
    /// system BLAS (`cblas_ssyrk`, one triangle, mirrored); `DenseMatmul.reference` on `X`
    /// transposed is its reference.
    public static func gram(x: UnsafePointer<Float>, rows: Int, width: Int, output: UnsafeMutablePointer<Float>) {
        precondition(rows > 0 && width > 0)
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, Int32(width), Int32(rows), 1, x, Int32(width), 0, output, Int32(width))
        for i in 0..<width { for j in 0..<i { output[i * width + j] = output[j * width + i] } }
    }
}
