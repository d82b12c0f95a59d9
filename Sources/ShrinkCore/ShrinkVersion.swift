/// Shrink's version: printed by `shrink --version`, and part of the key of everything Shrink
/// caches for a CPU (`SpecializationCache`), so that a new version never maps what an older one
/// prepared. Raised by hand when a change alters what kernels compute from prepared panels (a
/// change of the panels' format raises `SpecializationCache.layoutVersion` as well).
public enum ShrinkVersion {
    public static let current = "0.24.0"
}
