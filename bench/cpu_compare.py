#!/usr/bin/env python3
"""moec's CPU backend against onnxruntime and torch on the CPU, same run, same thread count.

Cells (docs/performance.md, "CPU backend"):
  blocks   the four MoE block fixtures (test/fixtures/<family>/model.onnx) at 1, 16 and 256
           tokens: moec (`moec compile --target=cpu`, moec_run), onnxruntime (CPU EP, the same
           model.onnx), and the transformers block with the batched_mm and grouped_mm experts
           (the fixtures' weights: scripts/fixtures/export_transformers.py's `build`).
  models   the four tiny whole models (test/fixtures/models/<family>): the forward of the
           prompt (batch 2 x 7 tokens; moec_forward, onnxruntime on the exported model.onnx,
           the transformers model's forward) and a 16-token greedy decode, time per step
           (moec_generate's decode time; transformers' `model.generate`, timed between the
           steps' stopping-criteria calls; onnxruntime's exported graph has no KV cache, so
           its step is a forward of the whole sequence so far).
Each framework runs in a worker process of its own (onnxruntime's threads spin after a run
and would steal the other frameworks' cores), with 1 and 2 threads: MOEC_NUM_THREADS,
intra_op_num_threads, torch.set_num_threads (and OMP/MKL_NUM_THREADS). The workers run
in --rounds rounds, the frameworks' order rotated each round; a cell's figure is the median
over rounds of the round's median call. Every cell's outputs are checked against
onnxruntime's (blocks, forward logits) and the fixture's generated tokens (decode).

    /work/tvenv/bin/python bench/cpu_compare.py [--bin build/bin] [--work /tmp/cpu-compare]
        [--threads 1,2] [--rounds 3] [--seconds 0.3] [--only blocks|models] [-o table.txt]
        [--runtime-dir PREFIX] [--baseline-runtime-dir OLD_PREFIX]

Needs torch, transformers 5.17 and onnxruntime in the running Python, a C++ compiler, and
a build tree (moec, libmoec_runtime.a).
"""
import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAMILIES = ("mixtral", "qwen3_moe", "gpt_oss", "deepseek_v3")
BLOCK_TOKENS = (1, 16, 256)
NEW_TOKENS = 16
FRAMEWORKS = ("moec", "ort", "torch")
TORCH_IMPLS = ("batched_mm", "grouped_mm")


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------

