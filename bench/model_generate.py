#!/usr/bin/env python3
"""Whole models, moec against transformers' generate, on one GPU with random weights.

Usage:
  model_generate.py transformers CONFIG_DIR --out FILE.json [--cells B:P,...] [--new N]
  model_generate.py moec LIBMOEC.so ARTIFACT --out FILE.json [--cells B:P,...] [--new N]
  model_generate.py table FILE.json... [--floor-gb NAME=GB ...]

Each system runs in a process of its own (a 30-90 GB model of each does not fit one GPU
twice); the driver (bench/model_generate.sh) runs both in one device call, so the table
compares runs on the same GPU, minutes apart.

A cell is a batch B and a prompt length P. For each cell:
- decode: milliseconds per decode step with P positions cached, over N new tokens
  (greedy). moec: moec_generate's decode seconds over its decode steps (the prefill of the
  B prompts is timed on its own). transformers: `model.generate` continuing from a
  DynamicCache that already holds P random positions of every layer (a prefill of 64 x
  4096 tokens would take minutes), max_new_tokens = N, the time over N steps; the best of
  its experts backends (`batched_mm`, `grouped_mm`), as transformers' docs advise.
- prefill: the time to the first token of B prompts of P tokens (moec: moec_generate's
  prefill seconds; transformers: `generate(max_new_tokens=1)` on an empty cache, only
  where B * P <= --max-prefill-tokens).

The L2 is not flushed: a decode step streams GBs. Times are medians of --repeats runs
after a warm-up, each synchronised. Weights: N(0, 0.02) (transformers: drawn on the GPU;
moec: its artifact's own random fill at load, `moec compile --random-weights`), norms 1.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time


def parse_cells(text):
    cells = []
    for item in text.split(","):
        b, p = item.split(":")
        cells.append((int(b), int(p)))
    return cells


def parse_backends(text):
    backends = {}
    for item in text.split(","):
        b, impl = item.split(":")
        backends.setdefault(int(b), []).append(impl)
    return backends


def gpu_info():
    try:
        import subprocess
        return subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.max.sm,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001 - informational only
        return f"unknown ({e})"


# ----------------------------------------------------------------------------- transformers

DEV = "cuda"


def run_transformers(args):
    global DEV
    import torch
    DEV = args.device
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

    def sync():
        if DEV == "cuda":
            torch.cuda.synchronize()

    torch.manual_seed(0)
    cfg = AutoConfig.from_pretrained(args.config)
    t0 = time.perf_counter()
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model = model.to_empty(device=DEV).eval()
    g = torch.Generator(device=DEV).manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.fill_(1.0)
            elif p.dim() == 1:
                p.zero_()
            else:
                p.normal_(0.0, 0.02, generator=g)
    # Rope's inv_freq is a non-persistent buffer computed at construction; on the meta
    # device it holds nothing, so rebuild the rotary embedding on the GPU.
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    for module in model.modules():
        if hasattr(module, "inv_freq") and hasattr(module, "rope_type"):
            fn = (module.compute_default_rope_parameters if module.rope_type == "default"
                  else ROPE_INIT_FUNCTIONS[module.rope_type])
            inv_freq, scaling = fn(module.config, torch.device(DEV))
            module.inv_freq = inv_freq
            module.original_inv_freq = inv_freq
            module.attention_scaling = scaling
    sync()
    init_s = time.perf_counter() - t0
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = None
    vocab = cfg.vocab_size
    res = {"system": "transformers", "model": args.name or args.config, "config": args.config, "transformers": transformers.__version__,
           "torch": torch.__version__, "gpu": gpu_info(), "init_seconds": init_s,
           "params_b": sum(p.numel() for p in model.parameters()) / 1e9, "cells": []}
    print("transformers: model ready in", f"{init_s:.1f} s;", res["params_b"], "B params", flush=True)

    def timed(fn):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t

    def prefilled_cache(batch, length):
        cache = DynamicCache(config=model.config)
        text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else cfg
        kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        k_dim = head_dim
        v_dim = head_dim
        if getattr(text, "qk_rope_head_dim", None):  # MLA: transformers caches expanded keys
            k_dim = text.qk_nope_head_dim + text.qk_rope_head_dim
            v_dim = text.v_head_dim
            kv_heads = text.num_attention_heads
        for layer in range(text.num_hidden_layers):
            k = torch.randn(batch, kv_heads, length, k_dim, device=DEV, dtype=torch.bfloat16)
            v = torch.randn(batch, kv_heads, length, v_dim, device=DEV, dtype=torch.bfloat16)
            cache.update(k, v, layer)
        return cache

    for batch, length in args.cells:
        cell = {"batch": batch, "prompt": length}
        impls = args.backends.get(batch, args.backends.get(0, ["batched_mm", "grouped_mm"]))
        ids = torch.randint(0, vocab, (batch, length + 1), device=DEV)
        mask = torch.ones_like(ids)
        for impl in impls:
            try:
                model.set_experts_implementation(impl)
            except Exception as e:  # noqa: BLE001
                cell[f"{impl}_error"] = str(e)[:200]
                continue
            try:
                with torch.no_grad():
                    times = []
                    for r in range(args.repeats + 1):
                        cache = prefilled_cache(batch, length)
                        t = timed(lambda: model.generate(
                            ids, attention_mask=mask, past_key_values=cache,
                            max_new_tokens=args.new, min_new_tokens=args.new, do_sample=False))
                        del cache
                        if r:
                            times.append(t)
                cell[f"{impl}_decode_ms"] = 1e3 * statistics.median(times) / args.new
                print(f"transformers {impl} B={batch} P={length}: decode "
                      f"{cell[f'{impl}_decode_ms']:.2f} ms/step", flush=True)
            except torch.OutOfMemoryError:
                cell[f"{impl}_decode_error"] = "OutOfMemoryError"
                print(f"transformers {impl} B={batch} P={length}: out of memory", flush=True)
            sync() or (DEV == "cuda" and torch.cuda.empty_cache())
            if batch * length <= args.max_prefill_tokens:
                try:
                    with torch.no_grad():
                        prompt = ids[:, :length]
                        times = [timed(lambda: model.generate(
                            prompt, attention_mask=mask[:, :length], max_new_tokens=1,
                            min_new_tokens=1, do_sample=False)) for _ in range(args.repeats + 1)][1:]
                    cell[f"{impl}_prefill_ms"] = 1e3 * statistics.median(times)
                    print(f"transformers {impl} B={batch} P={length}: prefill "
                          f"{cell[f'{impl}_prefill_ms']:.1f} ms", flush=True)
                except torch.OutOfMemoryError:
                    cell[f"{impl}_prefill_error"] = "OutOfMemoryError"
                sync() or (DEV == "cuda" and torch.cuda.empty_cache())
        res["cells"].append(cell)
        json.dump(res, open(args.out, "w"), indent=1)
    return res


# ----------------------------------------------------------------------------- moec

class Sampling(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32),
                ("top_p", ctypes.c_float), ("seed", ctypes.c_uint64)]


class Stats(ctypes.Structure):
    _fields_ = [("prefill_tokens", ctypes.c_int64), ("decode_tokens", ctypes.c_int64),
                ("prefill_seconds", ctypes.c_double), ("decode_seconds", ctypes.c_double)]


I64P = ctypes.POINTER(ctypes.c_int64)


def load_library(path):
    """libmoec.so through ctypes, the C API's signatures declared (moec.h): what this
    script, model_decode.py and model_profile.py call."""
    lib = ctypes.CDLL(path)
    lib.moec_load.restype = ctypes.c_void_p
    lib.moec_load.argtypes = [ctypes.c_char_p]
    lib.moec_last_error.restype = ctypes.c_char_p
    for f in ("moec_max_seq", "moec_max_batch", "moec_vocab_size"):
        getattr(lib, f).restype = ctypes.c_int64
        getattr(lib, f).argtypes = [ctypes.c_void_p]
    lib.moec_free.argtypes = [ctypes.c_void_p]
    lib.moec_generate.argtypes = [ctypes.c_void_p, I64P, I64P, ctypes.c_int64, ctypes.c_int64,
                                  ctypes.c_int64, ctypes.POINTER(Sampling), I64P,
                                  ctypes.POINTER(Stats)]
    return lib


def run_moec(args):
    import numpy as np

    lib = load_library(args.library)
    i64p = I64P
    t0 = time.perf_counter()
    model = lib.moec_load(args.artifact.encode())
    load_s = time.perf_counter() - t0
    if not model:
        sys.exit("model_generate.py: " + lib.moec_last_error().decode())
    vocab, max_batch, max_seq = (lib.moec_vocab_size(model), lib.moec_max_batch(model),
                                 lib.moec_max_seq(model))
    res = {"system": "moec", "model": args.name or args.artifact, "artifact": args.artifact, "gpu": gpu_info(), "load_seconds": load_s,
           "max_batch": max_batch, "max_seq": max_seq, "cells": []}
    print(f"moec: loaded in {load_s:.2f} s (vocab {vocab}, cache {max_batch} x {max_seq})",
          flush=True)
    rng = np.random.default_rng(0)
    for batch, length in args.cells:
        cell = {"batch": batch, "prompt": length}
        if batch > max_batch or length + args.new > max_seq:
            cell["error"] = f"outside the artifact's cache ({max_batch} x {max_seq})"
            res["cells"].append(cell)
            continue
        ids = np.ascontiguousarray(rng.integers(0, vocab, (batch, length)), dtype=np.int64)
        mask = np.ones_like(ids)
        sequences = np.zeros((batch, length + args.new), dtype=np.int64)
        decode, prefill = [], []
        for _ in range(args.repeats + 1):
            stats = Stats()
            if lib.moec_generate(model, ids.ctypes.data_as(i64p), mask.ctypes.data_as(i64p), batch,
                                 length, args.new, ctypes.byref(Sampling(0, 0, 1, 0)),
                                 sequences.ctypes.data_as(i64p), ctypes.byref(stats)):
                sys.exit("model_generate.py: " + lib.moec_last_error().decode())
            steps = max(stats.decode_tokens // batch, 1)
            decode.append(stats.decode_seconds * 1e3 / steps)
            prefill.append(stats.prefill_seconds * 1e3)
        cell["decode_ms"] = statistics.median(decode[1:])
        cell["prefill_ms"] = statistics.median(prefill[1:])
        cell["first_decode_ms"] = decode[0]
        print(f"moec B={batch} P={length}: decode {cell['decode_ms']:.3f} ms/step, prefill "
              f"{cell['prefill_ms']:.1f} ms", flush=True)
        res["cells"].append(cell)
        json.dump(res, open(args.out, "w"), indent=1)
    lib.moec_free(model)
    return res


# ----------------------------------------------------------------------------- table

def model_shape(config):
    """hidden, layers, vocab, heads, KV heads, head dim, experts, top-k, expert width."""
    c = json.load(open(os.path.join(config, "config.json")))
    h, heads = c["hidden_size"], c["num_attention_heads"]
    return (h, c["num_hidden_layers"], c["vocab_size"], heads,
            c.get("num_key_value_heads", heads), c.get("head_dim") or h // heads,
            c.get("num_experts") or c.get("num_local_experts"), c["num_experts_per_tok"],
            c.get("moe_intermediate_size") or c["intermediate_size"])


def step_bytes(config, batch, prompt, fp8=False, mxfp4=False):
    """Bytes one decode step of `batch` sequences with `prompt` cached positions must read,
    in moec's bf16 (experts: each touched once; with random routing an expert is touched
    with probability 1 - (1 - k/E)^batch; `fp8`: e4m3 experts, one byte an element;
    `mxfp4`: e2m1 codes and a scale byte per 32, 17/32 of a byte an element), the
    KV cache in bf16, the LM head; not the embedding table (gathered). A Qwen3-MoE,
    Mixtral or gpt-oss config.json."""
    h, layers, v, heads, kv, d, experts, k, inter = model_shape(config)
    attn = h * heads * d * 2 + h * kv * d * 2
    expert = 3 * h * inter * (0.5 if fp8 else 17 / 64 if mxfp4 else 1)
    touched = experts * (1 - (1 - k / experts) ** batch)
    weights = layers * (attn + touched * expert + h * experts) + h * v
    kv_cache = layers * batch * prompt * 2 * kv * d
    return 2 * (weights + kv_cache)


def prefill_floor_ms(config, batch, prompt, fp8=False, mxfp4=False):
    """The larger of streaming every weight the prefill touches once (at copy bandwidth) and
    its useful FLOPs at the bf16 matmul rate (685 TFLOP/s; `fp8`: the experts' at the FP8
    rate, 1280; `mxfp4`: bf16's, the codes dequantised): the projections and routed experts of every token, the causal attention,
    the LM head of each sequence's last."""
    h, layers, v, heads, kv, d, experts, k, inter = model_shape(config)
    tokens = batch * prompt
    dense = layers * (h * heads * d * 2 + h * kv * d * 2 + h * experts)
    routed = layers * k * 3 * h * inter
    flops = 2 * tokens * dense + 2 * batch * h * v
    flops += layers * batch * 2 * 2 * heads * d * prompt * (prompt + 1) / 2
    seconds = flops / 685e12 + 2 * tokens * routed / (1280e12 if fp8 else 685e12)
    weights = step_bytes(config, tokens, 0, fp8, mxfp4)  # every touched weight once
    return max(weights / 4.25e9, seconds * 1e3)


def table(args):
    configs = dict(kv.split("=") for kv in args.configs)
    runs = [json.load(open(f)) for f in args.files]
    lines = ["Decode: ms per step of B sequences with P positions cached; the floor is the bytes "
             "a step must read (bf16 weights touched, KV cache, LM head) at 4.25 TB/s. Prefill: "
             "the time to the first token of B prompts of P tokens. Ratios: moec / transformers' "
             "best backend (below 1: moec faster).", ""]
    by_model = {}
    for r in runs:  # several runs of one system: their cells merged, the later run's keys win
        merged = by_model.setdefault(r["model"], {}).setdefault(r["system"], {**r, "cells": []})
        cells = {(c["batch"], c["prompt"]): c for c in merged["cells"]}
        for c in r["cells"]:
            cells[(c["batch"], c["prompt"])] = {**cells.get((c["batch"], c["prompt"]), {}), **c}
        merged["cells"] = list(cells.values())
    for model, systems in by_model.items():
        moec, tf = systems.get("moec"), systems.get("transformers")
        lines.append(f"### {model}" + (" (FP8 experts)" if model in args.fp8_experts else "")
                     + (" (MXFP4 experts)" if model in args.mxfp4_experts else "")
                     + "\n")
        if moec:
            lines.append(f"moec load (weights filled on the GPU): {moec['load_seconds']:.2f} s; "
                         f"gpu: {moec.get('gpu')}\n")
        if tf:
            lines.append(f"transformers {tf.get('transformers')}, torch {tf.get('torch')}: model "
                         f"built and initialised in {tf['init_seconds']:.1f} s\n")
        lines.append("| B | P | moec ms/step | floor ms (% reached) | transformers ms/step (backend) | "
                     "ratio | moec prefill ms | floor ms (% reached) | transformers prefill ms | "
                     "ratio |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        cells = {(c["batch"], c["prompt"]): c for c in (moec or {"cells": []})["cells"]}
        tcells = {(c["batch"], c["prompt"]): c for c in (tf or {"cells": []})["cells"]}
        for key in sorted(set(cells) | set(tcells)):
            m, t = cells.get(key, {}), tcells.get(key, {})
            best = min(((t[k], k.split("_decode")[0]) for k in t if k.endswith("_decode_ms")),
                       default=(None, ""))
            bestp = min(((t[k], k.split("_prefill")[0]) for k in t if k.endswith("_prefill_ms")),
                        default=(None, ""))

            def fmt(value, digits=2):
                return "—" if value is None else f"{value:.{digits}f}"
            ratio = (m["decode_ms"] / best[0]) if m.get("decode_ms") and best[0] else None
            pratio = (m["prefill_ms"] / bestp[0]) if m.get("prefill_ms") and bestp[0] else None
            floor = pfloor = "—"
            fp8 = model in args.fp8_experts
            mxfp4 = model in args.mxfp4_experts
            if model in configs and m.get("prefill_ms"):
                f = prefill_floor_ms(configs[model], *key, fp8, mxfp4)
                pfloor = f"{f:.1f} ({100 * f / m['prefill_ms']:.0f} %)"
            if model in configs:
                f = step_bytes(configs[model], *key, fp8, mxfp4) / 4.25e9
                floor = f"{f:.2f}" + (f" ({100 * f / m['decode_ms']:.0f} %)" if m.get("decode_ms")
                                      else "")
            errors = [f"{k}: {t[k]}" for k in t if k.endswith("error")] + (
                [m["error"]] if m.get("error") else [])
            lines.append(f"| {key[0]} | {key[1]} | {fmt(m.get('decode_ms'), 3)} | {floor} | "
                         f"{fmt(best[0])} ({best[1]}) | {fmt(ratio, 3)} | "
                         f"{fmt(m.get('prefill_ms'), 1)} | {pfloor} | {fmt(bestp[0], 1)} ({bestp[1]}) | "
                         f"{fmt(pratio, 3)} |" + (f" {'; '.join(errors)}" if errors else ""))
        lines.append("")
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", required=True)
    common.add_argument("--name", default=None, help="the model's name in the table")
    common.add_argument("--cells", type=parse_cells,
                        default=parse_cells("1:512,16:512,64:512,1:4096,16:4096,64:4096"))
    common.add_argument("--new", type=int, default=16)
    common.add_argument("--repeats", type=int, default=2)
    t = sub.add_parser("transformers", parents=[common])
    t.add_argument("config")
    t.add_argument("--max-prefill-tokens", type=int, default=65536)
    t.add_argument("--device", default="cuda", help="cpu: a smoke test of the script itself")
    t.add_argument("--backends", type=parse_backends, default={},
                   help="experts backends per batch, e.g. 1:batched_mm,64:grouped_mm (0: any "
                        "other batch; default both everywhere)")
    m = sub.add_parser("moec", parents=[common])
    m.add_argument("library")
    m.add_argument("artifact")
    tb = sub.add_parser("table")
    tb.add_argument("files", nargs="+")
    tb.add_argument("--configs", nargs="*", default=[],
                    help="NAME=CONFIG_DIR: the floor of each model's decode steps")
    tb.add_argument("--fp8-experts", nargs="*", default=[],
                    help="models whose artifacts hold e4m3 experts (moec compile --fp8): their "
                         "floors count one byte an expert weight, the experts' FLOPs at 1280 "
                         "TFLOP/s")
    tb.add_argument("--mxfp4-experts", nargs="*", default=[],
                    help="models compiled with --expert-weights=mxfp4: their floors count 17/32 "
                         "of a byte an expert weight (codes and scales), the FLOPs at bf16's rate")
    args = parser.parse_args()
    if args.mode == "transformers":
        run_transformers(args)
    elif args.mode == "moec":
        run_moec(args)
    else:
        table(args)


if __name__ == "__main__":
    main()
