"""Weight-sync schemes of the disaggregated-RL papers (flat = veRL's all-gather baseline,
root = StreamRL, scatter = RollMux, relay = Laminar): bytes across the train/gen boundary
and bytes each gen GPU ends with, counted from the trace's ops (by the size convention of
traces/README.md) and from a simulated run's flows, against the model's byte count M
recomputed from its raw architecture numbers; the relay's per-instance dependencies; its
chain against the closed form of Laminar's appendix C; replays on a fat-tree."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_generator import total_params
from test_rl_options import replay_conserves

import rfabric as rf
import rfabric.traces as rt
from rfabric.cli import main as cli_main
from rfabric.errors import SpecError

MODEL = {"base": "qwen2.5-14b", "layers": 2}
P_BYTES = 2
SMALL = dict(global_batch=8, prompt_len=64, response=dict(median=64, sigma=0.5, max=256), memory_check="off")


def model_bytes(name: str = "qwen2.5-14b") -> int:
    """M: the parameters of ``name`` cut to 2 layers, times 2 bytes (BF16)."""
    return total_params(dataclasses.replace(rt.MODELS[name], layers=2)) * P_BYTES


def trace(ws: str, train_gpus: int, gen_gpus: int, train: dict, gen: dict, **kw) -> rt.Trace:
    args = dict(SMALL, **kw)
    return rt.generate_rl(
        MODEL, train_gpus=train_gpus, gen_gpus=gen_gpus, train=train, gen=gen, weight_sync=ws, **args
    )


def ws_rows(tr: rt.Trace, iteration: int = 0) -> list[dict]:
    return [r for r in tr.table.to_pylist() if r["stage"] == "weight_sync" and r["iteration"] == iteration]


def received(rows: list[dict]) -> dict[int, int]:
    """Bytes each rank ends with, by the size convention: a send's destination gets size,
    every non-root rank of a broadcast gets size, the rank of a one-rank broadcast (a
    relay pull: a host-to-GPU copy) gets size."""
    out: dict[int, int] = {}
    for r in rows:
        ranks = r["ranks"]
        if r["kind"] == "send":
            dst = [ranks[1]]
        elif r["kind"] == "broadcast":
            dst = ranks[1:] if len(ranks) > 1 else ranks
        else:
            continue  # trainer-side gathers
        for d in dst:
            out[d] = out.get(d, 0) + r["size_bytes"]
    return out


def crossing_ops(rows: list[dict], n_train: int) -> int:
    """Train -> gen bytes of the sends and direct broadcasts (each receiver gets size)."""
    total = 0
    for r in rows:
        src, dst = r["ranks"][0], r["ranks"][1:]
        if src < n_train and r["kind"] in ("send", "broadcast"):
            assert r["kind"] == "send" or r["algorithm"] == "direct" or not any(d >= n_train for d in dst)
            total += r["size_bytes"] * sum(d >= n_train for d in dst)
    return total


def crossing_flows(tr: rt.Trace, n_train: int, gpus: int) -> tuple[int, rf.Results]:
    """Train -> gen bytes of a replay's weight-sync flows (FatTree, flow backend)."""
    res = rf.simulate(rf.topologies.FatTree(gpus), tr, backend="flow", record_flows=True)
    ws = {r["op_id"] for r in tr.table.to_pylist() if r["stage"] == "weight_sync"}
    f = res.flows
    src, dst, op = (f[c].to_numpy() for c in ("src", "dst", "op_id"))
    sel = np.isin(op, list(ws)) & (src < n_train) & (dst >= n_train)
    protocols = {
        p
        for o, p in zip(res.ops["op_id"].to_pylist(), res.ops["protocol"].to_pylist(), strict=True)
        if o in ws
    }
    assert protocols <= {None, "simple"}  # weight sync: payload bytes only, no LL line overhead
    return int(f["size_bytes"].to_numpy()[sel].sum()), res


