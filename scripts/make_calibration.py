#!/usr/bin/env python3
"""Builds the calibration texts of the shipped calibrated recipes from the calibration splits in
../shared/data (never the test splits).

data/calibration/minilm-calibration.txt (MiniLM's recipes):

- 2,048 distinct sentences of the STS Benchmark train split, evenly spaced over the file so that
  every genre is represented (short inputs, like the sentences MiniLM embeds);
- 128 WikiText-2 validation paragraphs of more than 200 characters, evenly spaced, with the
  tokenized release's "@.@"-style joiners undone (long inputs, up to the 256-token truncation).

One paragraph follows every 16 sentences, so any prefix (a recipe's "limit") keeps the mix.

data/calibration/smollm2-calibration.txt (SmolLM2's recipes): 256 WikiText-2 validation paragraphs
of more than 200 characters, evenly spaced, as the file writes them (the text a perplexity run
reads is in the same tokenized form), one per line.

data/calibration/minilm-tuning.txt (what `"tune"` trains MiniLM's LUTs, biases and norms on): the
first 1,088 lines of minilm-calibration.txt (the shipped recipes' calibration limit), then every
other distinct STS Benchmark train sentence that the test split does not also contain, shuffled
(seed 11).

data/calibration/stsb-train-scan.csv (what `shrink sensitivity --data` scans MiniLM's searched
recipes on): 200 STS Benchmark train pairs, rows as in the split's file, drawn at random (seed 7) in
the test split's genre proportions (90 captions, 37 forum posts, 73 news sentences; the first 200
test pairs are all captions).
Usage: scripts/make_calibration.py [shared data folder]
"""
import os
import random
import sys

data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
seen, sentences = set(), []
with open(os.path.join(data, "stsb", "sts-train.csv"), encoding="utf-8") as f:
    for line in f:
        for sentence in line.rstrip("\n").split("\t")[5:7]:
            sentence = sentence.strip()
            if sentence and sentence not in seen:
                seen.add(sentence)
                sentences.append(sentence)
sentences = [sentences[i * len(sentences) // 2048] for i in range(2048)]

with open(os.path.join(data, "wikitext-2", "valid.txt"), encoding="utf-8") as f:
    paragraphs = [p.strip() for p in f if len(p.strip()) > 200 and not p.strip().startswith("=")]
paragraphs = [paragraphs[i * len(paragraphs) // 128] for i in range(128)]
paragraphs = [p.replace(" @.@ ", ".").replace(" @,@ ", ",").replace(" @-@ ", "-") for p in paragraphs]

lines = []
for index, sentence in enumerate(sentences):
    lines.append(sentence)
    if index % 16 == 15:
        lines.append(paragraphs[index // 16])
out = os.path.join(os.path.dirname(__file__), "..", "data", "calibration", "minilm-calibration.txt")
with open(out, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
print(f"wrote {len(lines)} lines to {os.path.normpath(out)}")

with open(os.path.join(data, "wikitext-2", "valid.txt"), encoding="utf-8") as f:
    raw = [p.strip() for p in f if len(p.strip()) > 200 and not p.strip().startswith("=")]
raw = [raw[i * len(raw) // 256] for i in range(256)]
out = os.path.join(os.path.dirname(__file__), "..", "data", "calibration", "smollm2-calibration.txt")
with open(out, "w", encoding="utf-8") as f:
    f.write("\n".join(raw) + "\n")
print(f"wrote {len(raw)} lines to {os.path.normpath(out)}")

with open(os.path.join(data, "stsb", "sts-test.csv"), encoding="utf-8") as f:
    test = {s.strip() for line in f for s in line.rstrip("\n").split("\t")[5:7]}
head = lines[:1088]
used = set(head)
rest = [s for s in seen if s not in used and s not in test]
rest.sort()
random.Random(11).shuffle(rest)
out = os.path.join(os.path.dirname(__file__), "..", "data", "calibration", "minilm-tuning.txt")
with open(out, "w", encoding="utf-8") as f:
    f.write("\n".join(head + rest) + "\n")
print(f"wrote {len(head) + len(rest)} lines to {os.path.normpath(out)}")

with open(os.path.join(data, "stsb", "sts-train.csv"), encoding="utf-8") as f:
    rows = f.readlines()
genres = {}
for row in rows:
    genres.setdefault(row.split("\t")[0], []).append(row)
random.seed(7)
pairs = []
for genre, count in [("main-captions", 90), ("main-forum", 37), ("main-news", 73)]:
    pairs += random.sample(genres[genre], count)
random.shuffle(pairs)
out = os.path.join(os.path.dirname(__file__), "..", "data", "calibration", "stsb-train-scan.csv")
with open(out, "w", encoding="utf-8") as f:
    f.writelines(pairs)
print(f"wrote {len(pairs)} pairs to {os.path.normpath(out)}")
