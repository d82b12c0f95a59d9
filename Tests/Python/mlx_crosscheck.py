#!/usr/bin/env python3
"""Checks an MLX folder written by `shrink export --format mlx` with MLX itself (PyPI `mlx`, CPU).

    mlx_crosscheck.py weights <mlx folder> <decoded.safetensors> <gguf-llama|same>
        Loads model.safetensors with mlx.core.load, reads config.json's quantization block, and
        compares every tensor with `shrink decompress`'s decoding of the same model bit for bit:
        quantized ops through mlx.core.dequantize, the rest as stored. `gguf-llama` maps GGUF names
        to Hugging Face ones and un-permutes query/key rows (llama.cpp's converter permutes them);
        `same` expects the names unchanged. Prints JSON: tensors, quantized, max_abs_difference.
    mlx_crosscheck.py logits <mlx folder> <log-probabilities file>
        Loads the folder with mlx_lm (its Llama model, quantized layers as config.json says), runs
        the windows a `shrink perplexity --kl-base` file holds and prints JSON: the mean and max
        KL-divergence of Shrink's scored rows from MLX's, and how often both pick the same top token.
    mlx_crosscheck.py tokenize <mlx folder> <text file>
        Loads the folder with mlx_lm.utils.load (model and tokenizer, as users do) and prints the
        text's token ids (special tokens parsed, none added) as a JSON array.
    mlx_crosscheck.py embeddings <mlx folder> <sentences file> <shrink embeddings.safetensors>
        A BERT encoder written with mlx.core over the folder's weights (quantized ops through
        mlx.core.quantized_matmul), tokenized by the folder's tokenizer.json, mean-pooled and
        normalized; prints JSON: the mean and min cosine to `shrink embed`'s embeddings.
Exits 1 (with the reason on standard error) when the folder cannot be read as MLX would.
"""
import json
import os
import struct
import sys

import numpy as np
import mlx.core as mx

GGUF_LAYER_OPS = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
GGUF_GLOBALS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def load_folder(folder):
    with open(os.path.join(folder, "config.json")) as handle:
        config = json.load(handle)
    return config, mx.load(os.path.join(folder, "model.safetensors"))


def quantization_of(config, op):
    """(group_size, bits) of `op`, or None when it is not quantized."""
    block = config.get("quantization")
    if block is None:
        return None
    entry = block.get(op, {"group_size": block["group_size"], "bits": block["bits"]})
    if entry is False:
        return None
    return entry["group_size"], entry["bits"]


def unpermute(rows, heads):
    """Undo llama.cpp's query/key permutation: rows as Hugging Face orders them."""
    count, width = rows.shape
    return rows.reshape(heads, count // heads // 2, 2, width).swapaxes(1, 2).reshape(count, width)


def hugging_face_name(name, config):
    """(name, heads to un-permute or None) of a GGUF Llama tensor."""
    parts = name.split(".")
    if len(parts) == 2:
        return GGUF_GLOBALS[parts[0]] + "." + parts[1], None
    _, layer, op, suffix = parts
    heads = {"attn_q": config["num_attention_heads"], "attn_k": config["num_key_value_heads"]}.get(op)
    return f"model.layers.{layer}.{GGUF_LAYER_OPS[op]}.{suffix}", heads


def check_weights(folder, decoded_path, naming):
    config, weights = load_folder(folder)
    decoded = mx.load(decoded_path)
    seen, quantized, worst = set(), 0, 0.0
    for name, reference in decoded.items():
        reference = np.array(reference.astype(mx.float32))
        heads = None
        if naming == "gguf-llama":
            name, heads = hugging_face_name(name, config)
        if heads is not None:
            reference = unpermute(reference, heads)
        op = name[: -len(".weight")] if name.endswith(".weight") else None
        layout = quantization_of(config, op) if op else None
        if layout is not None and op + ".scales" in weights:
            group, bits = layout
            values = mx.dequantize(weights[name], weights[op + ".scales"], weights[op + ".biases"], group_size=group, bits=bits)
            seen.update([name, op + ".scales", op + ".biases"])
            quantized += 1
        elif name in weights:
            values = weights[name]
            seen.add(name)
        else:
            fail(f"{name}: missing from the MLX folder")
        values = np.array(values.astype(mx.float32))
        if values.shape != reference.shape:
            fail(f"{name}: MLX shape {values.shape}, decoded {reference.shape}")
        difference = float(np.max(np.abs(values - reference))) if values.size else 0.0
        worst = max(worst, difference)
        if not np.array_equal(values, reference):
            fail(f"{name}: MLX's values differ from Shrink's decoding by up to {difference}")
    extra = set(weights) - seen
    if extra:
        fail(f"tensors no decoded tensor accounts for: {sorted(extra)[:5]}")
    print(json.dumps({"tensors": len(decoded), "quantized": quantized, "max_abs_difference": worst}))


def read_log_probabilities(path):
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:8] != b"SHRKLP01":
        fail(f"{path}: not a Shrink log-probability file")
    vocabulary, context, chunks, rows_per_chunk, count = struct.unpack_from("<5I", data, 8)
    tokens = np.frombuffer(data, dtype="<i4", count=count, offset=28)
    start = 28 + 4 * count
    row_bytes = 4 + 2 * vocabulary
    rows = []
    for row in range(chunks * rows_per_chunk):
        offset = start + row * row_bytes
        low = struct.unpack_from("<f", data, offset)[0]
        codes = np.frombuffer(data, dtype="<u2", count=vocabulary, offset=offset + 4).astype(np.float64)
        rows.append(low + codes * (-low / 65535))
    return context, chunks, rows_per_chunk, tokens, np.stack(rows)