def time_calls(fn, seconds, min_calls=20, max_calls=20000, warmup=5):
    """Per-call seconds of `fn`: warm-up calls, then calls until `seconds` have passed
    (at least min_calls, at most max_calls)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_calls and (len(times) < min_calls or time.perf_counter() - start < seconds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def block_inputs(tokens):
    return np.random.default_rng(tokens).standard_normal((1, tokens, 64)).astype(np.float32)


def model_prompt(family):
    d = np.load(os.path.join(ROOT, "test/fixtures/models", family, "prompt.npz"))
    return d["input_ids"].astype(np.int64), d["attention_mask"].astype(np.int64)


def model_expected(family):
    return np.load(os.path.join(ROOT, "test/fixtures/models", family, "generate.npz"))["sequences"]


# ---------------------------------------------------------------------------
# Workers: one framework, one thread count, every cell
# ---------------------------------------------------------------------------

class MoecTensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p)]


class MoecStats(ctypes.Structure):
    _fields_ = [("prefill_tokens", ctypes.c_int64), ("decode_tokens", ctypes.c_int64),
                ("prefill_seconds", ctypes.c_double), ("decode_seconds", ctypes.c_double)]


class MoecLib:
    def __init__(self, path):
        L = self.L = ctypes.CDLL(path)
        L.moec_load.restype = ctypes.c_void_p
        L.moec_load.argtypes = [ctypes.c_char_p]
        L.moec_last_error.restype = ctypes.c_char_p
        L.moec_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(MoecTensor), ctypes.c_size_t,
                               ctypes.POINTER(MoecTensor), ctypes.c_size_t]
        L.moec_forward.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                   ctypes.c_void_p]
        L.moec_generate.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                    ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.POINTER(MoecStats)]
        L.moec_free.argtypes = [ctypes.c_void_p]

    def load(self, artifact):
        model = self.L.moec_load(artifact.encode())
        if not model:
            raise RuntimeError("moec_load: " + self.L.moec_last_error().decode())
        return model

    def check(self, rc, what):
        if rc:
            raise RuntimeError(what + ": " + self.L.moec_last_error().decode())


def moec_worker(args, results):
    """moec's artifacts (column `moec`), or the baseline's (--baseline-runtime-dir: `base`)."""
    column = args.framework
    arts = os.path.join(args.work, "base" if column == "base" else "")
    lib = MoecLib(os.path.join(args.work, "libmoec.so"))
    ort_ref = OrtRef()
    if args.only != "models":
        for family in FAMILIES:
            model = lib.load(os.path.join(arts, "blocks", family))
            for tokens in BLOCK_TOKENS:
                x = block_inputs(tokens)
                y = np.empty_like(x)
                shape = (ctypes.c_int64 * 3)(*x.shape)
                inp = MoecTensor(b"hidden_states", 0, 3, shape, x.ctypes.data)
                out = MoecTensor(b"output", 0, 3, shape, y.ctypes.data)

                def call():
                    lib.check(lib.L.moec_run(model, ctypes.byref(inp), 1, ctypes.byref(out), 1), "moec_run")
                call()
                err = ort_ref.block_error(family, x, y)
                results[f"block/{family}/{tokens}/{column}"] = dict(times=time_calls(call, args.seconds), err=err)
            lib.L.moec_free(model)
    if args.only != "blocks":
        for family in FAMILIES:
            model = lib.load(os.path.join(arts, "models", family))
            ids, mask = model_prompt(family)
            batch, length = ids.shape
            vocab = 128
            logits = np.empty((batch, length, vocab), np.float32)

            def forward():
                lib.check(lib.L.moec_forward(model, ids.ctypes.data, batch, length, logits.ctypes.data),
                          "moec_forward")
            forward()
            err = ort_ref.model_error(family, ids, logits)
            results[f"forward/{family}/{column}"] = dict(times=time_calls(forward, args.seconds), err=err)

            seqs = np.empty((batch, length + NEW_TOKENS), np.int64)
            stats = MoecStats()
            steps = []

            def generate():
                lib.check(lib.L.moec_generate(model, ids.ctypes.data, mask.ctypes.data, batch, length,
                                              NEW_TOKENS, None, seqs.ctypes.data, ctypes.byref(stats)),
                          "moec_generate")
                steps.append(stats.decode_seconds / (stats.decode_tokens / batch))
            generate()
            same = bool(np.array_equal(seqs, model_expected(family)))
            steps.clear()
            time_calls(generate, args.seconds, min_calls=10, warmup=0)
            results[f"decode/{family}/{column}"] = dict(times=steps, same_tokens=same)
            lib.L.moec_free(model)


class OrtRef:
    """onnxruntime's outputs, one thread, as the accuracy reference of the other workers."""

    def __init__(self):
        self.sessions = {}

    def session(self, path):
        import onnxruntime as ort
        if path not in self.sessions:
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            self.sessions[path] = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        return self.sessions[path]

    def block_error(self, family, x, y):
        s = self.session(os.path.join(ROOT, "test/fixtures", family, "model.onnx"))
        ref = s.run(None, {"hidden_states": x})[0]
        return float(np.max(np.abs(ref - y)) / max(np.max(np.abs(ref)), 1e-30))

    def model_error(self, family, ids, logits):
        s = self.session(os.path.join(ROOT, "test/fixtures/models", family, "model.onnx"))
        ref = s.run(None, {"input_ids": ids})[0]
        return float(np.max(np.abs(ref - logits)) / max(np.max(np.abs(ref)), 1e-30))


