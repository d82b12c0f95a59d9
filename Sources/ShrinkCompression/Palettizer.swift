import Dispatch
import Foundation
import ShrinkCore

/// The first error raised by any of several concurrent tasks.
final class FirstFailure: @unchecked Sendable {
    private let lock = NSLock()
    private var first: CompressionError?

    func record(_ error: CompressionError) { lock.withLock { if first == nil { first = error } } }
    var error: CompressionError? { lock.withLock { first } }
}

/// Palettization: per LUT group, a table of `2^bits` entries (scalars or vectors of `clusterDim`
/// consecutive elements along the last axis) and one index per element (or vector).
///
/// With `perChannelScale`, each channel (index along the grouping axis) is first divided by its
/// largest magnitude, the LUT is built over the normalised values and the scales are stored.
/// LUT entries are rounded to the LUT dtype before indices are assigned (each index is the nearest
/// stored entry); an `int8` LUT takes one `LUTGrid` per LUT and is then refined on it
/// (`refineOnGrid`). With `clusteringSample`, a group's vector entries are clustered (and refined
/// on their grid) on every `⌈count / clusteringSample⌉`-th of its vectors, the start a calibrated
/// pass refits to the output error; indices are assigned over all. Groups are clustered in parallel over `threads` threads;
/// the result does not depend on the thread count.
enum Palettizer {
    static func encode(_ values: [Float], positions: [Int]?, shape: [Int], config: PalettizationConfig,
                       importance: [Float]?, tensor: String, threads: Int, clusteringSample: Int? = nil) throws(CompressionError) -> (layout: PaletteEncoding, parts: [String: DenseTensor]) {
        let layout = PaletteEncoding(bits: config.bits, granularity: config.granularity, vectorSize: config.clusterDim,
                                     lutDType: config.lutDType, perChannelScale: config.perChannelScale)
        let axis = layout.channelAxis
        let d = config.clusterDim
        let entries = layout.entries
        func position(_ k: Int) -> Int { positions?[k] ?? k }

        var normalized = values
        var channelScales: [Float]?
        if config.perChannelScale {
            var scales = [Float](repeating: 0, count: shape[axis])
            for k in values.indices {
                let channel = EncodingLayout.coordinate(position(k), axis: axis, shape: shape)
                scales[channel] = max(scales[channel], abs(values[k]))
            }
            for k in values.indices {
                let scale = scales[EncodingLayout.coordinate(position(k), axis: axis, shape: shape)]
                normalized[k] = scale > 0 ? values[k] / scale : 0
            }
            channelScales = scales
        }

        let points = normalized
        let vectorCount = values.count / d
        let groupCount = EncodingLayout.groupCount(config.granularity, shape: shape)
        // Per tensor and along axis 0 (rows) groups are contiguous runs: no member list is built.
        var contiguous: ElementGroups?
        if positions == nil {
            switch config.granularity {
            case .perTensor: contiguous = .contiguous(shape: shape, vectorSize: d, perTensor: true, axis0GroupSize: nil, blockSize: nil)
            case .perGroupedChannel(0, let size): contiguous = .contiguous(shape: shape, vectorSize: d, perTensor: false, axis0GroupSize: size, blockSize: nil)
            default: break
            }
        }
        let groups = contiguous ?? ElementGroups(count: vectorCount, groupCount: groupCount) { vector in
            EncodingLayout.group(of: position(vector * d), config.granularity, shape: shape)
        }
        var luts = [Float](repeating: 0, count: groupCount * entries * d)
        var lutGrids = [LUTGrid](repeating: LUTGrid(scale: 1, zeroPoint: 0), count: groupCount)
        var indices = [UInt8](repeating: 0, count: vectorCount)
        let failure = FirstFailure()
        let chunk = max(1, (groupCount + threads * 4 - 1) / (threads * 4))
        luts.withUnsafeMutableBufferPointer { lutBuffer in
            indices.withUnsafeMutableBufferPointer { indexBuffer in
                lutGrids.withUnsafeMutableBufferPointer { gridBuffer in
                    nonisolated(unsafe) let lutOut = lutBuffer, indexOut = indexBuffer, gridOut = gridBuffer
                    DispatchQueue.concurrentPerform(iterations: (groupCount + chunk - 1) / chunk) { task in
                        for group in (task * chunk)..<min(groupCount, (task + 1) * chunk) {
                            // The group's vectors are `groups.member(slot)` for `slot` in `slots`.
                            let slots = groups.offsets[group]..<groups.offsets[group + 1]
                            guard !slots.isEmpty else { continue }
                            var groupPoints = [Float]()
                            var weights: [Float]? = importance == nil ? nil : []
                            if slots.count == vectorCount {
                                // One group of every point (per tensor): the points as they are, not a copy.
                                groupPoints = points
                            } else {
                                groupPoints.reserveCapacity(slots.count * d)
                                for vector in slots.lazy.map(groups.member) {
                                    for lane in 0..<d { groupPoints.append(points[vector * d + lane]) }
                                }
                            }
                            if let importance {
                                for vector in slots.lazy.map(groups.member) { weights!.append((0..<d).reduce(0) { $0 + importance[vector * d + $1] }) }
                            }
                            do throws(CompressionError) {
                                var (fitPoints, fitWeights) = (groupPoints, weights)
                                if d > 1, let limit = clusteringSample, slots.count > limit {
                                    let chosen = Swift.stride(from: 0, to: slots.count, by: (slots.count + limit - 1) / limit)
                                    fitPoints = chosen.flatMap { groupPoints[($0 * d)..<(($0 + 1) * d)] }
                                    fitWeights = weights.map { w in chosen.map { w[$0] } }
                                }
                                var lut = try table(fitPoints, weights: fitWeights, config: config, tensor: tensor)
                                let grid = roundToStorage(&lut, dtype: config.lutDType)
                                guard lut.allSatisfy({ $0.isFinite }) else {
                                    throw CompressionError.invalidWeight(
                                        tensor: tensor, reason: "a LUT entry overflows \(config.lutDType.rawValue); use \"lut_dtype\": \"f32\"")
                                }
                                if let grid { refineOnGrid(fitPoints, weights: fitWeights, lut: &lut, grid: grid, dimension: d) }
                                let assignment = assign(groupPoints, lut: lut, dimension: d)
                                for (position, slot) in slots.enumerated() { indexOut[groups.member(slot)] = assignment[position] }
                                for entry in 0..<(entries * d) { lutOut[group * entries * d + entry] = lut[entry] }
                                if let grid { gridOut[group] = grid }
                            } catch {
                                failure.record(error)
                            }
                        }
                    }
                }
            }
        }
        if let error = failure.error { throw error }
        var parts: [String: DenseTensor] = [
            "indices": try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(dtype: .u8, shape: [PackedBits.byteCount(count: vectorCount, bits: config.bits)],
                                        bytes: PackedBits.pack(indices, bits: config.bits)) },
        ]
        let lutShape = [groupCount, entries, d]
        if config.lutDType == .i8 {
            parts.merge(try LUTGrid.parts(luts: luts, grids: lutGrids, shape: lutShape, tensor: tensor)) { $1 }
        } else {
            parts["lut"] = try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(converting: luts, to: config.lutDType, shape: lutShape) }
        }
        if let channelScales { parts["channel_scales"] = try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(converting: channelScales, shape: [channelScales.count]) } }
        return (layout, parts)
    }

    /// The LUT (`2^bits × d` values, padded by repeating the last entry) for one group's points.
    static func table(_ points: [Float], weights: [Float]?, config: PalettizationConfig, tensor: String) throws(CompressionError) -> [Float] {
        let entries = 1 << config.bits, d = config.clusterDim
        var lut: [Float]
        switch config.mode {
        case .kmeans:
            if d == 1 {
                lut = OptimalKMeans1D.cluster(points, importance: weights, k: entries).centroids
            } else {
                lut = LloydKMeans.cluster(points, dimension: d, importance: weights, k: entries).centroids
            }
        case .uniform:
            let low = points.min()!, high = points.max()!
            lut = (0..<entries).map { low + (high - low) * Float($0) / Float(max(entries - 1, 1)) }
        case .unique:
            lut = Array(Set(points)).sorted()
            guard lut.count <= entries else {
                throw .invalidWeight(tensor: tensor, reason: "has \(lut.count) distinct values in a LUT group; unique palettization with \(config.bits) bits allows \(entries)")
            }
        case .custom(let given):
            lut = given
        }
        while lut.count < entries * d { lut += lut.suffix(d) }
        return lut
    }

    /// Rounds LUT entries to what `dtype` stores; for an int8 LUT, to its `LUTGrid`, returned.
    static func roundToStorage(_ lut: inout [Float], dtype: DType) -> LUTGrid? {
        guard dtype == .i8 else {
            lut = lut.map { StoredPrecision.round($0, to: dtype) }
            return nil
        }
        let grid = LUTGrid(fitting: lut)
        lut = lut.map(grid.rounded)
        return grid
    }

    /// Lloyd's iterations with entries held on `grid`: each point goes to its nearest entry, then
    /// each entry moves to the grid point nearest its members' (importance-weighted) mean, which
    /// minimises its squared error on the grid; until no entry moves, at most 20 times. The
    /// squared error never increases; an entry without members stays.
    static func refineOnGrid(_ points: [Float], weights: [Float]?, lut: inout [Float], grid: LUTGrid, dimension d: Int) {
        let entries = lut.count / d
        for _ in 0..<20 {
            let assignment = assign(points, lut: lut, dimension: d)
            var sums = [Double](repeating: 0, count: lut.count), mass = [Double](repeating: 0, count: entries)
            for (vector, entry) in assignment.enumerated() {
                let weight = Double(weights?[vector] ?? 1)
                mass[Int(entry)] += weight
                for lane in 0..<d { sums[Int(entry) * d + lane] += weight * Double(points[vector * d + lane]) }
            }
            var moved = false
            for entry in 0..<entries where mass[entry] > 0 {
                for lane in 0..<d {
                    let value = grid.rounded(Float(sums[entry * d + lane] / mass[entry]))
                    if value != lut[entry * d + lane] { lut[entry * d + lane] = value; moved = true }
                }
            }
            if !moved { return }
        }
    }

    /// The nearest LUT entry of each point (ties go to the lower index).
    static func assign(_ points: [Float], lut: [Float], dimension d: Int) -> [UInt8] {
        let entries = lut.count / d
        if d == 1 {
            // Sorted entries and the midpoints between neighbours: a value's entry is the number of
            // midpoints strictly below it (a value on a midpoint goes to the lower entry).
            let order = lut.indices.sorted { (lut[$0], $0) < (lut[$1], $1) }
            let sorted = order.map { lut[$0] }
            let midpoints = (1..<max(entries, 1)).map { (sorted[$0 - 1] + sorted[$0]) / 2 } + [.infinity]
            let codes = order.map { UInt8($0) }
            return midpoints.withUnsafeBufferPointer { midpoints in
                points.map { value in
                    var base = 0, length = entries
                    while length > 1 {
                        let half = length / 2
                        base = midpoints[base + half - 1] < value ? base + half : base
                        length -= half
                    }
                    return codes[base]
                }
            }
        }
        return (0..<(points.count / d)).map { vector in
            var best = 0
            var bestDistance = Float.infinity
            for entry in 0..<entries {
                var distance: Float = 0
                for lane in 0..<d {
                    let delta = points[vector * d + lane] - lut[entry * d + lane]
                    distance += delta * delta
                }
                if distance < bestDistance { bestDistance = distance; best = entry }
            }
            return UInt8(best)
        }
    }
}

