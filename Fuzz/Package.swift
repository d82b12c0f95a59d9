// swift-tools-version:6.0
import PackageDescription

/// libFuzzer targets for Shrink's parsers, a package of their own so that the main package builds
/// without fuzzer flags. `scripts/fuzz.sh` builds them with `-sanitize=fuzzer,address` and runs each.
let targets: Target.Dependency = .product(name: "ShrinkFuzzTargets", package: "Shrink")
let package = Package(
    name: "ShrinkFuzz",
    dependencies: [.package(name: "Shrink", path: "..")],
    targets: [
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzSafetensors", dependencies: ["FuzzSupport", targets]),
        .executableTarget(name: "FuzzGGUF", dependencies: ["FuzzSupport", targets]),
        .executableTarget(name: "FuzzRecipe", dependencies: ["FuzzSupport", targets]),
        .executableTarget(name: "FuzzGate", dependencies: ["FuzzSupport", targets]),
        .executableTarget(name: "FuzzTokenizers", dependencies: ["FuzzSupport", targets]),
    ]
)