def ort_worker(args, results):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    ref = OrtRef()
    if args.only != "models":
        for family in FAMILIES:
            s = ort.InferenceSession(os.path.join(ROOT, "test/fixtures", family, "model.onnx"), so,
                                     providers=["CPUExecutionProvider"])
            for tokens in BLOCK_TOKENS:
                x = block_inputs(tokens)
                feed = {"hidden_states": x}
                y = s.run(None, feed)[0]
                err = ref.block_error(family, x, y)
                results[f"block/{family}/{tokens}/ort"] = dict(
                    times=time_calls(lambda: s.run(None, feed), args.seconds), err=err)
    if args.only != "blocks":
        for family in FAMILIES:
            s = ort.InferenceSession(os.path.join(ROOT, "test/fixtures/models", family, "model.onnx"), so,
                                     providers=["CPUExecutionProvider"])
            ids, _ = model_prompt(family)
            logits = s.run(None, {"input_ids": ids})[0]
            err = ref.model_error(family, ids, logits)
            results[f"forward/{family}/ort"] = dict(
                times=time_calls(lambda: s.run(None, {"input_ids": ids}), args.seconds), err=err)
            # Greedy decode without a KV cache (the exported graph has none): each step a
            # forward of the whole sequence so far.
            steps = []
            seqs = [None]

            def generate():
                seq = ids
                seq = np.concatenate([seq, s.run(None, {"input_ids": seq})[0][:, -1:].argmax(-1)], 1)
                t0 = time.perf_counter()
                for _ in range(NEW_TOKENS - 1):
                    nxt = s.run(None, {"input_ids": seq})[0][:, -1:].argmax(-1)
                    seq = np.concatenate([seq, nxt], 1)
                steps.append((time.perf_counter() - t0) / (NEW_TOKENS - 1))
                seqs[0] = seq
            generate()
            same = bool(np.array_equal(seqs[0], model_expected(family)))
            steps.clear()
            time_calls(generate, args.seconds, min_calls=10, warmup=0)
            results[f"decode/{family}/ort"] = dict(times=steps, same_tokens=same)


def torch_worker(args, results):
    import torch
    import transformers
    torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    ref = OrtRef()
    if args.only != "models":
        sys.path.insert(0, os.path.join(ROOT, "scripts/fixtures"))
        import export_transformers as et
        for family in FAMILIES:
            spec = et.FAMILIES[family]
            cfg, block, _, _, _ = et.build(family, spec, spec["seed"])
            for impl in TORCH_IMPLS:
                et.set_impl(cfg, block, impl)
                for tokens in BLOCK_TOKENS:
                    x = block_inputs(tokens)
                    xt = torch.from_numpy(x)

                    def call():
                        out = block(xt)
                        return out[0] if isinstance(out, (tuple, list)) else out
                    with torch.inference_mode():
                        y = call().numpy()
                        err = ref.block_error(family, x, y)
                        results[f"block/{family}/{tokens}/torch-{impl}"] = dict(
                            times=time_calls(call, args.seconds), err=err)
    if args.only != "blocks":
        for family in FAMILIES:
            path = os.path.join(ROOT, "test/fixtures/models", family, "checkpoint")
            ids, mask = model_prompt(family)
            tids, tmask = torch.from_numpy(ids), torch.from_numpy(mask)
            for impl in TORCH_IMPLS:
                model = transformers.AutoModelForCausalLM.from_pretrained(
                    path, dtype=torch.float32, experts_implementation=impl).eval()
                with torch.inference_mode():
                    logits = model(input_ids=tids, attention_mask=tmask).logits.numpy()
                    err = ref.model_error(family, ids, logits)
                    results[f"forward/{family}/torch-{impl}"] = dict(
                        times=time_calls(lambda: model(input_ids=tids, attention_mask=tmask), args.seconds),
                        err=err)

                    stamps = []

                    class Stamp(transformers.StoppingCriteria):
                        def __call__(self, input_ids, scores, **kwargs):
                            stamps.append(time.perf_counter())
                            return torch.zeros(input_ids.shape[0], dtype=torch.bool)
                    steps = []
                    seqs = [None]

                    def generate():
                        stamps.clear()
                        seqs[0] = model.generate(
                            input_ids=tids, attention_mask=tmask, max_new_tokens=NEW_TOKENS,
                            min_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0,
                            eos_token_id=None, stopping_criteria=transformers.StoppingCriteriaList([Stamp()]))
                        # stamps[0]: after the prefill's token; each later one after a decode step.
                        steps.append((stamps[-1] - stamps[0]) / (len(stamps) - 1))
                    generate()
                    same = bool(np.array_equal(seqs[0].numpy(), model_expected(family)))
                    steps.clear()
                    time_calls(generate, args.seconds, min_calls=10, warmup=0)
                    results[f"decode/{family}/torch-{impl}"] = dict(times=steps, same_tokens=same)


