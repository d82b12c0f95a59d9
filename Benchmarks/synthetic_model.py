#!/usr/bin/env python3
"""Writes a synthetic Llama- or BERT-shaped model folder of about a given parameter count.

    Benchmarks/synthetic_model.py --shape llama --params 1.2e9 --dtype bf16 --output /tmp/llama-1.2b

The folder holds `model.safetensors` and a Hugging Face `config.json`; a Llama-shaped one also a
byte-level BPE `tokenizer.json` (32,000 tokens, GPT-2 pre-tokenizer) trained with PyPI `tokenizers`
on `--tokenizer-text` (default: WikiText-2 validation), so that Shrink can run the model, for
example to calibrate it; with `--calibration N,T` the script also writes `calibration.txt`, N
lines of about T tokens each cut from that text.

Weights are Gaussian with the scale of trained transformer linears (standard deviation
1/sqrt(inputs), a few outlier input channels ten times larger), norms near one, biases near zero.
Tensors are generated and written one at a time, so the script needs one tensor's memory. Names
follow Hugging Face (`model.layers.N.self_attn.q_proj.weight`, `encoder.layer.N.attention.self.query.weight`).
Widths per size: the smallest of a fixed ladder of hidden sizes whose layer count reaches the target.
`--layers N` writes the first N layers only: a slice of that model, for per-layer figures at its widths.
"""
import argparse
import json
import os
import struct

import numpy as np

LADDER = {  # hidden → intermediate (Llama: SwiGLU, 2.75×; BERT: 4×)
    "llama": [(1024, 2816), (2048, 5632), (4096, 11008), (5120, 13824)],
    "bert": [(768, 3072), (1024, 4096), (2048, 8192), (4096, 16384)],
}
VOCABULARY = {"llama": 32000, "bert": 30522}
HEAD_SIZE = {"llama": 128, "bert": 64}


def layer_tensors(shape, index, hidden, intermediate):
    if shape == "llama":
        prefix = f"model.layers.{index}."
        return [
            (prefix + "input_layernorm.weight", [hidden]),
            (prefix + "self_attn.q_proj.weight", [hidden, hidden]),
            (prefix + "self_attn.k_proj.weight", [hidden, hidden]),
            (prefix + "self_attn.v_proj.weight", [hidden, hidden]),
            (prefix + "self_attn.o_proj.weight", [hidden, hidden]),
            (prefix + "post_attention_layernorm.weight", [hidden]),
            (prefix + "mlp.gate_proj.weight", [intermediate, hidden]),
            (prefix + "mlp.up_proj.weight", [intermediate, hidden]),
            (prefix + "mlp.down_proj.weight", [hidden, intermediate]),
        ]
    prefix = f"encoder.layer.{index}."
    tensors = []
    for name in ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"]:
        tensors += [(prefix + name + ".weight", [hidden, hidden]), (prefix + name + ".bias", [hidden])]
    tensors += [(prefix + "attention.output.LayerNorm.weight", [hidden]), (prefix + "attention.output.LayerNorm.bias", [hidden])]
    tensors += [(prefix + "intermediate.dense.weight", [intermediate, hidden]), (prefix + "intermediate.dense.bias", [intermediate])]
    tensors += [(prefix + "output.dense.weight", [hidden, intermediate]), (prefix + "output.dense.bias", [hidden])]
    tensors += [(prefix + "output.LayerNorm.weight", [hidden]), (prefix + "output.LayerNorm.bias", [hidden])]
    return tensors


def layout(shape, params, keep=None):
    for hidden, intermediate in LADDER[shape]:
        per_layer = sum(int(np.prod(s)) for _, s in layer_tensors(shape, 0, hidden, intermediate))
        embedding = VOCABULARY[shape] * hidden
        layers = max(1, round((params - 2 * embedding) / per_layer))
        if layers <= 48 or (hidden, intermediate) == LADDER[shape][-1]:
            break
    layers = min(layers, keep) if keep else layers
    if shape == "llama":
        tensors = [("model.embed_tokens.weight", [VOCABULARY[shape], hidden])]
        for index in range(layers):
            tensors += layer_tensors(shape, index, hidden, intermediate)
        tensors += [("model.norm.weight", [hidden]), ("lm_head.weight", [VOCABULARY[shape], hidden])]
    else:
        tensors = [("embeddings.word_embeddings.weight", [VOCABULARY[shape], hidden]),
                   ("embeddings.position_embeddings.weight", [512, hidden])]
        for index in range(layers):
            tensors += layer_tensors(shape, index, hidden, intermediate)
    return tensors


