import Foundation
import ShrinkCore

/// Applies an `OpCompressionConfig` to one weight: rotate (optional), prune (optional), then
/// quantize or palettize the kept elements, or keep them dense. A pure function of the weight, its config and the optional
/// per-element importance; deterministic.
public enum WeightCompressor {
    /// Encodes `tensor` named `name`.
    /// - Parameters:
    ///   - importance: optional non-negative weight per element for the squared error the passes
    ///     minimise (calibrated passes supply it); `nil` weighs all elements alike.
    ///   - correlation: the input correlation of the layer on calibration data, which calibrated
    ///     methods (`"method": "gptq"`) need. Quantizing GPTQ works in its matrix: give it up
    ///     (`consume`) and the `8n²` bytes of an `n`-input layer are not copied.
    ///   - threads: threads used inside the pass (grouped LUTs and GPTQ rows run in parallel).
    /// - Throws: `CompressionError.nonFiniteWeight` for NaN or infinity, `.invalidWeight` for an
    ///   empty tensor, a config that does not fit its shape, or values a mode cannot represent.
    public static func encode(name: String, tensor: DenseTensor, config: OpCompressionConfig,
                              importance: [Float]? = nil, correlation: consuming InputCorrelation? = nil,
                              threads: Int = 1) throws(CompressionError) -> EncodedTensor {
        guard tensor.dtype.isFloatingPoint else {
            throw .invalidWeight(tensor: name, reason: "dtype \(tensor.dtype.rawValue) is not a float type")
        }
        guard tensor.elementCount > 0, !tensor.shape.isEmpty else { throw .invalidWeight(tensor: name, reason: "is empty") }
        if let mismatch = config.mismatch(shape: tensor.shape) {
            throw .invalidWeight(tensor: name, reason: "shape \(Shape.describe(tensor.shape)) does not fit \(mismatch.key): \(mismatch.reason)")
        }
        let values = tensor.floats()
        if let bad = values.firstIndex(where: { !$0.isFinite }) {
            throw .nonFiniteWeight(tensor: name, index: bad, value: values[bad])
        }
        if let importance {
            guard importance.count == values.count, importance.allSatisfy({ $0 >= 0 && $0.isFinite }) else {
                throw .invalidWeight(tensor: name, reason: "importance must be one finite non-negative value per element")
            }
        }
        // Calibrated passes give the same bytes at any thread count only with OpenBLAS on one thread.
        var held = consume correlation
        return try BLASThreading.singleThreaded(when: config.isCalibrated) { () throws(CompressionError) -> EncodedTensor in
            try encodeFinite(name: name, values: values, tensor: tensor, config: config, importance: importance, correlation: held.take(), threads: threads)
        }
    }

