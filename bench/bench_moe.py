#!/usr/bin/env python3
"""moec against transformers' experts backends on one GPU, side by side, with the same weights.

Runs on the GPU machine (torch, transformers 5.x; no MLIR). For each model shape it
builds the transformers block with random bf16 weights (as the reference benchmark of
transformers' MoE blocks does: every parameter N(0, 0.02)), fills
the moec artifact's weights.bin from the block's own parameters
(bench/write_weights.py; the artifact comes from `moec compile --weights=external`,
see bench/prepare.sh), loads it through the C API (moec.h, via ctypes on a
libmoec.so) and, per token count T:

* checks moec's output against transformers' eager block run in f32 on the same
  weights and input (moec computes in f32, with f32 or bf16 expert weights as the
  artifact was compiled): relative L2 error <= --rtol (default 1e-4) passes; max abs error and transformers' own bf16 error are reported too;
* times transformers' `eager`, `batched_mm`, `grouped_mm` (bf16) and moec (f32),
  each run preceded by a 256 MiB write that flushes the L2 and timed on the host
  around one synchronised call (moec's input and output live in GPU memory, as
  transformers' do, and moec reads and writes them in place (moec.h); --host-io uses
  pinned host buffers instead); transformers' CUDA-event median (the reference's number) is reported beside it.

Bandwidth: touched experts (distinct experts routed by transformers' bf16 router, plus
the shared expert) x 3·H·I bf16 bytes (gpt-oss: plus its biases) / time, against 4.25 TB/s copy: the same yardstick for every
column. Matmul: 2·T·(k + shared)·3·H·I FLOP / time against 685 TFLOP/s (bf16).

transformers under torch.compile (--compiled IMPL:MODE,...; default grouped_mm with
mode reduce-overhead, i.e. CUDA graphs, for T <= 128, mode default, and max-autotune
without (MA) and with CUDA graphs (MAG) from T = 1024, where autotuning pays: 1.4-1.7x
faster than mode default for gpt-oss and DeepSeek-V3 at T = 1024 in the reference
anchors) is timed and checked the same way. A cold max-autotune compile costs 30-170 s
per cell and MAG after MA 4-16 s, so a table of all four models takes three to four
device calls (scripts/h200-bench.sh bench MODELS, which carries inductor's cache from
call to call; merged by bench/bench_table.py).

Every timed loop records the SM clock, the power and NVML's throttle reasons while it ran
(bench/gpu_clocks.py), and after the sequential columns moec and the cell's fastest
configuration are timed again in alternating rounds (--interleave), because the clock
falls under sustained load and moec's column is timed last (docs/performance.md,
"Method").

    python3 bench/bench_moe.py --artifacts .device/bench/art --lib .device/bench/libmoec.so \
        --models qwen3moe-30b-a3b,mixtral-8x7b,gpt-oss-120b,deepseek-v3 --tokens 1,16,128,1024
Writes bench_moe.md and bench_moe.json under $OUT (default ./out).
"""
import argparse
import copy
import ctypes
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import IMPLS, is_config_key, write  # noqa: E402
from gpu_clocks import ClockSampler  # noqa: E402
from write_weights import (dequantize_mxfp4_into, fp8_expert_weights,  # noqa: E402
                           mxfp4_expert_weights, read_layout, write_weights)

DEV = "cuda"
# name: (E, H, I, k, transformers module, block class, config class, config kwargs, shared experts, biases)
SPECS = {
    "qwen3moe-30b-a3b": (128, 2048, 768, 8, "qwen3_moe", "Qwen3MoeSparseMoeBlock", "Qwen3MoeConfig",
                         dict(hidden_size=2048, moe_intermediate_size=768, num_experts=128,
                              num_experts_per_tok=8, norm_topk_prob=True), 0, False),
    "mixtral-8x7b": (8, 4096, 14336, 2, "mixtral", "MixtralSparseMoeBlock", "MixtralConfig",
                     dict(hidden_size=4096, intermediate_size=14336, num_local_experts=8,
                          num_experts_per_tok=2), 0, False),
    "gpt-oss-120b": (128, 2880, 2880, 4, "gpt_oss", "GptOssMLP", "GptOssConfig",
                     dict(hidden_size=2880, intermediate_size=2880, num_local_experts=128,
                          num_experts_per_tok=4), 0, True),
    "deepseek-v3": (256, 7168, 2048, 8, "deepseek_v3", "DeepseekV3MoE", "DeepseekV3Config",
                    dict(hidden_size=7168, moe_intermediate_size=2048, n_routed_experts=256,
                         num_experts_per_tok=8, n_group=8, topk_group=4, n_shared_experts=1), 1, False),
}


