/// The reference decoder of an `EncodedTensor`: decodes any run of flat (row-major) positions,
/// for example one row of a linear layer or one embedding row, without decoding the rest.
///
/// Float views of the small parts (scales, zero points, LUTs with their int8 scales applied,
/// channel scales) are made once; for a sparse tensor, the number of kept elements before each
/// 8-element mask byte is precomputed so any position's encoded index is found in O(1). A rotated
/// tensor decodes whole rows of its stored `W'` and rotates each back, `w = Rᵀ · w'`.
public final class EncodedTensorReader: @unchecked Sendable {
    public let tensor: EncodedTensor
    private let rotation: (reader: EncodedTensorReader, rotation: HadamardRotation)?
    private let base: WeightEncoding
    private let mask: UnsafeRawBufferPointer?
    private let keptBeforeByte: [Int]
    private let scales: [Float]
    private let zeroPoints: [Float]?
    private let lut: [Float]
    private let channelScales: [Float]?
    private let offsets: [Float]?
    private let blockScales: [Float]?
    private let denseValues: [Float]
    private let packed: UnsafeRawBufferPointer

    public init(_ tensor: EncodedTensor) {
        self.tensor = tensor
        if let (rotated, rotation) = tensor.inputRotation {
            self.rotation = (EncodedTensorReader(rotated), rotation)
            (base, mask, keptBeforeByte, scales, zeroPoints, lut, channelScales, offsets, blockScales, denseValues) =
                (rotated.encoding, nil, [], [], nil, [], nil, nil, nil, [])
            packed = UnsafeRawBufferPointer(start: nil, count: 0)
            return
        }
        rotation = nil
        if case .sparse(_, let base) = tensor.encoding {
            self.base = base
            let mask = tensor.parts["mask"]!.bytes
            self.mask = mask
            var counts = [Int](repeating: 0, count: mask.count + 1)
            for index in 0..<mask.count { counts[index + 1] = counts[index] + mask[index].nonzeroBitCount }
            keptBeforeByte = counts
        } else {
            base = tensor.encoding
            mask = nil
            keptBeforeByte = []
        }
        scales = tensor.affineScales()
        zeroPoints = tensor.parts["zero_points"]?.floats()
        offsets = tensor.affineOffsets()
        blockScales = tensor.paletteBlockScales()
        if case .palette = base { channelScales = tensor.parts["channel_scales"]?.floats() } else { channelScales = nil }
        lut = tensor.paletteLUTs()
        if case .dense = base { denseValues = tensor.parts["values"]!.floats() } else { denseValues = [] }
        packed = (tensor.parts["codes"] ?? tensor.parts["indices"])?.bytes ?? UnsafeRawBufferPointer(start: nil, count: 0)
    }

    /// Decodes flat positions `flatRange` into `output[0..<flatRange.count]` (pruned positions are 0).
    public func decode(flatRange: Range<Int>, into output: UnsafeMutablePointer<Float>) {
        let shape = tensor.shape
        if let rotation, !flatRange.isEmpty {
            let columns = rotation.rotation.size
            let row = UnsafeMutablePointer<Float>.allocate(capacity: columns)
            defer { row.deallocate() }
            for index in (flatRange.lowerBound / columns)...((flatRange.upperBound - 1) / columns) {
                let rowRange = (index * columns)..<((index + 1) * columns)
                rotation.reader.decode(flatRange: rowRange, into: row)
                rotation.rotation.unrotate(row)
                let wanted = rowRange.clamped(to: flatRange)
                (output + wanted.lowerBound - flatRange.lowerBound).update(from: row + wanted.lowerBound - rowRange.lowerBound, count: wanted.count)
            }
            return
        }
        if mask == nil, case .affine(let layout) = base {
            decodeAffine(layout, flatRange: flatRange, into: output)
            return
        }
        for position in flatRange {
            var element = position
            if let mask {
                let byte = position >> 3, bit = position & 7
                guard (mask[byte] >> bit) & 1 == 1 else {
                    output[position - flatRange.lowerBound] = 0
                    continue
                }
                element = keptBeforeByte[byte] + (mask[byte] & ((1 << bit) - 1)).nonzeroBitCount
            }
            output[position - flatRange.lowerBound] = value(element: element, position: position, shape: shape)
        }
    }