    /// `encode` of the finite `values` of `tensor`, once its config, shape and importance are checked.
    static func encodeFinite(name: String, values: [Float], tensor: DenseTensor, config: OpCompressionConfig, importance: [Float]?,
                             correlation: consuming InputCorrelation?, threads: Int) throws(CompressionError) -> EncodedTensor {
        if let rotate = config.rotate {
            return try encodeRotated(name: name, values: values, tensor: tensor, config: config, rotate: rotate, importance: importance,
                                     correlation: consume correlation, threads: threads)
        }
        let shape = tensor.shape
        var positions: [Int]?
        var kept = values
        var keptImportance = importance
        var parts: [String: DenseTensor] = [:]
        if let prune = config.prune {
            let mask = Pruner.mask(values, shape: shape, config: prune)
            let indices = mask.indices.filter { mask[$0] }
            positions = indices
            kept = indices.map { values[$0] }
            keptImportance = importance.map { weights in indices.map { weights[$0] } }
            parts["mask"] = try DenseTensor.part(of: name) { () throws(ShrinkCoreError) in try DenseTensor(dtype: .u8, shape: [PackedBits.byteCount(count: values.count, bits: 1)],
                                            bytes: PackedBits.pack(mask.map { $0 ? 1 : 0 }, bits: 1)) }
        }
        let base: WeightEncoding
        if kept.isEmpty {
            base = .dense(.f32)
            parts["values"] = try DenseTensor.part(of: name) { () throws(ShrinkCoreError) in try DenseTensor(converting: [], shape: [0]) }
        } else if let quantize = config.quantize, case .gptq(let damping, let actOrder) = quantize.method {
            let encoded = try GPTQ.quantize(kept, shape: shape, correlation: try required(consume correlation, name, inputs: shape[shape.count - 1]), config: quantize,
                                            damping: damping, actOrder: actOrder, threads: threads, tensor: name)
            base = .affine(encoded.layout)
            parts.merge(encoded.parts) { $1 }
        } else if let palettize = config.palettize, case .gptq(let damping, let actOrder) = palettize.method {
            let correlation = try required(correlation, name, inputs: shape[shape.count - 1])
            // Sensitivity-weighted LUT: each weight counts by its input's energy (unless importance is given).
            let columns = shape[1]
            let energy = importance ?? (0..<kept.count).map { Float(correlation.matrix[($0 % columns) * (columns + 1)]) }
            let encoded = try Palettizer.encode(kept, positions: nil, shape: shape, config: palettize, importance: energy, tensor: name, threads: threads,
                                                clusteringSample: 1 << 14)
            base = .palette(encoded.layout)
            parts.merge(try GPTQ.assignPalette(kept, shape: shape, correlation: correlation, layout: encoded.layout, parts: encoded.parts,
                                               damping: damping, actOrder: actOrder, threads: threads, tensor: name)) { $1 }
        } else if let quantize = config.quantize {
            let encoded = try LinearQuantizer.encode(kept, positions: positions, shape: shape, config: quantize,
                                                    importance: keptImportance, tensor: name)
            base = .affine(encoded.layout)
            parts.merge(encoded.parts) { $1 }
        } else if let palettize = config.palettize {
            let encoded = try Palettizer.encode(kept, positions: positions, shape: shape, config: palettize,
                                                importance: keptImportance, tensor: name, threads: threads)
            base = .palette(encoded.layout)
            parts.merge(encoded.parts) { $1 }
        } else {
            let dtype: DType = [.f16, .bf16].contains(tensor.dtype) ? tensor.dtype : .f32
            base = .dense(dtype)
            parts["values"] = try DenseTensor.part(of: name) { () throws(ShrinkCoreError) in try DenseTensor(converting: kept, to: dtype, shape: positions == nil ? shape : [kept.count]) }
        }
        let encoding: WeightEncoding = config.prune.map { .sparse(SparseEncoding(pattern: $0.pattern), base: base) } ?? base
        let encoded: EncodedTensor
        do {
            encoded = try EncodedTensor(name: name, shape: shape, sourceDType: tensor.dtype, encoding: encoding, parts: parts)
        } catch {
            throw .invalidWeight(tensor: name, reason: error.description)
        }
        if config.palettize?.mode == .unique {
            let decoded = encoded.decode()
            let kept = positions ?? Array(values.indices)
            if let lost = kept.first(where: { decoded[$0] != values[$0] }) {
                throw .invalidWeight(tensor: name, reason: "unique palettization must be lossless but element \(lost) (\(values[lost])) "
                                     + "decodes to \(decoded[lost]); use \"lut_dtype\": \"f32\" without per_channel_scale")
            }
        }
        return encoded
    }

