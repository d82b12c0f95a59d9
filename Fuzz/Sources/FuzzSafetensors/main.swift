import FuzzSupport
import ShrinkFuzzTargets

/// Safetensors files, plain or Shrink's compressed container.
fuzz { FuzzTargets.readEveryTensor(path: scratchFile($0, suffix: ".safetensors")) }
