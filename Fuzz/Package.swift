// swift-tools-version:6.0
import PackageDescription

/// libFuzzer targets for Shrink's parsers, a package of their own so that the main package builds
/// without fuzzer flags. `scripts/fuzz.sh` builds them with `-sanitize=fuzzer,address` and runs each.
let shrink: Target.Dependency = .product(name: "ShrinkEvaluation", package: "Shrink")
let package = Package(
    name: "ShrinkFuzz",
    dependencies: [.package(name: "Shrink", path: "..")],
    targets: [
        .target(name: "FuzzSupport", dependencies: [shrink]),
        .executableTarget(name: "FuzzSafetensors", dependencies: ["FuzzSupport", shrink]),
        .executableTarget(name: "FuzzGGUF", dependencies: ["FuzzSupport", shrink]),
        .executableTarget(name: "FuzzRecipe", dependencies: ["FuzzSupport", shrink]),
        .executableTarget(name: "FuzzGate", dependencies: ["FuzzSupport", shrink]),
        .executableTarget(name: "FuzzTokenizers", dependencies: ["FuzzSupport", shrink]),
    ]
)
