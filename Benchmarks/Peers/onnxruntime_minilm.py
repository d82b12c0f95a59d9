#!/usr/bin/env python3
"""ONNX Runtime next to Shrink on all-MiniLM-L6-v2, driven by PeerBenchmark.

    onnxruntime_minilm.py MODEL_FOLDER WORK_FOLDER

Builds an ONNX graph of the BERT sentence encoder straight from model.safetensors and config.json
(embeddings, self-attention with a padding mask, GELU feed-forward, LayerNorms, mean pooling,
L2 normalization), makes ONNX Runtime's dynamic int8 variant (W8A8, per-channel weights), then
serves timing requests, one JSON object per line on stdin, answered by one JSON line on stdout:

    {"workload": "file.json"}                   load {"name": [[token ids], ...], ...}
    {"variant": "int8", "threads": 2, "run": "batch1", "inputs": "latency"}
        -> {"milliseconds": [per sequence]}
    {"variant": "int8", "threads": 2, "run": "batch32", "inputs": "throughput"}
        -> {"seconds": total}
    {"variant": "int8", "threads": 1, "run": "fidelity", "inputs": "reference", "reference": "embeddings.safetensors"}
        -> {"mean_cosine": m, "min_cosine": n}   (one sequence at a time, against tensor "embeddings")

Needs: python3 -m pip install -r scripts/requirements-peers.txt
"""
import json
import logging
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

from peer_protocol import serve


