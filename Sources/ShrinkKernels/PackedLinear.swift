import Dispatch
import Foundation
import ShrinkCore

/// A linear layer over an encoded weight, repacked once at load and executed row by row: each
/// output row's weights are decoded into a row-sized scratch buffer by a vector kernel and
/// dotted with the input rows. Threads split the output rows.
///
/// Layouts (chosen at load; 4- and 8-bit codes are used in place, without a copy):
/// - affine weights grouped per tensor, per output channel or per block along the input:
///   `w = s · c − o` per group with `o = s · (codeOffset + zeroPoint)`, or with stored offsets
///   `o = s · codeOffset + offset` (integer scales and offsets multiplied out at load); codes of 1–4 bits as
///   packed nibbles (input dimension even; 4-bit codes in place, narrower ones widened at load),
///   others one byte each;
/// - palettes with one LUT per tensor or per group of output channels (scalar entries): indices
///   laid out like affine codes, the group's LUT (int8 LUT scales applied, padded to 16 or 256
///   entries) looked up by index; output-channel scales multiply the row's result;
/// - pruned weights over those bases: per-row mask bytes and one byte per kept code; a row is
///   decoded by expanding the kept codes to their positions (AVX-512 `vpexpandd`) and zeroing the
///   pruned ones;
/// - F16/BF16 values in place, widened by the vector kernels;
/// - palettes with block scales: the LUT decode, then each block multiplied by its scale;
/// - every other encoding (vector palettes, groups along the input axis, pruned F16/BF16 values):
///   rows decoded by the reference reader, then the same dot kernel.
public final class PackedLinear: LinearOperator, @unchecked Sendable {
    public let inFeatures: Int
    public let outFeatures: Int
    public let threads: Int
    public let variant: KernelVariant
    /// Least multiply-adds (or decoded weights) per thread before work is split (0: always split).
    public let minimumWorkPerThread: Int
    let bias: [Float]?
    let layout: Layout
    /// Keeps the mapped or owned parts alive while `layout` points into them.
    let weight: EncodedTensor
    /// Codes or indices unpacked at load (widths other than 4 and 8 bits), freed with the layer.
    let unpacked: UnsafeMutableBufferPointer<UInt8>?
    /// The decoded rows and products of `forward`'s workers, kept between calls.
    private let rowScratch = ScratchBuffer()

    enum Layout {
        /// Per row: `blocksPerRow` (scale, offset) pairs; `codes` row stride in bytes.
        case affine(codes: UnsafePointer<UInt8>, rowBytes: Int, fourBit: Bool, scales: [Float], offsets: [Float], block: Int, blocksPerRow: Int)
        /// `luts[group]` has 16 (4-bit) or 256 entries; `rowGroup[row]`; `rowScale[row]` optional;
        /// `blockScales` (a scale per block of `block` inputs, rows after rows) optional.
        case palette(indices: UnsafePointer<UInt8>, rowBytes: Int, fourBit: Bool, luts: [[Float]], rowGroup: [Int], rowScale: [Float]?,
                     blockScales: (values: [Float], block: Int)?)
        /// Pruned weights: per row, `maskRowBytes` bytes of mask bits and the row's kept codes from
        /// `keptStart[row]`; kept codes decode through `lut[rowGroup[row]]` (16 or 256 entries) or through
        /// per-row block scales and offsets.
        case sparse(mask: UnsafePointer<UInt8>, maskRowBytes: Int, kept: UnsafePointer<UInt8>, keptStart: [Int],
                    luts: [[Float]]?, rowGroup: [Int], scales: [Float], offsets: [Float], block: Int, blocksPerRow: Int, rowScale: [Float]?)
        /// F16 or BF16 values, row-major, used in place.
        case half(values: UnsafePointer<UInt16>, bf16: Bool)
        /// F32 values, row-major, used in place (rows copied out, without alignment assumptions).
        case float32(values: UnsafeRawPointer)
        case generic(EncodedTensorReader)
    }

