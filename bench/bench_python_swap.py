#!/usr/bin/env python3
"""Qwen3-30B-A3B under transformers' model.generate, before and after
moec.transformers.compile_experts, in one run (issue 33; docs/python.md).

    python3 bench/bench_python_swap.py --prepare --cache DIR     (here: moec + nvcc, no GPU)
    python3 bench/bench_python_swap.py --cache DIR --json OUT.json   (on the H200)

The model is the real config (48 layers, 128 experts of 768, top-8, hidden 2048,
vocabulary 151936) with random bf16 weights made on the GPU (transformers'
initialisation, std 0.02). Each configuration runs model.generate on random
prompts of --prompt tokens at each batch size: greedy, --new-tokens tokens
(min_new_tokens too, so no end-of-sequence stops it), after a warm-up run; the
prefill alone is timed with max_new_tokens=1, and a decode step is
(total - prefill) / (new_tokens - 1). tokens/s = batch / step, the figure the
issue quotes (10.9 tokens/s at batch 1 = 92 ms a step with batched_mm).

The prompt is short (32 tokens) so that every implementation's prefill fits:
batched_mm gathers each token's top-8 expert weights, 16 x 128 tokens x 8 x
6 MB = 96 GiB at batch 16 with 128-token prompts, more than the GPU has free
beside the model's 57 GiB. A cell (implementation, batch) that still runs out
of memory is recorded as OOM (its memory freed) and the run goes on; the JSON
is rewritten after every cell, so a run cut short keeps what it measured.

Before: transformers' experts implementations (--before, default batched_mm and
grouped_mm). Then compile_experts swaps the 48 blocks (the shape compiled here
with --prepare, from the cache; weights written from the model's own parameters,
block by block, to whichever of /dev/shm and the temporary directory has room,
deleted once loaded) and the same runs follow. Where the time goes: a
torch.profiler trace of one decode step before and after the swap, its GPU
kernel time summed by kind (moec's kernels, attention, other matmuls, the rest)
against the step's wall time; and each MoE block alone (CUDA events) at the
decode token counts.
"""
import argparse
import gc
import json
import os
import shutil
import tempfile
import time


QWEN3_30B_A3B = dict(
    vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
    num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
    num_experts=128, num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1,
    mlp_only_layers=[], hidden_act="silu", max_position_embeddings=40960, rms_norm_eps=1e-6,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=False,
    attention_bias=False, use_sliding_window=False, initializer_range=0.02,
    bos_token_id=None, eos_token_id=None, pad_token_id=0)


# --tiny: the same model's form at a size a CPU runs (a check of this script).
TINY = dict(vocab_size=1024, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_experts=16,
            num_hidden_layers=2)


def config(layers=None, tiny=False):
    from transformers import Qwen3MoeConfig
    kw = dict(QWEN3_30B_A3B)
    if tiny:
        kw.update(TINY)
    if layers:
        kw["num_hidden_layers"] = layers
    return Qwen3MoeConfig(**kw)


def sync(a):
    import torch
    if a.device == "cuda":
        torch.cuda.synchronize()


def compile_options(a):
    if a.device == "cpu":  # the CPU target keeps f32 experts
        return dict(max_tokens=a.max_tokens)
    opts = dict(max_tokens=a.max_tokens, expert_weights="bf16")
    if a.expert_outputs == "bf16":
        opts["expert_outputs"] = "bf16"
    return opts


def prepare(a):
    import torch
    import transformers
    import moec.transformers
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config(a.layers, a.tiny),
                                                               dtype=torch.bfloat16)
    t = time.time()
    paths = moec.transformers.prepare(model, a.device, cache=a.cache, **compile_options(a))
    print(f"compiled {paths} in {time.time() - t:.1f} s")


def free_dir(need):
    """A directory with `need` bytes free for a block's weights.bin."""
    for d in ("/dev/shm", tempfile.gettempdir()):
        if os.path.isdir(d) and shutil.disk_usage(d).free > need + (1 << 30):
            return d
    raise SystemExit(f"no room for {need} bytes of weights in /dev/shm or {tempfile.gettempdir()}")


def swap(model, a):
    """compile_experts, block by block, each block's weights written where there is room."""
    import torch
    import moec
    import moec.transformers as mt
    from moec import blocks
    names = [n for n, m in model.named_modules() if type(m).__name__ in mt._BLOCKS]
    opts = compile_options(a)
    t = time.time()
    for i, name in enumerate(names):
        block = model.get_submodule(name)
        spec, weights, tup = mt.block_spec(block)
        art = blocks.compile_block(spec, a.device, cache=a.cache, **opts)
        need = sum(w.numel() * 2 for w in weights.values())
        root = tempfile.mkdtemp(prefix="moec-swap-", dir=free_dir(need))
        with torch.no_grad():
            blocks.instantiate(art, weights, root)
        m = moec.load(root)
        shutil.rmtree(root)  # mapped or uploaded: the files may go
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent), child, mt.MoecBlock(m, spec, tup, type(block).__name__))
        del block, weights
        if a.device == "cuda":
            torch.cuda.empty_cache()
        if i == 0 or (i + 1) % 12 == 0:
            print(f"  swapped {i + 1}/{len(names)} blocks in {time.time() - t:.1f} s", flush=True)
    return time.time() - t


