#!/usr/bin/env python3
"""Writes the Qwen3 cross-check fixture: a small random Qwen3-shaped GGUF (per-head q/k RMSNorm,
NeoX rotary positions, grouped-query attention with a head size apart from hidden / heads, an
untied output layer, linear weights in F16, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0) with a byte-level BPE
tokenizer trained on a few lines (pre-tokenizer `qwen2`), and llama.cpp's token ids and logits for a
text, computed by `llama_logits.cpp` linked against the llama.cpp build of
`../shared/peers/llama.cpp/build.sh`, and the exact logits (float64 forward pass over the
dequantized weights, `exact-logits.f32`) that both runtimes approximate.

    python3 -m pip install gguf numpy regex
    scripts/qwen3-fixture/make_fixture.py [output folder] (default: Tests/Fixtures/qwen3-random)
"""
import json
import os
import subprocess
import sys
from collections import Counter

import gguf
import numpy as np
import regex

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUTPUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "Tests/Fixtures/qwen3-random")
BUILD_SCRIPT = os.path.join(ROOT, "..", "shared", "peers", "llama.cpp", "build.sh")

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN = 64, 2, 4, 2, 32, 128
QWEN2_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
TRAINING = """The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.
In 2025, the model's weights were stored as they are computed: the kernels read them directly.
Tokenizers split text into chunks, then merge the most frequent pairs of symbols, again and again."""
TEXT = """The fox's 3 dogs DON'T sleep... they run!\n\n  Weights, as stored, are computed: 42 times (x2).\tOK"""


def byte_symbols():
    """GPT-2's printable character for each byte."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    symbols, extra = {}, 256
    for byte in range(256):
        if byte in keep:
            symbols[byte] = chr(byte)
        else:
            symbols[byte] = chr(extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def train_bpe(text, merges_wanted):
    """Byte-level BPE merges learnt from `text` chunked by Qwen2's rule (most frequent pair first)."""
    table = byte_symbols()
    words = Counter(tuple(table[b] for b in chunk.encode()) for chunk in regex.findall(QWEN2_SPLIT, text))
    merges = []
    for _ in range(merges_wanted):
        pairs = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs.items(), key=lambda item: (item[1], item[0]))[0]
        merges.append(best)
        merged = Counter()
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += count
        words = merged
    return merges