def ancestors(t: list[dict]):
    """op id -> the ids of all its transitive dependencies (deps point to smaller ids)."""
    memo: dict[int, set[int]] = {}

    def anc(op: int) -> set[int]:
        stack = [op]
        while stack:
            o = stack[-1]
            todo = [d for d in t[o]["deps"] if d not in memo]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            if o not in memo:
                memo[o] = set(t[o]["deps"]).union(*(memo[d] for d in t[o]["deps"]))
        return memo[op]

    return anc


# -- bytes across the boundary -----------------------------------------------------------------
@pytest.mark.parametrize(
    "ws, copies", [("flat", 4), ("two_level", 1), ("root", 1), ("scatter", 1), ("relay", 1)]
)
def test_rollmux_figure8_example(ws, copies):
    """RollMux §5.2 figure 8: train TP 2, DP 2 -> rollout DP 4. veRL's all-gather (flat)
    crosses 4M, the two-stage update (and StreamRL's root, Laminar's push) M."""
    M = model_bytes()
    tr = trace(ws, 4, 4, dict(tp=2), dict(tp=1))
    rows = ws_rows(tr)
    assert crossing_ops(rows, 4) == copies * M
    moved, res = crossing_flows(tr, 4, 16)
    assert moved == copies * M
    assert (res.ops["end_ps"].to_numpy() >= 0).all()


@pytest.mark.parametrize("ws", ["flat", "two_level", "root", "scatter", "relay"])
def test_boundary_and_per_instance_bytes(ws):
    """Train TP 2 PP 2 DP 2, gen TP 2 DP 4 (16 gen GPUs, two 8-GPU machines): flat crosses
    dp_gen M, the others M; every gen instance ends with the whole model, each GPU with
    its half (root: every GPU gets all of it and keeps its slice; relay: the relays get M
    over the chain, the GPUs their slice over PCIe)."""
    M = model_bytes()
    tr = trace(ws, 8, 8, dict(tp=2, pp=2), dict(tp=2))
    rows = ws_rows(tr)
    assert crossing_ops(rows, 8) == (4 if ws == "flat" else 1) * M
    got = received([r for r in rows if ws != "relay" or r["phase"] == "pull"])
    inst = np.arange(8, 16).reshape(4, 2)
    for gpus in inst:
        per_gpu = [got[int(g)] for g in gpus]
        if ws == "root":
            assert per_gpu[1] == M and per_gpu[0] == M  # gen root: from the train root
        else:
            assert sum(per_gpu) == M
            assert all(abs(x - M / 2) <= 2 * P_BYTES for x in per_gpu)
    if ws == "relay":  # one relay (8 GPUs = one machine): the master gets M from the push
        assert received([r for r in rows if r["phase"] == "push"]) == {8: M}


def test_scatter_one_piece_per_training_gpu():
    """RollMux: N = train GPUs disjoint pieces, each from a distinct training GPU to a
    distinct gen GPU; the pieces sum to M."""
    M = model_bytes()
    tr = trace("scatter", 8, 16, dict(tp=2, pp=2), dict(tp=2))
    sends = [r for r in ws_rows(tr) if r["phase"] == "scatter"]
    src = [r["ranks"][0] for r in sends]
    dst = [r["ranks"][1] for r in sends]
    assert sorted(src) == list(range(8)) and len(set(dst)) == 8 and min(dst) >= 8
    assert sum(r["size_bytes"] for r in sends) == M


