/// The second moment of a linear layer's inputs over calibration data, `H = Σ xᵀx` summed over
/// the input rows `x` the layer saw (`size × size`, row-major, in doubles). Calibrated passes
/// minimise the layer's output error `‖X·Wᵀ − X·Ŵᵀ‖²`, which for each output channel equals
/// `(w − ŵ) · H · (w − ŵ)ᵀ`.
public struct InputCorrelation: Sendable, Equatable {
    /// The layer's input width.
    public let size: Int
    /// `Σ xᵀx`, `size × size`, row-major.
    public private(set) var matrix: [Double]
    /// How many input rows were added.
    public private(set) var rows: Int

    /// An empty correlation for inputs of width `size`.
    public init(size: Int) {
        precondition(size > 0)
        self.size = size
        matrix = [Double](repeating: 0, count: size * size)
        rows = 0
    }

    /// A correlation as stored: `matrix` is `size × size`, row-major, summed over `rows` rows.
    public init(size: Int, matrix: [Double], rows: Int) {
        precondition(size > 0 && matrix.count == size * size && rows >= 0)
        self.size = size
        self.matrix = matrix
        self.rows = rows
    }

    /// Adds the product `Xᵀ·X` of `rows` input rows, computed by the caller (`size × size`,
    /// row-major): only its upper triangle (`i ≤ j`) is read, each entry added at `(i, j)` and
    /// `(j, i)` (`addUpperTriangle`, then `mirrorUpperTriangle`). O(size²).
    public mutating func add(product: UnsafeBufferPointer<Float>, rows added: Int, threads: Int = 1) {
        addUpperTriangle(of: product, rows: added, threads: threads)
        mirrorUpperTriangle()
    }

    /// Adds the upper triangle (`i ≤ j`) of the product `Xᵀ·X` of `rows` input rows to the
    /// matrix's upper triangle only: the entries below the diagonal are stale until
    /// `mirrorUpperTriangle()`. A caller adding many products mirrors once, at half the memory
    /// traffic per product (4 bytes read and 8 updated per entry, contiguous). Matrix rows are
    /// dealt round-robin to `threads` workers; the sums do not depend on `threads`. O(size² / 2).
    package mutating func addUpperTriangle(of product: UnsafeBufferPointer<Float>, rows added: Int, threads: Int) {
        precondition(product.count >= size * size && threads > 0)
        let n = size
        matrix.withUnsafeMutableBufferPointer { buffer in
            nonisolated(unsafe) let (sums, source) = (buffer.baseAddress!, product.baseAddress!)
            let workers = min(threads, n)
            WorkerPool.shared.run(workers) { worker in
                for i in stride(from: worker, to: n, by: workers) {
                    let (row, values) = (sums + i * n, source + i * n)
                    for j in i..<n { row[j] += Double(values[j]) }
                }
            }
        }
        rows += added
    }

    /// Copies the upper triangle below the diagonal, `H_ji = H_ij` for `i < j`, in 64 × 64 tiles
    /// (a tile and its mirror stay in cache). O(size²).
    package mutating func mirrorUpperTriangle() {
        let (n, tile) = (size, 64)
        matrix.withUnsafeMutableBufferPointer { h in
            for rowTile in stride(from: 0, to: n, by: tile) {
                for columnTile in stride(from: 0, through: rowTile, by: tile) {
                    for i in rowTile..<min(rowTile + tile, n) {
                        for j in columnTile..<min(columnTile + tile, i) { h[i * n + j] = h[j * n + i] }
                    }
                }
            }
        }
    }

    /// Adds `rows` input rows (`rows × size`, row-major) one by one; a plain reference for
    /// `add(product:rows:)`.
    public mutating func add(rows inputs: [Float], count: Int) {
        precondition(inputs.count == count * size)
        for row in 0..<count {
            let base = row * size
            for i in 0..<size {
                let xi = Double(inputs[base + i])
                guard xi != 0 else { continue }
                for j in 0..<size { matrix[i * size + j] += xi * Double(inputs[base + j]) }
            }
        }
        rows += count
    }

    /// The correlation of the rotated inputs `R·x`: `R · H · Rᵀ` (`rotation.size == size`), in
    /// `O(size² · (k + 12t))` for a Hadamard block `12^t · 2^k`.
    public func rotated(by rotation: HadamardRotation) -> InputCorrelation {
        precondition(rotation.size == size)
        var result = self
        result.matrix.withUnsafeMutableBufferPointer { h in
            // Rows of H become rows of H·Rᵀ; H·Rᵀ transposed is R·H (H symmetric), whose rows become R·H·Rᵀ.
            for row in 0..<size { rotation.rotate(h.baseAddress! + row * size) }
            for i in 0..<size { for j in (i + 1)..<max(i + 1, size) { h.swapAt(i * size + j, j * size + i) } }
            for row in 0..<size { rotation.rotate(h.baseAddress! + row * size) }
        }
        return result
    }

    /// The correlation of the inputs scaled element by element, `x_i · s_i`: `H_ij · s_i · s_j`
    /// (`scales.count == size`).
    public func scaled(by scales: [Double]) -> InputCorrelation {
        precondition(scales.count == size)
        var result = self
        for i in 0..<size { for j in 0..<size { result.matrix[i * size + j] *= scales[i] * scales[j] } }
        return result
    }

    /// The matrix, moved out: a caller that gave up the correlation (`consume`) and holds no other
    /// copy gets the only reference, so it can work in the matrix without copying its `8·size²` bytes.
    public consuming func takeMatrix() -> [Double] { matrix }
}
