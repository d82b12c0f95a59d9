import CBLAS
import ShrinkCore

/// Dense fp32 matrix products `y = x · Wᵀ (+ bias)`, the layout of a linear layer: `x` is
/// `rows × inFeatures`, `W` is `outFeatures × inFeatures`, both row-major, and `y` is
/// `rows × outFeatures`. This is the fp32 baseline every compressed kernel is measured against.
public enum DenseMatmul {
    /// Output-column block width of `blas`.
    static let productBlock = 128

    /// Computes the product with the system BLAS: the outputs fall in blocks of 128 columns, and
    /// each block is one single-threaded call (`cblas_sgemv` for one row, `cblas_sgemm` otherwise),
    /// the blocks dealt round-robin to `threads` workers. Every block is computed by the same call
    /// whatever the thread count or concurrent BLAS use elsewhere in the process, so the result's
    /// bits depend on the operands only. O(rows · outFeatures · inFeatures).
    public static func blas(x: UnsafePointer<Float>, rows: Int, weights: UnsafePointer<Float>, outFeatures: Int,
                            inFeatures: Int, bias: UnsafePointer<Float>?, output: UnsafeMutablePointer<Float>, threads: Int = 1) {
        precondition(rows > 0 && outFeatures > 0 && inFeatures > 0 && threads > 0)
        if let bias {
            for row in 0..<rows { (output + row * outFeatures).update(from: bias, count: outFeatures) }
        }
        let beta: Float = bias == nil ? 0 : 1
        let blocks = (outFeatures + productBlock - 1) / productBlock
        let workers = min(threads, blocks)
        nonisolated(unsafe) let (input, matrix, target) = (x, weights, output)
        BLASThreading.singleThreaded {
            WorkerPool.shared.run(workers) { worker in
                for block in stride(from: worker, to: blocks, by: workers) {
                    let first = block * productBlock
                    let count = Int32(min(productBlock, outFeatures - first))
                    if rows == 1 {
                        cblas_sgemv(CblasRowMajor, CblasNoTrans, count, Int32(inFeatures), 1, matrix + first * inFeatures,
                                    Int32(inFeatures), input, 1, beta, target + first, 1)
                    } else {
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(rows), count, Int32(inFeatures), 1,
                                    input, Int32(inFeatures), matrix + first * inFeatures, Int32(inFeatures), beta,
                                    target + first, Int32(outFeatures))
                    }
                }
            }
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

    /// Column-block width of `gram`.
    static let gramBlock = 128

    /// `Xᵀ·X` of `rows × width` inputs (row-major) into `output` (`width × width`): `gramUpper`,
    /// then the upper triangle mirrored below the diagonal in 64 × 64 tiles (so that the
    /// transposed reads stay in cache). O(rows · width² / 2); `DenseMatmul.reference` on `X`
    /// transposed is its reference.
    public static func gram(x: UnsafePointer<Float>, rows: Int, width: Int, output: UnsafeMutablePointer<Float>, threads: Int = 1) {
        gramUpper(x: x, rows: rows, width: width, output: output, threads: threads)
        let tile = 64
        for rowTile in stride(from: 0, to: width, by: tile) {
            for columnTile in stride(from: 0, through: rowTile, by: tile) {
                for i in rowTile..<min(rowTile + tile, width) {
                    for j in columnTile..<min(columnTile + tile, i) { output[i * width + j] = output[j * width + i] }
                }
            }
        }
    }

    /// The upper triangle (`i ≤ j`) of `Xᵀ·X` of `rows × width` inputs (row-major) into `output`
    /// (`width × width`), with the system BLAS; entries below the diagonal are left as they were.
    /// The columns fall in blocks of 128, and each block pair `(i ≤ j)` is one single-threaded
    /// call (`cblas_ssyrk` on the diagonal, `cblas_sgemm` above it), the pairs dealt round-robin
    /// to `threads` workers. Every pair is computed by the same call whatever the thread count or
    /// concurrent BLAS use, so the result's bits depend on `X` only. O(rows · width² / 2).
    public static func gramUpper(x: UnsafePointer<Float>, rows: Int, width: Int, output: UnsafeMutablePointer<Float>, threads: Int = 1) {
        precondition(rows > 0 && width > 0 && threads > 0)
        let blocks = (width + gramBlock - 1) / gramBlock
        let pairs = (0..<blocks).flatMap { i in (i..<blocks).map { j in (i, j) } }
        let workers = min(threads, pairs.count)
        nonisolated(unsafe) let (input, target) = (x, output)
        BLASThreading.singleThreaded {
            WorkerPool.shared.run(workers) { worker in
                for index in stride(from: worker, to: pairs.count, by: workers) {
                    let (i, j) = pairs[index]
                    let (first, second) = (i * gramBlock, j * gramBlock)
                    let (height, breadth) = (min(gramBlock, width - first), min(gramBlock, width - second))
                    if i == j {
                        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, Int32(height), Int32(rows), 1, input + first, Int32(width),
                                    0, target + first * width + first, Int32(width))
                    } else {
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int32(height), Int32(breadth), Int32(rows), 1,
                                    input + first, Int32(width), input + second, Int32(width), 0, target + first * width + second, Int32(width))
                    }
                }
            }
        }
    }
}
