import Foundation
import FuzzSupport
import ShrinkCompression
import ShrinkIO
import ShrinkModels

/// Recipes: decoded, then resolved into a plan against all-MiniLM-L6-v2's tensors and op types.
let folder = modelsFolder + "/all-MiniLM-L6-v2"
let store = try! TensorStores.open(path: folder + "/model.safetensors")
let configuration = try! ModelArchitectures.configuration(of: store, configPath: folder + "/config.json")
let descriptors = store.descriptors
let roles = ModelArchitectures.roles(of: store, configuration: configuration)
fuzz { bytes in
    guard let recipe = try? Recipe.parse(Data(bytes), file: "fuzz.json") else { return }
    _ = try? CompressionPlan.resolve(recipe, tensors: descriptors, roles: roles)
}