def moe_weights(name, m, cfg):
    """The block's parameters by the names of bench/make_block_mlir.py, in moe's [out, in]
    orientation (write_weights checks every shape against the manifest)."""
    ex = m.experts
    if name in ("qwen3moe-30b-a3b", "mixtral-8x7b"):
        # transformers 5: gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I]
        return dict(router=m.gate.weight, gate_up=ex.gate_up_proj, down=ex.down_proj)
    if name == "gpt-oss-120b":
        # gate_up_proj [E, H, 2I] interleaved (x @ W), down_proj [E, I, H]: transposed storage
        tr = getattr(ex, "is_transposed", True)
        f = (lambda w: w.transpose(-2, -1)) if tr else (lambda w: w)
        return dict(router=m.router.weight, router_bias=m.router.bias, gate_up=f(ex.gate_up_proj),
                    gate_up_bias=ex.gate_up_proj_bias, down=f(ex.down_proj), down_bias=ex.down_proj_bias)
    if name == "deepseek-v3":
        for key, want in (("routed_scaling_factor", 2.5), ("norm_topk_prob", True), ("n_group", 8),
                          ("topk_group", 4)):
            if getattr(cfg, key) != want:
                log(f"  WARNING: config {key} = {getattr(cfg, key)}, the compiled block assumes {want}")
        se = m.shared_experts
        return dict(router=m.gate.weight, correction_bias=m.gate.e_score_correction_bias,
                    gate_up=ex.gate_up_proj, down=ex.down_proj,
                    shared_gate_up=torch.cat([se.gate_proj.weight, se.up_proj.weight], 0),
                    shared_down=se.down_proj.weight)
    raise ValueError(name)


def log(*a):
    print(" ".join(str(x) for x in a), flush=True)


class Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p)]


class Moec:
    """One artifact loaded through moec.h."""

    def __init__(self, lib, artifact):
        L = self.L = ctypes.CDLL(lib)
        L.moec_load.restype = ctypes.c_void_p
        L.moec_load.argtypes = [ctypes.c_char_p]
        L.moec_last_error.restype = ctypes.c_char_p
        L.moec_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(Tensor), ctypes.c_size_t,
                               ctypes.POINTER(Tensor), ctypes.c_size_t]
        L.moec_run.restype = ctypes.c_int
        L.moec_free.argtypes = [ctypes.c_void_p]
        # moec_run_async (absent from older libraries) queues the run on a stream without waiting.
        self.has_async = hasattr(L, "moec_run_async")
        if self.has_async:
            L.moec_run_async.argtypes = L.moec_run.argtypes + [ctypes.c_void_p]
            L.moec_run_async.restype = ctypes.c_int
        self.model = L.moec_load(artifact.encode())
        if not self.model:
            raise RuntimeError("moec_load: " + L.moec_last_error().decode())

    def bind(self, x, y):
        """x, y: contiguous f32 tensors [T, H], on the GPU or pinned host memory."""
        self.shape = (ctypes.c_int64 * 2)(*x.shape)
        self.inp = Tensor(b"hidden_states", 0, 2, self.shape, x.data_ptr())
        self.out = Tensor(b"output", 0, 2, self.shape, y.data_ptr())

    def run(self):
        """moec_run: returns once the output is written (it waits for the GPU itself)."""
        if self.L.moec_run(self.model, ctypes.byref(self.inp), 1, ctypes.byref(self.out), 1):
            raise RuntimeError("moec_run: " + self.L.moec_last_error().decode())

    def run_async(self):
        """moec_run_async on torch's current stream: returns without waiting, as a torch
        module's call does; the output is written when that stream gets there."""
        stream = torch.cuda.current_stream().cuda_stream
        if self.L.moec_run_async(self.model, ctypes.byref(self.inp), 1, ctypes.byref(self.out), 1,
                                 ctypes.c_void_p(stream)):
            raise RuntimeError("moec_run_async: " + self.L.moec_last_error().decode())

    def call(self):
        """What the benchmark times: run_async where the library has it, else run."""
        (self.run_async if self.has_async else self.run)()

    def free(self):
        self.L.moec_free(self.model)


