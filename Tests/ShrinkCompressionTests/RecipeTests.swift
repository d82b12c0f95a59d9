import Foundation
import Testing
import ShrinkCompression
import ShrinkCore

@Suite struct RecipeTests {
    static func parse(_ json: String) throws(CompressionError) -> Recipe {
        try Recipe.parse(Data(json.utf8), file: "r.json")
    }

    static let tensors = [
        TensorDescriptor(name: "embed.weight", dtype: .f32, shape: [100, 16]),
        TensorDescriptor(name: "layers.0.attn.q.weight", dtype: .f32, shape: [16, 16]),
        TensorDescriptor(name: "layers.0.attn.q.bias", dtype: .f32, shape: [16]),
        TensorDescriptor(name: "layers.0.ffn.up.weight", dtype: .f16, shape: [48, 16]),
        TensorDescriptor(name: "layers.0.norm.weight", dtype: .f32, shape: [16]),
    ]
    static let roles = [
        TensorRole(name: "embed.weight", op: "embed", opType: .embedding, layer: "embed"),
        TensorRole(name: "layers.0.attn.q.weight", op: "layers.0.attn.q", opType: .linear, layer: "layers.0"),
        TensorRole(name: "layers.0.attn.q.bias", op: "layers.0.attn.q", opType: .linear, layer: "layers.0"),
        TensorRole(name: "layers.0.ffn.up.weight", op: "layers.0.ffn.up", opType: .linear, layer: "layers.0"),
        TensorRole(name: "layers.0.norm.weight", op: "layers.0.norm", opType: .norm, layer: "layers.0"),
    ]

    /// The same roles as an architecture adapter names them.
    static let architectureRoles = roles.map { role in
        TensorRole(name: role.name, op: role.op, opType: role.opType, layer: role.layer,
                   kind: ["embed": "embedding", "layers.0.attn.q": "attention.q", "layers.0.ffn.up": "mlp.up", "layers.0.norm": "norm"][role.op])
    }

    func plan(_ json: String, roles: [TensorRole] = RecipeTests.roles) throws(CompressionError) -> [String: String] {
        let resolved = try CompressionPlan.resolve(try Self.parse(json), tensors: Self.tensors, roles: roles)
        var decisions: [String: String] = [:]
        for entry in resolved.entries {
            switch entry.decision {
            case .compress(let config, let rule):
                decisions[entry.tensor.name] = rule + (config.quantize.map { " q\($0.bits)" } ?? "") + (config.palettize.map { " p\($0.bits)" } ?? "")
            case .keep(let reason): decisions[entry.tensor.name] = "keep: " + reason
            }
        }
        return decisions
    }

