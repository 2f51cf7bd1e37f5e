#!/usr/bin/env python3
"""Summarises an A/B of moec builds run by bench_moe.py in one device call.

    python3 bench/ab_summary.py DIR:LABEL DIR:LABEL ...
    python3 bench/ab_summary.py --timelines PROFILE_TXT

Each DIR holds one bench_moe.json (one run: new, prev, new again, ...). Prints,
per model and token count, each run's moec time (bf16, and FP8 where the run had
FP8 artifacts) in ms, then the first label's median over its runs divided by
each other label's: below 1, the first label is faster. The runs are shown in
the order given, so that drift during the call shows. With --timelines: the
in-graph timelines of moec's calls from bench_moe.py --profile's profile.txt,
without the per-kernel tables and without transformers' calls.
"""
import json
import os
import re
import statistics
import sys


def timelines(path):
    """Each moec cell's title and its timeline, from a bench_moe.py --profile file."""
    with open(path) as f:
        text = f.read()
    out = []
    for block in re.split(r"(?m)^== ", text)[1:]:
        title = block.split("\n", 1)[0].split(":")[0]
        found = re.search(r"timeline of the last call.*?\nspan [0-9.]+ µs", block, re.S)
        if found and not title.startswith("transformers"):
            out += ["== " + title, found.group(0), ""]
    return "\n".join(out)


def rows_of(directory):
    with open(os.path.join(directory, "bench_moe.json")) as f:
        data = json.load(f)
    return data["rows"] if isinstance(data, dict) else data


def main(argv):
    if len(argv) == 3 and argv[1] == "--timelines":
        print(timelines(argv[2]))
        return 0
    if len(argv) < 2 or any(":" not in a for a in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = []  # (label, {(model, T): row})
    for arg in argv[1:]:
        directory, label = arg.rsplit(":", 1)
        try:
            runs.append((label, {(r["model"], r["T"]): r for r in rows_of(directory)}))
        except (OSError, ValueError, KeyError) as e:
            print(f"{directory}: no usable bench_moe.json ({e!r})", file=sys.stderr)
            return 1
    labels = list(dict.fromkeys(label for label, _ in runs))
    cells = sorted({key for _, rows in runs for key in rows},
                   key=lambda key: (key[0], int(key[1])))
    for kind, field in (("bf16", "moec"), ("FP8", "moec_fp8")):
        if not any(field in row for _, rows in runs for row in rows.values()):
            continue
        print(f"{kind}: ms per run ({', '.join(label for label, _ in runs)}); "
              f"{labels[0]}'s median / each other label's")
        for key in cells:
            times = [(label, rows[key][field]) for label, rows in runs
                     if key in rows and isinstance(rows[key].get(field), (int, float))]
            if not times:
                continue
            medians = {label: statistics.median(t for l, t in times if l == label)
                       for label in labels if any(l == label for l, _ in times)}
            base = medians.get(labels[0])
            ratios = "  ".join(f"{labels[0]}/{label} {base / medians[label]:.3f}"
                               for label in labels[1:] if label in medians and base)
            shown = " ".join(f"{t:.4f}" for _, t in times)
            print(f"  {key[0]:<18} T={key[1]:<5} {shown}   {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
