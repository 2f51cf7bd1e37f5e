#!/usr/bin/env python3
"""Plots bench_moe.py results as an SVG (no plotting library needed): per model,
moec's time over transformers' best eager backend and over the best of every
configuration (eager and torch.compile), against T, on a log scale. Below 1:
moec is faster.

    python3 bench/plot_results.py RESULTS.json [...] -o performance.svg
"""
import argparse
import json
import math

W, H = 980, 330
PANEL_W, TOP, BOTTOM, LEFT = 225, 40, 60, 55
Y_MIN, Y_MAX = 0.1, 10.0
SERIES = [("ratio", "moec / best eager backend", "#1f77b4"),
          ("ratio_all", "moec / best of all (incl. torch.compile)", "#d62728")]


def y_of(ratio):
    r = min(max(ratio, Y_MIN), Y_MAX)
    frac = (math.log10(r) - math.log10(Y_MIN)) / (math.log10(Y_MAX) - math.log10(Y_MIN))
    return TOP + (1 - frac) * (H - TOP - BOTTOM)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", nargs="+")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--title", default="moec vs transformers 5.17 on one H200 (time ratio, log scale)")
    args = p.parse_args()
    rows = []
    for path in args.results:
        rows += json.load(open(path))["rows"]
    models = list(dict.fromkeys(r["model"] for r in rows))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14">{args.title}</text>']
    for i, model in enumerate(models):
        x0 = LEFT + i * (PANEL_W + 12)
        cells = sorted((r for r in rows if r["model"] == model), key=lambda r: r["T"])
        ts = [r["T"] for r in cells]
        def x_of(k):
            return x0 + 15 + k * (PANEL_W - 30) / max(1, len(ts) - 1)
        out.append(f'<rect x="{x0}" y="{TOP}" width="{PANEL_W}" height="{H - TOP - BOTTOM}" '
                   f'fill="none" stroke="#999"/>')
        out.append(f'<text x="{x0 + PANEL_W / 2}" y="{TOP - 6}" text-anchor="middle">{model}</text>')
        for tick in (0.1, 0.25, 0.5, 1, 2, 4, 10):
            y = y_of(tick)
            style = 'stroke="#444" stroke-dasharray="4 3"' if tick == 1 else 'stroke="#eee"'
            out.append(f'<line x1="{x0}" x2="{x0 + PANEL_W}" y1="{y:.1f}" y2="{y:.1f}" {style}/>')
            if i == 0:
                out.append(f'<text x="{x0 - 5}" y="{y + 4:.1f}" text-anchor="end">{tick:g}x</text>')
        for k, t in enumerate(ts):
            out.append(f'<text x="{x_of(k):.1f}" y="{H - BOTTOM + 15}" text-anchor="middle">T={t}</text>')
        for key, _, color in SERIES:
            pts = [(x_of(k), y_of(r[key])) for k, r in enumerate(cells) if isinstance(r.get(key), float)]
            if pts:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="' +
                           " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
                out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in pts]
    ly = H - 18
    for j, (_, label, color) in enumerate(SERIES):
        lx = LEFT + j * 330
        out.append(f'<line x1="{lx}" x2="{lx + 25}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 30}" y="{ly + 4}">{label}</text>')
    out.append(f'<text x="{LEFT + 700}" y="{ly + 4}">below the dashed line: moec faster</text>')
    out.append("</svg>")
    with open(args.output, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