# -- relay -------------------------------------------------------------------------------------
def test_relay_pull_waits_for_its_own_instance_only():
    """Async (one-step): the pull of gen GPU g in weight sync i depends on g's instance's
    last gen op of iteration i+1, and an instance's gen(i+2) waits for no other
    instance's gen(i+1) op; under two_level it waits for every instance's (the contrast
    shows the check can fail)."""
    kw = dict(mode="async", iterations=3, response=dict(median=64, sigma=1.0, max=512))
    inst_of = {g: (g - 4) // 2 for g in range(4, 20)}
    for ws in ("relay", "two_level"):
        tr = trace(ws, 4, 16, dict(tp=2), dict(tp=2), **kw)
        t = tr.table.to_pylist()
        gen = {i: {r["op_id"]: r for r in t if r["stage"] == "gen" and r["iteration"] == i} for i in (1, 2)}
        anc = ancestors(t)

        def of(ops: dict, j: int) -> list[int]:
            return [o for o, r in ops.items() if {inst_of[x] for x in r["ranks"]} == {j}]

        for j in range(8):
            first2 = min(of(gen[2], j))
            others = {o for o, r in gen[1].items() if j not in {inst_of[x] for x in r["ranks"]}}
            assert set(of(gen[1], j)) <= anc(first2)
            assert bool(anc(first2) & others) == (ws == "two_level")
        if ws == "relay":
            for r in ws_rows(tr, 0):
                if r["phase"] == "pull":
                    j = inst_of[r["ranks"][0]]
                    assert max(o for o in of(gen[1], j) if o < r["op_id"]) in r["deps"]
                    assert not anc(r["op_id"]) & set(gen[1]) - set(of(gen[1], j))


def test_relay_chain_and_pull_dependencies():
    """24 gen GPUs = 3 machines: the push goes to the master (first gen GPU), the chain
    runs master -> relay 1 -> relay 2 in chunks of weight_bucket_bytes, every chunk once
    per hop; a pull waits for the last chunk into its own relay (the master's: the push)."""
    M = model_bytes()
    chunk = 64 << 20
    tr = trace("relay", 8, 24, dict(tp=2, pp=2), dict(tp=2), weight_bucket_bytes=chunk)
    rows = ws_rows(tr)
    push = [r for r in rows if r["phase"] == "push"]
    assert {r["ranks"][1] for r in push} == {8} and sum(r["size_bytes"] for r in push) == M
    chain = [r for r in rows if r["phase"] == "relay_chain"]
    k = -(-M // chunk)
    assert len(chain) == 2 * k
    hops = {}
    for r in chain:
        hops.setdefault(tuple(r["ranks"]), []).append(r)
    assert sorted(hops) == [(8, 16), (16, 24)]
    for hop in hops.values():
        assert sum(r["size_bytes"] for r in hop) == M and max(r["size_bytes"] for r in hop) == chunk
    last_in = {16: hops[(8, 16)][-1]["op_id"], 24: hops[(16, 24)][-1]["op_id"]}
    push_ids = {r["op_id"] for r in push}
    for r in rows:
        if r["phase"] == "pull":
            g = r["ranks"][0]
            relay = 8 + (g - 8) // 8 * 8
            if relay == 8:
                assert push_ids <= set(r["deps"])
            else:
                assert last_in[relay] in r["deps"]
            # the copy time: the slice over PCIe Gen5 x16 (63.0 GB/s), after the GPU's last op
            assert r["compute_ps"] >= round(r["size_bytes"] / (32e9 * 16 * 128 / 130 / 8) * 1e12)


def test_relay_chain_time_matches_laminar_closed_form():
    """Laminar App. C: a chain of p relays passing k chunks of M/k takes
    T(p, k) = (p + k - 2) (M/k T_byte + T_start), one chunk time per pipeline step; with a
    smaller last chunk, (p + k - 3) t_full + t_last. On a non-blocking fat-tree of
    200 Gbps links (flow backend) a chunk hop takes chunk / 25 GB/s within 2 % (headers),
    and the simulated chain takes the closed form of its own chunk times."""
    M = model_bytes()
    chunk = 128 << 20
    tr = trace("relay", 8, 32, dict(tp=2, pp=2), dict(tp=2), weight_bucket_bytes=chunk)
    res = rf.simulate(rf.topologies.FatTree(40), tr, backend="flow")
    ops = res.ops.to_pylist()
    chain = [o for o in ops if o["phase"] == "relay_chain" and o["iteration"] == 0]
    t = (max(o["end_ps"] for o in chain) - min(o["start_ps"] for o in chain)) / 1e12
    p, k = 4, -(-M // chunk)
    assert len(chain) == (p - 1) * k
    full = [o["time_ps"] / 1e12 for o in chain if o["size_bytes"] == chunk]
    last = [o["time_ps"] / 1e12 for o in chain if o["size_bytes"] != chunk]
    assert len(last) == p - 1 and max(full) - min(full) < 1e-6 and max(last) - min(last) < 1e-6
    assert chunk / 25e9 <= full[0] <= 1.02 * chunk / 25e9
    assert t == pytest.approx((p + k - 3) * full[0] + last[0], rel=1e-6)


# -- runs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("ws", ["root", "scatter", "relay"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_replays_on_a_fat_tree(ws, mode):
    """Every op ends and moves exactly its bytes (FatTree(64), flow backend)."""
    replay_conserves(trace(ws, 16, 32, dict(tp=2, pp=2), dict(tp=4), mode=mode, iterations=2))


@pytest.mark.parametrize("ws", ["scatter", "relay"])
def test_packet_and_flow_backends_agree(ws):
    """A second backend: the packet-level replay ends within 1 % of the flow backend's."""
    tr = trace(
        ws, 8, 16, dict(tp=2, pp=2), dict(tp=2), mode="async", iterations=2, weight_bucket_bytes="256MiB"
    )
    ends = [
        max(rf.simulate(rf.topologies.FatTree(24), tr, backend=be).ops["end_ps"].to_pylist())
        for be in ("packet", "flow")
    ]
    assert ends[0] == pytest.approx(ends[1], rel=0.01)


def test_relay_with_prefill_instances_and_moe():
    """Prefill instances pull their own slice too; an MoE trainer's shards go through."""
    tr = rt.generate_rl(
        {"base": "qwen2-57b-a14b", "layers": 2},
        train_gpus=8,
        gen_gpus=16,
        train=dict(tp=2, ep=2),
        gen=dict(tp=2),
        prefill=dict(tp=2, dp=2),
        weight_sync="relay",
        **SMALL,
    )
    M = model_bytes("qwen2-57b-a14b")
    got = received([r for r in ws_rows(tr) if r["phase"] == "pull"])
    assert sorted(got) == list(range(8, 24))
    for first in range(8, 24, 2):  # every instance (decode and prefill, TP 2) gets M
        assert got[first] + got[first + 1] == M
    replay_conserves(tr)


def test_errors_and_cli(tmp_path):
    with pytest.raises(SpecError, match="weight_sync='scatter' does not model prefill"):
        trace("scatter", 4, 8, dict(tp=2), dict(tp=2), prefill=dict(tp=2, dp=1))
    with pytest.raises(SpecError, match="weight_sync must be one of .*'relay', got 'laminar'"):
        trace("laminar", 4, 4, dict(tp=2), dict(tp=2))
    assert (
        trace("relay", 4, 4, dict(tp=2), dict(tp=2)).metadata["parameters"]["weight_bucket_bytes"] == 32 << 20
    )
    assert (
        trace("root", 4, 4, dict(tp=2), dict(tp=2)).metadata["parameters"]["weight_bucket_bytes"] == 512 << 20
    )
    out = tmp_path / "relay.arrow"
    argv = ["trace", "generate", "--model", "qwen2.5-14b", "--train-gpus", "4", "--gen-gpus", "4"]
    argv += ["--train-tp", "2", "--gen-tp", "2", "--global-batch", "8", "--response-median", "64"]
    argv += [
        "--response-max",
        "256",
        "--weight-sync",
        "relay",
        "--weight-bucket-bytes",
        "1GiB",
        "-o",
        str(out),
    ]
    assert cli_main(argv) == 0
    params = rt.read(out).metadata["parameters"]
    assert params["weight_sync"] == "relay" and params["weight_bucket_bytes"] == 1 << 30
