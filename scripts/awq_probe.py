"""Does activation-aware scaling (AWQ) help on top of GPTQ? A probe on one model's calibration statistics.

For every linear layer (but a pooler) in a `shrink calibrate` statistics file (H = XᵀX and Σ|x| per input), the
weight W is quantized to affine `--bits`-bit codes in blocks of 32 inputs by GPTQ (1 % damping,
columns in order), after scaling its inputs by s = (mean|x| / max mean|x|)^α (W·diag(s), H scaled
to diag(1/s)·H·diag(1/s), the scale undone after decoding), with and without a randomized Hadamard
rotation (blocks of 128 or 64) applied after the scale. Printed per layer and averaged: the
relative output error tr(ΔW H ΔWᵀ) / tr(W H Wᵀ) for α = 0 (no AWQ), 0.25 and 0.5, and the best α's
error as a fraction of α = 0's.

    python3 scripts/awq_probe.py <stats> <model.safetensors> [bits]

Needs numpy and scipy. A measurement tool, not part of the library.
"""
import json
import struct
import sys

import numpy as np
from scipy.linalg import hadamard

DTYPES = {"F64": np.float64, "F32": np.float32, "I64": np.int64}


def load(path):
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(length))
        tensors = {}
        for name, entry in header.items():
            if name == "__metadata__" or entry["dtype"] not in DTYPES:
                continue
            begin, end = entry["data_offsets"]
            f.seek(8 + length + begin)
            tensors[name] = np.frombuffer(f.read(end - begin), dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def gptq(w, h, bits, block=32, damping=0.01):
    w = w.copy()
    n = w.shape[1]
    h = h + np.eye(n) * damping * np.mean(np.diag(h))
    u = np.linalg.cholesky(np.linalg.inv(h)).T
    q = np.zeros_like(w)
    top = 2 ** bits - 1
    for start in range(0, n, block):
        lo = w[:, start:start + block].min(1, keepdims=True)
        hi = w[:, start:start + block].max(1, keepdims=True)
        scale = np.where(hi > lo, (hi - lo) / top, 1.0)
        zero = np.round(-lo / scale)
        for j in range(start, min(start + block, n)):
            column = (np.clip(np.round(w[:, j:j + 1] / scale) + zero, 0, top) - zero) * scale
            q[:, j:j + 1] = column
            w[:, j + 1:] -= ((w[:, j:j + 1] - column) / u[j, j]) @ u[j:j + 1, j + 1:]
    return q


def relative_error(w, decoded, h):
    d = w - decoded
    return np.einsum("ij,jk,ik->", d, h, d) / np.einsum("ij,jk,ik->", w, h, w)


def main():
    stats, weights = load(sys.argv[1]), load(sys.argv[2])
    bits = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    alphas = [0.0, 0.25, 0.5]
    totals = {}
    inputs = {k[: -len(".input_correlation")]: k for k in stats if k.endswith(".input_correlation")}
    # Ops that share an input are recorded once, under one of them (BERT's query and value under key).
    shared = {op.replace(".key", suffix): op for op in inputs if op.endswith("attention.self.key") for suffix in (".query", ".value")}
    for op in sorted(set(inputs) | set(shared)):
        key = inputs[shared.get(op, op)]
        if op + ".weight" not in weights or op.startswith("pooler"):
            continue
        h = stats[key]
        w = weights[op + ".weight"].astype(np.float64)
        n = w.shape[1]
        sums = stats[key.replace(".input_correlation", ".input_abs_sum")]
        magnitude = sums / sums.max()
        block = 128 if n % 128 == 0 else 64
        signs = np.random.default_rng(0).choice([-1.0, 1.0], n)
        rotation = np.kron(np.eye(n // block), hadamard(block) / np.sqrt(block)) * signs[None, :]
        row = {}
        for alpha in alphas:
            s = np.maximum(magnitude, 1e-4) ** alpha
            s /= np.sqrt(s.max() * s.min())
            hs = h / np.outer(s, s)
            row[("gptq", alpha)] = relative_error(w, gptq(w * s, hs, bits) / s, h)
            row[("rotated gptq", alpha)] = relative_error(w, (gptq((w * s) @ rotation.T, rotation @ hs @ rotation.T, bits) @ rotation) / s, h)
        for method in ("gptq", "rotated gptq"):
            best = min(row[(method, a)] for a in alphas)
            totals.setdefault((method, "best"), []).append(best / row[(method, 0.0)])
        for k, v in row.items():
            totals.setdefault(k, []).append(v)
        print(op, " ".join(f"{m} α={a}: {v:.5f}" for (m, a), v in row.items()), flush=True)
    for (method, alpha), values in totals.items():
        label = "best α / α=0" if alpha == "best" else f"α={alpha}"
        print(f"mean over {len(values)} layers, {method}, {label}: {np.mean(values):.5f} (min {np.min(values):.5f})")


if __name__ == "__main__":
    main()