def worker(args):
    results = {}
    {"moec": moec_worker, "base": moec_worker, "ort": ort_worker,
     "torch": torch_worker}[args.framework](args, results)
    with open(args.json, "w") as f:
        json.dump(results, f)


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def prepare(args):
    """Artifacts and the C API as a shared library, under --work."""
    os.makedirs(args.work, exist_ok=True)
    build = os.path.dirname(os.path.abspath(args.bin))
    cxx = os.environ.get("CXX", "c++")
    run([cxx, "-shared", "-o", os.path.join(args.work, "libmoec.so"), "-Wl,--whole-archive",
         os.path.join(build, "lib", "libmoec_runtime.a"), "-Wl,--no-whole-archive", "-ldl", "-pthread"])
    # A copy of moec (a build tree's may be relinked meanwhile), with the tree's runtime.
    os.makedirs(os.path.join(args.work, "bin"), exist_ok=True)
    moec = os.path.join(args.work, "bin", "moec")
    shutil.copy2(os.path.join(args.bin, "moec"), moec)
    sets = [(args.work, args.runtime_dir or build)]
    if args.baseline_runtime_dir:
        sets.append((os.path.join(args.work, "base"), args.baseline_runtime_dir))
    for out, runtime in sets:
        flags = ["--target=cpu", f"--runtime-dir={runtime}"]
        for family in FAMILIES:
            if args.only != "models":
                run([moec, "compile", os.path.join(ROOT, "test/fixtures", family, "model.onnx"), *flags,
                     "-o", os.path.join(out, "blocks", family)])
            if args.only != "blocks":
                run([moec, "compile", os.path.join(ROOT, "test/fixtures/models", family, "checkpoint"),
                     *flags, "--max-batch=2", "--max-seq=32", "-o", os.path.join(out, "models", family)])


def cells(args):
    out = []
    if args.only != "models":
        out += [("block", f, t) for f in FAMILIES for t in BLOCK_TOKENS]
    if args.only != "blocks":
        out += [(kind, f, None) for kind in ("forward", "decode") for f in FAMILIES]
    return out


def key(kind, family, tokens, column):
    return f"{kind}/{family}/{tokens}/{column}" if tokens is not None else f"{kind}/{family}/{column}"


def fmt_ms(s):
    return f"{s * 1e3:.4f}" if s < 0.1 else f"{s * 1e3:.1f}"


def table(args, merged, meta):
    """Medians (ms) and moec / other ratios (< 1: moec faster)."""
    columns = (["base"] if args.baseline_runtime_dir else []) + ["moec", "ort"] + \
        [f"torch-{i}" for i in TORCH_IMPLS]
    lines = [f"# bench/cpu_compare.py, {meta['date']}: {meta['cpu']}; {meta['versions']}",
             f"# rounds {args.rounds}, >= {args.seconds} s of calls per cell and round; load average "
             f"before/after {meta['load_before']} / {meta['load_after']}",
             "# ms: median over rounds of each round's median call. ratio: moec / that column "
             "(< 1: moec faster); torch: the faster of batched_mm and grouped_mm. err: the largest "
             "relative error (max |diff| / max |ref|) against onnxruntime of moec, base and torch."] + \
            ([f"# base: moec's generated code on the kernels of {args.baseline_runtime_dir} "
              "(the baseline)."] if args.baseline_runtime_dir else []) + [

             "# block: one call of the MoE block at T tokens; forward: the prompt (2 x 7 tokens);",
             "# decode: one greedy step of 2 sequences (ort: the exported graph has no KV cache, so "
             "a forward of the whole sequence so far).", ""]
    head = (f"{'cell':<26} {'thr':>3} " + " ".join(f"{c:>14}" for c in columns) +
            f" {'/ort':>6} {'/torch':>6}" + (f" {'/base':>6}" if args.baseline_runtime_dir else "") +
            "  check")
    lines += [head, "-" * len(head)]
    for threads in args.threads:
        for kind, family, tokens in cells(args):
            name = f"{kind} {family}" + (f" T={tokens}" if tokens is not None else "")
            vals, errs, differ = {}, [], []
            for c in columns:
                rounds = merged.get((threads, key(kind, family, tokens, c)))
                if rounds:
                    vals[c] = statistics.median(r["median"] for r in rounds)
                    errs += [r["err"] for r in rounds if "err" in r and c != "ort"]
                    if any(not r.get("same_tokens", True) for r in rounds):
                        differ.append(c)
            cellsf = " ".join(f"{fmt_ms(vals[c]) if c in vals else '-':>14}" for c in columns)
            torch_best = min((vals[c] for c in columns if c.startswith("torch") and c in vals), default=None)
            r_ort = f"{vals['moec'] / vals['ort']:.2f}" if "moec" in vals and "ort" in vals else "-"
            r_torch = f"{vals['moec'] / torch_best:.2f}" if "moec" in vals and torch_best else "-"
            if kind == "decode":
                check = "tokens differ: " + ", ".join(differ) if differ else "tokens as the fixture"
            else:
                check = f"err <= {max(errs):.0e}" if errs else ""
            r_base = ""
            if args.baseline_runtime_dir:
                r_base = f" {vals['moec'] / vals['base']:.2f}" if "moec" in vals and "base" in vals else "      -"
                r_base = f"{r_base:>7}"
            lines.append(f"{name:<26} {threads:>3} {cellsf} {r_ort:>6} {r_torch:>6}{r_base}  {check}")
        lines.append("")
    return "\n".join(lines)


