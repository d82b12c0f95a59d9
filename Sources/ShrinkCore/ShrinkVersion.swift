/// Shrink's version: printed by `shrink --version`, and part of the key of everything Shrink
/// caches for a CPU (`SpecializationCache`), so that a new version never maps what an older one
/// prepared. Raised with every change that lands on `main` and alters kernels or what they read.
public enum ShrinkVersion {
    public static let current = "0.24.0"
}
