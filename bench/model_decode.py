#!/usr/bin/env python3
"""Decode step time of a whole model's artifact, at steady state.

Usage: model_decode.py LIBMOEC.so ARTIFACT PROMPT.npz [--new N] [--repeats R]

`moec-run --generate` times one generation in a fresh process, whose first
decode step of each batch size also captures its CUDA graph. Here one process
loads the artifact once and runs moec_generate (greedy) R times for each batch
size (1: the first prompt alone; then the whole batch), N new tokens each
(default: what the cache's max_seq leaves); the first run is the warm-up, the
rest give the median milliseconds per decode step and per prefill. Prints
one line per batch size. numpy only; the C API through ctypes.
"""

import argparse
import ctypes
import statistics
import sys

import numpy as np


# The C API through ctypes (its structs and signatures), beside this file.
from model_generate import I64P as i64p, Sampling, Stats, load_library  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("library")
    parser.add_argument("artifact")
    parser.add_argument("prompt")
    parser.add_argument("--new", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()

    lib = load_library(args.library)
    model = lib.moec_load(args.artifact.encode())
    if not model:
        sys.exit("model_decode.py: " + lib.moec_last_error().decode())
    prompt = np.load(args.prompt)
    ids = np.ascontiguousarray(prompt["input_ids"], dtype=np.int64)
    mask = np.ascontiguousarray(prompt.get("attention_mask", np.ones_like(ids)), dtype=np.int64)
    new = args.new or int(lib.moec_max_seq(model)) - ids.shape[1]
    for batch in sorted({1, ids.shape[0]}):
        b_ids, b_mask = np.ascontiguousarray(ids[:batch]), np.ascontiguousarray(mask[:batch])
        sequences = np.zeros((batch, ids.shape[1] + new), dtype=np.int64)
        decode, prefill = [], []
        for _ in range(args.repeats):
            stats = Stats()
            if lib.moec_generate(model, b_ids.ctypes.data_as(i64p), b_mask.ctypes.data_as(i64p),
                                 batch, ids.shape[1], new, ctypes.byref(Sampling(0, 0, 1, 0)),
                                 sequences.ctypes.data_as(i64p), ctypes.byref(stats)):
                sys.exit("model_decode.py: " + lib.moec_last_error().decode())
            decode.append(stats.decode_seconds * 1e3 * batch / max(stats.decode_tokens, 1))
            prefill.append(stats.prefill_seconds * 1e3)
        print(f"batch {batch}: decode {statistics.median(decode[1:]):.3f} ms a step "
              f"(first run {decode[0]:.3f}), prefill of {int(b_mask.sum())} tokens "
              f"{statistics.median(prefill[1:]):.3f} ms, {new} new tokens, "
              f"{args.repeats - 1} runs")
    lib.moec_free(model)


if __name__ == "__main__":
    main()
