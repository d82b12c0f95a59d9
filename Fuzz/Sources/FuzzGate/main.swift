import FuzzSupport
import ShrinkFuzzTargets

/// Gate files (`recipes/gates/*.json`).
fuzz { FuzzTargets.loadGate(path: scratchFile($0, suffix: ".json")) }
