// swift-tools-version:6.0
import PackageDescription

/// Kernels drop arithmetic overflow checks in release builds; their bounds are checked on entry.
/// Modules that parse untrusted input keep every check.
let kernelSettings: [SwiftSetting] = [.unsafeFlags(["-Ounchecked"], .when(configuration: .release))]

let package = Package(
    name: "Shrink",
    products: [
        .library(name: "Shrink", targets: ["Shrink"]),
        .executable(name: "shrink", targets: ["shrink"]),
    ],
    targets: [
        .systemLibrary(name: "CBLAS", path: "Sources/CBLAS"),
        .target(name: "ShrinkCore"),
        .target(name: "ShrinkIO", dependencies: ["ShrinkCore"]),
        .target(name: "ShrinkKernels", dependencies: ["ShrinkCore", "CBLAS"], swiftSettings: kernelSettings),
        .target(name: "ShrinkModels", dependencies: ["ShrinkCore", "ShrinkIO"]),
        .target(name: "Shrink", dependencies: ["ShrinkCore", "ShrinkIO", "ShrinkKernels", "ShrinkModels"]),
        .target(name: "ShrinkCLI", dependencies: ["Shrink"]),
        .executableTarget(name: "shrink", dependencies: ["ShrinkCLI"]),
        .executableTarget(
            name: "BlasBenchmark", dependencies: ["ShrinkCore", "ShrinkKernels"],
            path: "Benchmarks/BlasBenchmark", swiftSettings: kernelSettings),
        .testTarget(name: "ShrinkCoreTests", dependencies: ["ShrinkCore"]),
        .testTarget(name: "ShrinkIOTests", dependencies: ["ShrinkIO"], resources: [.copy("Python")]),
        .testTarget(name: "ShrinkKernelsTests", dependencies: ["ShrinkKernels"]),
        .testTarget(name: "ShrinkModelsTests", dependencies: ["ShrinkModels"]),
        .testTarget(name: "ShrinkCLITests", dependencies: ["ShrinkCLI"]),
    ]
)
