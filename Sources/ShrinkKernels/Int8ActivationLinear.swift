import Dispatch
import Foundation
import ShrinkCore

/// A linear layer whose activations are quantized to int8 (per row, per block of 32 inputs) and
/// multiplied with u8 weight codes by integer dot products (`Int8PanelWeights`). Threads split the
/// panels of 16 output channels; each output is computed the same way whatever the thread count.
///
/// Against exact arithmetic on the stored weights, each product `x · w` is off by at most
/// `|w| · s/2` where `s` is the scale of `x`'s block (plus, for palettes, `|x|` times half the LUT
/// grid's step): see `errorBound` in the tests.
public final class Int8ActivationLinear: LinearOperator, @unchecked Sendable {
    public let inFeatures: Int
    public let outFeatures: Int
    public let threads: Int
    public let variant: IntegerKernelVariant
    /// Least multiply-adds per thread before work is split (0: always split).
    public let minimumWorkPerThread: Int
    public let weights: Int8PanelWeights
    /// The bias, owned, so that a forward pass needs no array access closures.
    let biasValues: UnsafeMutablePointer<Float>?
    let scratch = ScratchBuffer()

    public init(weights: Int8PanelWeights, bias: [Float]?, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
                variant: IntegerKernelVariant = .best, minimumWorkPerThread: Int = defaultMinimumWorkPerThread) {
        precondition((bias?.count ?? weights.rows) == weights.rows && threads >= 1)
        self.weights = weights
        biasValues = bias.map { values in
            let pointer = UnsafeMutablePointer<Float>.allocate(capacity: values.count)
            pointer.initialize(from: values, count: values.count)
            return pointer
        }
        self.threads = threads
        self.variant = variant
        self.minimumWorkPerThread = minimumWorkPerThread
        inFeatures = weights.columns
        outFeatures = weights.rows
    }

    deinit { biasValues?.deallocate() }

    /// Each row is quantized on its own and every kernel variant computes the Swift twin's integer
    /// sums and float operations per row, whatever the row count or tile.
    public var rowsAreIndependent: Bool { true }

    public var execution: LinearExecution {
        LinearExecution(kernel: "int8 × u8 codes, \(variant.rawValue)", weights: weights.codeDescription,
                        maximumWeightError: (0..<weights.rows).reduce(0) { max($0, weights.maximumWeightError(row: $1)) })
    }

