#!/usr/bin/env python3
"""Usage: check-bf16-weights.py F32_ARTIFACT BF16_ARTIFACT

Checks that every `bf16` weight of BF16_ARTIFACT (moec compile
--expert-weights=bf16) holds the bits of the same-named f32 weight of
F32_ARTIFACT rounded to nearest even, and that every other weight is
byte-identical. Pure Python (no numpy): the artifacts are small test ones.
"""
import array
import os
import struct
import sys

# The rounding rule bench/write_weights.py also fills external bf16 weights with.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from write_weights import bf16_bits  # noqa: E402


def layout(artifact):
    weights = {}
    with open(os.path.join(artifact, "manifest.txt")) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "weight":
                name, dtype, _, offset, size = parts[1:6]
                weights[name] = (dtype, int(offset), int(size))
    with open(os.path.join(artifact, "weights.bin"), "rb") as f:
        data = f.read()
    return {name: (dtype, data[offset:offset + size])
            for name, (dtype, offset, size) in weights.items()}


def main():
    f32, bf16 = layout(sys.argv[1]), layout(sys.argv[2])
    if set(f32) != set(bf16):
        sys.exit(f"weight names differ: {sorted(f32)} vs {sorted(bf16)}")
    failed = False
    for name, (dtype, data) in bf16.items():
        ref_dtype, ref = f32[name]
        if dtype != "bf16":
            if (dtype, data) != (ref_dtype, ref):
                print(f"{name}: {dtype} bytes differ from the f32 artifact's")
                failed = True
            continue
        values = struct.unpack(f"<{len(ref) // 4}f", ref)
        halves = array.array("H", data)
        if sys.byteorder != "little":
            halves.byteswap()
        bad = sum(1 for v, h in zip(values, halves) if bf16_bits(v) != h)
        if len(values) != len(halves) or bad:
            print(f"{name}: {bad} of {len(halves)} bf16 values differ ({len(values)} f32 values)")
            failed = True
        else:
            print(f"{name}: {len(halves)} bf16 values match")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