/// The grid of an int8 LUT: entries `scale · (q − zeroPoint)` with `q` and the zero point in
/// −128…127, so that 0 is exact.
struct LUTGrid {
    let scale: Float
    let zeroPoint: Int

    init(scale: Float, zeroPoint: Int) {
        self.scale = scale
        self.zeroPoint = zeroPoint
    }

    /// The grid spanning `[min(lut, 0), max(lut, 0)]` in 255 steps (a scale of 1 for an all-zero LUT).
    init(fitting lut: [Float]) {
        let low = min(lut.min() ?? 0, 0), high = max(lut.max() ?? 0, 0)
        scale = high > low ? (high - low) / 255 : 1
        zeroPoint = Int(max(-128, min(127, (-128 - low / scale).rounded())))
    }

    /// The stored integer nearest `value`.
    func code(_ value: Float) -> Int { max(-128, min(127, Int((value / scale).rounded()) + zeroPoint)) }

    /// The grid value nearest `value`.
    func rounded(_ value: Float) -> Float { scale * Float(code(value) - zeroPoint) }

    /// Parts `lut` (I8), `lut_scales` and `lut_zero_points` of LUTs already on `grids` (one per
    /// group, `shape` `[groups, entries, vector size]`).
    static func parts(luts: [Float], grids: [LUTGrid], shape: [Int], tensor: String) throws(CompressionError) -> [String: DenseTensor] {
        let width = luts.count / grids.count
        return [
            "lut": try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(dtype: .i8, shape: shape, bytes: luts.indices.map { UInt8(bitPattern: Int8(grids[$0 / width].code(luts[$0]))) }) },
            "lut_scales": try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(converting: grids.map(\.scale), shape: [grids.count]) },
            "lut_zero_points": try DenseTensor.part(of: tensor) { () throws(ShrinkCoreError) in try DenseTensor(dtype: .i8, shape: [grids.count], bytes: grids.map { UInt8(bitPattern: Int8($0.zeroPoint)) }) },
        ]
    }
}