    /// `W' = W · Rᵀ` (each row rotated) encoded by the rest of `config` against the rotated
    /// correlation, wrapped as `.rotated` with `R`'s signs.
    static func encodeRotated(name: String, values: [Float], tensor: DenseTensor, config: OpCompressionConfig, rotate: RotationConfig,
                              importance: [Float]?, correlation: consuming InputCorrelation?, threads: Int) throws(CompressionError) -> EncodedTensor {
        guard importance == nil else {
            throw .invalidWeight(tensor: name, reason: "per-element importance does not carry over to rotated weights; drop \"rotate\" or the importance")
        }
        let columns = tensor.shape[tensor.shape.count - 1]
        let rotation = HadamardRotation(size: columns, seed: rotate.seed, block: rotate.block)
        var rotated = values
        rotated.withUnsafeMutableBufferPointer { buffer in
            for row in 0..<(buffer.count / columns) { rotation.rotate(buffer.baseAddress! + row * columns) }
        }
        var rest = config
        rest.rotate = nil
        let base = try encode(name: name, tensor: try DenseTensor.part(of: name) { () throws(ShrinkCoreError) in try DenseTensor(converting: rotated, shape: tensor.shape) }, config: rest,
                              correlation: correlation.map { $0.size == columns ? $0.rotated(by: rotation) : $0 }, threads: threads)
        var parts = base.parts
        parts["rotation_signs"] = try DenseTensor.part(of: name) { () throws(ShrinkCoreError) in try DenseTensor(dtype: .u8, shape: [PackedBits.byteCount(count: columns, bits: 1)], bytes: rotation.packedSigns) }
        do {
            return try EncodedTensor(name: name, shape: tensor.shape, sourceDType: tensor.dtype, encoding: .rotated(blockSize: rotation.blockSize, base: base.encoding),
                                     parts: parts)
        } catch {
            throw .invalidWeight(tensor: name, reason: error.description)
        }
    }
}

/// `correlation`, or the error saying that a calibrated method needs it or that it does not fit.
private func required(_ correlation: consuming InputCorrelation?, _ name: String, inputs: Int) throws(CompressionError) -> InputCorrelation {
    guard let correlation else {
        throw .invalidWeight(tensor: name, reason: "\"method\": \"gptq\" needs calibration data (recipe key \"calibration\")")
    }
    guard correlation.size == inputs else {
        throw .invalidWeight(tensor: name, reason: "the calibration correlation is \(correlation.size) wide, the weight has \(inputs) inputs")
    }
    return correlation
}

/// Error measures between a weight and its decoded compression.
public enum WeightError {
    /// Signal-to-noise ratio in dB: `10·log10(Σw² / Σ(w − ŵ)²)`; infinity when exact.
    public static func snr(original: [Float], decoded: [Float]) -> Double {
        var signal = 0.0, noise = 0.0
        for (w, v) in zip(original, decoded) {
            signal += Double(w) * Double(w)
            noise += Double(w - v) * Double(w - v)
        }
        return noise == 0 ? .infinity : 10 * log10(signal / noise)
    }

    /// `snr(original:decoded:)` of `original` and the decoding of `encoded` (same element count),
    /// taken over runs of whole rows of about 64 Ki elements: the same sums in the same order, so
    /// the same result, in O(row) memory instead of two float copies of the tensor.
    public static func snr(original: DenseTensor, encoded: EncodedTensor) -> Double {
        let count = min(original.elementCount, encoded.elementCount)
        let columns = max(encoded.shape.last ?? 1, 1)
        let chunk = max(1, (1 << 16) / columns) * columns
        let reader = EncodedTensorReader(encoded)
        let width = original.dtype.byteSize
        var source = [Float](repeating: 0, count: chunk), decoded = [Float](repeating: 0, count: chunk)
        var signal = 0.0, noise = 0.0
        for start in stride(from: 0, to: count, by: chunk) {
            let run = min(chunk, count - start)
            source.withUnsafeMutableBufferPointer { output in
                ElementConversion.convertToFloat(UnsafeRawBufferPointer(rebasing: original.bytes[(start * width)..<((start + run) * width)]),
                                                 dtype: original.dtype, into: output)
            }
            decoded.withUnsafeMutableBufferPointer { reader.decode(flatRange: start..<(start + run), into: $0.baseAddress!) }
            for index in 0..<run {
                let (w, v) = (source[index], decoded[index])
                signal += Double(w) * Double(w)
                noise += Double(w - v) * Double(w - v)
            }
        }
        return noise == 0 ? .infinity : 10 * log10(signal / noise)
    }

    /// Relative squared error `Σ(w − ŵ)² / Σw²`.
    public static func relativeSquaredError(original: [Float], decoded: [Float]) -> Double {
        var signal = 0.0, noise = 0.0
        for (w, v) in zip(original, decoded) {
            signal += Double(w) * Double(w)
            noise += Double(w - v) * Double(w - v)
        }
        return signal == 0 ? (noise == 0 ? 0 : .infinity) : noise / signal
    }
}
