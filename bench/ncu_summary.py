#!/usr/bin/env python3
"""One table per benchmark cell from an ncu log of `bench_moe.py --ncu`.

    ncu --profile-from-start off --clock-control none --csv --page details \\
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,\\
    sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,\\
    launch__registers_per_thread --log-file ncu.csv \\
        python3 bench/bench_moe.py --ncu ... > bench.log
    python3 bench/ncu_summary.py ncu.csv bench.log > ncu.md

--clock-control none: ncu would otherwise lock the clocks to base for the replay,
and the machine's clocks are not ours to change. bench_moe.py --ncu profiles one
moec call per cell and prints "ncu cell: MODEL T=..." after it; a call's kernels
end with moec's combine kernel, which is how the log is cut into cells.
"""
import csv
import re
import sys

COPY_BPS = 4.25e12
TIME = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3,
        "second": 1.0, "s": 1.0}
BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}


def number(text):
    return float(text.replace(",", "")) if text not in ("", "n/a") else float("nan")


def kernels(path):
    """[(id, name, grid, block, {metric: (value, unit)})] in launch order."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own ==PROF== lines are not CSV
    out, index = [], {}
    for row in csv.DictReader(lines):
        key = row["ID"]
        if key not in index:
            index[key] = len(out)
            out.append((key, row["Kernel Name"], row.get("Grid Size", ""), row.get("Block Size", ""), {}))
        metric = RAW.get(row["Metric Name"], row["Metric Name"])
        out[index[key]][4][metric] = (row["Metric Value"], row["Metric Unit"])
    return out


# The raw metrics (ncu --metrics ...) by the names of the sections' rows.
RAW = {"gpu__time_duration.sum": "Duration",
       "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM Throughput",
       "sm__throughput.avg.pct_of_peak_sustained_elapsed": "Compute (SM) Throughput",
       "sm__warps_active.avg.pct_of_peak_sustained_active": "Achieved Occupancy",
       "launch__registers_per_thread": "Registers Per Thread"}


def short(name):
    """moec::<unnamed>::permuteKernel(const float *, ...) -> permuteKernel; templates keep
    their arguments (groupedMatmulBF16Kernel<8, 8>)."""
    if "cutlass::device_kernel" in name:
        return "CUTLASS grouped GEMM (wgmma)"
    name = name.replace("(anonymous namespace)", "").replace("<unnamed>", "")
    name = re.sub(r"^void ", "", name)
    name = name[:name.index("(")] if "(" in name else name
    head, _, args = name.partition("<")
    head = head.split("::")[-1]
    if head.startswith("DeviceRadixSort"):
        return head
    return head + ("<" + args if args else "")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ks = kernels(sys.argv[1])
    cells = [line.split("ncu cell: ", 1)[1].strip() for line in open(sys.argv[2]) if "ncu cell: " in line]
    groups, current = [], []
    for k in ks:
        current.append(k)
        if short(k[1]).split("<")[0] == "combineKernel":
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    if len(groups) != len(cells):
        print(f"warning: {len(groups)} kernel groups, {len(cells)} cells in the log", file=sys.stderr)
    for title, group in zip(cells, groups):
        fields = dict(f.split("=", 1) for f in title.split()[1:])
        print(f"### {title.split()[0]} {fields.get('T', '')}: touched bytes "
              f"{float(fields.get('bytes', 'nan')) / 1e9:.3f} GB, {float(fields.get('flops', 'nan')) / 1e12:.2f} TFLOP\n")
        print("| kernel | time µs | DRAM read GB | DRAM GB/s | % of copy | DRAM % peak | SM % peak | "
              "achieved occ % | regs | grid | block |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        total = 0.0
        for _, name, grid, block, m in group:
            t = number(m["Duration"][0]) * TIME.get(m["Duration"][1], float("nan"))
            total += t
            rd = m.get("dram__bytes_read.sum", ("nan", "byte"))
            rb = number(rd[0]) * BYTES.get(rd[1], float("nan"))
            print(f"| {short(name)} | {t * 1e6:.1f} | {rb / 1e9:.3f} | {rb / t / 1e9:.0f} | "
                  f"{100 * rb / t / COPY_BPS:.0f} | {m.get('DRAM Throughput', ('', ''))[0]} | "
                  f"{m.get('Compute (SM) Throughput', ('', ''))[0]} | "
                  f"{m.get('Achieved Occupancy', ('', ''))[0]} | {m.get('Registers Per Thread', ('', ''))[0]} | "
                  f"{grid} | {block} |")
        print(f"\nkernels' sum {total * 1e6:.1f} µs\n")


if __name__ == "__main__":
    main()
