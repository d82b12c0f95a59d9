#!/usr/bin/env python3
"""Cross-check Shrink's safetensors files against the reference `safetensors` package.

    safetensors_crosscheck.py write <file>   write a file of every dtype with safetensors, print its
                                             contents as JSON
    safetensors_crosscheck.py read <file>    read a file with safetensors, print its contents as JSON

The JSON maps each tensor name to its dtype, shape, raw bytes (hex) and every element converted
to float32 by numpy / ml_dtypes (hex of the float32 bits), plus "__metadata__". Needs
`pip install safetensors numpy ml_dtypes`.
"""
import json
import sys

import ml_dtypes
import numpy as np
import safetensors

NUMPY_TYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}
# Types numpy's safetensors front end handles itself; the rest go through the format-level API.
NATIVE = {"F64", "F32", "F16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL"}
# The format-level writer names types as the frameworks do.
SPEC_NAMES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2", "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U64": "uint64",
    "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
}


def describe(dtype, shape, data):
    array = np.frombuffer(data, dtype=NUMPY_TYPES[dtype]).reshape(shape)
    floats = array.astype(np.float32).reshape(-1)
    return {"dtype": dtype, "shape": list(shape), "bytes": bytes(data).hex(), "floats": floats.view(np.uint32).tolist()}


def sample_tensors():
    rng = np.random.default_rng(2024)
    arrays = {
        "float64": rng.standard_normal((3, 4)),
        "float32.special": np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, -1.5], dtype=np.float32),
        "float16.all": np.arange(65536, dtype=np.uint16).view(np.float16).reshape(256, 256),
        "int64": rng.integers(-2**62, 2**62, size=(5,), dtype=np.int64),
        "int32": rng.integers(-2**31, 2**31 - 1, size=(2, 3), dtype=np.int32),
        "int16": rng.integers(-2**15, 2**15 - 1, size=(7,), dtype=np.int16),
        "int8": np.arange(-128, 128, dtype=np.int8),
        "uint64": rng.integers(0, 2**63, size=(3,), dtype=np.uint64),
        "uint32": rng.integers(0, 2**32 - 1, size=(3,), dtype=np.uint32),
        "uint16": np.arange(0, 65536, 257, dtype=np.uint16),
        "uint8": np.arange(256, dtype=np.uint8).reshape(16, 16),
        "bool": np.array([True, False, True]),
        "scalar": np.array(3.25, dtype=np.float32),
        "empty": np.zeros((0, 5), dtype=np.float32),
    }
    special = {
        "bfloat16.all": ("BF16", (256, 256), np.arange(65536, dtype=np.uint16).tobytes()),
        "f8_e4m3.all": ("F8_E4M3", (256,), np.arange(256, dtype=np.uint8).tobytes()),
        "f8_e5m2.all": ("F8_E5M2", (16, 16), np.arange(256, dtype=np.uint8).tobytes()),
    }
    return arrays, special


def write(path):
    arrays, special = sample_tensors()
    metadata = {"format": "np", "written_by": "safetensors " + safetensors.__version__}
    tensors = {name: {"dtype": dtype, "shape": list(shape), "data": data} for name, (dtype, shape, data) in special.items()}
    for name, array in arrays.items():
        dtype = next(key for key, value in NUMPY_TYPES.items() if key in NATIVE and np.dtype(value) == array.dtype)
        tensors[name] = {"dtype": dtype, "shape": list(array.shape), "data": np.ascontiguousarray(array).tobytes()}
    buffers = {name: np.frombuffer(t["data"], dtype=np.uint8) if t["data"] else np.zeros(1, np.uint8) for name, t in tensors.items()}
    specs = {
        name: safetensors.TensorSpec(dtype=SPEC_NAMES[t["dtype"]], shape=t["shape"], data_ptr=buffers[name].ctypes.data,
                                     data_len=len(t["data"]))
        for name, t in tensors.items()
    }
    safetensors.serialize_file(specs, path, metadata=metadata)
    # The numpy front end must agree with the format-level writer on the types it supports.
    with safetensors.safe_open(path, framework="numpy") as opened:
        for name, array in arrays.items():
            assert opened.get_tensor(name).tobytes() == np.ascontiguousarray(array).tobytes(), name
    result = {name: describe(t["dtype"], t["shape"], t["data"]) for name, t in tensors.items()}
    result["__metadata__"] = metadata
    print(json.dumps(result))


def read(path):
    with open(path, "rb") as handle:
        raw = handle.read()
    result = {name: describe(info["dtype"], info["shape"], info["data"]) for name, info in safetensors.deserialize(raw)}
    with safetensors.safe_open(path, framework="numpy") as opened:
        result["__metadata__"] = opened.metadata() or {}
        for name in opened.keys():
            if result[name]["dtype"] in NATIVE:
                assert opened.get_tensor(name).tobytes().hex() == result[name]["bytes"], name
    print(json.dumps(result))


if __name__ == "__main__":
    {"write": write, "read": read}[sys.argv[1]](sys.argv[2])