    public func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        precondition(x.count >= rows * inFeatures && y.count >= rows * outFeatures)
        x.withUnsafeBufferPointer { input in
            y.withUnsafeMutableBufferPointer { output in
                withUnsafeTemporaryAllocation(of: Product.self, capacity: 1) { products in
                    products.initializeElement(at: 0, to: Product(layer: self, y: output.baseAddress!))
                    Self.run(UnsafeBufferPointer(products), x: input.baseAddress!, rows: rows)
                }
            }
        }
    }

    /// One layer's share of a forward pass: its weights and where its outputs go.
    struct Product {
        unowned(unsafe) let layer: Int8ActivationLinear
        let y: UnsafeMutablePointer<Float>
    }

    /// A forward pass of layers that read the same input (same columns, variant and threads): the
    /// input quantized once, in the first layer's scratch, then all their panels split over the
    /// workers as one range.
    static func run(_ products: UnsafeBufferPointer<Product>, x: UnsafePointer<Float>, rows: Int) {
        let first = products[0].layer
        let kpad = first.weights.paddedColumns, blocks = kpad / 32
        var panels = 0, work = 0
        for product in products {
            panels += product.layer.weights.panels
            work += rows * product.layer.outFeatures * product.layer.inFeatures
        }
        let workers = workerCount(threads: first.threads, work: work, outFeatures: panels, minimumWork: first.minimumWorkPerThread)
        // Quantized rows, then per row and block a scale, a sum and an integer sum, in the reused scratch.
        first.scratch.withBytes(rows * kpad + 12 * rows * blocks) { bytes in
            let quantized = bytes.bindMemory(to: Int8.self, capacity: rows * kpad)
            let scales = (bytes + rows * kpad).bindMemory(to: Float.self, capacity: 2 * rows * blocks)
            let sums = scales + rows * blocks
            let integerSums = (bytes + rows * kpad + 8 * rows * blocks).bindMemory(to: Int32.self, capacity: rows * blocks)
            // Rows are quantized independently: split over the same workers when there are enough.
            WorkerPool.shared.run(rows >= 8 * workers ? workers : 1,
                                  QuantizeJob(layer: first, x: x, rows: rows, quantized: quantized, scales: scales, sums: sums,
                                              integerSums: integerSums))
            WorkerPool.shared.run(workers, GemmJob(products: products, panels: panels, quantized: quantized, scales: scales, sums: sums,
                                                   integerSums: integerSums, rows: rows))
        }
    }

    /// Quantizes a forward pass's input rows, split over the workers.
    struct QuantizeJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: QuantizeJob.self).pointee.run(worker: worker, of: workers) } }
        let layer: Int8ActivationLinear
        let x: UnsafePointer<Float>
        let rows: Int
        let quantized: UnsafeMutablePointer<Int8>
        let scales, sums: UnsafeMutablePointer<Float>
        let integerSums: UnsafeMutablePointer<Int32>

        func run(worker: Int, of workers: Int) {
            let part = Parallel.range(worker: worker, of: workers, count: rows)
            let kpad = layer.weights.paddedColumns, blocks = kpad / 32, first = part.lowerBound
            layer.variant.quantizeRows(x + first * layer.inFeatures, rows: part.count, k: layer.inFeatures, ldx: layer.inFeatures, kpad: kpad,
                                       into: quantized + first * kpad, scales: scales + first * blocks, sums: sums + first * blocks,
                                       integerSums: integerSums + first * blocks)
        }
    }

    /// Multiplies the quantized rows with the layers' panels, taken as one range of panels (layer
    /// after layer) split over the workers.
    struct GemmJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: GemmJob.self).pointee.run(worker: worker, of: workers) } }
        let products: UnsafeBufferPointer<Product>
        let panels: Int
        let quantized: UnsafeMutablePointer<Int8>
        let scales, sums: UnsafeMutablePointer<Float>
        let integerSums: UnsafeMutablePointer<Int32>
        let rows: Int

        func run(worker: Int, of workers: Int) {
            let share = Parallel.range(worker: worker, of: workers, count: panels)
            var start = 0
            for product in products {
                let layer = product.layer, count = layer.weights.panels
                let first = max(share.lowerBound, start) - start, end = min(share.upperBound, start + count) - start
                if first < end {
                    layer.variant.gemm(layer.weights, panels: first..<end, xq: quantized, xScales: scales, xSums: sums, xIntegerSums: integerSums,
                                       rows: rows, y: product.y, ldy: layer.outFeatures, bias: layer.biasValues.map { UnsafePointer($0) })
                }
                start += count
            }
        }
    }
}

/// Linear layers that read the same input, such as a transformer's query, key and value
/// projections: a forward pass quantizes the input once and splits all their panels over the
/// threads in one job (one quantization and one hand-off instead of one per layer). Each output
/// equals its own layer's forward pass bit for bit.
public final class SharedInputLinears: @unchecked Sendable {
    public let layers: [Int8ActivationLinear]

    /// `nil` unless every operator is an `Int8ActivationLinear` and all take the same inputs with
    /// the same kernel variant and thread count.
    public init?(_ operators: [any LinearOperator]) {
        let layers = operators.compactMap { $0 as? Int8ActivationLinear }
        guard let first = layers.first, layers.count == operators.count,
              layers.allSatisfy({ $0.inFeatures == first.inFeatures && $0.variant == first.variant && $0.threads == first.threads
                                  && $0.weights.paddedColumns == first.weights.paddedColumns })
        else { return nil }
        self.layers = layers
    }

    /// Computes `rows × layers[i].outFeatures` outputs into `outputs[i]` from `rows × inFeatures`
    /// inputs (row-major), for every layer.
    public func forward(_ x: [Float], rows: Int, into outputs: UnsafeBufferPointer<UnsafeMutablePointer<Float>>) {
        precondition(outputs.count == layers.count && x.count >= rows * layers[0].inFeatures)
        x.withUnsafeBufferPointer { input in
            withUnsafeTemporaryAllocation(of: Int8ActivationLinear.Product.self, capacity: layers.count) { products in
                for (index, layer) in layers.enumerated() {
                    products.initializeElement(at: index, to: Int8ActivationLinear.Product(layer: layer, y: outputs[index]))
                }
                Int8ActivationLinear.run(UnsafeBufferPointer(products), x: input.baseAddress!, rows: rows)
            }
        }
    }
}

