#!/usr/bin/env python3
"""Decode a Shrink compressed model with numpy alone, from the layout documented in docs/FORMAT.md,
and compare every tensor with the dense model Shrink's decompress wrote.

    compressed_crosscheck.py <compressed.safetensors> <dense.safetensors>

Prints one JSON line: {"tensors": N, "encoded": M, "mismatches": [...]}. Needs safetensors, numpy.
Rotated tensors are compared within float rounding (their Hadamard transform runs in another order
here); every other tensor bit for bit.
"""
import json
import sys

import numpy as np
import safetensors

DTYPES = {"F32": np.float32, "F16": np.float16, "I8": np.int8, "U8": np.uint8, "I64": np.int64}


def load(path):
    with open(path, "rb") as handle:
        raw = handle.read()
    tensors = {}
    for name, info in safetensors.deserialize(raw):
        data = bytes(info["data"])
        if info["dtype"] == "BF16":
            bits = np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16
            tensors[name] = bits.view(np.float32).reshape(info["shape"])
        else:
            tensors[name] = np.frombuffer(data, dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    with safetensors.safe_open(path, framework="numpy") as opened:
        metadata = opened.metadata() or {}
    return tensors, metadata


def unpack(packed, bits, count):
    """Values of `bits` bits, least significant bit first, possibly straddling bytes."""
    stream = np.unpackbits(packed.astype(np.uint8), bitorder="little")[: count * bits].reshape(count, bits)
    return (stream.astype(np.int64) << np.arange(bits)).sum(axis=1)


def coordinate(flat, axis, shape):
    stride = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return (flat // stride) % shape[axis]


def decode(encoding, parts, shape, positions):
    kind = encoding["kind"]
    count = len(positions)
    if kind == "dense":
        return parts["values"].astype(np.float32).reshape(-1)
    if kind == "affine":
        bits = encoding["bits"]
        codes = unpack(parts["codes"], bits, count)
        q = codes - (2 ** (bits - 1) if encoding["signed"] else 0)
        granularity = encoding["granularity"]
        if granularity["kind"] == "per_tensor":
            group = np.zeros(count, dtype=np.int64)
        elif granularity["kind"] == "per_channel":
            group = coordinate(positions, granularity["axis"], shape)
        else:
            last, size = shape[-1], granularity["block_size"]
            group = (positions // last) * (-(-last // size)) + (positions % last) // size
        if encoding["symmetric"]:
            zero = 0 if encoding["signed"] else 2 ** (bits - 1)
        else:
            zero = parts["zero_points"].astype(np.int64)[group]
        scales = parts["scales"].astype(np.float32)
        if encoding["scale_dtype"] == "U8":
            # Integer block scales: the block's multiplier times its row's channel scale.
            blocks_per_row = len(scales) // len(parts["channel_scales"])
            scales = scales * parts["channel_scales"].astype(np.float32)[np.arange(len(scales)) // blocks_per_row]
        return (scales[group] * (q - zero).astype(np.float32)).astype(np.float32)
    if kind == "palette":
        bits, width = encoding["bits"], encoding["vector_size"]
        indices = unpack(parts["indices"], bits, count // width)
        lut = parts["lut"].astype(np.float32)
        if encoding["lut_dtype"] == "I8":
            if "lut_zero_points" in parts:
                lut = lut - parts["lut_zero_points"].astype(np.float32)[:, None, None]
            lut = lut * parts["lut_scales"].astype(np.float32)[:, None, None]
        granularity = encoding["granularity"]
        axis = granularity.get("axis", 0)
        starts = positions[::width]
        if granularity["kind"] == "per_tensor":
            group = np.zeros(len(starts), dtype=np.int64)
        else:
            group = coordinate(starts, axis, shape) // granularity["group_size"]
        values = lut[group, indices, :].reshape(-1)
        if encoding["per_channel_scale"]:
            values = values * parts["channel_scales"].astype(np.float32)[coordinate(positions, axis, shape)]
        return values.astype(np.float32)
    raise ValueError(f"unknown encoding {kind}")


def hadamard_rotation(signs, order):
    """R = (1/sqrt(d)) (I kron H_d) diag(s), d = order = 12^t 2^k."""
    size = len(signs)
    twelves, two = 0, order
    while two % 12 == 0:
        twelves, two = twelves + 1, two // 12
    residues = {1, 3, 4, 5, 9}
    paley = np.eye(12)
    for i in range(12):
        for j in range(12):
            if i == 0 and j > 0:
                paley[i, j] += 1
            elif i > 0 and j == 0:
                paley[i, j] -= 1
            elif i > 0 and (j - i) % 11 != 0:
                paley[i, j] += 1 if (j - i) % 11 in residues else -1
    sylvester = np.ones((1, 1))
    while sylvester.shape[0] < two:
        sylvester = np.block([[sylvester, sylvester], [sylvester, -sylvester]])
    block = np.ones((1, 1))
    for _ in range(twelves):
        block = np.kron(block, paley)
    block = np.kron(block, sylvester) / np.sqrt(order)
    return np.kron(np.eye(size // order), block) * signs[None, :]


def main(compressed_path, dense_path):
    stored, metadata = load(compressed_path)
    dense, _ = load(dense_path)
    described = json.loads(metadata["shrink.tensors"])
    mismatches = []
    for name, info in described.items():
        shape, encoding = info["shape"], info["encoding"]
        parts = {part: stored[f"{name}#{part}"] for part in info["parts"]}
        total = int(np.prod(shape, dtype=np.int64))
        output = np.zeros(total, dtype=np.float32)
        rotation = None
        if encoding["kind"] == "rotated":
            signs = 1 - 2 * unpack(parts["rotation_signs"], 1, shape[-1]).astype(np.float64)
            rotation, encoding = hadamard_rotation(signs, encoding["block_size"]), encoding["base"]
        if encoding["kind"] == "sparse":
            mask = unpack(parts["mask"], 1, total).astype(bool)
            positions = np.nonzero(mask)[0]
            output[positions] = decode(encoding["base"], parts, shape, positions)
        else:
            output[:] = decode(encoding, parts, shape, np.arange(total))
        if rotation is not None:
            output = (output.astype(np.float64).reshape(-1, shape[-1]) @ rotation).astype(np.float32).reshape(-1)
        if info["dtype"] == "F16":
            output = output.astype(np.float16).astype(np.float32)
        elif info["dtype"] == "BF16":
            bits = output.view(np.uint32).astype(np.uint64)
            output = ((((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32)).view(np.float32)
        expected = dense[name].astype(np.float32).reshape(-1)
        if rotation is not None:
            # Within float rounding, and one unit in the last place of a 16-bit source dtype.
            tolerance = {"F16": 1e-3, "BF16": 8e-3}.get(info["dtype"], 1e-6) * max(1.0, float(np.abs(expected).max()))
            if not np.allclose(output, expected, rtol=0, atol=tolerance):
                worst = int(np.argmax(np.abs(output - expected)))
                mismatches.append(f"{name}: element {worst} is {output[worst]}, Shrink wrote {expected[worst]}")
        elif not np.array_equal(output.view(np.uint32), expected.view(np.uint32)):
            worst = int(np.argmax(np.abs(output - expected)))
            mismatches.append(f"{name}: element {worst} is {output[worst]}, Shrink wrote {expected[worst]}")
    kept = [name for name in stored if "#" not in name]
    for name in kept:
        if not np.array_equal(stored[name], dense[name]):
            mismatches.append(f"{name}: stored tensor differs")
    print(json.dumps({"tensors": len(kept) + len(described), "encoded": len(described), "mismatches": mismatches}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
