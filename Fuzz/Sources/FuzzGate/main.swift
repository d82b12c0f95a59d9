import FuzzSupport
import ShrinkEvaluation

/// Gate files (`recipes/gates/*.json`).
fuzz { bytes in
    _ = try? RecipeGate.load(path: scratchFile(bytes, suffix: ".json"))
}
