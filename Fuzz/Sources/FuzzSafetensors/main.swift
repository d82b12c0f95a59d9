import FuzzSupport

/// Safetensors files, plain or Shrink's compressed container.
fuzz { readEveryTensor($0, suffix: ".safetensors") }
