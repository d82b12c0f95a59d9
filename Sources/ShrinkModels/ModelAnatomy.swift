import ShrinkCore

/// Places every tensor of a model by the naming conventions of Hugging Face transformers (BERT,
/// Llama, GPT-2) and GGUF.
///
/// Rules, in order, for each op (tensors sharing a name up to a final `weight`/`bias`/`gamma`/`beta`):
/// 1. integer or boolean tensors are `buffer`;
/// 2. an op whose last name component contains `norm` (any case) or is `ln`, `ln_f`, `ln_1`, `ln_2` is `norm`;
/// 3. one containing `embed` or `embd` (GGUF's `token_embd`) or named `wte`, `wpe` is `embedding`;
/// 4. otherwise the op's weight decides by rank: 2 → `linear`, 3 or more → `conv`, else `other`.
public enum ModelAnatomy {
    static let parameterSuffixes: Set<String> = ["weight", "bias", "gamma", "beta"]
    static let blockNames: Set<String> = ["layer", "layers", "h", "blk", "block", "blocks"]
    static let normNames: Set<String> = ["ln", "ln_f", "ln_1", "ln_2"]
    static let embeddingNames: Set<String> = ["wte", "wpe"]

    /// The role of each tensor, in the order given.
    public static func roles(of tensors: [TensorDescriptor]) -> [TensorRole] {
        let ops = tensors.map { opName(of: $0.name) }
        var weightShapeByOp: [String: [Int]] = [:]
        for (tensor, op) in zip(tensors, ops) where tensor.name.hasSuffix("weight") || weightShapeByOp[op] == nil {
            weightShapeByOp[op] = tensor.shape
        }
        return zip(tensors, ops).map { tensor, op in
            TensorRole(name: tensor.name, op: op,
                       opType: opType(op: op, dtype: tensor.dtype, weightShape: weightShapeByOp[op] ?? tensor.shape),
                       layer: layer(of: op))
        }
    }

    static func opName(of name: String) -> String {
        let components = name.split(separator: ".", omittingEmptySubsequences: false)
        guard components.count > 1, let last = components.last, parameterSuffixes.contains(String(last)) else { return name }
        return components.dropLast().joined(separator: ".")
    }

    static func opType(op: String, dtype: DType, weightShape: [Int]) -> OpType {
        guard dtype.isFloatingPoint else { return .buffer }
        let last = String(op.split(separator: ".").last ?? Substring(op)).lowercased()
        if last.contains("norm") || normNames.contains(last) { return .norm }
        if last.contains("embed") || last.contains("embd") || embeddingNames.contains(last) { return .embedding }
        switch weightShape.count {
        case 2: return .linear
        case 3...: return .conv
        default: return .other
        }
    }

    static func layer(of op: String) -> String {
        let components = op.split(separator: ".").map(String.init)
        for index in components.indices.dropFirst() where Int(components[index]) != nil && blockNames.contains(components[index - 1]) {
            return components[...index].joined(separator: ".")
        }
        return components.count > 1 ? components.dropLast().joined(separator: ".") : op
    }

    /// Orders names so that numbered parts compare by value (`layer.2` before `layer.10`).
    public static func naturalOrder(_ lhs: String, _ rhs: String) -> Bool {
        let left = lhs.split(separator: ".", omittingEmptySubsequences: false)
        let right = rhs.split(separator: ".", omittingEmptySubsequences: false)
        for (a, b) in zip(left, right) where a != b {
            if let x = Int(a), let y = Int(b) { return x < y }
            return a < b
        }
        return left.count < right.count
    }
}
