#!/usr/bin/env python3
"""Checks that Shrink decodes GGUF files exactly as the `gguf` package (PyPI) does.

For each file: `shrink decompress` writes every tensor as dense safetensors (block types decoded
through Shrink's weight encodings), and each tensor is compared bit for bit (NaN as NaN) with
`gguf.quants.dequantize` of the same bytes. Prints one line per file: the ggml types it holds and
the tensors checked; exits 1 on the first mismatch (naming the tensor, element and values).

    scripts/check_gguf_decoding.py [--shrink .build/release/shrink] model.gguf [more.gguf ...]
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

import ml_dtypes  # noqa: F401 (registers bfloat16 with numpy: BF16 tensors stay BF16)
import numpy as np
from safetensors.numpy import load_file

import gguf


def check(shrink, path):
    with tempfile.TemporaryDirectory() as folder:
        dense = os.path.join(folder, "dense.safetensors")
        subprocess.run([shrink, "decompress", "--input", path, "--output", dense], check=True, stdout=subprocess.DEVNULL)
        decoded = load_file(dense)
        reader = gguf.GGUFReader(path)
        types = collections.Counter()
        for tensor in reader.tensors:
            expected = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
            expected = expected.reshape([int(d) for d in reversed(tensor.shape)])
            actual = decoded[tensor.name].astype(np.float32)
            if actual.shape != expected.shape:
                sys.exit(f"{path}: {tensor.name}: shape {actual.shape}, gguf says {expected.shape}")
            a, e = actual.reshape(-1).view(np.uint32), expected.reshape(-1).view(np.uint32)
            both_nan = np.isnan(actual.reshape(-1)) & np.isnan(expected.reshape(-1))
            bad = np.nonzero((a != e) & ~both_nan)[0]
            if bad.size:
                i = bad[0]
                sys.exit(f"{path}: {tensor.name} ({tensor.tensor_type.name}): element {i} is {actual.reshape(-1)[i]}, "
                         f"gguf.quants says {expected.reshape(-1)[i]} ({bad.size} elements differ)")
            types[tensor.tensor_type.name] += 1
        print(f"{path}: {len(reader.tensors)} tensors identical ({', '.join(f'{n} {t}' for t, n in sorted(types.items()))})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shrink", default=".build/release/shrink")
    parser.add_argument("files", nargs="+")
    arguments = parser.parse_args()
    for path in arguments.files:
        check(arguments.shrink, path)


if __name__ == "__main__":
    main()
