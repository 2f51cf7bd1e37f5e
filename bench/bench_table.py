#!/usr/bin/env python3
"""bench_moe.py's tables (bench_moe.md) from its rows, and several runs' rows merged into one.

No torch here, so a table can be rebuilt anywhere from the JSON files that the GPU
machine wrote:

    python3 bench/bench_table.py RUN1.json RUN2.json ... -o DIR     (DIR/bench_moe.{md,json})

Rows are taken in the files' order; a (model, T) that appears twice keeps the later one.
"""
import argparse
import json
import os
import sys

COPY_BPS = 4.25e12
IMPLS = ["eager", "batched_mm", "grouped_mm"]


def is_config_key(key):
    """A compiled configuration's column (IMPL+MODE, e.g. grouped_mm+MA), not one of its
    derived fields (grouped_mm+MA_events, _rel_err, _sm, ...)."""
    return "+" in key and "_" not in key.split("+")[1]


def fmt(v):
    return f"{v:.3f}" if isinstance(v, float) else (v or "")


def mm_pct(flops, ms):
    """% of the measured bf16 matmul ceiling (685 TFLOP/s)."""
    return f"{100 * flops / (ms * 1e-3) / 685e12:.1f} %" if flops and isinstance(ms, float) else ""


def pct(bytes_, ms):
    return 100 * bytes_ * 1e9 / (ms * 1e-3) / COPY_BPS if isinstance(ms, float) else None