FLUSH = None
CLOCKS = None  # gpu_clocks.ClockSampler, from main


def timeline(prof, runs):
    """The last call's kernels in order of start: start and length in µs from the
    call's first kernel, and the gap since the previous kernel ended (negative:
    they overlapped, e.g. a programmatic dependent launch or a second stream).
    Where a call spends its time between kernels, which the per-kernel table hides."""
    from torch.autograd import DeviceType
    kernels = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    if not kernels or len(kernels) % runs:
        return ""
    last = kernels[-(len(kernels) // runs):]
    t0, prev_end, lines = last[0].time_range.start, None, []
    for e in last:
        start, end = e.time_range.start - t0, e.time_range.end - t0
        gap = "" if prev_end is None else f"{start - prev_end:8.1f}"
        lines.append(f"{start:8.1f} {end - start:8.1f} {gap:>8}  {e.name[:90]}")
        prev_end = end if prev_end is None else max(prev_end, end)
    return ("timeline of the last call (µs: start, length, gap since the previous end):\n"
            + "\n".join(lines) + f"\nspan {prev_end:.1f} µs\n")


def profile_kernels(fn, title, runs=5, out="out"):
    """Per-kernel GPU time of `fn` (CUPTI through torch.profiler: it sees the kernels
    moec launches from its model.so too), averaged over `runs` calls, printed and
    appended to OUT/profile.txt."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=25,
                                      max_name_column_width=90)
    try:
        order = timeline(prof, runs)
    except Exception as e:  # noqa: BLE001 (a profiler without the fields: the table still counts)
        order = f"no timeline: {e!r}\n"
    text = f"== {title}: per-kernel GPU time over {runs} calls\n{table}\n{order}"
    print(text)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "profile.txt"), "a") as f:
        f.write(text)


def time_wall(fn, target_s, n_min=5, n_max=100, row=None, key=None):
    """Median/min host ms of synchronised single calls, L2 flushed before each. With row and
    key, row[key + "_sm"] gets the SM clock and power sampled while the calls ran
    (bench/gpu_clocks.py)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    est = time.perf_counter() - t0
    n = max(n_min if est < 1 else 3, min(n_max, int(target_s / max(est, 1e-5))))  # slow cells: 3 runs
    ts = []
    begin = time.perf_counter()
    for _ in range(n):
        FLUSH.zero_()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    if row is not None and CLOCKS is not None:
        row[key + "_sm"] = CLOCKS.window(begin, time.perf_counter())
    ts.sort()
    return ts[n // 2], ts[0], n


def time_events(fn, n):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for s, e in ev:
        FLUSH.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    ts = sorted(s.elapsed_time(e) for s, e in ev)
    return ts[n // 2]


def build(spec):
    import importlib
    mod, cls_name, cfg_name, kw = spec[4:8]
    m_ = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
    import transformers
    cfg = getattr(transformers, cfg_name)(**kw)
    cfg._experts_implementation = "eager"
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(DEV):
            m = getattr(m_, cls_name)(cfg)
    finally:
        torch.set_default_dtype(prev)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0.0, 0.02)
    return m.eval(), cfg


def out0(o):
    return o[0] if isinstance(o, tuple) else o


MODE_SHORT = {"reduce-overhead": "CG", "max-autotune-no-cudagraphs": "MA", "default": "def",
              "max-autotune": "MAG"}
# Modes whose calls replay inductor's CUDA graphs (cudagraph_mark_step_begin before each).
GRAPH_MODES = ("reduce-overhead", "max-autotune")
AUTOTUNE_MODES = ("max-autotune-no-cudagraphs", "max-autotune")


def compiled_fn(m, cfg, impl, mode, x):
    """transformers' block under torch.compile(mode), as a call on x (compiled at its first)."""
    import torch._dynamo
    torch._dynamo.reset()
    try:
        from torch._inductor import cudagraph_trees
        cudagraph_trees.reset_cudagraph_trees()
    except Exception:  # noqa: BLE001
        pass
    torch.cuda.empty_cache()
    cfg._experts_implementation = impl
    graphs = mode in GRAPH_MODES
    cm = torch.compile(m, mode=mode, fullgraph=False, dynamic=False)

    def fn():
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        return cm(x)
    return fn


def compiled(m, cfg, impl, mode, x, ref, T, H, row, key, args):
    """transformers' block under torch.compile(mode): checked against the f32 reference
    and timed like the eager columns (host time, L2 flushed; CUDA-event median beside it).
    Returns the host median in ms, or a string saying why not."""
    try:
        fn = compiled_fn(m, cfg, impl, mode, x)
        with torch.no_grad():
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            row[key + "_compile_s"] = time.perf_counter() - t0
            for _ in range(3):  # CUDA graph trees: warm-up, record, replay
                fn()
            o = out0(fn()).float().reshape(T, H)
            row[key + "_rel_err"] = ((o - ref).norm() / ref.norm()).item()
            del o
            ms, mn, n = time_wall(fn, args.target_s, row=row, key=key)
            row[key + "_events"] = time_events(fn, n)
            if args.profile:
                profile_kernels(fn, f"transformers {key} T={T}", out=args.out)
        log(f"  {key} T={T}: {ms:.3f} ms, compile {row[key + '_compile_s']:.1f} s, "
            f"rel err {row[key + '_rel_err']:.1e}")
        return ms
    except Exception as e:  # noqa: BLE001
        return "error: " + repr(e)[:160]
    finally:
        torch._dynamo.reset()
        torch.cuda.empty_cache()


def interleaved(row, moec_call, m, cfg, x, args):
    """moec and the fastest transformers configuration of the cell (row['best_all_impl']),
    timed in alternating rounds of ~0.1 s (which goes first alternates too), since the
    SM clock falls under sustained load (1965 MHz in the first timed loop of a
    Mixtral T = 8192 cell, 1470 in the last, moec's) and the sequential columns time
    moec last. Fills row['il_*']: the medians of the rounds' medians, the median of the
    rounds' ratios, and the SM clock of each side's rounds."""
    import torch._dynamo  # here, not in the finally below: that would make torch a local name
    best = row.get("best_all_impl")
    if not best or args.interleave <= 0:
        return
    impl, _, short = best.partition("+")
    try:
        with torch.no_grad():
            if short:
                fn = compiled_fn(m, cfg, impl, {v: k for k, v in MODE_SHORT.items()}[short], x)
                for _ in range(3):  # compile (inductor's cache is warm), record, replay
                    fn()
            else:
                cfg._experts_implementation = impl
                fn = lambda: m(x)  # noqa: E731
            sides = {"moec": moec_call, "best": fn}
            ms = {k: [] for k in sides}
            spans = {k: [] for k in sides}
            for r in range(args.interleave):
                for k in (("moec", "best") if r % 2 == 0 else ("best", "moec")):
                    t0 = time.perf_counter()
                    ms[k].append(time_wall(sides[k], 0.1)[0])
                    spans[k].append((t0, time.perf_counter()))
    except Exception as e:  # noqa: BLE001
        row["il_error"] = repr(e)[:160]
        return
    finally:
        if short:
            torch._dynamo.reset()

    def median(v):
        return sorted(v)[len(v) // 2]
    row.update(il_config=best, il_rounds=args.interleave, il_moec=median(ms["moec"]),
               il_best=median(ms["best"]),
               il_ratio=median([a / b for a, b in zip(ms["moec"], ms["best"])]))
    if CLOCKS is not None:
        row["il_moec_sm"], row["il_best_sm"] = CLOCKS.windows(spans["moec"]), CLOCKS.windows(spans["best"])
    log(f"  interleaved with {best}: moec {row['il_moec']:.3f} ms, {best} {row['il_best']:.3f} ms, "
        f"ratio {row['il_ratio']:.3f}")


def outlier_rows(x, y, ref, router, k, cfg=None):
    """Rows whose relative error is above 5 %, and for them the f32 router's gap
    between its k-th and (k+1)-th largest logit: a tiny gap means a near tie
    that the smallest rounding difference decides (another expert chosen), not
    a wrong kernel."""
    rowerr = (y - ref).norm(dim=1) / ref.norm(dim=1).clamp_min(1e-30)
    bad = torch.nonzero(rowerr > 0.05).flatten()
    if bad.numel() == 0:
        return {}
    w = (router.weight if hasattr(router, "weight") else router.linear.weight).float()
    logits = x[bad].float() @ w.T
    if getattr(router, "bias", None) is not None:
        logits = logits + router.bias.float()
    if getattr(router, "e_score_correction_bias", None) is not None and \
            getattr(cfg, "n_group", None) and getattr(cfg, "topk_group", None):
        # DeepSeek-V3: the choice is made on sigmoid + correction bias, first of
        # topk_group groups by their top-2 sums, then of k experts in them; the
        # gap is the smaller of the two margins.
        scores = logits.sigmoid() + router.e_score_correction_bias.float()
        groups, keep = cfg.n_group, cfg.topk_group
        group_scores = scores.view(len(bad), groups, -1).topk(2, dim=-1).values.sum(-1)
        top_groups = group_scores.topk(min(keep + 1, groups), dim=-1)
        group_gap = (top_groups.values[:, keep - 1] - top_groups.values[:, keep]).abs() \
            if keep < groups else torch.full((len(bad),), float("inf"), device=x.device)
        mask = torch.zeros_like(group_scores, dtype=torch.bool)
        mask.scatter_(1, top_groups.indices[:, :keep], True)
        masked = scores.view(len(bad), groups, -1).masked_fill(~mask[..., None], -float("inf"))
        top = masked.view(len(bad), -1).topk(k + 1, dim=-1).values
        gaps = torch.minimum((top[:, k - 1] - top[:, k]).abs(), group_gap)
    else:
        top = logits.topk(k + 1, dim=-1).values
        gaps = (top[:, k - 1] - top[:, k]).abs()
    return dict(outlier_rows=int(bad.numel()), outlier_rows_max_err=rowerr[bad].max().item(),
                outlier_max_topk_gap=gaps.max().item())


def errors(y, ref):
    """y against ref in float64: (relative L2, DeepGEMM's 1 - 2·Σxy / (Σx² + Σy²))."""
    y, r = y.double().ravel(), ref.double().ravel()
    return ((y - r).norm() / r.norm()).item(), (1 - 2 * (y @ r) / (y @ y + r @ r)).item()


def run_model(name, args, rows):
    E, H, I, K = SPECS[name][:4]
    shared, bias = SPECS[name][8:10]
    art = os.path.join(args.artifacts, name)
    pe_bytes = 3 * H * I * 2 + ((2 * I + H) * 2 if bias else 0)
    t0 = time.perf_counter()
    m, cfg = build(SPECS[name])
    router = m.gate if hasattr(m, "gate") else m.router
    with torch.no_grad():
        write_weights(art, moe_weights(name, m, cfg))
    t1 = time.perf_counter()
    moec = Moec(args.lib, art)
    t2 = time.perf_counter()
    moec8, art8 = None, None
    if args.fp8_artifacts:  # FP8 experts: the same weights, cast as the compiler would
        art8 = os.path.join(args.fp8_artifacts, name)
        with torch.no_grad():
            write_weights(art8, fp8_expert_weights(art8, moe_weights(name, m, cfg)))
        torch.cuda.empty_cache()  # the cast's temporaries: moec allocates with cudaMalloc
        moec8 = Moec(args.lib, art8)
    moecx, artx, mxfp4_weights = None, None, {}
    if args.mxfp4_artifacts:  # MXFP4 experts: the same weights, cast as the compiler would
        artx = os.path.join(args.mxfp4_artifacts, name)
        with torch.no_grad():
            # the codes and scales stay (on the GPU) for the emulated reference below
            tensors, mxfp4_weights = mxfp4_expert_weights(artx, moe_weights(name, m, cfg))
            write_weights(artx, tensors)
            del tensors
        torch.cuda.empty_cache()
        moecx = Moec(args.lib, artx)
    mod_bytes = sum(p.numel() * p.element_size() for p in m.parameters())
    log(f"## {name}: module {mod_bytes / 1e9:.1f} GB bf16; weights.bin written in {t1 - t0:.1f} s "
        f"(build included), moec_load {t2 - t1:.1f} s")
    # The f32 reference (same weights, eager), for every T first; then it is freed.
    mf = None if args.ncu else copy.deepcopy(m).float()  # --ncu checks nothing
    cfg._experts_implementation = "eager"
    inputs, refs = {}, {}
    with torch.inference_mode():
        for T in args.tokens:
            torch.manual_seed(T)
            inputs[T] = torch.randn(1, T, H, device=DEV, dtype=torch.bfloat16)
            if mf is not None:
                refs[T] = out0(mf(inputs[T].float())).reshape(T, H).clone()
        # The MXFP4 recipe emulated: the same f32 block with its experts' weights
        # replaced by their dequantised MXFP4 values (issue 34's 1e-2 bound is against this).
        refs_mx = {}
        if mf is not None and mxfp4_weights:
            views = moe_weights(name, mf, cfg)
            for source, (codes, scales) in mxfp4_weights.items():
                dequantize_mxfp4_into(views[source], codes, scales)
            for T in args.tokens:
                refs_mx[T] = out0(mf(inputs[T].float())).reshape(T, H).clone()
    del mf, mxfp4_weights
    torch.cuda.empty_cache()
    for T in args.tokens:
        x, ref = inputs[T], refs.get(T)
        try:
            with torch.inference_mode():
                ids = router(x.view(-1, H))[2]
                distinct = int(torch.unique(ids).numel())
                counts = torch.bincount(ids.flatten().long())
                counts = counts[counts > 0].float()
                # The tile choice sees only the mean (no host sync); skew costs weight re-reads.
                log(f"  {name} T={T}: rows per touched expert mean {counts.mean().item():.1f}, "
                    f"max {int(counts.max().item())}, experts over 8 rows "
                    f"{int((counts > 8).sum().item())}")
        except Exception as e:
            log(f"  distinct experts: {e!r}")
            distinct = -1
        bytes_ = (distinct + shared) * pe_bytes
        # Like transformers' blocks, moec reads its input from and writes its output to
        # GPU memory (moec.h: used in place, being device memory); --host-io times pinned host
        # buffers instead (two PCIe copies more).
        def buffer(t):
            return t.cpu().pin_memory() if args.host_io else t.to(DEV)
        xh = buffer(x.float().reshape(T, H).contiguous())
        yh = buffer(torch.empty(T, H, dtype=torch.float32))
        torch.cuda.synchronize()  # moec's stream reads x: torch's work on it is done
        moec.bind(xh, yh)
        moec.run()

        def bound_run(model):
            """`model` bound to xh and an output of its own and run once; the output,
            which must outlive the model's later calls (it holds the pointer)."""
            out = buffer(torch.empty(T, H, dtype=torch.float32))
            model.bind(xh, out)
            model.run()
            return out
        if args.ncu:  # one profiled call, nothing else timed or checked (bench/ncu_summary.py)
            flops = 2.0 * T * (K + shared) * 3 * H * I

            def profiled(model, cell, cell_bytes):
                torch.cuda.cudart().cudaProfilerStart()
                model.run()
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStop()
                log(f"ncu cell: {cell} T={T} distinct={distinct} bytes={cell_bytes} flops={flops}")
            profiled(moec, name, bytes_)
            if moec8:  # the FP8 build's call too, as a cell of its own
                yh8 = bound_run(moec8)
                # e4m3 routed experts, the shared expert in bf16
                profiled(moec8, f"{name}-fp8", distinct * pe_bytes / 2 + shared * pe_bytes)
                del yh8
            if moecx:  # MXFP4 routed experts (17/32 of a byte a weight), the rest as compiled
                yhx = bound_run(moecx)
                profiled(moecx, f"{name}-mxfp4", distinct * pe_bytes * 17 / 64 + shared * pe_bytes)
                del yhx
            del xh, yh
            continue
        if moec8:
            yh8 = bound_run(moec8)
            fp8 = dict(zip(("moec_fp8_rel_err", "moec_fp8_diff"), errors(yh8.to(DEV), ref)))
        if moecx:
            yhx = bound_run(moecx)
            yx = yhx.to(DEV)
            mx = dict(zip(("moec_mxfp4_rel_err", "moec_mxfp4_diff"), errors(yx, ref)))
            mx["moec_mxfp4_emul_err"] = errors(yx, refs_mx[T])[0]
            mx["check_mxfp4"] = "ok" if mx["moec_mxfp4_emul_err"] <= args.mxfp4_rtol else "FAIL"
        y = yh.to(DEV)
        err = ((y - ref).norm() / ref.norm()).item()
        maxabs = (y - ref).abs().max().item()
        flops = 2.0 * T * (K + shared) * 3 * H * I  # routed slots and the shared expert
        row = dict(model=name, T=T, distinct=distinct, bytes_GB=bytes_ / 1e9, flops=flops,
                   moec_rel_err=err, moec_max_abs=maxabs, check="ok" if err <= args.rtol else "FAIL")
        row.update(outlier_rows(x.view(-1, H), y, ref, router, K, cfg))
        for impl in args.impls:
            torch.cuda.empty_cache()
            gathered = T * K * pe_bytes
            if impl == "batched_mm" and (gathered + mod_bytes > args.batched_mm_limit
                                         or gathered > 0.7 * torch.cuda.mem_get_info()[0]):
                row[impl] = f"skipped (~{gathered / 1e9:.0f} GB gathered)"
                continue
            cfg._experts_implementation = impl
            try:
                with torch.inference_mode():
                    fn = lambda: m(x)
                    o = out0(fn()).float().reshape(T, H)
                    row[impl + "_rel_err"] = ((o - ref).norm() / ref.norm()).item()
                    del o
                    ms, mn, n = time_wall(fn, args.target_s, row=row, key=impl)
                    row[impl] = ms
                    row[impl + "_min"] = mn
                    row[impl + "_events"] = time_events(fn, n)
            except Exception as e:  # OOM and friends: record, go on
                row[impl] = "error: " + repr(e)[:160]
                torch.cuda.empty_cache()
        for impl, mode in args.compiled:
            if mode == "reduce-overhead" and T > args.cuda_graphs_max_tokens:
                continue
            if mode in AUTOTUNE_MODES and T < args.max_autotune_min_tokens:
                continue
            key = f"{impl}+{MODE_SHORT[mode]}"
            row[key] = compiled(m, cfg, impl, mode, x, ref, T, H, row, key, args)
        # moec: queued on torch's stream and waited for by the clock's one synchronise, as
        # transformers' calls are; moec_blocking: moec_run, which waits inside, so that the
        # clock's synchronise after it is an idle one (bench/host_floor.py).
        ms, mn, n = time_wall(moec.call, args.target_s, row=row, key="moec")
        row.update(moec=ms, moec_min=mn, moec_n=n, moec_clock="async" if moec.has_async else "blocking")
        if moec.has_async:
            row["moec_blocking"], row["moec_blocking_min"], _ = time_wall(moec.run, args.target_s)
        if args.profile:
            profile_kernels(moec.call, f"{name} T={T}", out=args.out)
        if moec8:
            row.update(fp8)
            row["moec_fp8"], row["moec_fp8_min"], _ = time_wall(moec8.call, args.target_s, row=row, key="moec_fp8")
            if args.profile:
                profile_kernels(moec8.call, f"{name} T={T} fp8", out=args.out)
        if moecx:
            row.update(mx)
            row["moec_mxfp4"], row["moec_mxfp4_min"], _ = time_wall(moecx.call, args.target_s, row=row,
                                                                   key="moec_mxfp4")
            if args.profile:
                profile_kernels(moecx.call, f"{name} T={T} mxfp4", out=args.out)
        best = [(row[i], i) for i in IMPLS if isinstance(row.get(i), float)]
        if best:
            row["best"], row["best_impl"] = min(best)
            row["ratio"] = ms / row["best"]
        every = best + [(row[k], k) for k in row if is_config_key(k) and isinstance(row[k], float)]
        if every:
            row["best_all"], row["best_all_impl"] = min(every)
            row["ratio_all"] = ms / row["best_all"]
            interleaved(row, moec.call, m, cfg, x, args)
        log(json.dumps({k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in row.items()}))
        rows.append(row)
        write(rows, args.out, args.meta, quiet=True)  # a killed run keeps its rows
        del xh, yh, y
    moec.free()
    if moec8:
        moec8.free()
    if moecx:
        moecx.free()
    del m, inputs, refs, refs_mx
    torch.cuda.empty_cache()
    if args.remove_weights:  # the disk holds one model's weights at a time
        for directory in filter(None, [art, art8, artx]):
            os.remove(os.path.join(directory, "weights.bin"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--artifacts", default=".device/bench/art", help="one artifact directory per model")
    p.add_argument("--lib", default=".device/bench/libmoec.so", help="moec's C API as a shared library")
    p.add_argument("--models", default=",".join(SPECS))
    p.add_argument("--tokens", default="1,16,128,1024,8192")
    p.add_argument("--profile", action="store_true",
                   help="also print per-kernel GPU times per cell (torch.profiler): moec's, and "
                        "those of the compiled transformers configurations")
    p.add_argument("--ncu", action="store_true",
                   help="profile one moec call per cell between cudaProfilerStart/Stop and time nothing "
                        "(run under ncu --profile-from-start off; see bench/ncu_summary.py)")
    p.add_argument("--host-io", action="store_true",
                   help="moec's input and output in pinned host memory (default: GPU memory)")
    p.add_argument("--rtol", type=float, default=1e-4, help="max relative L2 error of moec vs f32 eager")
    p.add_argument("--target-s", type=float, default=0.5, help="timed seconds per cell (5..100 runs)")
    p.add_argument("--keep-weights", dest="remove_weights", action="store_false",
                   help="keep each weights.bin (default: removed once its model is done)")
    p.add_argument("--batched-mm-limit", type=float, default=60e9,
                   help="skip batched_mm when gathered weights + module exceed this many bytes")
    p.add_argument("--fp8-artifacts", default="",
                   help="also run these FP8 artifacts (bench/prepare.sh with FP8=1), same weights")
    p.add_argument("--mxfp4-artifacts", default="",
                   help="also run these MXFP4 artifacts (bench/prepare.sh with MXFP4=1), same weights; "
                        "checked against the f32 block with the dequantised weights (--mxfp4-rtol)")
    p.add_argument("--mxfp4-rtol", type=float, default=1e-2,
                   help="max relative L2 error of moec's MXFP4 block vs the emulated MXFP4 block")
    p.add_argument("--impls", default=",".join(IMPLS),
                   help="transformers' eager experts backends to run, comma-separated; '' for none "
                        "(moec's own bf16 / FP8 / MXFP4 columns only, with --compiled '')")
    p.add_argument("--compiled", default="grouped_mm:reduce-overhead,grouped_mm:default,"
                                          "grouped_mm:max-autotune-no-cudagraphs,grouped_mm:max-autotune",
                   help="transformers configurations under torch.compile, IMPL:MODE,... (MODE: "
                        "reduce-overhead, max-autotune-no-cudagraphs, max-autotune (autotuned and "
                        "CUDA graphs: MAG) or default); '' for none")
    p.add_argument("--cuda-graphs-max-tokens", type=int, default=128,
                   help="run reduce-overhead (CUDA graphs) only up to this many tokens")
    p.add_argument("--max-autotune-min-tokens", type=int, default=1024,
                   help="run the max-autotune modes only from this many tokens (30-170 s of "
                        "compile per cell, cold)")
    p.add_argument("--interleave", type=int, default=8,
                   help="rounds of moec against the cell's fastest transformers configuration, "
                        "alternating (0: none)")
    args = p.parse_args()
    args.tokens = [int(t) for t in args.tokens.split(",")]
    args.impls = [i for i in args.impls.split(",") if i]
    for impl in args.impls:
        if impl not in IMPLS:
            p.error(f"--impls: unknown backend {impl}")
    args.compiled = [tuple(c.split(":")) for c in args.compiled.split(",") if c]
    for impl, mode in args.compiled:
        if impl not in IMPLS or mode not in MODE_SHORT:
            p.error(f"--compiled: unknown configuration {impl}:{mode}")
    global FLUSH, CLOCKS
    FLUSH = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=DEV)
    CLOCKS = ClockSampler()
    if CLOCKS.error:
        log(f"no SM clocks recorded: {CLOCKS.error}")
        CLOCKS = None
    import transformers
    # The expert weights' dtype in the artifacts (f32, or bf16 with --expert-weights=bf16).
    dtypes = {w[1] for m in args.models.split(",")
              if os.path.exists(os.path.join(args.artifacts, m, "manifest.txt"))
              for w in read_layout(os.path.join(args.artifacts, m))[1] if len(w[2]) == 3}
    meta = dict(transformers=transformers.__version__, torch=torch.__version__,
                gpu=torch.cuda.get_device_name(), tokens=args.tokens,
                moec_expert_weights="/".join(sorted(dtypes)) or "f32",
                moec_io="host" if args.host_io else "device", moec_artifacts=args.artifacts,
                clocks_recorded=CLOCKS is not None)
    rows = []
    out = args.out = os.environ.get("OUT", "out")
    args.meta = meta
    for name in args.models.split(","):
        try:
            run_model(name, args, rows)
        except Exception as e:
            import traceback
            traceback.print_exc()
            log(f"## {name}: failed: {e!r}")
        write(rows, out, meta)
    if args.ncu:  # nothing checked: the profiles are the result
        return 0
    return 0 if all(r["check"] == "ok" and r.get("check_mxfp4", "ok") == "ok" for r in rows) and rows else 1


if __name__ == "__main__":
    sys.exit(main())
