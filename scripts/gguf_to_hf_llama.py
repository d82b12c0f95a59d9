#!/usr/bin/env python3
"""Writes a GGUF Llama model (SmolLM2's Q4_1 file) as a Hugging Face Llama folder, the layout
`transformers` checkpoints use: `model.safetensors` (every tensor decoded to F32 by the `gguf`
package, named `model.layers.N.self_attn.q_proj.weight` …, query and key rows un-permuted back to
Hugging Face's rotate-halves order that llama.cpp's converter permutes for ggml), `config.json`,
`tokenizer.json` (byte-level BPE: the vocabulary, merges, special tokens and pre-tokenizer the GGUF
metadata names) and `tokenizer_config.json` (BOS/EOS, the chat template).

No Hugging Face Llama can be fetched here, so this folder stands in for one: Shrink must load it
and compute what it computes from the GGUF file (Tests/ShrinkModelsTests/HuggingFaceLlamaTests.swift).

    python3 -m pip install gguf numpy safetensors
    scripts/gguf_to_hf_llama.py <model.gguf> <output folder>
"""
import json
import os
import sys

import gguf
import numpy as np
from safetensors.numpy import save_file

LAYER_OPS = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
GLOBALS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
LLAMA3_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
PRE_TOKENIZERS = {
    "gpt2": BYTE_LEVEL,
    "smollm": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, BYTE_LEVEL]},
    "llama-bpe": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False},
        dict(BYTE_LEVEL, use_regex=False)]},
}


def field(reader, key):
    """A metadata value as Python data (strings decoded, arrays as lists)."""
    entry = reader.fields.get(key)
    if entry is None:
        return None
    if entry.types[0] == gguf.GGUFValueType.ARRAY:
        if entry.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(entry.parts[i]).decode("utf-8") for i in entry.data]
        return [entry.parts[i][0].item() for i in entry.data]
    if entry.types[0] == gguf.GGUFValueType.STRING:
        return bytes(entry.parts[entry.data[0]]).decode("utf-8")
    return entry.parts[entry.data[0]][0].item()


def hf_permute_back(rows, heads):
    count, width = rows.shape
    return rows.reshape(heads, count // heads // 2, 2, width).swapaxes(1, 2).reshape(count, width)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    source, output = sys.argv[1], sys.argv[2]
    reader = gguf.GGUFReader(source)
    arch = field(reader, "general.architecture")
    if arch != "llama":
        sys.exit(f"{source}: architecture {arch}, expected llama")

    def meta(key, default=None):
        value = field(reader, f"{arch}.{key}")
        return default if value is None else value

    tokens = field(reader, "tokenizer.ggml.tokens")
    heads, kv_heads = meta("attention.head_count"), meta("attention.head_count_kv", meta("attention.head_count"))
    tensors = {}
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        values = values.reshape([int(d) for d in reversed(tensor.shape)])
        parts = tensor.name.split(".")
        if len(parts) == 2:
            name = GLOBALS[parts[0]] + "." + parts[1]
        else:
            _, layer, op, suffix = parts
            name = f"model.layers.{layer}.{LAYER_OPS[op]}.{suffix}"
            if op in ("attn_q", "attn_k"):
                values = hf_permute_back(values, heads if op == "attn_q" else kv_heads)
        tensors[name] = np.ascontiguousarray(values)
    os.makedirs(output, exist_ok=True)
    save_file(tensors, os.path.join(output, "model.safetensors"), metadata={"format": "pt"})

    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": meta("embedding_length"), "intermediate_size": meta("feed_forward_length"),
        "num_hidden_layers": meta("block_count"), "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "head_dim": meta("attention.key_length", meta("embedding_length") // heads),
        "vocab_size": len(tokens), "max_position_embeddings": meta("context_length"),
        "rms_norm_eps": meta("attention.layer_norm_rms_epsilon"), "rope_theta": meta("rope.freq_base", 10000.0),
        "hidden_act": "silu", "tie_word_embeddings": "lm_head.weight" not in tensors, "torch_dtype": "float32",
        "bos_token_id": field(reader, "tokenizer.ggml.bos_token_id"), "eos_token_id": field(reader, "tokenizer.ggml.eos_token_id"),
    }
    with open(os.path.join(output, "config.json"), "w") as handle:
        json.dump(config, handle, indent=2)

    types = field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    pre = field(reader, "tokenizer.ggml.pre") or "gpt2"
    if pre not in PRE_TOKENIZERS:
        sys.exit(f"{source}: pre-tokenizer {pre} has no Hugging Face form here ({sorted(PRE_TOKENIZERS)})")
    added = [{"id": index, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": kind == 3}
             for index, (text, kind) in enumerate(zip(tokens, types)) if kind in (3, 4)]

    def token(key):
        value = field(reader, key)
        return None if value is None else tokens[value]

    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": PRE_TOKENIZERS[pre],
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": token("tokenizer.ggml.unknown_token_id"),
                  "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": {text: index for index, text in enumerate(tokens)},
                  "merges": [merge.split(" ", 1) for merge in field(reader, "tokenizer.ggml.merges")]},
    }
    with open(os.path.join(output, "tokenizer.json"), "w", encoding="utf-8") as handle:
        json.dump(tokenizer, handle, ensure_ascii=False)
    tokenizer_config = {
        "add_bos_token": bool(field(reader, "tokenizer.ggml.add_bos_token")),
        "bos_token": token("tokenizer.ggml.bos_token_id"), "eos_token": token("tokenizer.ggml.eos_token_id"),
        "unk_token": token("tokenizer.ggml.unknown_token_id"), "chat_template": field(reader, "tokenizer.chat_template"),
        "tokenizer_class": "GPT2Tokenizer", "model_max_length": meta("context_length"),
    }
    with open(os.path.join(output, "tokenizer_config.json"), "w", encoding="utf-8") as handle:
        json.dump(tokenizer_config, handle, ensure_ascii=False, indent=2)
    print(f"Wrote {output}: {len(tensors)} tensors, {len(tokens)} tokens, pre-tokenizer {pre}")


if __name__ == "__main__":
    main()
