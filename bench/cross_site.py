"""StreamRL's cross-site deployment against one site, with three weight-sync schemes.

StreamRL (§7.3) trains Qwen2.5-7B on an H800 cluster (rail-optimized RoCE, 8 x 200 Gb/s per
server) and generates on a cheaper H20 cluster (100 Gb/s TCP), the two joined by an 80 Gb/s
dedicated link; RollMux joins its clusters with 20 Gb/s Ethernet. The weights cross that link
once per iteration, and how they cross is the weight-sync scheme
(docs/explanation/weight-sync-schemes.md):

* ``flat``: veRL's all-gather, every rollout instance fetches a full copy (dp_gen x M);
* ``root``: StreamRL, one root sends the model across, then a broadcast inside (M);
* ``scatter``: RollMux, one disjoint shard per training GPU over parallel streams, then a
  broadcast inside the rollout cluster (M).

Setups: one site of 64 H800 (all on one rail-optimized fabric), one site of 32 H800 + 32
H20, and the two-site deployment (32 H800 on a rail-optimized site, 32 H20 on a 100 Gb/s
fat-tree, one long link of 20 or 80 Gb/s, 1 ms one way: the distance is not in the papers).
The long link runs the Sites' ``transport`` (TCP-like ``dctcp``: StreamRL's cross-datacenter
traffic falls back to TCP) where the installed rfabric supports it.

Each row: the iteration time, the weight-sync stage's busy time, the bytes that crossed the
long link against what the scheme predicts (M = the model's bytes), samples per second and
samples per second per million USD of cluster (GPUs at rfabric/data/prices.toml's [gpus]
prices plus each site's network; the long link is a leased circuit, not in the bill).

    python bench/cross_site.py                 # flow backend, 1 iteration, ~1 min
    python bench/cross_site.py --iterations 2 --batch 512
    python bench/cross_site.py --packets       # + the weight sync alone, flow against packets

``--packets`` replays the weight-sync stage alone (``root`` and ``scatter``; ``flat``'s 490 GB
is 50 M frames) on both backends over each long link, with the packet run's drops, ECN marks
and retransmissions: the flow backend runs the long link at its max-min share, the packet
backend runs DCTCP's control loop over the long link's round trip.
"""

from __future__ import annotations

import argparse
import inspect
import time

import numpy as np
import pyarrow.compute as pc

import rfabric as rf

MODEL = "qwen2.5-7b"
SCHEMES = ("flat", "root", "scatter")
LATENCY = "1ms"  # assumption: ~200 km of fibre; neither StreamRL nor RollMux gives it


def trace(scheme: str, gen_gpu: str, args) -> rf.traces.Trace:
    return rf.traces.generate_rl(
        MODEL,
        train_gpus=32,
        gen_gpus=32,
        train_hardware="H800",
        gen_hardware=gen_gpu,
        weight_sync=scheme,
        iterations=args.iterations,
        global_batch=args.batch,
        seed=args.seed,
    )


def sites(link: str):
    train = rf.topologies.RailOptimized(32, link="200Gbps", gpu="H800")
    gen = rf.topologies.FatTree(32, link="100Gbps", gpu="H20")
    kw = {}
    if "transport" in inspect.signature(rf.topologies.Sites).parameters:
        kw["transport"] = "dctcp"
    try:
        fab = rf.topologies.Sites({"train": train, "gen": gen}, link=link, latency=LATENCY, **kw)
    except rf.SpecError:  # an rfabric whose long link runs the run's transport
        fab = rf.topologies.Sites({"train": train, "gen": gen}, link=link, latency=LATENCY)
    cost = rf.cost.cluster_cost(train) + rf.cost.cluster_cost(gen)
    return fab, cost