extension EncodedTensor {
    /// This tensor (a palette, or a rotated palette) with its LUTs replaced by `luts`
    /// (`[groups, entries, vector size]` floats, as `EncodedTensor.paletteLUTs()` gives them):
    /// an `I8` LUT is put on a grid fitted to each group's new entries (`LUTGrid(fitting:)`, each
    /// entry then within half a step of its value), other LUT dtypes are converted; indices and
    /// every other part stay as they are.
    /// - Throws: `CompressionError.invalidWeight` naming the tensor when it is no palette or
    ///   `luts` has the wrong size.
    public func replacingPaletteLUTs(_ luts: [Float]) throws(CompressionError) -> EncodedTensor {
        let base: WeightEncoding
        if case .rotated(_, let inner) = encoding { base = inner } else { base = encoding }
        guard case .palette(let layout) = base, let stored = parts["lut"] else {
            throw .invalidWeight(tensor: name, reason: "only a palette's LUTs can be replaced")
        }
        guard luts.count == stored.shape.reduce(1, *), let groups = stored.shape.first, groups > 0 else {
            throw .invalidWeight(tensor: name, reason: "\(luts.count) LUT values where the palette stores \(stored.shape.reduce(1, *))")
        }
        var parts = self.parts
        if layout.lutDType == .i8 {
            let width = luts.count / groups
            let grids = (0..<groups).map { LUTGrid(fitting: Array(luts[($0 * width)..<(($0 + 1) * width)])) }
            parts.merge(try LUTGrid.parts(luts: luts, grids: grids, shape: stored.shape, tensor: name)) { $1 }
        } else {
            parts["lut"] = try DenseTensor.part(of: name) { () throws(ShrinkCoreError) in try DenseTensor(converting: luts, to: layout.lutDType, shape: stored.shape) }
        }
        do {
            return try EncodedTensor(name: name, shape: shape, sourceDType: sourceDType, encoding: encoding, parts: parts)
        } catch {
            throw .invalidWeight(tensor: name, reason: "\(error)")
        }
    }
}