def driver(args):
    if not args.skip_prepare:
        prepare(args)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "load_before": f"{os.getloadavg()[0]:.2f}"}
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")]
        meta["cpu"] = f"{cpu[0]}, {len(cpu)} cores"
    except OSError:
        meta["cpu"] = "?"
    merged = {}
    for r in range(args.rounds):
        frameworks = (("base",) if args.baseline_runtime_dir else ()) + FRAMEWORKS
        order = frameworks[r % len(frameworks):] + frameworks[:r % len(frameworks)]
        for threads in args.threads:
            for fw in order:
                if fw not in args.frameworks and fw != "base":
                    continue
                out = os.path.join(args.work, f"{fw}-{threads}-{r}.json")
                env = dict(os.environ, MOEC_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                           MKL_NUM_THREADS=str(threads))
                cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--framework", fw,
                       "--threads", str(threads), "--work", args.work, "--json", out,
                       "--seconds", str(args.seconds), "--only", args.only]
                t0 = time.time()
                run(cmd, env=env)
                print(f"round {r + 1}/{args.rounds}: {fw} with {threads} threads, {time.time() - t0:.0f} s",
                      file=sys.stderr, flush=True)
                for k, v in json.load(open(out)).items():
                    column = k.rsplit("/", 1)[1]
                    entry = dict(v, median=statistics.median(v["times"]), calls=len(v["times"]))
                    del entry["times"]
                    merged.setdefault((threads, k), []).append(entry)
                    del column
    meta["load_after"] = f"{os.getloadavg()[0]:.2f}"
    import importlib.metadata as md
    vers = []
    for p in ("torch", "transformers", "onnxruntime"):
        try:
            vers.append(f"{p} {md.version(p)}")
        except md.PackageNotFoundError:
            pass
    meta["versions"] = ", ".join(vers)
    text = table(args, merged, meta)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    with open(os.path.join(args.work, "merged.json"), "w") as f:
        json.dump({f"{t}|{k}": v for (t, k), v in merged.items()}, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default=os.path.join(ROOT, "build/bin"))
    p.add_argument("--work", default="/tmp/cpu-compare")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=0.3)
    p.add_argument("--only", choices=("all", "blocks", "models"), default="all")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    p.add_argument("--skip-prepare", action="store_true", help="reuse --work's artifacts and libmoec.so")
    p.add_argument("--baseline-runtime-dir", default="",
                   help="also time moec's code on this runtime prefix's kernels (column base: a "
                        "before/after table in the same run)")
    p.add_argument("--runtime-dir", default="",
                   help="compile against this runtime prefix (include/, lib/libmoec_kernels.a) instead "
                        "of the build tree's: another build's kernels, for a before/after table")
    p.add_argument("-o", "--output", default="")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--framework", help=argparse.SUPPRESS)
    p.add_argument("--json", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.work = os.path.abspath(args.work)
    if args.worker:
        args.threads = int(args.threads)
        worker(args)
        return
    args.threads = [int(t) for t in args.threads.split(",")]
    args.frameworks = args.frameworks.split(",")
    driver(args)


if __name__ == "__main__":
    main()