def check_logits(folder, log_probabilities_path):
    from pathlib import Path
    from mlx_lm.utils import load_model

    model, _ = load_model(Path(folder))
    context, chunks, rows_per_chunk, tokens, shrink = read_log_probabilities(log_probabilities_path)
    first = context // 2
    divergences, same_top = [], 0
    for chunk in range(chunks):
        window = mx.array(tokens[chunk * context:(chunk + 1) * context][None, :].astype(np.int32))
        logits = np.array(model(window)[0].astype(mx.float32)).astype(np.float64)
        for j in range(first, first + rows_per_chunk):
            row = logits[j] - logits[j].max()
            mlx_log = row - np.log(np.exp(row).sum())
            base = shrink[chunk * rows_per_chunk + j - first]
            divergences.append(float(np.sum(np.exp(base) * (base - mlx_log))))
            same_top += int(np.argmax(base) == np.argmax(mlx_log))
    print(json.dumps({"rows": len(divergences), "mean_kld": float(np.mean(divergences)),
                      "max_kld": float(np.max(divergences)), "same_top": same_top / len(divergences)}))


def tokenize(folder, text_path):
    from mlx_lm.utils import load

    _, tokenizer = load(folder)
    with open(text_path, encoding="utf-8") as handle:
        text = handle.read()
    print(json.dumps(tokenizer.encode(text, add_special_tokens=False)))


def linear(weights, config, op, x):
    layout = quantization_of(config, op)
    if layout is not None and op + ".scales" in weights:
        group, bits = layout
        y = mx.quantized_matmul(x, weights[op + ".weight"], weights[op + ".scales"], weights[op + ".biases"],
                                transpose=True, group_size=group, bits=bits)
    else:
        y = x @ weights[op + ".weight"].astype(mx.float32).T
    bias = weights.get(op + ".bias")
    return y if bias is None else y + bias.astype(mx.float32)


def layer_norm(weights, op, x, eps):
    return mx.fast.layer_norm(x, weights[op + ".weight"].astype(mx.float32), weights[op + ".bias"].astype(mx.float32), eps)


def embedding_rows(weights, config, op, ids):
    layout = quantization_of(config, op)
    if layout is not None and op + ".scales" in weights:
        group, bits = layout
        return mx.dequantize(weights[op + ".weight"][ids], weights[op + ".scales"][ids], weights[op + ".biases"][ids],
                             group_size=group, bits=bits)
    return weights[op + ".weight"][ids].astype(mx.float32)


def bert_embed(weights, config, ids):
    """Mean-pooled, normalized BERT embedding of one sentence's token ids."""
    eps = config.get("layer_norm_eps", 1e-12)
    heads = config["num_attention_heads"]
    positions = mx.arange(len(ids))
    ids = mx.array(ids)
    x = (embedding_rows(weights, config, "embeddings.word_embeddings", ids)
         + embedding_rows(weights, config, "embeddings.position_embeddings", positions)
         + embedding_rows(weights, config, "embeddings.token_type_embeddings", mx.zeros_like(ids)))
    x = layer_norm(weights, "embeddings.LayerNorm", x, eps)
    count, hidden = x.shape
    width = hidden // heads
    for layer in range(config["num_hidden_layers"]):
        prefix = f"encoder.layer.{layer}."
        q, k, v = (linear(weights, config, prefix + "attention.self." + name, x).reshape(count, heads, width).transpose(1, 0, 2)
                   for name in ("query", "key", "value"))
        scores = mx.softmax((q @ k.transpose(0, 2, 1)) / np.sqrt(width), axis=-1)
        attended = (scores @ v).transpose(1, 0, 2).reshape(count, hidden)
        x = layer_norm(weights, prefix + "attention.output.LayerNorm",
                       x + linear(weights, config, prefix + "attention.output.dense", attended), eps)
        inner = nn_gelu(linear(weights, config, prefix + "intermediate.dense", x))
        x = layer_norm(weights, prefix + "output.LayerNorm", x + linear(weights, config, prefix + "output.dense", inner), eps)
    pooled = x.mean(axis=0)
    return pooled / mx.linalg.norm(pooled)


def nn_gelu(x):
    return 0.5 * x * (1 + mx.erf(x / np.sqrt(2)))


def check_embeddings(folder, sentences_path, shrink_path):
    from tokenizers import Tokenizer

    config, weights = load_folder(folder)
    tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(config.get("max_position_embeddings", 512))
    with open(sentences_path, encoding="utf-8") as handle:
        sentences = [line.rstrip("\n") for line in handle if line.strip()]
    shrink = np.array(mx.load(shrink_path)["embeddings"])
    if shrink.shape[0] != len(sentences):
        fail(f"{shrink_path}: {shrink.shape[0]} embeddings for {len(sentences)} sentences")
    cosines = []
    for sentence, expected in zip(sentences, shrink):
        mine = np.array(bert_embed(weights, config, tokenizer.encode(sentence).ids))
        cosines.append(float(mine @ expected / np.linalg.norm(expected)))
    print(json.dumps({"sentences": len(cosines), "mean_cosine": float(np.mean(cosines)), "min_cosine": float(np.min(cosines))}))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "weights":
        check_weights(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 4 and sys.argv[1] == "logits":
        check_logits(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "tokenize":
        tokenize(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "embeddings":
        check_embeddings(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main()
