import FuzzSupport
import ShrinkFuzzTargets

/// Recipes: decoded, then resolved into a plan against all-MiniLM-L6-v2's tensors and op types.
let recipes = try! FuzzTargets.RecipeResolution(modelFolder: modelsFolder + "/all-MiniLM-L6-v2")
fuzz { recipes.resolve($0) }
