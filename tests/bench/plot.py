#!/usr/bin/env python3
"""plot.py CSV [PNG] - coll_gpu_bench's CSV (-p) as a picture.

One row of panels per collective: bus bandwidth against message size (log2 axis) on the left,
time per call against size (log-log) on the right, one line per backend.  The latency floor,
when the run measured one, is drawn on the time panel with the 1.25x goal.  PNG defaults to
CSV with .png.
"""
import collections
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

STYLE = {"mpi": ("tab:blue", "o"), "nccl": ("tab:green", "s"), "staged": ("tab:red", "^")}


def human(nbytes, _pos=None):
    """8 -> '8', 65536 -> '64K', 536870912 -> '512M'."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            v = nbytes / scale
            return f"{v:g}{unit}"
    return f"{nbytes:g}"


def load(path):
    series = collections.OrderedDict()  # collective -> backend -> [(size, busbw, time)]
    meta = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            coll = row["collective"]
            meta.setdefault(coll, row)
            per_backend = series.setdefault(coll, collections.OrderedDict())
            per_backend.setdefault(row["backend"], []).append(
                (int(row["size_bytes"]), float(row["busbw_gbs"]), float(row["time_us"]))
            )
    return series, meta


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    src = argv[1]
    dst = argv[2] if len(argv) > 2 else os.path.splitext(src)[0] + ".png"
    series, meta = load(src)
    if not series:
        print(f"plot.py: {src} has no rows", file=sys.stderr)
        return 1

    fig, axes = plt.subplots(len(series), 2, figsize=(13, 4.2 * len(series)), squeeze=False)
    shared = False
    for i, (coll, backends) in enumerate(series.items()):
        m = meta[coll]
        shared = shared or m.get("shared_gpu", "0") == "1"
        what = f"{coll}, {m['type']}" + (f" {m['op']}" if m["op"] not in ("", "-") else "")
        where = f"{m['nranks']} ranks, {m['nodes']} node(s), {m['device']} device"
        ax_bw, ax_t = axes[i]
        for name, pts in backends.items():
            pts.sort()
            color, marker = STYLE.get(name, (None, "."))
            sizes = [p[0] for p in pts]
            ax_bw.plot(sizes, [p[1] for p in pts], marker=marker, ms=3, color=color, label=name)
            ax_t.plot(sizes, [p[2] for p in pts], marker=marker, ms=3, color=color, label=name)
        floor = m.get("floor_us", "")
        if floor:
            f = float(floor)
            ax_t.axhline(f, color="gray", ls=":", lw=1, label=f"floor {f:.1f} us")
            ax_t.axhline(1.25 * f, color="gray", ls="--", lw=1, label="1.25 x floor")
        for ax in (ax_bw, ax_t):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(human))
            ax.set_xlabel("message size (bytes)")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=8)
        ax_t.set_yscale("log")
        ax_bw.set_ylabel("busbw (GB/s)")
        ax_t.set_ylabel("time per call (us)")
        ax_bw.set_title(f"{what}: bus bandwidth ({where})", fontsize=10)
        ax_t.set_title(f"{what}: time per call", fontsize=10)
    title = "coll_gpu_bench: " + os.path.basename(src)
    if shared:
        title += "   (SEVERAL RANKS SHARE ONE GPU: times are not meaningful)"
    fig.suptitle(title, fontsize=11, color="red" if shared else "black")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot.py: wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
