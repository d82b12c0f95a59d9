#!/usr/bin/env python3
"""STS-B Spearman ×100 of a sentence encoder run by `shrink embed` (a stand-in until `shrink compare`).

    scripts/stsb_spearman.py [--model <path>] [--data <sts-test.csv>]

Reads the tab-separated STS-B file (genre, file, year, id, score, sentence 1, sentence 2, extra
fields ignored), embeds both sides with the release `shrink embed`, and prints the Spearman rank
correlation (ties averaged) between cosine similarity and the gold score. Needs numpy, safetensors.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ranks(values):
    order = np.argsort(values, kind="mergesort")
    positions = np.empty(len(values))
    positions[order] = np.arange(len(values))
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.zeros(len(counts))
    np.add.at(sums, inverse, positions)
    return sums[inverse] / counts[inverse]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "stsb", "sts-test.csv"))
    arguments = parser.parse_args()
    rows = [line.rstrip("\n").split("\t") for line in open(arguments.data, encoding="utf-8") if line.strip()]
    scores = np.array([float(row[4]) for row in rows])
    shrink = os.path.join(ROOT, ".build", "release", "shrink")
    subprocess.run(["swift", "build", "-c", "release", "--product", "shrink", "--quiet"], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as folder:
        embeddings = []
        for side in (5, 6):
            text = os.path.join(folder, f"side{side}.txt")
            with open(text, "w", encoding="utf-8") as handle:
                handle.write("".join(row[side] + "\n" for row in rows))
            output = os.path.join(folder, f"side{side}.safetensors")
            subprocess.run([shrink, "embed", "--model", arguments.model, "--input", text, "--output", output], check=True,
                           stdout=sys.stderr)
            embeddings.append(load_file(output)["embeddings"].astype(np.float64))
    a, b = embeddings
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    spearman = np.corrcoef(ranks(cosine), ranks(scores))[0, 1]
    print(f"STS-B Spearman x100 = {100 * spearman:.2f} over {len(rows)} pairs ({arguments.model})")


if __name__ == "__main__":
    main()
