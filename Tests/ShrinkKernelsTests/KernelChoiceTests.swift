import Testing
@testable import ShrinkKernels

/// The default kernel variant from the environment: unset picks the fastest, a variant the CPU
/// runs is taken, anything else falls back to the fastest with a warning that names the variable,
/// the value and the choices.
@Suite struct KernelChoiceTests {
    @Test func anUnsetVariablePicksTheFastest() {
        let choice = KernelChoice.resolve(nil, variable: "SHRINK_KERNELS", available: [KernelVariant.swift, .avx2, .avx512])
        #expect(choice.variant == .avx512 && choice.warning == nil)
    }

    @Test func aVariantTheCPURunsIsTaken() {
        let choice = KernelChoice.resolve("avx2", variable: "SHRINK_INTEGER_KERNELS", available: [IntegerKernelVariant.swift, .avx2, .avx512vnni])
        #expect(choice.variant == .avx2 && choice.warning == nil)
    }

    @Test(arguments: ["avx3", "", "AVX2", "avx512"])
    func anythingElseFallsBackWithAWarning(value: String) {
        let choice = KernelChoice.resolve(value, variable: "SHRINK_KERNELS", available: [KernelVariant.swift, .avx2])
        #expect(choice.variant == .avx2)
        #expect(choice.warning == "shrink: SHRINK_KERNELS=\(value) is not a kernel variant this CPU runs (swift, avx2); using avx2")
    }
}
