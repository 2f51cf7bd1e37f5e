#!/usr/bin/env python3
"""How fast an artifact's weights reach the GPU: moec_load (moec.h) of a CUDA artifact, timed.

Fills ARTIFACT/weights.bin with random bytes when it is absent (the size the manifest declares; an
artifact from bench/prepare.sh, --weights=external), reads it once so that it sits in the page cache as
after any earlier run, then loads the artifact twice through LIB and reports the second load (the CUDA
context already made by the first) in GB/s against the H200's measured pinned host-to-device bandwidth
(55 GB/s). The load is all of moec_load: mmap, dlopen, device allocation, the upload of every byte.

    python3 bench/load_weights.py .device/bench/art-bf16/deepseek-v3 .device/bench/libmoec.so
"""
import ctypes
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from write_weights import read_layout  # noqa: E402

PINNED_H2D = 55e9  # bytes/s, measured on the H200


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    artifact, lib = sys.argv[1:]
    total, layout = read_layout(artifact)
    path = os.path.join(artifact, "weights.bin")
    if not os.path.exists(path) or os.path.getsize(path) != total:
        # write_weights' header (64 bytes), then random bytes where the weights go.
        import numpy as np
        rng = np.random.default_rng(0)
        with open(path, "wb") as f:
            f.write(b"MOECWTS\0" + struct.pack("<IIQQ", 1, 0, len(layout), total) + bytes(32))
            for at in range(64, total, 1 << 30):
                f.write(rng.integers(0, 256, min(1 << 30, total - at), dtype=np.uint8).tobytes())
    with open(path, "rb") as f:  # into the page cache
        while f.read(1 << 26):
            pass
    L = ctypes.CDLL(lib)
    L.moec_load.restype = ctypes.c_void_p
    L.moec_load.argtypes = [ctypes.c_char_p]
    L.moec_free.argtypes = [ctypes.c_void_p]
    L.moec_last_error.restype = ctypes.c_char_p
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        model = L.moec_load(artifact.encode())
        times.append(time.perf_counter() - t0)
        if not model:
            sys.exit("moec_load: " + L.moec_last_error().decode())
        L.moec_free(model)
    rate = total / times[-1]
    print(f"{os.path.basename(artifact)}: {total / 1e9:.2f} GB, moec_load {times[0]:.3f} s (first, CUDA "
          f"context included), {times[-1]:.3f} s (second): {rate / 1e9:.1f} GB/s, "
          f"{100 * rate / PINNED_H2D:.0f} % of pinned host-to-device")


if __name__ == "__main__":
    main()