def is_oom(e):
    import torch
    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e)


def free_memory(a):
    import torch
    gc.collect()
    if a.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def guarded(what, fn, a, **fields):
    """fn()'s result, or a record of its OOM (the memory freed) so the run goes on."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - only OOM is recorded; the rest propagates
        if not is_oom(e):
            raise
        msg = str(e).split("\n")[0][:200]
    # Out of the except block: its traceback, which holds the failed step's
    # tensors, is gone before the cache is emptied.
    free_memory(a)
    print(f"  {what}: out of memory ({msg})", flush=True)
    return dict(oom=True, error=msg, **fields)


def time_generate(model, batch, a):
    import torch
    g = torch.Generator().manual_seed(batch)
    ids = torch.randint(1, model.config.vocab_size, (batch, a.prompt), generator=g).to(a.device)
    mask = torch.ones_like(ids)

    def run(n):
        sync(a)
        t = time.perf_counter()
        out = model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                             do_sample=False, pad_token_id=0)
        sync(a)
        return time.perf_counter() - t, out

    with torch.no_grad():
        run(4)  # warm-up: allocator, kernels, moec's graphs for these token counts
        prefill = sorted(run(1)[0] for _ in range(3))[1]  # the median of three
        total, out = run(a.new_tokens)
    step = (total - prefill) / (a.new_tokens - 1)
    return dict(batch=batch, prompt=a.prompt, new_tokens=a.new_tokens, prefill_s=prefill,
                total_s=total, step_ms=step * 1e3, tokens_per_s=batch / step,
                first_tokens=out[0, a.prompt:a.prompt + 8].tolist())


# moec's own kernels are in namespace moec::rt::cuda; CUTLASS's grouped GEMMs
# are moec's prefill after the swap and torch's grouped_mm before it.
KINDS = [("moec", ("moec::", "cub::")),
         ("cutlass", ("cutlass",)),
         ("attention", ("flash", "attention", "fmha", "sdpa", "softmax")),
         ("matmul", ("gemm", "Gemm", "nvjet", "cublas", "xmma", "bmm")),
         ("other", ("",))]


def kind_of(name):
    for kind, keys in KINDS:
        if any(k in name for k in keys):
            return kind
    return "other"


def profile_step(model, batch, a):
    """One decode step's GPU kernels by kind, and its wall time."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    ids = torch.randint(1, model.config.vocab_size, (batch, a.prompt)).to(a.device)
    with torch.no_grad():
        out = model(ids, use_cache=True)
        cache = out.past_key_values
        nxt = out.logits[:, -1:].argmax(-1)
        for _ in range(3):  # warm the decode path
            out = model(nxt, past_key_values=cache, use_cache=True)
            nxt = out.logits[:, -1:].argmax(-1)
        sync(a)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if a.device == "cuda" else [])
        with profile(activities=activities) as prof:
            t = time.perf_counter()
            out = model(nxt, past_key_values=cache, use_cache=True)
            sync(a)
            wall = time.perf_counter() - t
    sums, top = {}, {}
    for e in prof.events():
        dev = getattr(e, "device_type", None)
        if dev is None or "CUDA" not in str(dev):
            continue
        us = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        k = kind_of(e.name)
        sums[k] = sums.get(k, 0.0) + us
        top[e.name] = top.get(e.name, 0.0) + us
    busy = sum(sums.values())
    return dict(batch=batch, wall_ms=wall * 1e3, gpu_busy_ms=busy / 1e3,
                gpu_idle_ms=max(0.0, wall * 1e3 - busy / 1e3),
                by_kind_ms={k: v / 1e3 for k, v in sorted(sums.items())},
                top_kernels_ms=[(n[:120], v / 1e3) for n, v in
                                sorted(top.items(), key=lambda x: -x[1])[:15]])