def build(folder, path, transposed_matmuls=False):
    config = json.load(open(os.path.join(folder, "config.json")))
    weights = load_file(os.path.join(folder, "model.safetensors"))
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_size, epsilon = hidden // heads, config.get("layer_norm_eps", 1e-12)
    nodes, initializers = [], []

    def constant(name, array):
        initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(op, inputs, name, **attributes):
        nodes.append(helper.make_node(op, inputs, [name], name=name + "_node", **attributes))
        return name

    def weight(name):
        return constant(name, weights[name].astype(np.float32))

    def linear(x, prefix, out):
        # y = x · Wᵀ + b with W stored [out, in]: the graph holds Wᵀ, or (transposed_matmuls) W and a
        # Transpose, which OpenVINO reads as a MatMul with transpose_b (what NNCF's GPTQ takes).
        if transposed_matmuls:
            wt = node("Transpose", [weight(prefix + ".weight")], out + "_wt", perm=[1, 0])
        else:
            wt = constant(prefix + ".weight.T", weights[prefix + ".weight"].astype(np.float32).T.copy())
        return node("Add", [node("MatMul", [x, wt], out + "_mm"), weight(prefix + ".bias")], out)

    def layer_norm(x, prefix, out):
        return node("LayerNormalization", [x, weight(prefix + ".weight"), weight(prefix + ".bias")], out, axis=-1, epsilon=epsilon)

    # Embeddings: word + position + token type 0.
    words = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "words")
    length = node("Gather", [node("Shape", ["input_ids"], "ids_shape"), constant("one", np.array(1, np.int64))], "length")
    positions = node("Range", [constant("zero", np.array(0, np.int64)), length, constant("step", np.array(1, np.int64))], "positions")
    position_rows = node("Gather", [weight("embeddings.position_embeddings.weight"), positions], "position_rows")
    type_row = constant("type_row", weights["embeddings.token_type_embeddings.weight"][0].astype(np.float32))
    states = node("Add", [node("Add", [words, position_rows], "emb_sum"), type_row], "emb_all")
    states = layer_norm(states, "embeddings.LayerNorm", "emb_norm")
    # Additive mask [batch, 1, 1, seq]: 0 where attended, −10000 on padding.
    mask = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    bias = node("Mul", [node("Sub", [constant("one_f", np.array(1, np.float32)), mask], "mask_inv"),
                        constant("neg", np.array(-10000, np.float32))], "mask_bias")
    bias = node("Unsqueeze", [bias, constant("axes12", np.array([1, 2], np.int64))], "mask_bias4")
    split_shape = constant("split_shape", np.array([0, 0, heads, head_size], np.int64))
    merge_shape = constant("merge_shape", np.array([0, 0, hidden], np.int64))
    scale = constant("scale", np.array(1 / math.sqrt(head_size), np.float32))
    for index in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{index}."
        def heads_of(name):
            projected = linear(states, p + "attention.self." + name, f"l{index}_{name}")
            return node("Transpose", [node("Reshape", [projected, split_shape], f"l{index}_{name}_r")], f"l{index}_{name}_t", perm=[0, 2, 1, 3])
        q, k, v = heads_of("query"), heads_of("key"), heads_of("value")
        k_t = node("Transpose", [k], f"l{index}_kt", perm=[0, 1, 3, 2])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k_t], f"l{index}_qk"), scale], f"l{index}_scaled"), bias], f"l{index}_scores")
        context = node("MatMul", [node("Softmax", [scores], f"l{index}_probs", axis=-1), v], f"l{index}_ctx")
        context = node("Reshape", [node("Transpose", [context], f"l{index}_ctx_t", perm=[0, 2, 1, 3]), merge_shape], f"l{index}_ctx_m")
        attended = linear(context, p + "attention.output.dense", f"l{index}_attn_out")
        attended = layer_norm(node("Add", [attended, states], f"l{index}_res1"), p + "attention.output.LayerNorm", f"l{index}_ln1")
        inner = linear(attended, p + "intermediate.dense", f"l{index}_inter")
        # GELU with erf: x · (1 + erf(x / √2)) / 2.
        erf = node("Erf", [node("Div", [inner, constant(f"sqrt2_{index}", np.array(math.sqrt(2), np.float32))], f"l{index}_div")], f"l{index}_erf")
        gelu = node("Mul", [node("Mul", [inner, node("Add", [erf, constant(f"one_{index}", np.array(1, np.float32))], f"l{index}_erf1")],
                                  f"l{index}_g"), constant(f"half_{index}", np.array(0.5, np.float32))], f"l{index}_gelu")
        out = linear(gelu, p + "output.dense", f"l{index}_out")
        states = layer_norm(node("Add", [out, attended], f"l{index}_res2"), p + "output.LayerNorm", f"l{index}_ln2")
    # Mean pooling over attended tokens, then L2 normalization.
    mask3 = node("Unsqueeze", [mask, constant("axis2", np.array([2], np.int64))], "mask3")
    summed = node("ReduceSum", [node("Mul", [states, mask3], "masked"), constant("axis1", np.array([1], np.int64))], "summed", keepdims=0)
    counts = node("ReduceSum", [mask3, constant("axis1b", np.array([1], np.int64))], "counts", keepdims=0)
    pooled = node("Div", [summed, node("Max", [counts, constant("tiny", np.array(1e-9, np.float32))], "counts_safe")], "pooled")
    norm = node("ReduceL2", [pooled], "norm", axes=[1], keepdims=1)
    node("Div", [pooled, node("Max", [norm, constant("tiny2", np.array(1e-12, np.float32))], "norm_safe")], "embedding")
    graph = helper.make_graph(
        nodes, "minilm",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def fp32_graph(folder, work, transposed_matmuls=False):
    """The fp32 ONNX graph in `work`, built once (written atomically); see `build`."""
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "minilm-fp32" + ("-transposed" if transposed_matmuls else "") + ".onnx")
    if not os.path.exists(path):
        build(folder, path + ".tmp", transposed_matmuls)
        os.replace(path + ".tmp", path)
    return path


def main():
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    folder, work = sys.argv[1], sys.argv[2]
    paths = {"fp32": fp32_graph(folder, work), "int8": os.path.join(work, "minilm-int8-dynamic.onnx")}
    if not os.path.exists(paths["int8"]):
        logging.disable(logging.WARNING)
        quantize_dynamic(paths["fp32"], paths["int8"] + ".tmp.onnx", weight_type=QuantType.QInt8, per_channel=True)
        os.replace(paths["int8"] + ".tmp.onnx", paths["int8"])
    sessions = {}

    def runner(variant, threads):
        key = (variant, threads)
        if key not in sessions:
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            session = ort.InferenceSession(paths[variant], options, providers=["CPUExecutionProvider"])
            sessions[key] = lambda feeds: session.run(["embedding"], feeds)[0]
        return sessions[key]

    serve({"ready": list(paths), "onnxruntime": ort.__version__}, runner)


if __name__ == "__main__":
    main()