def low_precision_table(rows):
    """moec's FP8 and MXFP4 experts against its own bf16 experts, same run."""
    rows = [r for r in rows if "moec_fp8" in r or "moec_mxfp4" in r]
    if not rows:
        return []
    L = ["", "moec's low-precision experts against its own bf16 experts, same run and weights: "
         "ms; x = bf16 time / this time; % copy counts the touched experts' bytes (FP8 1, MXFP4 "
         "17/32 of a byte a weight); % rate: useful FLOPs against 1280 TFLOP/s (FP8); errors "
         "as relative L2 against the f32 block, FP8 also DeepGEMM's 1 - 2·Σxy/(Σx²+Σy²), MXFP4 "
         "also against the f32 block with the dequantised MXFP4 weights (emul.):", "",
         "| model | T | bf16 | FP8 | x | % copy | % rate | rel L2 | diff | MXFP4 | x | % copy "
         "| rel L2 | vs emul. |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def num(v, f):
        return format(v, f) if isinstance(v, float) else ""

    for r in rows:
        bf, f8, mx = r.get("moec"), r.get("moec_fp8"), r.get("moec_mxfp4")
        speed = lambda t: f"{bf / t:.2f}" if isinstance(bf, float) and isinstance(t, float) else ""
        p8, px = pct(r["bytes_GB"] / 2, f8), pct(r["bytes_GB"] * 17 / 64, mx)
        rate = (f"{100 * r['flops'] / (f8 * 1e-3) / 1280e12:.1f} %"
                if isinstance(f8, float) and r.get("flops") else "")
        L.append(f"| {r['model']} | {r['T']} | {fmt(bf)} | {fmt(f8)} | {speed(f8)} | "
                 f"{num(p8, '.1f')}{' %' if p8 else ''} | {rate} | {num(r.get('moec_fp8_rel_err'), '.2e')} | "
                 f"{num(r.get('moec_fp8_diff'), '.2e')} | {fmt(mx)} | {speed(mx)} | "
                 f"{num(px, '.1f')}{' %' if px else ''} | {num(r.get('moec_mxfp4_rel_err'), '.2e')} | "
                 f"{num(r.get('moec_mxfp4_emul_err'), '.2e')} {r.get('check_mxfp4', '')} |")
    return L


def clock(c):
    """One timed loop's SM clock and power (bench/gpu_clocks.py): 'median MHz (lowest), W, reasons'."""
    if not c:
        return ""
    return (f"{c['mhz']} ({c['mhz_min']}), {c['watts']:.0f} W"
            + (f", {' '.join(c['throttle'])}" if c.get("throttle") else ""))


def clock_table(rows, ckeys):
    """SM clock and board power while each configuration's timed loop ran, where recorded."""
    keys = [k for k in IMPLS + ckeys + ["moec", "moec_fp8", "moec_mxfp4"] if any(r.get(k + "_sm") for r in rows)]
    if not keys:
        return []
    L = ["", "SM clock while each timed loop ran (NVML, sampled every 5 ms): median MHz (lowest), "
         "median board power, and the throttle reasons NVML reported (power-cap: the power limit "
         "held the clock down):", "",
         "| model | T | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for r in rows:
        if any(r.get(k + "_sm") for k in keys):  # older runs recorded none
            L.append(f"| {r['model']} | {r['T']} | " + " | ".join(clock(r.get(k + "_sm")) for k in keys) + " |")
    return L


def interleaved_table(rows):
    """moec against the cell's fastest configuration, timed in alternating rounds (bench_moe.py)."""
    if not any("il_ratio" in r for r in rows):
        return []
    L = ["", "moec against each cell's fastest transformers configuration above, timed again in "
         "alternating rounds of ~0.1 s (which side goes first alternates too), so that neither "
         "side runs at the clock that the other's sustained load left: medians of the rounds' "
         "host medians, ms; moec / best: the median of the rounds' ratios; SM clock as below:", "",
         "| model | T | configuration | its ms | moec ms | moec / best (interleaved) | its SM clock "
         "| moec's SM clock |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "il_ratio" in r:
            L.append(f"| {r['model']} | {r['T']} | {r['il_config']} | {fmt(r['il_best'])} | "
                     f"{fmt(r['il_moec'])} | {r['il_ratio']:.2f}x | {clock(r.get('il_best_sm'))} | "
                     f"{clock(r.get('il_moec_sm'))} |")
    return L


def write(rows, out, meta, quiet=False):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "bench_moe.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    L = [f"moec vs transformers {meta['transformers']} (torch {meta['torch']}) on {meta['gpu']}.",
         "ms: median host time of one synchronised call, L2 flushed before each; transformers bf16, moec f32 "
         f"with {meta.get('moec_expert_weights', 'f32')} expert weights "
         + ("(its time includes the input/output copies host<->device)"
            if meta.get("moec_io") == "host" else
            "(input and output in GPU memory: used in place by artifacts that take device "
            "pointers as they are, copied through the workspace by older ones)")
         + (". moec's call is moec_run_async on torch's current stream, timed to the same one "
            "synchronise as transformers' calls (moec_run, which waits inside and then meets an idle "
            "synchronise: the column 'moec_run')" if any(r.get("moec_clock") == "async" for r in rows)
            else ". moec's call is moec_run, which waits inside (the clock's synchronise after it is an idle one)")
         + f" (artifacts: {meta.get('moec_artifacts', '?')}; art-bf16out: --expert-outputs=bf16)"
         + ". % copy: touched experts' bf16 bytes / "
         "time / 4.25 TB/s. check: moec against transformers' eager block in f32, relative L2 error.", "",
         "| model | T | hit | eager | batched_mm | grouped_mm | moec | moec_run | moec / best | moec % copy "
         "| best % copy | moec % bf16 | check (rel err, max abs) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pb = pct(r["bytes_GB"], r.get("best"))
        pm = pct(r["bytes_GB"], r.get("moec"))
        L.append(f"| {r['model']} | {r['T']} | {r['distinct']} | {fmt(r.get('eager'))} | "
                 f"{fmt(r.get('batched_mm'))} | {fmt(r.get('grouped_mm'))} | {fmt(r.get('moec'))} | "
                 f"{fmt(r.get('moec_blocking'))} | "
                 f"{r.get('ratio', float('nan')):.2f}x ({r.get('best_impl', '')}) | "
                 f"{pm:.1f} % | {'' if pb is None else f'{pb:.1f} %'} | {mm_pct(r.get('flops'), r.get('moec'))} | {r['check']} ({r['moec_rel_err']:.1e}, {r['moec_max_abs']:.1e}"
                 + (f"; {r['outlier_rows']} rows > 5 %, router top-k gap <= {r['outlier_max_topk_gap']:.1e}"
                    if r.get('outlier_rows') else "") + ") |")
    L += ["", "transformers' CUDA-event medians (the reference script's timing), ms, and bf16 error vs f32:", "",
          "| model | T | eager | batched_mm | grouped_mm | bf16 rel err (grouped_mm) |", "|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['model']} | {r['T']} | {fmt(r.get('eager_events'))} | {fmt(r.get('batched_mm_events'))} | "
                 f"{fmt(r.get('grouped_mm_events'))} | {r.get('grouped_mm_rel_err', float('nan')):.1e} |")
    if any("moec_fp8" in r and isinstance(r.get("best"), float) for r in rows):
        L += ["", "moec with FP8 experts (e4m3 weights with 128x128 block scales, rows quantised per "
              "token and 128 channels; same weights, cast as moe-quantize-experts-fp8 does), same run: "
              "ms, ratio to transformers' best eager backend (bf16), error against the f32 block "
              "(relative L2, DeepGEMM's 1 - 2·Σxy/(Σx²+Σy²)):", "",
              "| model | T | best eager (bf16) | moec bf16 | moec FP8 | FP8 / best | FP8 / moec bf16 "
              "| FP8 % copy (FP8 bytes) | FP8 rel L2 | FP8 diff |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if "moec_fp8" not in r or not isinstance(r.get("best"), float):
                continue
            f8 = r["moec_fp8"]
            p8 = pct(r["bytes_GB"] / 2, f8)
            L.append(f"| {r['model']} | {r['T']} | {fmt(r.get('best'))} | {fmt(r.get('moec'))} | "
                     f"{fmt(f8)} | {f8 / r['best']:.2f}x | {f8 / r['moec']:.2f}x | {p8:.1f} % | "
                     f"{r['moec_fp8_rel_err']:.2e} | {r['moec_fp8_diff']:.2e} |")
    L += low_precision_table(rows)
    ckeys = sorted({k for r in rows for k in r if is_config_key(k)})
    if ckeys:
        L += ["", "transformers' CUDA-event medians of the compiled configurations (queued back to back, "
              "so host launch costs hide under the GPU's work), ms; moec's host time against the best "
              "of every configuration's CUDA-event median, a clock that favours transformers:", "",
              "| model | T | " + " | ".join(k + " (events)" for k in ckeys) + " | moec (host) "
              "| moec / best events |", "|---|---|" + "---|" * len(ckeys) + "---|---|"]
        for r in rows:
            events = [(r[i + "_events"], i) for i in IMPLS + ckeys
                      if isinstance(r.get(i + "_events"), float)]
            best = min(events) if events else None
            ratio = (f"{r['moec'] / best[0]:.2f}x ({best[1]})"
                     if best and isinstance(r.get("moec"), float) else "")
            L.append(f"| {r['model']} | {r['T']} | " +
                     " | ".join(fmt(r.get(k + "_events")) for k in ckeys) +
                     f" | {fmt(r.get('moec'))} | {ratio} |")
        L += ["", "transformers under torch.compile (CG: mode reduce-overhead, CUDA graphs; MA: "
              "max-autotune-no-cudagraphs; MAG: max-autotune, with CUDA graphs; def: mode default), "
              "host ms as above; moec / best of all "
              "configurations, eager and compiled:", "",
              "| model | T | " + " | ".join(ckeys) + " | moec | moec / best of all |",
              "|---|---|" + "---|" * len(ckeys) + "---|---|"]
        for r in rows:
            L.append(f"| {r['model']} | {r['T']} | " + " | ".join(fmt(r.get(k)) for k in ckeys) +
                     f" | {fmt(r.get('moec'))} | {r.get('ratio_all', float('nan')):.2f}x "
                     f"({r.get('best_all_impl', '')}) |")
    L += interleaved_table(rows)
    L += clock_table(rows, ckeys)
    text = "\n".join(L) + "\n"
    with open(os.path.join(out, "bench_moe.md"), "w") as f:
        f.write(text)
    if not quiet:
        print(text, flush=True)



def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="bench_moe.json files")
    p.add_argument("-o", "--out", required=True, help="directory for bench_moe.md and bench_moe.json")
    args = p.parse_args()
    rows, meta, where = [], None, {}
    for path in args.runs:
        try:
            with open(path) as f:
                run = json.load(f)
            run_rows, run_meta = run["rows"], run["meta"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"bench_table.py: {path}: not a bench_moe.json ({e!r})", file=sys.stderr)
            return 2
        meta = meta or dict(run_meta)
        for row in run_rows:
            key = (row["model"], row["T"])
            if key in where:
                rows[where[key]] = row
            else:
                where[key] = len(rows)
                rows.append(row)
    models = list(dict.fromkeys(r["model"] for r in rows))
    rows.sort(key=lambda r: (models.index(r["model"]), r["T"]))
    meta["merged_from"] = [os.path.basename(r) for r in args.runs]
    write(rows, args.out, meta, quiet=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