def run(fab, tr, backend: str) -> dict:
    t0 = time.perf_counter()
    res = rf.simulate(fab, tr, backend=backend)
    wall = time.perf_counter() - t0
    job = res.jobs.to_pylist()[0]
    st = res.stages
    ws = st.filter(pc.equal(st["stage"], "weight_sync"))["busy_ps"].to_numpy()
    longs = res.links.filter(pc.equal(res.links["kind"], "long-haul"))
    # payload that crossed from the train site to the gen site (direction 0: src -> dst)
    crossed = (
        int(longs.filter(pc.equal(longs["direction"], 0))["bytes"].to_numpy().sum()) if longs.num_rows else 0
    )
    p = tr.metadata["parameters"]
    samples = p["global_batch"] * job["iterations"]
    span_s = (job["end_ps"] - job["start_ps"]) / 1e12
    return {
        "iter_s": job["iteration_time_ps"] / 1e12,
        "ws_s": float(np.sum(ws)) / 1e12 / job["iterations"],
        "crossed_GB": crossed / job["iterations"] / 1e9,
        "samples_s": samples / span_s,
        "wall_s": wall,
        "header": res.run["header_bytes"],
    }


def packet_check(args) -> list[dict]:
    """The weight sync alone on each long link, flow against packet backend."""
    from qwen3_235b_flow import only_stage

    rows = []
    for link in args.links.split(","):
        fab, _ = sites(link)
        for scheme in ("root", "scatter"):
            ws = only_stage(trace(scheme, "H20", args), "weight_sync")
            out = {"link": link, "scheme": scheme}
            for backend in ("flow", "packet"):
                t0 = time.perf_counter()
                res = rf.simulate(fab, ws, backend=backend)
                out[f"{backend}_s"] = round(res.run["makespan_ps"] / 1e12, 3)
                out[f"{backend}_wall_s"] = round(time.perf_counter() - t0, 1)
                if backend == "packet":
                    out["drops"] = res.run["drops"]
                    out["ecn_marks"] = res.run["ecn_marks"]
                    out["retransmits"] = int(np.sum(res.ops["retransmits"].fill_null(0).to_numpy()))
            out["flow/packet"] = round(out["flow_s"] / out["packet_s"], 3)
            rows.append(out)
            print(rf.format_table(rows[-1:]), flush=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", default="flow", choices=("flow", "packet"))
    ap.add_argument("--links", default="20Gbps,80Gbps")
    ap.add_argument("--packets", action="store_true", help="also the weight sync alone on both backends")
    args = ap.parse_args(argv)
    m_bytes = rf.traces.MODELS[MODEL].params * 2  # BF16 weights
    rows = []
    one_ro = rf.topologies.RailOptimized(64, link="200Gbps", gpu="H800")
    one_mixed = rf.topologies.RailOptimized(64, link="200Gbps", gpu={"H800": 32, "H20": 32})
    setups = [("one site, 64 H800", one_ro, "H800", rf.cost.cluster_cost(one_ro))]
    setups.append(("one site, 32 H800 + 32 H20", one_mixed, "H20", rf.cost.cluster_cost(one_mixed)))
    for link in args.links.split(","):
        fab, cost = sites(link)
        setups.append((f"two sites, {link}", fab, "H20", cost))
    for name, fab, gen_gpu, cost in setups:
        for scheme in SCHEMES:
            tr = trace(scheme, gen_gpu, args)
            r = run(fab, tr, args.backend)
            dp_gen = tr.metadata["parameters"]["gen"]["dp"]
            predicted = (dp_gen if scheme == "flat" else 1) * m_bytes / 1e9
            rows.append(
                {
                    "setup": name,
                    "scheme": scheme,
                    "iteration_s": round(r["iter_s"], 2),
                    "weight_sync_s": round(r["ws_s"], 2),
                    "crossed_GB": round(r["crossed_GB"], 2) if "two sites" in name else None,
                    "predicted_GB": round(predicted, 2) if "two sites" in name else None,
                    "samples_per_s": round(r["samples_s"], 2),
                    "per_musd": round(r["samples_s"] / (cost / 1e6), 3),
                    "wall_s": round(r["wall_s"], 1),
                }
            )
            print(rf.format_table(rows[-1:]), flush=True)
    print()
    print(
        f"{MODEL}: M = {m_bytes / 1e9:.2f} GB of BF16 weights; backend {args.backend}, {args.iterations} iteration(s), batch {args.batch}"
    )
    print(rf.format_table(rows))
    if args.packets:
        print()
        print("the weight sync alone (its own ops, no other stage), flow against packet backend")
        print(rf.format_table(packet_check(args)))


if __name__ == "__main__":
    main()