def exact_logits(model_path, ids):
    """Qwen3's forward pass in float64 over the dequantized weights (no activation rounding): the
    exact values both runtimes approximate."""
    reader = gguf.GGUFReader(model_path)
    weights = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(
        [int(d) for d in reversed(t.shape)]) for t in reader.tensors}
    eps = 1e-6

    def rms(x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w

    def rope(x):
        half = HEAD_DIM // 2
        angles = np.arange(len(ids))[:, None] * 1_000_000.0 ** (-2 * np.arange(half) / HEAD_DIM)
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    count = len(ids)
    x = weights["token_embd.weight"][ids]
    mask = np.triu(np.full((count, count), -np.inf), 1)
    for layer in range(LAYERS):
        w = lambda name: weights[f"blk.{layer}.{name}.weight"]
        h = rms(x, w("attn_norm"))
        q = rope(rms((h @ w("attn_q").T).reshape(count, HEADS, HEAD_DIM), w("attn_q_norm")))
        k = rope(rms((h @ w("attn_k").T).reshape(count, KV_HEADS, HEAD_DIM), w("attn_k_norm")))
        v = (h @ w("attn_v").T).reshape(count, KV_HEADS, HEAD_DIM)
        heads = []
        for head in range(HEADS):
            group = head // (HEADS // KV_HEADS)
            scores = q[:, head] @ k[:, group].T / np.sqrt(HEAD_DIM) + mask
            scores = np.exp(scores - scores.max(axis=1, keepdims=True))
            heads.append(scores / scores.sum(axis=1, keepdims=True) @ v[:, group])
        x = x + np.concatenate(heads, axis=1) @ w("attn_output").T
        h = rms(x, w("ffn_norm"))
        gate = h @ w("ffn_gate").T
        x = x + (gate / (1 + np.exp(-gate)) * (h @ w("ffn_up").T)) @ w("ffn_down").T
    return rms(x, weights["output_norm.weight"]) @ weights["output.weight"].T


def main():
    rng = np.random.default_rng(2026)
    merges = train_bpe(TRAINING, 60)
    tokens = byte_symbols() + [a + b for a, b in merges] + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [gguf.TokenType.NORMAL] * (len(tokens) - 3) + [gguf.TokenType.CONTROL] * 3
    vocabulary = len(tokens)
    os.makedirs(OUTPUT, exist_ok=True)
    model_path = os.path.join(OUTPUT, "model.gguf")
    writer = gguf.GGUFWriter(model_path, "qwen3")
    writer.add_name("random qwen3 fixture")
    writer.add_context_length(256)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([f"{a} {b}" for a, b in merges])
    writer.add_bos_token_id(vocabulary - 3)
    writer.add_eos_token_id(vocabulary - 1)
    writer.add_add_bos_token(False)

    def linear(name, rows, columns, qtype, scale=1.0):
        weights = (scale * rng.standard_normal((rows, columns)) / np.sqrt(columns)).astype(np.float32)
        if qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(name, weights.astype(np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(weights, qtype), raw_dtype=qtype)

    def norm(name, size):
        writer.add_tensor(name, (1 + 0.2 * rng.standard_normal(size)).astype(np.float32))

    Q = gguf.GGMLQuantizationType
    linear("token_embd.weight", vocabulary, HIDDEN, Q.Q8_0)
    kinds = [[Q.Q4_0, Q.Q5_0, Q.Q8_0, Q.Q4_1, Q.Q5_1, Q.F16, Q.Q8_0], [Q.Q8_0, Q.Q4_1, Q.F16, Q.Q5_0, Q.Q4_0, Q.Q5_1, Q.Q4_0]]
    for layer in range(LAYERS):
        q, k, v, o, gate, up, down = kinds[layer]
        prefix = f"blk.{layer}."
        norm(prefix + "attn_norm.weight", HIDDEN)
        linear(prefix + "attn_q.weight", HEADS * HEAD_DIM, HIDDEN, q)
        linear(prefix + "attn_k.weight", KV_HEADS * HEAD_DIM, HIDDEN, k)
        linear(prefix + "attn_v.weight", KV_HEADS * HEAD_DIM, HIDDEN, v)
        norm(prefix + "attn_q_norm.weight", HEAD_DIM)
        norm(prefix + "attn_k_norm.weight", HEAD_DIM)
        linear(prefix + "attn_output.weight", HIDDEN, HEADS * HEAD_DIM, o)
        norm(prefix + "ffn_norm.weight", HIDDEN)
        linear(prefix + "ffn_gate.weight", FFN, HIDDEN, gate)
        linear(prefix + "ffn_up.weight", FFN, HIDDEN, up)
        linear(prefix + "ffn_down.weight", HIDDEN, FFN, down)
    norm("output_norm.weight", HIDDEN)
    linear("output.weight", vocabulary, HIDDEN, Q.Q8_0, scale=4.0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    text_path = os.path.join(OUTPUT, "text.txt")
    with open(text_path, "w", encoding="utf-8") as handle:
        handle.write(TEXT)
    binaries = subprocess.run(["bash", BUILD_SCRIPT], check=True, capture_output=True, text=True).stdout.strip()
    source = os.path.dirname(os.path.dirname(binaries))
    tool = os.path.join(os.environ.get("TMPDIR", "/tmp"), "shrink-llama-logits")
    subprocess.run(["g++", "-O2", "-std=c++17", os.path.join(HERE, "llama_logits.cpp"), "-o", tool,
                    "-I", os.path.join(source, "include"), "-I", os.path.join(source, "ggml", "include"),
                    "-L", binaries, "-lllama", "-lggml", "-lggml-base", f"-Wl,-rpath,{binaries}"], check=True)
    dump = os.path.join(OUTPUT, "llama-logits.bin")
    subprocess.run([tool, model_path, text_path, dump], check=True, capture_output=True)
    with open(dump, "rb") as handle:
        count = int(np.frombuffer(handle.read(4), dtype="<i4")[0])
        ids = np.frombuffer(handle.read(4 * count), dtype="<i4")
        width = int(np.frombuffer(handle.read(4), dtype="<i4")[0])
        logits = np.frombuffer(handle.read(), dtype="<f4").reshape(count, width)
    exact = exact_logits(model_path, ids)
    exact.astype("<f4").tofile(os.path.join(OUTPUT, "exact-logits.f32"))
    version = os.path.basename(os.path.dirname(os.path.dirname(source)))
    with open(os.path.join(OUTPUT, "fixture.json"), "w") as handle:
        json.dump({"llama_cpp": version, "text": TEXT, "ids": ids.tolist(), "vocabulary": width,
                   "logit_spread": float(logits.std()), "argmax": logits.argmax(axis=1).tolist(),
                   "min_top_margin": float(np.min(np.diff(np.sort(logits, axis=1)[:, -2:], axis=1))),
                   "llama_cpp_max_error": float(np.abs(logits - exact).max()),
                   "llama_cpp_argmax_agrees_with_exact": int((logits.argmax(axis=1) == exact.argmax(axis=1)).sum())}, handle, indent=1)
    print(f"{model_path}: {os.path.getsize(model_path)} bytes; {count} tokens, logits {logits.shape}, spread {logits.std():.3f}")


if __name__ == "__main__":
    main()
