#!/usr/bin/env python3
"""What a synchronised call costs before its kernels: the floor under bench_moe.py's T = 1 cells.

bench_moe.py times one call on the host (L2 flushed, synchronise, call, synchronise).
At T = 1 moec's kernels span 39 µs of Qwen3's 62-68 µs (its timelines); this
measures the rest with the same clock: torch.cuda.synchronize() alone, a CUDA graph of
one empty kernel and of eight chained ones replayed and synchronised, a ctypes call
into libmoec.so, and (with --artifact) moec_run at T = 1 beside its own graph.

    python3 bench/host_floor.py --lib D/libmoec.so [--artifact D/art-bf16/qwen3moe-30b-a3b]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_moe import DEV, Moec  # noqa: E402
from write_weights import Splat, read_layout, write_weights  # noqa: E402


def host_us(fn, flush, n=200):
    times = []
    for _ in range(n):
        flush.zero_()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def first_library(names):
    """The first of `names` that loads, or None."""
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    return None


def graph_of(kernels, x):
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        for _ in range(kernels):  # warm up outside capture
            x.add_(1.0)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(kernels):
                x.add_(1.0)
    return graph


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", required=True)
    p.add_argument("--artifact", default="")
    args = p.parse_args()
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=DEV)
    x = torch.zeros(32, device=DEV)
    lib = ctypes.CDLL(args.lib)
    lib.moec_dtype_name.restype = ctypes.c_char_p
    g1, g8 = graph_of(1, x), graph_of(8, x)
    print(f"synchronize alone:                {host_us(lambda: None, flush):6.1f} us")
    print(f"ctypes call (moec_dtype_name):    {host_us(lambda: lib.moec_dtype_name(0), flush):6.1f} us")
    print(f"graph of 1 kernel, replayed:      {host_us(g1.replay, flush):6.1f} us")
    print(f"graph of 8 chained kernels:       {host_us(g8.replay, flush):6.1f} us")
    # What GraphCache::inPlace asks per buffer and call (runtime/src/cuda/Artifact.cpp).
    cudart = first_library(("libcudart.so.13", "libcudart.so.12", "libcudart.so"))
    if cudart:
        # cudaPointerAttributes is 88 bytes in CUDA 13 (eight reserved longs): a 64-byte buffer
        # here corrupted the heap and crashed the script at exit.
        attrs, device = ctypes.create_string_buffer(256), ctypes.c_int()
        for name, fn in (("cudaGetDevice", lambda: cudart.cudaGetDevice(ctypes.byref(device))),
                         ("cudaPointerGetAttributes", lambda: cudart.cudaPointerGetAttributes(
                             attrs, ctypes.c_void_p(x.data_ptr())))):
            n = 2000
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            print(f"{name} via ctypes, a call:  {(time.perf_counter() - t0) / n * 1e6:6.2f} us")
    if args.artifact:
        # Splatted weights (write_weights.py's Splat) unless some are there: the router's
        # ties pick the first k experts, whose bytes stream like any others.
        weights = os.path.join(args.artifact, "weights.bin")
        made = not os.path.exists(weights)
        if made:
            write_weights(args.artifact, [Splat(0.01) for _ in read_layout(args.artifact)[1]])
        m = Moec(args.lib, args.artifact)
        if made:
            os.remove(weights)
        H = next(int(line.split(",")[-1].rstrip("]\n")) for line in open(os.path.join(args.artifact, "manifest.txt"))
                 if line.startswith("input "))  # input hidden_states f32 [-1,H]
        xs = torch.randn(1, H, device=DEV)
        ys = torch.empty(1, H, device=DEV)
        m.bind(xs, ys)
        m.run()
        m.run()
        name = os.path.basename(args.artifact)
        print(f"moec_run at T = 1 ({name}): {host_us(m.run, flush):6.1f} us")
        if m.has_async:  # queued on torch's stream: the clock's synchronise is the one wait
            m.run_async()
            print(f"moec_run_async at T = 1 ({name}): {host_us(m.run_async, flush):6.1f} us")
            t0 = time.perf_counter()
            for _ in range(200):
                m.run_async()
            torch.cuda.synchronize()
            print(f"moec_run_async x200 back to back ({name}): "
                  f"{(time.perf_counter() - t0) / 200 * 1e6:6.1f} us a call")
        m.free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
