import ShrinkCompression
import ShrinkCore
import ShrinkIO
import ShrinkModels

/// How `ModelCompressor` folds a recipe's input rotation into the weights (`FoldedResidualRotation`,
/// recipe key `fold_rotations`) instead of rotating activations at run time. It needs: an
/// architecture with a residual stream (Llama, Qwen3; not BERT, see `ResidualStream`), a plan that
/// compresses every linear that reads or writes the stream and no reading norm, the same `rotate`
/// in every reading linear's config, and reading norms whose scales are finite and non-zero
/// (folding divides the calibration inputs by them). Writers keep their own `rotate`, which still
/// rotates their inputs at run time.
struct ResidualRotationFolding: Sendable {
    let fold: FoldedResidualRotation
    /// Each reading norm weight's scale `γ`.
    let normScales: [String: [Float]]

    /// The fold for compressing `store` with `configs` (the config of every tensor the plan
    /// compresses).
    /// - Throws: `CompressionError.invalidRecipe` (key `fold_rotations`, recipe `file`) saying
    ///   which condition fails; `ShrinkIOError` when a norm cannot be read.
    static func plan(architecture: (any ModelArchitecture)?, store: any TensorStore, configs: [String: OpCompressionConfig],
                     file: String) throws -> ResidualRotationFolding {
        func refuse(_ reason: String) -> CompressionError { .invalidRecipe(file: file, keyPath: "fold_rotations", reason: reason) }
        guard let stream = architecture?.residualStream, !stream.readers.isEmpty else {
            throw refuse("the model has no residual stream a rotation folds into (BERT's LayerNorm subtracts the mean, which a rotation does not commute with)")
        }
        let readers = stream.readers.flatMap(\.linears)
        guard let rotate = configs[readers[0]]?.rotate else { throw refuse("\(readers[0]) is not rotated") }
        if let other = readers.first(where: { configs[$0]?.rotate != rotate }) {
            throw refuse("every reader of the residual stream needs the rotate of \(readers[0]); \(other) has another")
        }
        if let writer = stream.writers.first(where: { configs[$0] == nil }) { throw refuse("\(writer) writes the residual stream but is not compressed") }
        if let norm = stream.readers.first(where: { configs[$0.norm] != nil }) { throw refuse("\(norm.norm) would absorb its scale but is compressed") }
        guard rotate.block.order(for: stream.width) >= RotationConfig.minimumBlock else {
            throw refuse("the residual width \(stream.width) has no Hadamard block of \(RotationConfig.minimumBlock) or more")
        }
        var scales: [String: [Float]] = [:]
        for reader in stream.readers {
            guard let norm = store.tensor(named: reader.norm) else { throw ShrinkIOError.tensorNotFound(path: store.path, tensor: reader.norm) }
            let scale = norm.decodedFloats()
            guard scale.count == stream.width, scale.allSatisfy({ $0.isFinite && $0 != 0 }) else {
                throw refuse("\(reader.norm) has a zero or non-finite scale, which cannot be folded")
            }
            scales[reader.norm] = scale
        }
        let rotation = HadamardRotation(size: stream.width, seed: rotate.seed, block: rotate.block)
        return ResidualRotationFolding(fold: FoldedResidualRotation(rotation: rotation, stream: stream), normScales: scales)
    }

    /// `tensor` (weight `name`) in the rotated basis with the config and input correlation that
    /// encode it there: a reader's `W·D·Qᵀ`, no `rotate`, and the correlation of `Q·D⁻¹·x`
    /// (`Q·D⁻¹·H·D⁻¹·Qᵀ`); a writer's `Q·W` with its config and correlation as they are.
    func folded(_ name: String, tensor: DenseTensor, config: OpCompressionConfig,
                correlation: InputCorrelation?) throws -> (DenseTensor, OpCompressionConfig, InputCorrelation?) {
        let norm = fold.readers[name]
        guard norm != nil || fold.writers.contains(name) else { return (tensor, config, correlation) }
        var values = tensor.floats()
        let scale = norm.map { normScales[$0]! }
        try fold.fold(name, values: &values, shape: tensor.shape, normScale: scale)
        let rotated = try DenseTensor(converting: values, shape: tensor.shape)
        guard let scale else { return (rotated, config, correlation) }
        var readerConfig = config
        readerConfig.rotate = nil
        let inverse = scale.map { 1 / Double($0) }
        return (rotated, readerConfig, correlation.map { $0.scaled(by: inverse).rotated(by: fold.rotation) })
    }

    /// One line for the compression summary.
    var summary: String {
        let rotation = fold.rotation
        return "residual stream rotated (Hadamard \(rotation.blockSize) × \(rotation.size / rotation.blockSize)), folded into "
            + "\(fold.readers.count) reading and \(fold.writers.count) writing linears; \(fold.norms.count) norm scales absorbed"
    }
}
