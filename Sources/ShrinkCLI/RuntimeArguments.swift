import Foundation
import Shrink
import ShrinkKernels
import ShrinkModels

/// `--model`, `--base` and `--activations` of the commands that build a runtime (embed, inspect
/// `--kernels`).
enum RuntimeArguments {
    /// The optional model positional of `inspect` and `specialize`.
    static let modelArgument = ArgumentSpec(name: "model", help: "A model folder, a .safetensors (plain or compressed) or .gguf file, or a known model name (default: minilm).",
                                            isOptional: true)
    static let activationsOption = OptionSpec(name: "--activations", valueName: "int8|f32",
                                              help: "Precision of compressed layers: int8 activations with integer dot products (default), or fp32.")
    static let baseOption = OptionSpec(name: "--base", valueName: "folder",
                                       help: "Folder with config.json, vocab.txt and the pooling config (default: the model's folder, else the minilm cache folder).")

    static func activations(_ arguments: ParsedArguments, command: String, default fallback: ActivationPrecision = .int8) throws(UsageError) -> ActivationPrecision {
        let precision = arguments.value("--activations") ?? fallback.rawValue
        guard let activations = ActivationPrecision(rawValue: precision) else {
            throw UsageError(command: command, message: "--activations must be int8 or f32, not '\(precision)'")
        }
        return activations
    }

    /// The runtime of the model at `location` (its configuration from `--base` when given, else
    /// from next to the weights, else from the default model's folder).
    static func runtime(_ arguments: ParsedArguments, location: ModelLocation, options: RuntimeOptions) throws -> (any ModelRuntime, any ModelArchitecture) {
        let base = arguments.value("--base") ?? (location.configPath.map { ($0 as NSString).deletingLastPathComponent }
            ?? ModelRegistry.directory(of: ModelRegistry.defaultEntry))
        let (files, architecture) = try ModelArchitectures.open(weightsPath: location.weightsPath, configPath: base + "/config.json", folder: base)
        return (try architecture.makeRuntime(files: files, options: options), architecture)
    }
}
