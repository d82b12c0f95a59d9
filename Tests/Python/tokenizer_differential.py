#!/usr/bin/env python3
"""Random and adversarial Unicode strings with the ids Hugging Face's `tokenizers` (the reference
implementation) gives them, for Shrink's tokenizers to match.

    tokenizer_differential.py <count> <seed> <output.jsonl> <wordpiece tokenizer.json> [<bpe tokenizer.json>]

Each output line is {"text": ..., "wordpiece": [ids], "bpe": [ids]}: WordPiece with its special
tokens ([CLS] … [SEP]) and no truncation; byte-level BPE without added BOS, added tokens in the text
matched (as `tokenizers` always does). Strings mix: code points from every general category (as
Python's unicodedata sees them) and from unassigned ones; all whitespace and line separators;
combining marks after letters; the edges of the CJK blocks and the ranges where references
disagree with Unicode; controls, format and private-use characters; long runs of one character;
ASCII words, digits and punctuation; and the tokenizers' own special tokens.
"""
import json
import random
import sys
import unicodedata

from tokenizers import Tokenizer

CJK_BLOCKS = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F), (0x30000, 0x3134F), (0x31350, 0x323AF)]
WHITESPACE = [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F,
              0x205F, 0x3000, 0x180E, 0x200B, 0xFEFF, 0x1C, 0x1D, 0x1E, 0x1F]
WORDS = ["the", "The", "DON'T", "naïve", "café", "Straße", "ΣΊΣΥΦΟΣ", "İstanbul", "東京", "日本語", "12345", "3.14",
         "e-mail", "co-op", "U.S.A.", "hello,world", "😀", "👩‍💻", "🇫🇷", "<|im_start|>", "<|im_end|>", "[CLS]", "[SEP]",
         "[MASK]", "##ing", "’s", "’", "—", "…", "ﬁ", "Å", "Ǆ", "ǅ", "ß", "ı", "K", "Ω", "\u0301", "a\u0308"]


def category_pools():
    """Assigned code points by general category, and unassigned ones (Cn), from unicodedata."""
    pools = {}
    for point in range(0x110000):
        if 0xD800 <= point <= 0xDFFF:
            continue
        pools.setdefault(unicodedata.category(chr(point)), []).append(point)
    return pools


def make_string(rng, pools, categories):
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.25:
            parts.append(chr(rng.choice(pools[rng.choice(categories)])))
        elif kind < 0.35:
            parts.append(chr(rng.choice(WHITESPACE)))
        elif kind < 0.45:
            low, high = rng.choice(CJK_BLOCKS)
            edge = rng.choice([low, high, high + 1, low - 1])
            parts.append(chr(max(0, edge + rng.randint(-2, 2))))
        elif kind < 0.55:
            letter = rng.choice("aeiouAEIOUnNcCsSzZyY" + "αβγΑΒΓабвАБВ")
            marks = "".join(chr(rng.choice(pools["Mn"])) for _ in range(rng.randint(1, 3)))
            parts.append(letter + marks)
        elif kind < 0.6:
            parts.append(chr(rng.choice(pools[rng.choice(["Cc", "Cf", "Co", "Cn", "Zl", "Zp"])])))
        elif kind < 0.63:
            parts.append(chr(rng.choice(pools[rng.choice(categories)])) * rng.randint(20, 150))
        elif kind < 0.8:
            parts.append(rng.choice(WORDS))
        elif kind < 0.9:
            parts.append("".join(rng.choice("abcdefghij klmnop 0123456789 .,;:!?'\"()[]{}-_/\\@#$%^&*+=<>|~`") for _ in range(rng.randint(1, 20))))
        else:
            parts.append(chr(rng.randint(0x80, 0x10FFFF)))
    text = "".join(parts if rng.random() < 0.5 else [p + " " for p in parts])
    return "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    count, seed, output = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    wordpiece = Tokenizer.from_file(sys.argv[4])
    wordpiece.no_padding()
    wordpiece.no_truncation()
    bpe = Tokenizer.from_file(sys.argv[5]) if len(sys.argv) == 6 else None
    rng = random.Random(seed)
    pools = category_pools()
    categories = sorted(pools)
    texts = [make_string(rng, pools, categories) for _ in range(count)]
    with open(output, "w", encoding="utf-8") as handle:
        for start in range(0, count, 10000):
            batch = texts[start:start + 10000]
            pieces = wordpiece.encode_batch(batch)
            bpes = bpe.encode_batch(batch, add_special_tokens=False) if bpe else [None] * len(batch)
            for text, piece, ids in zip(batch, pieces, bpes):
                line = {"text": text, "wordpiece": piece.ids}
                if ids is not None:
                    line["bpe"] = ids.ids
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
