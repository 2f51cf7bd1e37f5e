#!/usr/bin/env python3
"""The GPU machine's first check of the Python package (bench/python_swap.sh
run): loads the CUDA block artifact that python/tests/test_gpu.py loads first,
in a fresh process for each way torch can already be in it, and runs it on
numpy arrays and on torch CUDA tensors queued on a side stream.

    python_swap_probe.py --prepare CACHE      (here: the block, compiled for cuda and cpu)
    python_swap_probe.py --write CACHE DIR    (there: DIR/cuda and DIR/cpu with weights)
    python_swap_probe.py --load DIR/cuda --torch MODE [--run]
    python_swap_probe.py --symbolize LOG      (a crash's frames, from gdb's log or
                                               bench/segv_backtrace.c's, as functions)

MODE says what of torch is in the process before moec.load: none (not
imported), import, available (torch.cuda.is_available(), as test_gpu.py's skip
mark asks), context (a CUDA tensor made: torch's context exists), after (torch
imported and its context made after the load). Exit 0 when the load (and the
runs) worked; a crash shows as the signal's exit status.
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

MAX_TOKENS = 256  # test_gpu.py's


def block_spec():
    from moec import blocks
    return blocks.BlockSpec(experts=8, hidden=64, inter=32, top_k=2, normalize=True)


def weights():
    rng = np.random.default_rng(5)
    return {"gate_up": rng.normal(0, 0.2, (8, 64, 64)).astype(np.float32),
            "down": rng.normal(0, 0.2, (8, 64, 32)).astype(np.float32),
            "router": rng.normal(0, 1, (8, 64)).astype(np.float32)}


def prepare(cache):
    from moec import blocks
    for target in ("cuda", "cpu"):
        print(blocks.compile_block(block_spec(), target, cache=cache, max_tokens=MAX_TOKENS))


def write(cache, out):
    from moec import blocks
    for target in ("cuda", "cpu"):
        art = blocks.compile_block(block_spec(), target, cache=cache, max_tokens=MAX_TOKENS)
        print(blocks.instantiate(art, weights(), os.path.join(out, target)))


def log(*args):
    print(*args, flush=True)


def load(path, mode, run):
    torch = None
    if mode in ("import", "available", "context"):
        import torch
        if mode in ("available", "context"):
            log("torch.cuda.is_available():", torch.cuda.is_available())
        if mode == "context":
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
            log("torch's CUDA context made")
    import moec
    log(f"moec.load({path!r}) ...")
    m = moec.load(path)
    log("loaded:", m)
    if mode == "after":
        import torch
        torch.zeros(1, device="cuda")
        log("torch's CUDA context made after the load")
    if not run:
        return
    from conftest import reference_block, softmax_topk
    w = weights()
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, (37, 64)).astype(np.float32)
    ids, rw = softmax_topk(x, w["router"], 2, True)
    expected = reference_block(x, w["gate_up"], w["down"], ids, rw)
    got = m(x)
    log("numpy run: max abs err", float(np.abs(got - expected).max()))
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    if torch is None and mode != "after":
        return
    import torch
    if m.target == "cpu":  # host tensors: a CPU artifact refuses CUDA ones
        y = m(torch.from_numpy(x))
        log("torch run on host tensors: max abs err",
            float((y.double() - torch.from_numpy(expected)).abs().max()))
    else:
        stream = torch.cuda.Stream()
        xd = torch.zeros(37, 64, device="cuda")
        with torch.cuda.stream(stream):
            xd.copy_(torch.from_numpy(x).pin_memory(), non_blocking=True)
            y = m(xd)
        stream.synchronize()
        log("torch run on a side stream: max abs err",
            float((y.cpu().double() - torch.from_numpy(expected)).abs().max()))
    np.testing.assert_allclose(y.cpu().numpy(), expected, rtol=1e-4, atol=1e-4)


def symbolize(path):
    """Each frame of a crash log as function and line: the frame's address
    less the load address of its file, through addr2line. The log is gdb's
    (`bt` and `info proc mappings`) or bench/segv_backtrace.c's (its frames and
    /proc/self/maps). Libraries loaded through /proc/self/fd/N (model.so) are
    named by their real file in the mappings, which gdb's symbols miss."""
    text = open(path, errors="replace").read()
    maps = []  # (start, end, offset, file)
    for m in re.finditer(r"^\s*(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)\s+"
                         r"(?:[rwxps-]{4}\s+)?(/\S+)", text, re.M):  # gdb
        maps.append((int(m[1], 16), int(m[2], 16), int(m[3], 16), m[4]))
    for m in re.finditer(r"^([0-9a-f]+)-([0-9a-f]+)\s+[rwxps-]{4}\s+([0-9a-f]+)\s+\S+\s+\d+\s+(/\S+)",
                         text, re.M):  # /proc/self/maps
        maps.append((int(m[1], 16), int(m[2], 16), int(m[3], 16), m[4]))
    base = {}
    for start, _, offset, f in maps:
        if offset == 0 and (f not in base or start < base[f]):
            base[f] = start
    frames = []  # (line, pc, exact)
    for m in re.finditer(r"^#(\d+)\s+(0x[0-9a-f]+)?.*$", text, re.M):  # gdb's bt
        frames.append((m[0], int(m[2], 16) if m[2] else None, m[1] == "0"))
    first = True
    for m in re.finditer(r"^\S*\(\S*\)\s*\[(0x[0-9a-f]+)\]\s*$", text, re.M):  # backtrace_symbols_fd
        frames.append((m[0], int(m[1], 16), first))
        first = False
    seen = {}
    for line, pc, exact in frames:
        if pc is None:
            print(line)
            continue
        hit = next((f for s, e, _, f in maps if s <= pc < e), None)
        if hit is None or hit not in base:
            print(f"{line}\n      (no mapping for {pc:#x})")
            continue
        rel = pc - base[hit]
        # a caller's frame holds the return address: the call is just before it
        at = rel if exact else rel - 1
        if (hit, at) not in seen:
            try:
                out = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", hit, f"{at:#x}"],
                                     capture_output=True, text=True, timeout=60).stdout
                seen[hit, at] = " | ".join(s for s in out.splitlines() if s)
            except (OSError, subprocess.TimeoutExpired) as e:
                seen[hit, at] = f"(addr2line: {e})"
        print(f"{line}\n      {hit} +{rel:#x}: {seen[hit, at]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prepare", metavar="CACHE")
    p.add_argument("--write", nargs=2, metavar=("CACHE", "DIR"))
    p.add_argument("--load", metavar="ARTIFACT")
    p.add_argument("--torch", default="none", choices=["none", "import", "available", "context", "after"])
    p.add_argument("--run", action="store_true")
    p.add_argument("--symbolize", metavar="LOG")
    a = p.parse_args()
    if a.prepare:
        prepare(a.prepare)
    elif a.write:
        write(*a.write)
    elif a.load:
        load(a.load, a.torch, a.run)
    elif a.symbolize:
        symbolize(a.symbolize)
    else:
        p.error("one of --prepare, --write, --load, --symbolize")


if __name__ == "__main__":
    main()
