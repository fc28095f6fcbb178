"""What every figure script of bench/paper shares: the paper's setup, its models and
layouts, the workload factories, and table output.

The setup (OrchestrRL §7.2) is rfabric's default (README "What is modelled": 1 us per link,
0.8 us per switch hop, 9216 B MTU, 8 GPUs and 8 NICs per server, 200 GB/s of NVLink per GPU
each way = 400 GB/s bidirectional), so nothing here overrides it; ``T_OCS`` is the paper's
25 ms and every run passes it.

Models and layouts (Appendix C, Table 3): Qwen2.5-72B trains with TP 8, PP 2, CP 3 and DP
scaled; Qwen2-57B-A14B with TP 4, EP 16 and DP scaled; Qwen3-235B-A22B is figure 22's. The
choices the paper leaves open are stated where they are made (``dense``, ``moe``).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

import rfabric as rf

OUT = Path(__file__).resolve().parents[1] / "out" / "paper"
T_OCS = "25ms"  # §7.2
FABRICS = list(rf.catalog.PAPER_FABRICS)  # §7.2's baselines and RFabric
SETUP = (
    "setup (paper §7.2, rfabric's defaults): 1 us links, 0.8 us per switch hop, 9216 B MTU, "
    "8 H800 and 8 NICs per server, 400 GB/s NVLink per GPU (bidirectional), t_ocs 25 ms"
)


def parser(doc: str, shares_points: bool = False) -> argparse.ArgumentParser:
    """The figure scripts' common flags; ``shares_points``: the script's sweeps have points
    another figure's have too (``--sweep-dir``)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="reduced scale and layers (about a minute)")
    ap.add_argument("--workers", type=int, default=1, help="sweep processes (1: serial, in this process)")
    ap.add_argument("--out", default=str(OUT), help="folder of the CSV and Parquet tables")
    if not shares_points:
        return ap
    ap.add_argument(
        "--sweep-dir",
        default=None,
        help="keep each sweep's points in DIR and resume from them (rf.sweep's out=): a point "
        "another figure ran already (figure 13's MoE scales in figure 14, the 200 Gb/s rows of "
        "figure 16) is read back, not run again; rows of older code are not detected, so use a "
        "fresh DIR after changing rfabric (run_all.py gives each run one)",
    )
    return ap


def sweep_out(args, model: str, gpus: int) -> str | None:
    """rf.sweep's ``out`` for one model and scale: ``DIR/<model>-<gpus>[-quick].parquet`` under
    ``--sweep-dir`` (every figure's sweep of that model and scale resumes from the same file,
    by each point's content hash), else None (nothing kept)."""
    if args.sweep_dir is None:
        return None
    return str(Path(args.sweep_dir) / f"{model}-{gpus}{'-quick' if args.quick else ''}.parquet")


def sweep_kw(args) -> dict:
    """rf.sweep's executor arguments (everything else stays at rf.sweep's defaults)."""
    if args.workers <= 1:
        return {"executor": "serial", "progress": False}
    return {"executor": "local", "workers": args.workers, "progress": False}


# -- workloads --------------------------------------------------------------------------------


def batch_for(gpus: int) -> int:
    """Responses per iteration: 512 at 128 GPUs (the fidelity runs' batch, §7.1), scaled with
    the GPU count (§7: the testbed traces are scaled to the simulated GPU count)."""
    return max(8, 4 * gpus)


def model(name: str, layers: int | None):
    shape = rf.traces.models.get_model(name)
    if layers is None or layers >= shape.layers:
        return shape
    import dataclasses

    return dataclasses.replace(shape, name=f"{shape.name}-{layers}L", layers=layers)


@functools.lru_cache(maxsize=1)
def dense(gpus: int, seed: int, layers: int | None = None, batch: int | None = None) -> rf.traces.Trace:
    """Qwen2.5-72B, half the GPUs train (TP 8, PP 2, CP 3, DP the rest: Appendix C), half
    generate (TP 8 instances, one per server). The train half must be a multiple of 48.
    Megatron's distributed optimizer: without it the layout needs 81.8 GB per GPU at DP 1
    (the generator's memory check), more than an H800 holds."""
    half = gpus // 2
    if half % 48:
        raise SystemExit(f"dense: {gpus} GPUs: the train half must be a multiple of 48 (TP8 PP2 CP3)")
    return rf.traces.generate_rl(
        model("qwen2.5-72b", layers),
        train_gpus=half,
        gen_gpus=gpus - half,
        train=dict(tp=8, pp=2, cp=3),
        gen=dict(tp=8),
        distributed_optimizer=True,
        global_batch=batch or batch_for(gpus),
        seed=seed,
    )


