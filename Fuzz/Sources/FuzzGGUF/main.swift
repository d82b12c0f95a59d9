import FuzzSupport

/// GGUF files (v2, v3).
fuzz { readEveryTensor($0, suffix: ".gguf") }