    /// Dense affine codes: `value`'s arithmetic, one scale group's run of positions at a time
    /// (groups per tensor, per block of the last axis, or along axis 0; other granularities per
    /// position).
    private func decodeAffine(_ layout: AffineEncoding, flatRange: Range<Int>, into output: UnsafeMutablePointer<Float>) {
        let shape = tensor.shape, bits = layout.bits, codeOffset = layout.codeOffset
        let columns = shape.last ?? 1, elements = shape.reduce(1, *)
        /// The group of `position` and the end of its run.
        func run(_ position: Int) -> (group: Int, end: Int) {
            switch layout.granularity {
            case .perTensor: return (0, flatRange.upperBound)
            case .perChannel(let axis) where axis == 0:
                let inner = elements / max(shape[0], 1), group = position / inner
                return (group, (group + 1) * inner)
            case .perBlock(let blockSize):
                let row = position / columns, block = (position % columns) / blockSize
                return (row * ((columns + blockSize - 1) / blockSize) + block, row * columns + min(columns, (block + 1) * blockSize))
            case .perChannel:
                return (EncodingLayout.group(of: position, layout.granularity, shape: shape), position + 1)
            }
        }
        var position = flatRange.lowerBound
        while position < flatRange.upperBound {
            let (group, runEnd) = run(position)
            let end = min(runEnd, flatRange.upperBound)
            let scale = scales[group], offset = offsets?[group]
            let zeroPoint = zeroPoints.map { Int($0[group]) } ?? layout.implicitZeroPoint
            for index in position..<end {
                let stored: UInt8 = switch bits {
                case 8: packed[index]
                case 4: (packed[index >> 1] >> UInt8((index & 1) * 4)) & 0x0F
                default: PackedBits.value(at: index, bits: bits, in: packed)
                }
                let q = Int(stored) - codeOffset
                output[index - flatRange.lowerBound] = offset.map { scale * Float(q) - $0 } ?? scale * Float(q - zeroPoint)
            }
            position = end
        }
    }

    @inline(__always)
    private func value(element: Int, position: Int, shape: [Int]) -> Float {
        switch base {
        case .dense:
            return denseValues[element]
        case .affine(let layout):
            let group = EncodingLayout.group(of: position, layout.granularity, shape: shape)
            let q = Int(PackedBits.value(at: element, bits: layout.bits, in: packed)) - layout.codeOffset
            if let offsets { return scales[group] * Float(q) - offsets[group] }
            let zeroPoint = zeroPoints.map { Int($0[group]) } ?? layout.implicitZeroPoint
            return scales[group] * Float(q - zeroPoint)
        case .palette(let layout):
            let vector = element / layout.vectorSize, lane = element % layout.vectorSize
            // Vectors never span rows (the vector size divides the last dimension) and are never sparse,
            // so the vector's first element is at `position − lane`.
            let group = EncodingLayout.group(of: position - lane, layout.granularity, shape: shape)
            let index = Int(PackedBits.value(at: vector, bits: layout.bits, in: packed))
            var result = lut[(group * layout.entries + index) * layout.vectorSize + lane]
            if let channelScales { result *= channelScales[EncodingLayout.coordinate(position, axis: layout.channelAxis, shape: shape)] }
            if let blockScales, let block = layout.blockScales?.blockSize {
                let columns = shape.last ?? 1
                result *= blockScales[(position / columns) * ((columns + block - 1) / block) + (position % columns) / block]
            }
            return result
        case .sparse, .rotated:
            preconditionFailure("validation keeps sparse and rotated encodings out of a base")
        }
    }
}