#: AFD instance of the MoE generation: attention on 16 GPUs (4 TP-4 groups), experts on 16
#: (4 experts of 64 per GPU). The paper's AFD instance for Qwen3-235B is 24 + 16 GPUs
#: (§7.3.2), whose 40 GPUs divide no power-of-two cluster; for Qwen2-57B it gives none.
AFD = dict(attn=16, ffn=16)


@functools.lru_cache(maxsize=1)
def moe(gpus: int, seed: int, layers: int | None = None, batch: int | None = None) -> rf.traces.Trace:
    """Qwen2-57B-A14B, half the GPUs train (TP 4, EP 16, DP the rest: Appendix C), half
    generate in AFD mode (figure 14: ``AFD`` above). The train half must be a multiple of 64.
    Full activation recomputation: without it the layout needs 105.6 GB per GPU (55.3 GB of
    activations), more than an H800 holds; the paper does not say how it fits."""
    half = gpus // 2
    if half % 64:
        raise SystemExit(f"moe: {gpus} GPUs: the train half must be a multiple of 64 (TP4 EP16)")
    return rf.traces.generate_rl(
        model("qwen2-57b-a14b", layers),
        train_gpus=half,
        gen_gpus=gpus - half,
        train=dict(tp=4, ep=16),
        gen=dict(tp=4, afd=AFD),
        global_batch=batch or batch_for(gpus),
        seed=seed,
        recompute="full",
    )


# Module-level factories for rf.sweep (it pickles them for its process pool).
def dense_full(gpus: int, seed: int):
    return dense(gpus, seed)


def moe_full(gpus: int, seed: int):
    return moe(gpus, seed)


def dense_quick(gpus: int, seed: int):
    return dense(gpus, seed, layers=2, batch=64)


def moe_quick(gpus: int, seed: int):
    return moe(gpus, seed, layers=2, batch=64)


# -- output -----------------------------------------------------------------------------------


def seconds(ps) -> float:
    """A sweep row's time column (int ps; None if the point did not finish) in seconds, as
    the paper's tables give them (NaN for None)."""
    return float("nan") if ps is None else ps / 1e12


def rewrites_of(row: dict) -> str:
    """The workload rewrites a sweep row says it ran, if the sweep records them."""
    for key in ("rewrites", "rewrite", "workload_rewrites"):
        if key in row and row[key] is not None:
            v = row[key]
            return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
    return "-"


def print_table(title: str, rows: list[dict], cols: list[tuple[str, str]]) -> None:
    print(f"\n{title}")
    cells = [[_fmt(r.get(k), f) for k, f in cols] for r in rows]
    widths = [max([len(k)] + [len(c[i]) for c in cells]) for i, (k, _) in enumerate(cols)]
    print("  ".join(k.rjust(w) for (k, _), w in zip(cols, widths, strict=True)))
    for c in cells:
        print("  ".join(x.rjust(w) for x, w in zip(c, widths, strict=True)))
    sys.stdout.flush()


def _fmt(v, f: str) -> str:
    if v is None:
        return "-"
    try:
        return f.format(v)
    except (ValueError, TypeError):
        return str(v)


def write(rows: list[dict], name: str, out: str) -> pa.Table:
    """Write the figure's rows to OUT/name.csv and OUT/name.parquet (bench/out is git-ignored)."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))  # every row's columns, in order
    table = pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])
    pq.write_table(table, folder / f"{name}.parquet")
    flat = table.select([c for c in table.column_names if not pa.types.is_nested(table.schema.field(c).type)])
    pacsv.write_csv(flat, folder / f"{name}.csv")
    return table


class Timer:
    def __init__(self, what: str):
        self.what, self.t0 = what, time.perf_counter()

    def done(self, table: pa.Table | None = None) -> float:
        """Print and return the wall time; with the sweep's table, how many of its points were
        read back from ``--sweep-dir`` (their rows keep the wall time of the run that made them)."""
        wall = time.perf_counter() - self.t0
        meta = (table.schema.metadata or {}) if table is not None else {}
        resumed = int(meta.get(b"rfabric.sweep.resumed", b"0"))
        note = f" ({resumed} of {meta[b'rfabric.sweep.points'].decode()} points read back)" if resumed else ""
        print(f"\n{self.what}: {wall:.1f} s wall{note}", flush=True)
        return wall


def stage_times(res) -> dict:
    """Seconds from each stage's first start to its last end (summed over iterations)."""
    out: dict[str, float] = {}
    for r in res.stages.to_pylist():
        if r["end_ps"] >= 0:
            out[r["stage"]] = out.get(r["stage"], 0.0) + (r["end_ps"] - r["start_ps"]) / 1e12
    return out
