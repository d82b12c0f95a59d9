// swift-tools-version:6.0
import PackageDescription

/// Kernels drop arithmetic overflow checks in release builds; their bounds are checked on entry.
/// Modules that parse untrusted input keep every check.
let kernelSettings: [SwiftSetting] = [.unsafeFlags(["-Ounchecked"], .when(configuration: .release))]

let package = Package(
    name: "Shrink",
    products: [
        .library(name: "Shrink", targets: ["Shrink"]),
        .library(name: "ShrinkEvaluation", targets: ["ShrinkEvaluation"]),
        .library(name: "ShrinkTesting", targets: ["ShrinkTesting"]),
        // What the fuzzers in Fuzz/ (a package of their own) run per input; the tests replay their corpora.
        .library(name: "ShrinkFuzzTargets", targets: ["ShrinkFuzzTargets"]),
        .executable(name: "shrink", targets: ["shrink"]),
    ],
    targets: [
        .systemLibrary(name: "CBLAS", path: "Sources/CBLAS"),
        .target(name: "CShrinkCoreSupport"),
        .target(name: "ShrinkCore", dependencies: ["CShrinkCoreSupport"]),
        .target(name: "ShrinkIO", dependencies: ["ShrinkCore"]),
        .target(name: "CShrinkKernels", cSettings: [.unsafeFlags(["-O3"])]),
        .target(name: "ShrinkKernels", dependencies: ["ShrinkCore", "CBLAS", "CShrinkKernels"], swiftSettings: kernelSettings),
        .target(name: "ShrinkCompression", dependencies: ["ShrinkCore", "CBLAS", "CShrinkKernels"], swiftSettings: kernelSettings),
        .target(name: "ShrinkModels", dependencies: ["ShrinkCore", "ShrinkIO", "ShrinkKernels", "CBLAS"]),
        .target(name: "Shrink", dependencies: ["ShrinkCore", "ShrinkIO", "ShrinkKernels", "ShrinkCompression", "ShrinkModels"]),
        .target(name: "ShrinkEvaluation", dependencies: ["Shrink", "ShrinkModels", "ShrinkKernels", "ShrinkCompression", "ShrinkIO"]),
        .target(name: "ShrinkTesting", dependencies: ["ShrinkEvaluation", "Shrink"]),
        .target(name: "ShrinkFuzzTargets", dependencies: ["ShrinkCore", "ShrinkIO", "ShrinkCompression", "ShrinkModels", "ShrinkEvaluation"]),
        .target(name: "ShrinkCLI", dependencies: ["Shrink", "ShrinkCore", "ShrinkModels", "ShrinkKernels", "ShrinkEvaluation"]),
        .executableTarget(name: "shrink", dependencies: ["ShrinkCLI"]),
        .executableTarget(
            name: "BlasBenchmark", dependencies: ["ShrinkCore", "ShrinkKernels", "ShrinkTestSupport"],
            path: "Benchmarks/BlasBenchmark", swiftSettings: kernelSettings),
        .executableTarget(
            name: "PassBenchmark", dependencies: ["ShrinkCompression", "ShrinkIO", "ShrinkTestSupport"],
            path: "Benchmarks/PassBenchmark", swiftSettings: kernelSettings),
        .executableTarget(
            name: "KernelBenchmark", dependencies: ["ShrinkKernels", "ShrinkCompression", "ShrinkIO", "ShrinkTestSupport"],
            path: "Benchmarks/KernelBenchmark", swiftSettings: kernelSettings),
        .executableTarget(
            name: "DecoderBenchmark", dependencies: ["ShrinkModels", "ShrinkKernels", "ShrinkEvaluation", "ShrinkTestSupport"],
            path: "Benchmarks/DecoderBenchmark", swiftSettings: kernelSettings),
        .executableTarget(
            name: "LoadBenchmark", dependencies: ["ShrinkModels", "ShrinkTestSupport"],
            path: "Benchmarks/LoadBenchmark", swiftSettings: kernelSettings),
        .executableTarget(
            name: "GuidedBenchmark", dependencies: ["ShrinkModels", "ShrinkTestSupport"],
            path: "Benchmarks/GuidedBenchmark", swiftSettings: kernelSettings),
        .executableTarget(
            name: "PeerBenchmark", dependencies: ["Shrink", "ShrinkModels", "ShrinkKernels", "ShrinkCompression", "ShrinkIO"],
            path: "Benchmarks/PeerBenchmark", swiftSettings: kernelSettings),
        .target(name: "ShrinkTestSupport", dependencies: ["ShrinkCore", "ShrinkIO", "ShrinkCompression", "ShrinkModels", "CShrinkKernels"], path: "Tests/ShrinkTestSupport"),
        .target(name: "CAllocationCounter", path: "Tests/CAllocationCounter"),
        .testTarget(name: "ShrinkCoreTests", dependencies: ["ShrinkCore", "ShrinkTestSupport"]),
        .testTarget(name: "ShrinkIOTests", dependencies: ["ShrinkIO", "ShrinkTestSupport"]),
        .testTarget(name: "ShrinkKernelsTests", dependencies: ["ShrinkKernels", "ShrinkCompression", "ShrinkIO", "ShrinkTestSupport", "CAllocationCounter"]),
        .testTarget(name: "ShrinkCompressionTests", dependencies: ["ShrinkCompression", "ShrinkIO", "ShrinkTestSupport"]),
        .testTarget(name: "ShrinkModelsTests", dependencies: ["ShrinkModels", "Shrink", "ShrinkIO", "ShrinkTestSupport", "CAllocationCounter"]),
        .testTarget(name: "ShrinkCLITests", dependencies: ["ShrinkCLI", "Shrink", "ShrinkCore", "ShrinkIO", "ShrinkTestSupport", "ShrinkEvaluation", "CAllocationCounter"]),
        .testTarget(name: "ShrinkEvaluationTests", dependencies: ["ShrinkEvaluation", "ShrinkTesting", "Shrink", "ShrinkModels", "ShrinkIO", "ShrinkTestSupport", "ShrinkFuzzTargets"]),
    ]
)