/// Linear layers that read the same input (a transformer's query, key and value projections; a
/// SwiGLU's gate and up): one `SharedInputLinears` pass when their kernels allow it, else each
/// layer's own forward pass, with the same outputs either way. Layers that all rotate their input
/// by the same rotation (`RotatedLinear`) rotate it once and share their bases' pass.
public struct LinearGroup: @unchecked Sendable {
    public let operators: [any LinearOperator]
    let shared: SharedInputLinears?
    /// The rotation every layer applies to the shared input first, when `shared` runs their bases.
    let sharedRotation: RotatedLinear?

    public init(_ operators: [any LinearOperator]) {
        self.operators = operators
        let rotated = operators.compactMap { $0 as? RotatedLinear }
        if let first = rotated.first, rotated.count == operators.count, rotated.allSatisfy({ $0.rotation == first.rotation }),
           let bases = SharedInputLinears(rotated.map(\.base)) {
            shared = bases
            sharedRotation = first
        } else {
            shared = SharedInputLinears(operators)
            sharedRotation = nil
        }
    }

    /// The group's shared pass over `x`, rotated first when the layers rotate their input.
    func runShared(_ shared: SharedInputLinears, _ x: [Float], rows: Int, into outputs: UnsafeBufferPointer<UnsafeMutablePointer<Float>>) {
        guard let sharedRotation else {
            shared.forward(x, rows: rows, into: outputs)
            return
        }
        sharedRotation.withRotatedInput(x, rows: rows) { shared.forward($0, rows: rows, into: outputs) }
    }

    /// Two layers' outputs into `first` and `second` (each at least `rows × outFeatures`).
    public func forward(_ x: [Float], rows: Int, into first: inout [Float], _ second: inout [Float]) {
        precondition(operators.count == 2 && first.count >= rows * operators[0].outFeatures && second.count >= rows * operators[1].outFeatures)
        guard let shared else {
            operators[0].forward(x, rows: rows, into: &first)
            operators[1].forward(x, rows: rows, into: &second)
            return
        }
        first.withUnsafeMutableBufferPointer { a in
            second.withUnsafeMutableBufferPointer { b in
                withUnsafeTemporaryAllocation(of: UnsafeMutablePointer<Float>.self, capacity: 2) { outputs in
                    outputs.initializeElement(at: 0, to: a.baseAddress!)
                    outputs.initializeElement(at: 1, to: b.baseAddress!)
                    runShared(shared, x, rows: rows, into: UnsafeBufferPointer(outputs))
                }
            }
        }
    }

    /// Three layers' outputs into `first`, `second` and `third` (each at least `rows × outFeatures`).
    public func forward(_ x: [Float], rows: Int, into first: inout [Float], _ second: inout [Float], _ third: inout [Float]) {
        precondition(operators.count == 3 && first.count >= rows * operators[0].outFeatures && second.count >= rows * operators[1].outFeatures
                     && third.count >= rows * operators[2].outFeatures)
        guard let shared else {
            operators[0].forward(x, rows: rows, into: &first)
            operators[1].forward(x, rows: rows, into: &second)
            operators[2].forward(x, rows: rows, into: &third)
            return
        }
        first.withUnsafeMutableBufferPointer { a in
            second.withUnsafeMutableBufferPointer { b in
                third.withUnsafeMutableBufferPointer { c in
                    withUnsafeTemporaryAllocation(of: UnsafeMutablePointer<Float>.self, capacity: 3) { outputs in
                        outputs.initializeElement(at: 0, to: a.baseAddress!)
                        outputs.initializeElement(at: 1, to: b.baseAddress!)
                        outputs.initializeElement(at: 2, to: c.baseAddress!)
                        runShared(shared, x, rows: rows, into: UnsafeBufferPointer(outputs))
                    }
                }
            }
        }
    }
}
