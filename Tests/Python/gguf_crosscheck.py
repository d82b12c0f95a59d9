#!/usr/bin/env python3
"""Cross-checks Shrink's GGUF reader against the `gguf` package (PyPI).

    gguf_crosscheck.py write <folder>
        Writes <folder>/synthetic.gguf: one tensor per ggml type Shrink reads (random but valid
        blocks: finite f16 scales, random codes; 3 rows of two blocks each), metadata of every GGUF
        value type including nested arrays, and general.alignment 64. Writes <folder>/expected.safetensors
        with each tensor as `gguf.quants.dequantize` decodes it (F32), and prints the metadata as JSON.
    gguf_crosscheck.py decode <file.gguf> <out.safetensors> [name ...]
        Decodes the named tensors (default: all) of an existing GGUF with `gguf.quants.dequantize`.
    gguf_crosscheck.py compare <a.gguf> <b.gguf>
        Reads both files with `gguf.GGUFReader` and exits 1 unless they hold the same metadata
        (keys, value types and values) and the same tensors (names, ggml types, shapes and raw
        bytes); prints the counts compared as JSON.
"""
import json
import sys

import numpy as np
from safetensors.numpy import save_file

import gguf
from gguf import GGMLQuantizationType as T

# (type, offsets of f16 scale fields within a block)
TYPES = [
    (T.F32, []), (T.F16, []), (T.BF16, []),
    (T.Q4_0, [0]), (T.Q4_1, [0, 2]), (T.Q5_0, [0]), (T.Q5_1, [0, 2]), (T.Q8_0, [0]),
    (T.Q2_K, [80, 82]), (T.Q3_K, [108]), (T.Q4_K, [0, 2]), (T.Q5_K, [0, 2]), (T.Q6_K, [208]),
    (T.IQ4_NL, [0]), (T.IQ4_XS, [0]),
]


def random_blocks(rng, qtype, scale_offsets, rows, blocks_per_row):
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    if qtype in (T.F32, T.F16, T.BF16):
        values = rng.standard_normal((rows, blocks_per_row * block_size)).astype(np.float32)
        if qtype == T.F32:
            return values.view(np.uint8)
        if qtype == T.F16:
            return values.astype(np.float16).view(np.uint8)
        return (values.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    data = rng.integers(0, 256, size=(rows * blocks_per_row, type_size), dtype=np.uint8)
    for offset in scale_offsets:
        scales = (rng.standard_normal(rows * blocks_per_row) * 0.05).astype(np.float16)
        data[:, offset:offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return data.reshape(rows, blocks_per_row * type_size)


def write(folder):
    rng = np.random.default_rng(20261201)
    writer = gguf.GGUFWriter(folder + "/synthetic.gguf", "llama")
    writer.data_alignment = 64
    writer.add_uint32("general.alignment", 64)
    writer.add_uint8("test.u8", 200)
    writer.add_int8("test.i8", -100)
    writer.add_uint16("test.u16", 60000)
    writer.add_int16("test.i16", -30000)
    writer.add_uint32("test.u32", 4000000000)
    writer.add_int32("test.i32", -2000000000)
    writer.add_float32("test.f32", 0.5)
    writer.add_bool("test.bool", True)
    writer.add_string("test.string", "héllo ✓")
    writer.add_uint64("test.u64", 2**63 + 5)
    writer.add_int64("test.i64", -(2**62))
    writer.add_float64("test.f64", 1.25)
    writer.add_array("test.strings", ["a", "", "ü"])
    writer.add_array("test.ints", [1, -2, 3])
    writer.add_array("test.nested", [[1, 2], [3]])
    expected = {}
    for qtype, offsets in TYPES:
        block_size, _ = gguf.GGML_QUANT_SIZES[qtype]
        raw = random_blocks(rng, qtype, offsets, rows=3, blocks_per_row=2 if block_size > 1 else 37)
        name = "tensor." + qtype.name
        writer.add_tensor(name, raw, raw_dtype=qtype)
        expected[name] = np.ascontiguousarray(gguf.quants.dequantize(raw, qtype).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    save_file(expected, folder + "/expected.safetensors")
    print(json.dumps({"types": [t.name for t, _ in TYPES]}))


def decode(path, out, names):
    reader = gguf.GGUFReader(path)
    expected = {}
    for tensor in reader.tensors:
        if names and tensor.name not in names:
            continue
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        expected[tensor.name] = np.ascontiguousarray(values.reshape([int(d) for d in reversed(tensor.shape)]))
    save_file(expected, out)
    print(json.dumps({"tensors": sorted(expected)}))


def compare(first, second):
    a, b = gguf.GGUFReader(first), gguf.GGUFReader(second)

    def fields(reader):
        return {key: (list(field.types), [bytes(field.parts[i]) for i in field.data])
                for key, field in reader.fields.items() if not key.startswith("GGUF.")}

    fa, fb = fields(a), fields(b)
    problems = [f"metadata {key}" for key in sorted(set(fa) | set(fb)) if fa.get(key) != fb.get(key)]
    ta, tb = {t.name: t for t in a.tensors}, {t.name: t for t in b.tensors}
    for name in sorted(set(ta) | set(tb)):
        x, y = ta.get(name), tb.get(name)
        if x is None or y is None:
            problems.append(f"tensor {name} is in one file only")
        elif x.tensor_type != y.tensor_type or list(x.shape) != list(y.shape):
            problems.append(f"tensor {name}: {x.tensor_type.name} {list(x.shape)} against {y.tensor_type.name} {list(y.shape)}")
        elif not np.array_equal(np.asarray(x.data).view(np.uint8).ravel(), np.asarray(y.data).view(np.uint8).ravel()):
            problems.append(f"tensor {name}: bytes differ")
    if problems:
        sys.exit("; ".join(problems[:10]))
    print(json.dumps({"metadata": len(fa), "tensors": len(ta)}))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    elif sys.argv[1] == "decode":
        decode(sys.argv[2], sys.argv[3], set(sys.argv[4:]))
    elif sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: gguf_crosscheck.py write <folder> | decode <file.gguf> <out.safetensors> [name ...] | compare <a.gguf> <b.gguf>")
