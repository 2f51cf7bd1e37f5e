#!/usr/bin/env python3
"""Writes the seed corpus of moec-fuzz-safetensors (docs/fuzzing.md).

    test/fuzz/make-safetensors-seeds.py

Tiny single-file checkpoints: valid ones (every dtype, empty and scalar
tensors, metadata, an empty header) and one broken variant per check of the
reader (header length, JSON, dtype, shape, offsets, overlap, duplicate keys).
"""
import json
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))
corpus = os.path.join(here, "safetensors-corpus")

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
         "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def with_header(header, data=b""):
    """8-byte length, the header padded with spaces to 8 bytes, the data."""
    text = header.encode() if isinstance(header, str) else header
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def valid(tensors, metadata=None):
    """tensors: (name, dtype, shape) back to back, bytes 0, 1, 2, ..."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        count = 1
        for dim in shape:
            count *= dim
        size = count * SIZES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    return with_header(json.dumps(header, separators=(",", ":")),
                       bytes(i % 256 for i in range(offset)))


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


seeds = {
    "valid-two-tensors": valid([("w", "F32", [2, 2]), ("b", "BF16", [3])], {"format": "pt"}),
    "valid-every-dtype": valid([(f"t.{d}", d, [2]) for d in SIZES]),
    "valid-empty-and-scalar": valid([("empty", "F16", [0, 4]), ("scalar", "I64", [])]),
    "valid-empty-header": with_header("{}"),
    "valid-trailing-data": valid([("x", "U8", [3])]) + b"tail",
    "bad-short": b"\x08\x00\x00",
    "bad-header-length": struct.pack("<Q", 1 << 40) + b"{}      ",
    "bad-header-past-end": struct.pack("<Q", 64) + b"{}",
    "bad-not-json": with_header('{"w":{"dtype":"F32",'),
    "bad-not-object": with_header("[1,2,3]"),
    "bad-deep": with_header("{\"a\":" + "[" * 100 + "]" * 100 + "}"),
    "bad-dtype": with_header(json.dumps({"w": entry("U16", [2], 0, 4)}), bytes(4)),
    "bad-negative-shape": with_header(json.dumps({"w": entry("F32", [-1, 2], 0, 8)}), bytes(8)),
    "bad-overflow": with_header(json.dumps({"w": entry("F64", [1 << 32, 1 << 32], 0, 8)}),
                                bytes(8)),
    "bad-size": with_header(json.dumps({"w": entry("F32", [3], 0, 8)}), bytes(8)),
    "bad-past-end": with_header(json.dumps({"w": entry("U8", [8], 4, 12)}), bytes(8)),
    "bad-reversed": with_header(json.dumps({"w": entry("U8", [0], 8, 0)}), bytes(8)),
    "bad-overlap": with_header(json.dumps({"a": entry("F32", [2], 0, 8),
                                           "b": entry("F32", [2], 4, 12)}), bytes(12)),
    "bad-duplicate": with_header('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                 '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"xy"),
    "bad-metadata": with_header(json.dumps({"__metadata__": {"format": 1}})),
    "bad-extra-key": with_header(json.dumps({"w": dict(entry("U8", [1], 0, 1), x=1)}), b"z"),
}

os.makedirs(corpus, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(corpus, name + ".safetensors"), "wb") as f:
        f.write(data)
print(f"{len(seeds)} seeds in {corpus}")
