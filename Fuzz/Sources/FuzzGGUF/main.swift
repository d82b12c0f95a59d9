import FuzzSupport
import ShrinkFuzzTargets

/// GGUF files (v2, v3).
fuzz { FuzzTargets.readEveryTensor(path: scratchFile($0, suffix: ".gguf")) }