    /// Repacks `weight` (`[outFeatures, inFeatures]`) for `variant` with `threads` threads.
    public init(weight: EncodedTensor, bias: [Float]?, threads: Int = ProcessInfo.processInfo.activeProcessorCount,
                variant: KernelVariant = .best, minimumWorkPerThread: Int = defaultMinimumWorkPerThread) {
        precondition(weight.shape.count == 2 && (bias?.count ?? weight.shape[0]) == weight.shape[0] && threads >= 1)
        self.weight = weight
        self.bias = bias
        self.threads = threads
        self.variant = variant
        self.minimumWorkPerThread = minimumWorkPerThread
        outFeatures = weight.shape[0]
        inFeatures = weight.shape[1]
        (layout, unpacked) = Self.repack(weight)
    }

    deinit { unpacked?.deallocate() }

    /// fp32 activations times the stored weights decoded on the fly: exactly the stored weights.
    public var execution: LinearExecution {
        let weights = switch layout {
        case .affine(_, _, let fourBit, _, _, _, _): fourBit ? "4-bit affine codes" : "8-bit affine codes"
        case .palette(_, _, let fourBit, _, _, _, _): fourBit ? "4-bit LUT indices → f32 LUT" : "8-bit LUT indices → f32 LUT"
        case .sparse(_, _, _, _, let luts, _, _, _, _, _, _): luts == nil ? "mask + affine codes" : "mask + LUT indices"
        case .half(_, let bf16): bf16 ? "bf16" : "f16"
        case .float32: "f32"
        case .generic: "decoded rows"
        }
        return LinearExecution(kernel: "fp32 × decoded weights, \(variant.rawValue)", weights: weights)
    }