def time_blocks(model, tokens, a, reps=50):
    """Each MoE block's median ms at each token count, and their sum."""
    import torch
    import moec.transformers as mt
    blocks_ = [m for m in model.modules()
               if type(m).__name__ in mt._BLOCKS or isinstance(m, mt.MoecBlock)]
    result = {}
    with torch.no_grad():
        for t in tokens:
            x = torch.randn(1, t, model.config.hidden_size, device=a.device, dtype=torch.bfloat16)
            per = []
            for b in blocks_[:4]:
                for _ in range(5):
                    b(x)
                times = []
                for _ in range(reps):
                    sync(a)
                    start = time.perf_counter()
                    b(x)
                    sync(a)
                    times.append((time.perf_counter() - start) * 1e3)
                per.append(sorted(times)[len(times) // 2])
            result[t] = dict(block_ms=sum(per) / len(per),
                             all_blocks_ms=sum(per) / len(per) * len(blocks_))
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prepare", action="store_true", help="compile the block shape (no GPU)")
    p.add_argument("--cache", required=True, help="moec.blocks cache ($MOEC_CACHE_DIR)")
    p.add_argument("--layers", type=int, help="fewer layers (a quick check)")
    p.add_argument("--tiny", action="store_true", help="a small model of the same form")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: a check of this script where there is no GPU (with --tiny)")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=2048, help="moec's largest step")
    p.add_argument("--expert-outputs", choices=["bf16", "f32"], default="bf16")
    p.add_argument("--before", default="batched_mm,grouped_mm",
                   help="transformers' experts implementations timed before the swap")
    p.add_argument("--no-swap", action="store_true",
                   help="transformers' implementations only (where moec.load fails)")
    p.add_argument("--json")
    a = p.parse_args()
    if a.prepare:
        return prepare(a)
    import torch
    import transformers
    batches = [int(b) for b in a.batches.split(",")]
    if max(batches) * a.prompt > a.max_tokens:
        raise SystemExit(f"batch x prompt {max(batches) * a.prompt} > --max-tokens {a.max_tokens}")
    report = dict(config="Qwen3-30B-A3B (real config, random bf16 weights)", args=vars(a),
                  device=torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
                  torch=torch.__version__,
                  transformers=transformers.__version__, runs=[], profiles=[], blocks={})
    t = time.time()
    torch.manual_seed(0)
    with torch.device(a.device):
        model = transformers.AutoModelForCausalLM.from_config(config(a.layers, a.tiny),
                                                               dtype=torch.bfloat16)
    model.eval()
    print(f"model made in {time.time() - t:.1f} s, "
          f"{sum(p.numel() for p in model.parameters()) / 1e9:.1f} B parameters", flush=True)

    def save():
        if a.json:
            with open(a.json + ".tmp", "w") as f:
                json.dump(report, f, indent=1)
            os.replace(a.json + ".tmp", a.json)

    def cells(label):
        """model.generate at each batch size, one cell at a time."""
        for b in batches:
            r = guarded(f"{label} batch {b}", lambda: time_generate(model, b, a), a,
                        batch=b, prompt=a.prompt, new_tokens=a.new_tokens)
            r["experts"] = label
            report["runs"].append(r)
            if r.get("oom"):
                print(f"{label:>12} batch {b:>2}: OOM", flush=True)
            else:
                print(f"{label:>12} batch {b:>2}: prefill {r['prefill_s'] * 1e3:8.1f} ms, "
                      f"step {r['step_ms']:7.2f} ms, {r['tokens_per_s']:8.1f} tokens/s", flush=True)
            save()

    def where_time_goes(label, profile_batches):
        report["blocks"][label] = guarded(f"{label} blocks", lambda: time_blocks(model, batches, a), a)
        for b in profile_batches:
            pr = guarded(f"{label} profile", lambda: profile_step(model, b, a), a, batch=b)
            report["profiles"].append(dict(experts=label, **pr))
        save()

    for impl in a.before.split(","):
        model.set_experts_implementation(impl)
        cells(impl)
        where_time_goes(impl, batches[:1])
    if not a.no_swap:
        report["swap_s"] = swap(model, a)
        print(f"swapped in {report['swap_s']:.1f} s", flush=True)
        save()
        cells("moec")
        where_time_goes("moec", batches)
    for pr in report["profiles"]:
        if pr.get("oom"):
            print(f"profile {pr['experts']:>12} batch {pr['batch']:>2}: OOM")
            continue
        kinds = ", ".join(f"{k} {v:.2f}" for k, v in pr["by_kind_ms"].items())
        print(f"profile {pr['experts']:>12} batch {pr['batch']:>2}: wall {pr['wall_ms']:.2f} ms, "
              f"GPU busy {pr['gpu_busy_ms']:.2f} ms ({kinds}), idle {pr['gpu_idle_ms']:.2f} ms")
    for impl, per in report["blocks"].items():
        if per.get("oom"):
            print(f"block {impl:>12}: OOM")
            continue
        for t_, r in per.items():
            print(f"block {impl:>12} T={t_:>3}: {r['block_ms']:.3f} ms, all blocks {r['all_blocks_ms']:.2f} ms")
    print()
    print(table(report, batches))
    save()


def table(report, batches):
    """The runs as a markdown table: per-step decode time and tokens/s of each
    implementation at each batch, and the speed-up of moec over each."""
    runs = {(r["experts"], r["batch"]): r for r in report["runs"]}
    impls = list(dict.fromkeys(r["experts"] for r in report["runs"]))
    head = ["experts"]
    for b in batches:
        head += [f"batch {b} prefill ms", f"batch {b} decode step ms", f"batch {b} tokens/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for impl in impls:
        row = [impl]
        for b in batches:
            r = runs.get((impl, b))
            if r is None:
                row += ["-"] * 3
            elif r.get("oom"):
                row += ["OOM"] * 3
            else:
                row += [f"{r['prefill_s'] * 1e3:.1f}", f"{r['step_ms']:.2f}", f"{r['tokens_per_s']:.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    for b in batches:
        m = runs.get(("moec", b))
        if not m or m.get("oom"):
            continue
        for impl in impls:
            r = runs.get((impl, b))
            if impl != "moec" and r and not r.get("oom"):
                lines.append(f"batch {b}: decode step {impl} / moec = {r['step_ms'] / m['step_ms']:.2f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
