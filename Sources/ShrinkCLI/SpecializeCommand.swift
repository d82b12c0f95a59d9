import Foundation
import Shrink
import ShrinkKernels
import ShrinkModels

/// `shrink specialize`: prepare a model for this CPU once (its linear layers' repacked panels, in
/// the specialization cache), or say whether it is ready, without loading it.
enum SpecializeCommand {
    static let command = ShrinkCommand(spec: spec, run: run)

    static let spec = CommandSpec(
        name: "specialize",
        summary: "Write a model's repacked panels (int8, or fp32 for dense F32 weights) to the specialization cache, so that later loads map them; --check says whether it is ready.",
        arguments: [RuntimeArguments.modelArgument],
        options: [OptionSpec(name: "--check", valueName: nil, help: "Only say whether the cache holds a usable entry (exit 0) or not (exit 1), without loading the model."),
                  OptionSpec(name: "--cache", valueName: "folder", help: "The cache folder (default: $SHRINK_SPECIALIZATION_CACHE, else ~/.cache/shrink/specialized)."),
                  RuntimeArguments.baseOption])

    static func run(_ arguments: ParsedArguments, console: Console) throws -> Int32 {
        let location = try ModelLocation.resolve(arguments.positionals.first ?? ModelRegistry.defaultEntry.alias)
        let cache = SpecializationCache(directory: arguments.value("--cache") ?? SpecializationCache.defaultDirectory)
        if arguments.flag("--check") {
            let status = cache.status(modelPath: location.weightsPath)
            switch status {
            case .ready: console.print("ready: \(location.weightsPath) (\(IntegerKernelVariant.best.rawValue))")
            case .missing: console.print("missing: \(location.weightsPath) has no entry for \(IntegerKernelVariant.best.rawValue) in \(cache.directory)")
            case .stale(let reason): console.print("stale: \(location.weightsPath): \(reason)")
            }
            return status == .ready ? 0 : 1
        }
        let start = Date()
        let (runtime, _) = try RuntimeArguments.runtime(arguments, location: location, options: RuntimeOptions(specialization: cache))
        let seconds = String(format: "%.3f", Date().timeIntervalSince(start))
        let outcome = (runtime as? LlamaDecoder)?.specializationOutcome ?? (runtime as? SentenceEncoder)?.specializationOutcome ?? .unused
        switch outcome {
        case .mapped: console.print("ready: mapped from \(cache.directory) in \(seconds) s")
        case .written(let rebuilt): console.print((rebuilt ? "rebuilt a stale entry" : "written") + " in \(cache.directory); load with repacking \(seconds) s")
        case .repacked(let reason): console.print("not written: \(reason)"); return 1
        case .unused: console.print("nothing to specialize: the model has no layers whose weights are repacked"); return 1
        }
        return 0
    }
}