def values(name, dims, rng):
    if len(dims) == 1:
        center = 1.0 if ("norm" in name.lower() and name.endswith("weight")) else 0.0
        return (center + 0.02 * rng.standard_normal(dims[0], dtype=np.float32)).astype(np.float32)
    rows, columns = dims
    weights = rng.standard_normal((rows, columns), dtype=np.float32)
    weights *= np.float32(1 / np.sqrt(columns))
    outliers = rng.choice(columns, size=max(1, columns // 256), replace=False)
    weights[:, outliers] *= np.float32(10)
    return weights


def config(shape, tensors):
    """The Hugging Face config.json of the layout."""
    hidden = dict(tensors)["model.embed_tokens.weight" if shape == "llama" else "embeddings.word_embeddings.weight"][1]
    layers = sum(1 for name, _ in tensors if name.endswith(("input_layernorm.weight", "attention.output.LayerNorm.weight")))
    intermediate = next(dims[0] for name, dims in tensors if name.endswith(("mlp.gate_proj.weight", "intermediate.dense.weight")))
    common = {"hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
              "num_attention_heads": hidden // HEAD_SIZE[shape], "vocab_size": VOCABULARY[shape]}
    if shape == "llama":
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **common, "num_key_value_heads": hidden // HEAD_SIZE[shape],
                "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
                "tie_word_embeddings": False}
    return {"architectures": ["BertModel"], "model_type": "bert", **common, "max_position_embeddings": 512,
            "type_vocab_size": 1, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}


def train_tokenizer(text_path, folder):
    """A byte-level BPE tokenizer of VOCABULARY["llama"] tokens trained on the text, saved as tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCABULARY["llama"], special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train([text_path], trainer)
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    return tokenizer


def write_calibration(tokenizer, text_path, lines, tokens, path):
    """`lines` lines of about `tokens` tokens each: consecutive windows of the text's tokens, decoded, newlines as spaces."""
    with open(text_path, encoding="utf-8") as handle:
        ids = tokenizer.encode(" ".join(line.strip() for line in handle if line.strip())).ids
    if len(ids) < lines * tokens:
        raise SystemExit(f"{text_path} has {len(ids)} tokens, fewer than {lines} × {tokens}")
    with open(path, "w", encoding="utf-8") as output:
        for index in range(lines):
            window = tokenizer.decode(ids[index * tokens:(index + 1) * tokens])
            output.write(" ".join(window.split()) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=["llama", "bert"], default="llama")
    parser.add_argument("--params", type=float, required=True, help="target parameter count, e.g. 1.2e9")
    parser.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", required=True, help="the model folder to write")
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--tokenizer-text", default=os.path.join(here, "..", "..", "shared", "data", "wikitext-2", "valid.txt"))
    parser.add_argument("--layers", type=int, help="write only the first N layers of the --params model (its widths, a fraction of its size)")
    parser.add_argument("--calibration", help="N,T: also write calibration.txt, N lines of about T tokens (Llama shape)")
    arguments = parser.parse_args()

    tensors = layout(arguments.shape, arguments.params, arguments.layers)
    os.makedirs(arguments.output, exist_ok=True)
    with open(os.path.join(arguments.output, "config.json"), "w") as handle:
        json.dump(config(arguments.shape, tensors), handle, indent=2)
    if arguments.shape == "llama":
        tokenizer = train_tokenizer(arguments.tokenizer_text, arguments.output)
        if arguments.calibration:
            lines, tokens = (int(part) for part in arguments.calibration.split(","))
            write_calibration(tokenizer, arguments.tokenizer_text, lines, tokens, os.path.join(arguments.output, "calibration.txt"))
    size = 2 if arguments.dtype == "bf16" else 4
    header, offset = {"__metadata__": {"format": "pt", "synthetic": f"{arguments.shape} seed {arguments.seed}"}}, 0
    for name, dims in tensors:
        count = int(np.prod(dims))
        header[name] = {"dtype": arguments.dtype.upper(), "shape": dims, "data_offsets": [offset, offset + count * size]}
        offset += count * size
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    rng = np.random.default_rng(arguments.seed)
    weights = os.path.join(arguments.output, "model.safetensors")
    with open(weights, "wb") as output:
        output.write(struct.pack("<Q", len(text)) + text.encode())
        for name, dims in tensors:
            data = values(name, dims, rng)
            if arguments.dtype == "bf16":
                bits = data.view(np.uint32)
                data = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            output.write(data.tobytes())
    parameters = sum(int(np.prod(dims)) for _, dims in tensors)
    print(f"{weights}: {parameters / 1e9:.3f} B parameters, {len(tensors)} tensors, {offset / 1e9:.2f} GB of {arguments.dtype.upper()}")


if __name__ == "__main__":
    main()
