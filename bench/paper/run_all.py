"""Regenerate the OrchestrRL paper's simulation figures 13, 14, 15, 16, 21, 22 and 23 with
rfabric: each figure script's table, printed, and its rows in bench/out/paper/figNN.csv and
.parquet (git-ignored).

    python bench/paper/run_all.py [--quick] [--only 13,15] [--workers N]

Each figure runs in its own process, one after another (``python bench/paper/figNN.py``),
with the same flags and one ``--sweep-dir`` (a fresh temporary folder unless given), so a
point two figures share runs once (figure 13's MoE scales are figure 14's; the 200 Gb/s
rows of figure 16 are figure 13's); the wall time of each is printed at the end. ``--quick`` is the reduced
mode the tests run; the default is each script's own (the paper's setup where it fits, the
scale each docstring states where it does not). docs/against-the-paper.md compares the
tables with the paper's text.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIGURES = ("13", "14", "15", "16", "21", "22", "23")
SWEEPS = ("13", "14", "16")  # the figures whose points other figures share
HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(FIGURES), help="comma-separated figure numbers")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=str(HERE.parents[0] / "out" / "paper"))
    ap.add_argument(
        "--sweep-dir",
        default=None,
        help="the figures' shared sweep points (default: a temporary folder, removed at the end)",
    )
    args = ap.parse_args(argv)
    figs = [f for f in args.only.split(",") if f]
    bad = sorted(set(figs) - set(FIGURES))
    if bad:
        ap.error(f"unknown figure(s) {', '.join(bad)} (known: {', '.join(FIGURES)})")
    with tempfile.TemporaryDirectory(prefix="rfabric-paper-") as tmp:
        return _run(figs, args, args.sweep_dir or tmp)


def _run(figs: list[str], args, sweep_dir: str) -> int:
    walls, failed = {}, []
    for fig in figs:
        cmd = [sys.executable, str(HERE / f"fig{fig}.py"), "--out", args.out, "--workers", str(args.workers)]
        if fig in SWEEPS:
            cmd += ["--sweep-dir", sweep_dir]
        if args.quick:
            cmd.append("--quick")
        print(f"\n===== figure {fig}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        walls[fig] = time.perf_counter() - t0
        if rc:
            failed.append(fig)
    print("\nwall time per figure: " + ", ".join(f"fig {f} {w:.0f} s" for f, w in walls.items()))
    print(f"total {sum(walls.values()):.0f} s")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