    static func repack(_ weight: EncodedTensor) -> (Layout, UnsafeMutableBufferPointer<UInt8>?) {
        let rows = weight.shape[0], columns = weight.shape[1]
        var unpacked: UnsafeMutableBufferPointer<UInt8>?
        /// The stored codes in place (4-bit with an even row length, or 8-bit), else unpacked bytes.
        func codes(_ part: DenseTensor, bits: Int) -> (UnsafePointer<UInt8>, Int, Bool) {
            let stored = part.bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
            if bits == 8 { return (stored, columns, false) }
            if bits == 4 && columns % 2 == 0 { return (stored, columns / 2, true) }
            if bits < 4 && columns % 2 == 0 {
                // 1- to 3-bit values widened to nibbles, so the 4-bit kernels serve them.
                let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(rows * columns / 2, 1))
                for pair in 0..<(rows * columns / 2) {
                    buffer[pair] = PackedBits.value(at: 2 * pair, bits: bits, in: part.bytes)
                        | PackedBits.value(at: 2 * pair + 1, bits: bits, in: part.bytes) << 4
                }
                unpacked = buffer
                return (UnsafePointer(buffer.baseAddress!), columns / 2, true)
            }
            let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(rows * columns, 1))
            for index in 0..<(rows * columns) { buffer[index] = PackedBits.value(at: index, bits: bits, in: part.bytes) }
            unpacked = buffer
            return (UnsafePointer(buffer.baseAddress!), columns, false)
        }
        switch weight.encoding {
        case .affine(let affine):
            let block: Int
            switch affine.granularity {
            case .perTensor, .perChannel(axis: 0): block = columns
            case .perBlock(let size): block = size
            default: return (.generic(EncodedTensorReader(weight)), nil)
            }
            let (blocksPerRow, rowScales, offsets) = affineTables(weight, affine, block: block)
            let (pointer, rowBytes, fourBit) = codes(weight.parts["codes"]!, bits: affine.bits)
            return (.affine(codes: pointer, rowBytes: rowBytes, fourBit: fourBit, scales: rowScales, offsets: offsets,
                            block: block, blocksPerRow: blocksPerRow), unpacked)
        case .palette(let palette) where palette.vectorSize == 1 && palette.channelAxis == 0:
            let (pointer, rowBytes, fourBit) = codes(weight.parts["indices"]!, bits: palette.bits)
            let (luts, rowGroup) = lookupTables(weight, palette, tableSize: fourBit ? 16 : 256)
            let blockScales = weight.paletteBlockScales().map { ($0, palette.blockScales!.blockSize) }
            return (.palette(indices: pointer, rowBytes: rowBytes, fourBit: fourBit, luts: luts, rowGroup: rowGroup,
                             rowScale: weight.parts["channel_scales"]?.floats(), blockScales: blockScales), unpacked)
        case .sparse(_, let base):
            return repackSparse(weight, base: base) ?? (.generic(EncodedTensorReader(weight)), nil)
        case .dense(let dtype) where dtype == .f16 || dtype == .bf16:
            let values = weight.parts["values"]!.bytes.baseAddress!.assumingMemoryBound(to: UInt16.self)
            return (.half(values: values, bf16: dtype == .bf16), nil)
        case .dense(.f32):
            return (.float32(values: UnsafeRawPointer(weight.parts["values"]!.bytes.baseAddress!)), nil)
        default:
            return (.generic(EncodedTensorReader(weight)), nil)
        }
    }

    /// Per row, per block of `block` inputs: the scale `s` and offset `o = s · (codeOffset + zeroPoint)`
    /// with which a code decodes to `s · c − o`.
    static func affineTables(_ weight: EncodedTensor, _ affine: AffineEncoding, block: Int) -> (Int, [Float], [Float]) {
        let rows = weight.shape[0], columns = weight.shape[1]
        let blocksPerRow = (columns + block - 1) / block
        let scales = weight.affineScales()
        let zeroPoints = weight.parts["zero_points"]?.floats()
        let storedOffsets = weight.affineOffsets()
        var rowScales = [Float](repeating: 0, count: rows * blocksPerRow)
        var offsets = rowScales
        for row in 0..<rows {
            for b in 0..<blocksPerRow {
                let group = EncodingLayout.group(of: row * columns + b * block, affine.granularity, shape: weight.shape)
                rowScales[row * blocksPerRow + b] = scales[group]
                if let storedOffsets {
                    offsets[row * blocksPerRow + b] = scales[group] * Float(affine.codeOffset) + storedOffsets[group]
                } else {
                    let zeroPoint = zeroPoints.map { Int($0[group]) } ?? affine.implicitZeroPoint
                    offsets[row * blocksPerRow + b] = scales[group] * Float(affine.codeOffset + zeroPoint)
                }
            }
        }
        return (blocksPerRow, rowScales, offsets)
    }

    /// Each LUT group's values (`entries × vectorSize`, int8 LUT scales applied) padded with zeros
    /// to `tableSize`, and the group of each output row.
    static func lookupTables(_ weight: EncodedTensor, _ palette: PaletteEncoding, tableSize: Int) -> ([[Float]], [Int]) {
        let groups = EncodingLayout.groupCount(palette.granularity, shape: weight.shape)
        let lut = weight.paletteLUTs()
        let width = palette.entries * palette.vectorSize
        let luts = (0..<groups).map { group in
            Array(lut[(group * width)..<((group + 1) * width)]) + [Float](repeating: 0, count: tableSize - width)
        }
        let rowGroup = (0..<weight.shape[0]).map { EncodingLayout.group(of: $0 * weight.shape[1], palette.granularity, shape: weight.shape) }
        return (luts, rowGroup)
    }

    /// Sparse weights whose base is an affine code or a scalar palette grouped along the output
    /// axis: mask bits and kept codes re-laid per row (one byte per kept code), tables per row.
    static func repackSparse(_ weight: EncodedTensor, base: WeightEncoding) -> (Layout, UnsafeMutableBufferPointer<UInt8>?)? {
        let rows = weight.shape[0], columns = weight.shape[1]
        let bits: Int
        var luts: [[Float]]?
        var rowGroup = [Int](repeating: 0, count: rows)
        var rowScale: [Float]?
        var scales: [Float] = [], offsets: [Float] = []
        var block = columns, blocksPerRow = 1
        switch base {
        case .palette(let palette) where palette.vectorSize == 1 && palette.channelAxis == 0:
            bits = palette.bits
            (luts, rowGroup) = lookupTables(weight, palette, tableSize: palette.entries <= 16 ? 16 : 256)
            rowScale = weight.parts["channel_scales"]?.floats()
        case .affine(let affine):
            bits = affine.bits
            switch affine.granularity {
            case .perTensor, .perChannel(axis: 0): block = columns
            case .perBlock(let size): block = size
            default: return nil
            }
            (blocksPerRow, scales, offsets) = affineTables(weight, affine, block: block)
        default:
            return nil
        }
        let mask = weight.parts["mask"]!.bytes
        let maskRowBytes = (columns + 7) / 8
        let codes = (weight.parts["codes"] ?? weight.parts["indices"])!.bytes
        var kept = 0
        for byte in mask { kept += byte.nonzeroBitCount }
        // One buffer: per-row mask bytes, then kept codes (with 16 bytes of slack for vector reads).
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: rows * maskRowBytes + kept + 16)
        buffer.initialize(repeating: 0)
        var keptStart = [Int](repeating: 0, count: rows + 1)
        var element = 0
        for row in 0..<rows {
            keptStart[row] = element
            for column in 0..<columns where (mask[(row * columns + column) >> 3] >> ((row * columns + column) & 7)) & 1 == 1 {
                buffer[row * maskRowBytes + column >> 3] |= 1 << (column & 7)
                buffer[rows * maskRowBytes + element] = PackedBits.value(at: element, bits: bits, in: codes)
                element += 1
            }
        }
        keptStart[rows] = element
        let base = UnsafePointer(buffer.baseAddress!)
        return (.sparse(mask: base, maskRowBytes: maskRowBytes, kept: base + rows * maskRowBytes, keptStart: keptStart, luts: luts,
                        rowGroup: rowGroup, scales: scales, offsets: offsets, block: block, blocksPerRow: blocksPerRow, rowScale: rowScale), buffer)
    }

    /// Per-output-channel scales that multiply a row's result (channel-scaled palettes).
    var outputScales: [Float]? {
        switch layout {
        case .palette(_, _, _, _, _, let scale, _): scale
        case .sparse(_, _, _, _, _, _, _, _, _, _, let scale): scale
        default: nil
        }
    }

    /// The decode-and-dot of weight row `row` with one input row in a single pass, for the layouts
    /// that have a fused kernel (affine, and 4-bit LUTs); `nil` for the others.
    @inline(__always)
    func fusedDot(row: Int, x: UnsafePointer<Float>, scratch: UnsafeMutablePointer<Float>) -> Float? {
        switch layout {
        case .affine(let codes, let rowBytes, let fourBit, let scales, let offsets, let block, let blocksPerRow):
            return scales.withUnsafeBufferPointer { s in
                offsets.withUnsafeBufferPointer { o in
                    variant.dotAffine(codes + row * rowBytes, fourBit: fourBit, x, inFeatures, s.baseAddress! + row * blocksPerRow,
                                      o.baseAddress! + row * blocksPerRow, block, scratch: scratch)
                }
            }
        case .palette(let indices, let rowBytes, true, let luts, let rowGroup, _, nil):
            return luts[rowGroup[row]].withUnsafeBufferPointer { lut in
                variant.dotLUT4(indices + row * rowBytes, x, inFeatures, lut.baseAddress!, scratch: scratch)
            }
        case .half(let values, let bf16):
            return variant.dotHalf(values + row * inFeatures, x, inFeatures, bf16: bf16, scratch: scratch)
        default:
            return nil
        }
    }

    /// Weight row `row` as stored values (output-channel scales applied) into `out[0..<inFeatures]`:
    /// the vector decoders serve row gathers such as compressed embedding tables.
    public func decodeWeightRow(_ row: Int, into out: UnsafeMutablePointer<Float>) {
        precondition(row >= 0 && row < outFeatures)
        decodeRow(row, into: out)
        if let scale = outputScales?[row] { for column in 0..<inFeatures { out[column] *= scale } }
    }

    /// Decodes weight row `row` into `out[0..<inFeatures]` (without output-channel scales).
    func decodeRow(_ row: Int, into out: UnsafeMutablePointer<Float>) {
        switch layout {
        case .affine(let codes, let rowBytes, let fourBit, let scales, let offsets, let block, let blocksPerRow):
            scales.withUnsafeBufferPointer { s in
                offsets.withUnsafeBufferPointer { o in
                    let rowScales = s.baseAddress! + row * blocksPerRow, rowOffsets = o.baseAddress! + row * blocksPerRow
                    if fourBit {
                        variant.decodeAffine4(codes + row * rowBytes, inFeatures, rowScales, rowOffsets, block, out)
                    } else {
                        variant.decodeAffine8(codes + row * rowBytes, inFeatures, rowScales, rowOffsets, block, out)
                    }
                }
            }
        case .palette(let indices, let rowBytes, let fourBit, let luts, let rowGroup, _, let blockScales):
            luts[rowGroup[row]].withUnsafeBufferPointer { lut in
                if fourBit {
                    variant.decodeLUT4(indices + row * rowBytes, inFeatures, lut.baseAddress!, out)
                } else {
                    variant.decodeLUT8(indices + row * rowBytes, inFeatures, lut.baseAddress!, out)
                }
            }
            if let (values, block) = blockScales {
                let blocksPerRow = (inFeatures + block - 1) / block
                values.withUnsafeBufferPointer { scales in
                    for index in 0..<blocksPerRow {
                        let scale = scales[row * blocksPerRow + index]
                        for column in (index * block)..<min(inFeatures, (index + 1) * block) { out[column] *= scale }
                    }
                }
            }
        case .sparse(let mask, let maskRowBytes, let kept, let keptStart, let luts, let rowGroup, let scales, let offsets, let block,
                     let blocksPerRow, _):
            if let luts {
                luts[rowGroup[row]].withUnsafeBufferPointer { lut in
                    variant.decodeSparse(mask + row * maskRowBytes, kept + keptStart[row], inFeatures, lut: lut.baseAddress!,
                                         lutSize: lut.count, scales: nil, offsets: nil, block: block, out)
                }
            } else {
                scales.withUnsafeBufferPointer { s in
                    offsets.withUnsafeBufferPointer { o in
                        variant.decodeSparse(mask + row * maskRowBytes, kept + keptStart[row], inFeatures, lut: nil, lutSize: 0,
                                             scales: s.baseAddress! + row * blocksPerRow, offsets: o.baseAddress! + row * blocksPerRow,
                                             block: block, out)
                    }
                }
            }
        case .half(let values, let bf16):
            variant.decodeHalf(values + row * inFeatures, inFeatures, bf16: bf16, out)
        case .float32(let values):
            UnsafeMutableRawPointer(out).copyMemory(from: values + 4 * row * inFeatures, byteCount: 4 * inFeatures)
        case .generic(let reader):
            reader.decode(flatRange: (row * inFeatures)..<((row + 1) * inFeatures), into: out)
        }
    }

    /// From this many input rows on, the weight is decoded into a transient fp32 buffer (one layer,
    /// released after the call) and multiplied by the system BLAS, where decoding costs little
    /// against the `rows × out × in` multiply-adds; below it, each row is decoded and dotted.
    public static let blasRowThreshold = 32

    public func forward(_ x: [Float], rows: Int, into y: inout [Float]) {
        precondition(x.count >= rows * inFeatures && y.count >= rows * outFeatures)
        if rows >= Self.blasRowThreshold {
            forwardThroughBLAS(x, rows: rows, into: &y)
            return
        }
        // Contiguous row ranges, one per thread: each output is computed the same way whatever the
        // thread count, so results are identical run to run.
        let workers = workerCount(threads: threads, work: rows * outFeatures * inFeatures, outFeatures: outFeatures,
                                  minimumWork: minimumWorkPerThread)
        let stride = DecodeJob.tile * (inFeatures + rows)
        rowScratch.withBytes(workers * stride * MemoryLayout<Float>.stride) { raw in
            y.withUnsafeMutableBufferPointer { output in
                x.withUnsafeBufferPointer { input in
                    let job = DecodeJob(layer: self, x: input.baseAddress!, rows: rows, y: output.baseAddress!,
                                        scratch: raw.bindMemory(to: Float.self, capacity: workers * stride), stride: stride)
                    if workers == 1 { job.run(worker: 0, of: 1) } else { WorkerPool.shared.run(workers, job) }
                }
            }
        }
    }

    /// Rows of fewer than `blasRowThreshold` inputs: each worker decodes its share of weight rows,
    /// `tile` at a time, into its `stride` floats of `scratch` and multiplies them with every input row.
    struct DecodeJob: ParallelJob {
        static var function: ParallelJobFunction { { context, worker, workers in context.assumingMemoryBound(to: DecodeJob.self).pointee.run(worker: worker, of: workers) } }
        static let tile = 4
        let layer: PackedLinear
        let x: UnsafePointer<Float>
        let rows: Int
        let y: UnsafeMutablePointer<Float>
        /// Per worker: `tile` decoded rows (`tile × inFeatures`), then `rows × tile` products.
        let scratch: UnsafeMutablePointer<Float>
        let stride: Int

        func run(worker: Int, of workers: Int) {
            let layer = layer, tile = Self.tile, inFeatures = layer.inFeatures, outFeatures = layer.outFeatures
            let decoded = scratch + worker * stride, products = decoded + tile * inFeatures
            let rowScale = layer.outputScales, bias = layer.bias
            let rowRange = Parallel.range(worker: worker, of: workers, count: outFeatures)
            var row = rowRange.lowerBound
            while row < rowRange.upperBound {
                if rows == 1, let value = layer.fusedDot(row: row, x: x, scratch: decoded) {
                    y[row] = value * (rowScale?[row] ?? 1) + (bias?[row] ?? 0)
                    row += 1
                    continue
                }
                let count = min(tile, rowRange.upperBound - row)
                for offset in 0..<count { layer.decodeRow(row + offset, into: decoded + offset * inFeatures) }
                layer.variant.gemmNT(decoded, count, x, rows, inFeatures, products, tile)
                for offset in 0..<count {
                    let scale = rowScale?[row + offset] ?? 1, shift = bias?[row + offset] ?? 0
                    for m in 0..<rows { y[m * outFeatures + row + offset] = products[m * tile + offset] * scale + shift }
                }
                row += count
            }
        }
    }

    func forwardThroughBLAS(_ x: [Float], rows: Int, into y: inout [Float]) {
        let decoded = UnsafeMutablePointer<Float>.allocate(capacity: outFeatures * inFeatures)
        defer { decoded.deallocate() }
        nonisolated(unsafe) let target = decoded
        let workers = workerCount(threads: threads, work: outFeatures * inFeatures, outFeatures: outFeatures,
                                  minimumWork: minimumWorkPerThread / 16)
        WorkerPool.shared.run(workers) { worker in
            for row in (self.outFeatures * worker / workers)..<(self.outFeatures * (worker + 1) / workers) {
                self.decodeRow(row, into: target + row * self.inFeatures)
                if let scale = self.outputScales?[row] {
                    for column in 0..<self.inFeatures { target[row * self.inFeatures + column] *= scale }
                }
            }
        }
        y.withUnsafeMutableBufferPointer { output in
            if let bias {
                bias.withUnsafeBufferPointer { b in
                    DenseMatmul.blas(x: x, rows: rows, weights: decoded, outFeatures: outFeatures, inFeatures: inFeatures,
                                     bias: b.baseAddress, output: output.baseAddress!, threads: threads)
                }
            } else {
                DenseMatmul.blas(x: x, rows: rows, weights: decoded, outFeatures: outFeatures, inFeatures: inFeatures,
                                 bias: nil, output: output.baseAddress!, threads: threads)
            }
        }
    }
}