    @Test func architectureOpTypesComeBeforeCoarseOnes() throws {
        let json = #"""
            {"op_type": {"linear": {"quantize": {"bits": 8}}, "mlp.up": {"quantize": {"bits": 4, "granularity": "per_block"}}, "embedding": null},
             "op_name": {"layers.0.attn.q": {"palettize": {"bits": 6}}}}
            """#
        let decisions = try plan(json, roles: Self.architectureRoles)
        #expect(decisions["layers.0.ffn.up.weight"] == "op_type.mlp.up q4")
        #expect(decisions["layers.0.attn.q.weight"] == "op_name[\"layers.0.attn.q\"] p6")
        #expect(decisions["embed.weight"] == "keep: op_type.embedding is null")
        // A model without that op type, or without an architecture, is told which it has.
        #expect(throws: CompressionError.recipeMismatch(file: "r.json", keyPath: "op_type.mlp.up",
                                                        reason: "no tensor of the model has this op type; its op types are not known (no architecture)")) {
            try plan(json)
        }
        let other = #"{"op_type": {"mlp.gate": {"quantize": {"bits": 8}}}}"#
        #expect(throws: CompressionError.recipeMismatch(file: "r.json", keyPath: "op_type.mlp.gate",
                                                        reason: "no tensor of the model has this op type; its op types: attention.q, embedding, mlp.up, norm")) {
            try plan(other, roles: Self.architectureRoles)
        }
        #expect(throws: CompressionError.self) { try Self.parse(#"{"op_type": {"Attention.Q": null}}"#) }
        #expect(throws: CompressionError.self) { try Self.parse(#"{"op_type": {"norm": null}}"#) }
    }

    @Test func precedenceIsOpNameThenOpTypeThenGlobal() throws {
        let decisions = try plan(#"""
            {"global": {"palettize": {"bits": 2}},
             "op_type": {"linear": {"quantize": {"bits": 8}}},
             "op_name": {"layers\\.\\d+\\.ffn\\..*": {"palettize": {"bits": 6}}, "layers.0.attn.q": null}}
            """#)
        #expect(decisions["embed.weight"] == "global p2")
        #expect(decisions["layers.0.attn.q.weight"] == "keep: op_name[\"layers.0.attn.q\"] is null")
        #expect(decisions["layers.0.ffn.up.weight"] == "op_name[\"layers\\.\\d+\\.ffn\\..*\"] p6")
        #expect(decisions["layers.0.attn.q.bias"] == "keep: 1-D tensor")
        #expect(decisions["layers.0.norm.weight"] == "keep: 1-D tensor")
    }

    @Test func weightThresholdSkipsSmallTensors() throws {
        let decisions = try plan(#"{"global": {"quantize": {"bits": 4, "granularity": "per_block"}}, "weight_threshold": 700}"#)
        #expect(decisions["layers.0.attn.q.weight"] == "keep: 256 elements < weight_threshold 700")
        #expect(decisions["layers.0.ffn.up.weight"] == "global q4")
    }

    @Test(arguments: [
        (#"{"globl": {}}"#, "r.json: globl: unknown key (expected calibration, fold_rotations, global, op_name, op_type, tune, weight_threshold)"),
        (#"{"global": {"palettize": {"bits": 5}}}"#, "r.json: global.palettize.bits: 5 is not one of 1, 2, 3, 4, 6, 8"),
        (#"{"global": {"quantize": {"bits": 9}}}"#, "r.json: global.quantize.bits: 9 is outside 2…8"),
        (#"{"global": {"quantize": {"bits": 4, "granulrity": "per_block"}}}"#, "r.json: global.quantize.granulrity: unknown key"),
        (#"{"op_type": {"attention": null}}"#, "r.json: op_type.attention: unknown op type (expected linear, embedding, conv, or an architecture's op type such as attention.q or mlp.down)"),
        (#"{"op_type": {"linear": {"quantize": {}, "palettize": {}}}}"#, "r.json: op_type.linear: use either quantize or palettize, not both"),
        (#"{"op_type": {"linear": {}}}"#, "r.json: op_type.linear: expected at least one of prune, quantize, palettize"),
        (#"{"global": {"prune": {"mode": "magnitude"}}}"#, "r.json: global.prune.target_sparsity: required for magnitude pruning"),
        (#"{"global": {"prune": {"mode": "magnitude", "target_sparsity": 1.0}}}"#, "r.json: global.prune.target_sparsity: 1.0 is outside 0.0…1.0 (exclusive)"),
        (#"{"global": {"prune": {"mode": "n_m", "n": 4, "m": 4}}}"#, "r.json: global.prune.n: n (4) must be smaller than m (4)"),
        (#"{"global": {"palettize": {"mode": "custom"}}}"#, "r.json: global.palettize.lut: mode \"custom\" needs a lut array of numbers"),
        (#"{"global": {"palettize": {"bits": 1, "mode": "custom", "lut": [1, 2, 3]}}}"#, "r.json: global.palettize.lut: 3 values do not fit 2 entries of 1"),
        (#"{"global": {"palettize": {"cluster_dim": 2, "mode": "uniform"}}}"#, "r.json: global.palettize.mode: vector palettes (cluster_dim > 1) support kmeans and custom"),
        (#"{"global": {"prune": {"mode": "n_m"}, "palettize": {"cluster_dim": 2}}}"#, "r.json: global.palettize.cluster_dim: vector palettes cannot be combined with pruning"),
        (#"{"op_name": {"(": null}}"#, "r.json: op_name[\"(\"]: not a valid regular expression"),
        (#"{"weight_threshold": -1}"#, "r.json: weight_threshold: -1 is outside"),
        (#"{"global": "int8"}"#, "r.json: global: expected an object, found string"),
        (#"{"global": {"quantize": {"bits": 8}},}"#, "r.json: cannot read recipe: invalid JSON"),
        ("[]", "r.json: expected an object, found array"),
        (#"{"global": {"quantize": {"bits": 4, "method": "gptq"}}}"#, "r.json: calibration: \"method\": \"gptq\" needs calibration data"),
        (#"{"global": {"quantize": {"method": "gptq", "damping": 2}}, "calibration": {"data": "c.txt"}}"#, "r.json: global.quantize.damping: 2.0 is outside"),
        (#"{"global": {"quantize": {"damping": 0.1}}}"#, "r.json: global.quantize.damping: unknown key"),
        (#"{"global": {"prune": {"mode": "n_m"}, "quantize": {"method": "gptq"}}, "calibration": {"data": "c.txt"}}"#,
         "r.json: global.quantize.method: gptq cannot be combined with pruning"),
        (#"{"global": {"palettize": {"cluster_dim": 2, "method": "gptq", "granularity": "per_grouped_channel", "channel_axis": 1}}, "calibration": {"data": "c.txt"}}"#,
         "r.json: global.palettize.method: gptq on vector palettes needs LUTs per tensor or grouped along the output channels (channel_axis 0)"),
        (#"{"global": {"palettize": {"mode": "unique", "method": "gptq"}}, "calibration": {"data": "c.txt"}}"#,
         "r.json: global.palettize.method: gptq would make unique (lossless) palettization lossy"),
        (#"{"calibration": {"limit": 8}}"#, "r.json: calibration.data: expected the path of a text file"),
        (#"{"calibration": {"data": "c.txt", "limit": 0}}"#, "r.json: calibration.limit: 0 is outside"),
        (#"{"global": {"quantize": {"bits": 4, "scale_dtype": "u8"}}}"#,
         "r.json: global.quantize.scale_dtype: integer block scales (\"u8\") need \"granularity\": \"per_block\""),
        (#"{"global": {"quantize": {"bits": 5, "mode": "affine", "granularity": "per_block", "scale_dtype": "u8"}}}"#,
         "r.json: global.quantize.scale_dtype: integer block scales (\"u8\") need bits ≤ 4 (affine) or ≤ 6 (symmetric)"),
        (#"{"global": {"quantize": {"bits": 4, "granularity": "per_block", "scale_dtype": "i8"}}}"#,
         "r.json: global.quantize.scale_dtype: \"i8\" is not one of"),
        (#"{"global": {"rotate": {"sead": 1}, "quantize": {}}}"#, "r.json: global.rotate.sead: unknown key (expected block, seed)"),
        (#"{"global": {"rotate": {"seed": -1}, "quantize": {}}}"#, "r.json: global.rotate.seed: -1 is outside"),
        (#"{"global": {"rotate": {"block": 128}, "quantize": {}}}"#, "r.json: global.rotate.block: expected a string"),
        (#"{"global": {"rotate": {"block": "full"}, "quantize": {}}}"#, "r.json: global.rotate.block: \"full\" is not one of power_of_two, largest"),
        (#"{"global": {"rotate": true, "quantize": {}}}"#, "r.json: global.rotate: expected an object, found"),
        (#"{"global": {"rotate": {}}}"#, "r.json: global: expected at least one of prune, quantize, palettize"),
        (#"{"global": {"rotate": {}, "prune": {"mode": "n_m"}, "quantize": {}}}"#,
         "r.json: global.rotate: rotation cannot be combined with pruning"),
    ])
    func invalidRecipesNameTheKeyPath(json: String, expected: String) {
        do {
            _ = try Self.parse(json)
            Issue.record("accepted \(json)")
        } catch {
            #expect(error.description.hasPrefix(expected), "\(error)")
        }
    }

    @Test(arguments: [
        (#"{"op_name": {"layers\\.9\\..*": null}}"#, #"r.json: op_name["layers\.9\..*"]: matches no tensor or op of the model"#),
        (#"{"global": {"palettize": {"granularity": "per_grouped_channel", "group_size": 32}}}"#,
         "r.json: global.palettize.group_size: tensor 'embed.weight' of shape [100, 16]: 32 does not divide the 100 channels of axis 0"),
        (#"{"op_type": {"linear": {"prune": {"mode": "n_m", "n": 2, "m": 32}}}}"#,
         "r.json: op_type.linear.prune.m: tensor 'layers.0.attn.q.weight' of shape [16, 16]: m = 32 does not divide the input dimension 16"),
        (#"{"global": {"quantize": {"axis": 2}}}"#, "r.json: global.quantize.axis: tensor 'embed.weight' of shape [100, 16]: axis 2 does not exist"),
        (#"{"global": {"palettize": {"cluster_dim": 4}}, "op_type": {"embedding": {"palettize": {"cluster_dim": 2}}}}"#, ""),
    ])
    func recipesThatDoNotFitTheModelAreErrors(json: String, expected: String) {
        do {
            _ = try plan(json)
            #expect(expected.isEmpty, "accepted \(json)")
        } catch {
            #expect(!expected.isEmpty && error.description == expected, "\(error)")
        }
    }

    /// A recipe restricted to one tensor compresses it with the config the recipe gives it and
    /// leaves the rest; a plan rule leads back to the config's JSON as the file spells it.
    @Test func restrictedRecipesAndRuleJSON() throws {
        let recipe = try Self.parse(#"{"global": {"quantize": {"bits": 8}}, "op_type": {"linear": {"palettize": {"bits": 3}}}, "op_name": {"embed\\..*": {"quantize": {"bits": 4}}}}"#)
        let resolved = try CompressionPlan.resolve(recipe, tensors: Self.tensors, roles: Self.roles)
        var rules: [String: String] = [:]
        for entry in resolved.entries { if case .compress(_, let rule) = entry.decision { rules[entry.tensor.name] = rule } }
        #expect(recipe.configJSON(rule: rules["embed.weight"]!)?.serialized() == #"{"quantize":{"bits":4}}"#)
        #expect(recipe.configJSON(rule: rules["layers.0.attn.q.weight"]!)?.serialized() == #"{"palettize":{"bits":3}}"#)
        #expect(recipe.configJSON(rule: "global")?.serialized() == #"{"quantize":{"bits":8}}"#)
        #expect(recipe.configJSON(rule: "op_type.conv") == nil && recipe.configJSON(rule: "nonsense") == nil)
        guard case .compress(let config, _) = resolved.entries[3].decision else { Issue.record("ffn.up is compressed"); return }
        let single = try CompressionPlan.resolve(recipe.restricted(to: [("layers.0.ffn.up.weight", config)]), tensors: Self.tensors, roles: Self.roles)
        for entry in single.entries {
            if case .compress(let chosen, _) = entry.decision {
                #expect(entry.tensor.name == "layers.0.ffn.up.weight" && chosen == config)
            }
        }
        #expect(single.entries.filter { if case .compress = $0.decision { true } else { false } }.count == 1)
    }

    @Test func shippedRecipesParse() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("recipes")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }
        #expect(files.count >= 9)
        for file in files { _ = try Recipe.load(path: folder.appendingPathComponent(file).path) }
        #expect(throws: CompressionError.unreadableRecipe(file: "/nonexistent.json", reason: "no such file")) { try Recipe.load(path: "/nonexistent.json") }
    }
}
