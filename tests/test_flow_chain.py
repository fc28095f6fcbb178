"""RFabric's chained weight sync on the flow backend against packets (the oracle).

The stage-aware controller rewrites the weight sync of a 128-GPU RL iteration on RFabric into
64 pipelined chain broadcasts: train GPU g sends its 8,866,048-byte shard down the chain
g -> 64 + g % 8 -> 72 + g % 8 -> ... -> 120 + g % 8 (8 NCCL channels, 17 chunks of 64 KiB per
channel). The 8 roots of one rail share one ToR uplink (the circuit to the generation ToR)
and every relay of the rail: 64 pipelines through one bottleneck. The cases below cut that
stage down to what reproduces its flow-packet gap (docs/explanation/flow-backend.md, "Where
it is off", RFabric's weight sync):

* a NIC's channels: their messages end in the NIC's turns, to the ps of packets;
* one chain alone: the flow backend within a few percent of packets;
* the 8 chains of one rail, alone: 3.605 ms (packets) and 3.950 ms (flows), the stage's
  case where every root starts at once; inside the whole iteration each shard's chain starts
  as its holder's training ends, spread over the last 1.5 ms of training, and the stage takes
  3.492 ms (packets) and 3.585 ms (flows, +2.7%);
* why: in packets the shared uplink serves the 8 roots in turns (their chunk rounds end
  spread over much of a round), and each relay forwards the early chunks nearly alone, so a
  chunk round reaches the next relay in about half a round; on flows max-min shares the
  uplink evenly, every pipeline's chunk of a round ends within a few microseconds at the first
  hop, and each of the first relay hops adds nearly a whole round to the tail.
"""

import numpy as np
import pytest
from conftest import load_bench

import rfabric as rf
from rfabric.traces import Trace

SHARD = 8_866_048  # the weight sync's shard of the bench's small MoE model (one train GPU's)
GPUS = 128


@pytest.fixture(scope="module")
def fab():
    return rf.topologies.RFabric(GPUS)


def rail_chains(roots):
    """One 9-rank chain broadcast of SHARD per root: root -> the 8 generation GPUs of its rail
    (64 + rail, 72 + rail, ..., 120 + rail), as the forest rewrite emits them."""
    ranks = [[r] + [64 + r % 8 + 8 * k for k in range(8)] for r in roots]
    n = len(ranks)
    return Trace.from_columns(
        op_id=list(range(n)),
        stage="weight_sync",
        phase="fanout",
        kind="broadcast",
        ranks=ranks,
        size_bytes=[SHARD] * n,
        algorithm="chain",
        deps=[[]] * n,
        gpus=GPUS,
    )


def run(fab, trace, backend, **kw):
    return rf.simulate(fab, trace, backend=backend, seed=1, **kw)


def round_ends(res, relay, per_round):
    """End times (ps) of the chunks into `relay`, round by round (`per_round` flows each)."""
    f = res.flows
    ends = np.sort(f["end_ps"].to_numpy()[f["dst"].to_numpy() == relay])
    return ends.reshape(-1, per_round)


def test_channels_end_in_the_nics_turns(fab):
    # A 2-rank chain over one NIC, its 8 channels apart (flow_merge_channels=False): every
    # channel's chunk ends one last frame after the channel before it, in the order the NIC
    # serves them, as in packets (to the ps), though the fluid tells them in another order and
    # each channel posts its next chunk as its last one leaves. (Per chunk, as packets.)
    tr = rf.op_trace("broadcast", [0, 64], SHARD, "chain")
    pk = run(fab, tr, "packet", record_flows=True)
    fl = run(fab, tr, "flow", record_flows=True, flow_merge_channels=False, flow_pipeline_slices=0)
    for res in (pk, fl):
        assert res.flows.num_rows == 8 * 9  # 8 channels x 9 chunks of 128 KiB
    pe, fe = pk.flows["end_ps"].to_numpy(), fl.flows["end_ps"].to_numpy()
    first = np.argsort(pk.flows["start_ps"].to_numpy(), kind="stable")[:8]
    assert np.all(np.diff(pe[first]) > 0)  # in packets: in turn, a last frame apart
    np.testing.assert_array_equal(fe[first], pe[first])
    assert fl.run["makespan_ps"] == pk.run["makespan_ps"]


def test_one_chain_within_packets(fab):
    # measured: 613.068 us in packets, 628.950 us on flows (+2.6%); no PFC pause, no mark
    tr = rail_chains([0])
    pk, fl = run(fab, tr, "packet"), run(fab, tr, "flow")
    assert pk.run["pfc_pauses"] == 0
    p, f = pk.run["makespan_ps"], fl.run["makespan_ps"]
    assert f == pytest.approx(p, rel=0.04)


@pytest.fixture(scope="module")
def rail(fab):
    # the flows per chunk, as packets have them, for the rounds below
    tr = rail_chains(range(0, 64, 8))
    return run(fab, tr, "packet", record_flows=True), run(
        fab, tr, "flow", record_flows=True, flow_pipeline_slices=0
    )


def test_rail_chains_streamed_within_five_percent(fab, rail):
    # Streamed (flow_pipeline_slices, the default): a round's tail no longer crosses each
    # relay hop as a whole round of chunks, only the last chunk does (measured +4.7%, 3.776
    # against 3.605 ms, for +9.6% per chunk), in 3,072 flows for 8,704.
    pk, chunks = rail
    fl = run(fab, rail_chains(range(0, 64, 8)), "flow")
    assert fl.run["flows"] < chunks.run["flows"] / 2
    assert fl.run["makespan_ps"] == pytest.approx(pk.run["makespan_ps"], rel=0.05)


def test_rail_chains_bound_the_stage(fab, rail):
    # The 8 chains of rail 0 alone, every root at once, are the weight sync's case where all of
    # training ends together (the other 7 rails are the same on their own links). In the
    # iteration each shard's chain starts as its holder's training ends: the stage starts
    # before training's end and ends no later than training's end plus the chains alone, on
    # each backend; and the flow backend's stage is within 5% of packets' (3.492 against
    # 3.585 ms measured).
    tr = rf.traces.generate_rl(
        model=load_bench("validate_flow").MOE_SMALL,
        train_gpus=64,
        gen_gpus=64,
        train=dict(tp=4, pp=2, ep=8),
        gen=dict(tp=4, ep=8),
        iterations=1,
        seed=1,
        global_batch=16,
        decode_steps_per_op=256,
        distributed_optimizer=True,
    )
    span = {}
    for res, backend in zip(rail, ("packet", "flow"), strict=True):
        whole = rf.simulate(fab, tr, backend=backend, seed=1, controller=fab.controller())
        st = {r["stage"]: (r["start_ps"], r["end_ps"]) for r in whole.stages.to_pylist()}
        (ws0, ws1), train_end = st["weight_sync"], st["train"][1]
        assert ws0 < train_end, backend
        assert ws1 <= train_end + res.run["makespan_ps"], backend
        span[backend] = ws1 - ws0
    assert span["flow"] == pytest.approx(span["packet"], rel=0.05), span


def test_rail_chains_mechanism(rail):
    pk, fl = rail
    per_round = 64  # 8 chains x 8 channels
    # the first hop (the shared uplink into relay 64) is as busy on both backends: its last
    # chunk ends at the same time (2,881.7 us) within 0.1%
    pk1, fl1 = round_ends(pk, 64, per_round), round_ends(fl, 64, per_round)
    assert fl1[-1, -1] == pytest.approx(pk1[-1, -1], rel=0.001)
    rnd = np.median(np.diff(np.median(fl1, axis=1)))  # one chunk round of the uplink
    # packets: the uplink serves the roots in turns; a round's 64 chunks end spread over
    # more than a fifth of a round (measured 0.42 in round 0); flows: together, but for the
    # chains' offsets of a microsecond at the start (measured 1.7% of a round, 3.7% in the
    # last, shorter one)
    assert np.ptp(pk1[0]) > 0.2 * rnd
    assert np.all(np.ptp(fl1, axis=1) < 0.05 * rnd)
    # so on flows the last round takes 5.5-7.5 rounds down the chain's 7 relay hops (measured
    # 1,068 us, 6.3 rounds), in packets much less (723 us, 4.3)
    tail_f = fl.run["makespan_ps"] - fl1[-1, -1]
    tail_p = pk.run["makespan_ps"] - pk1[-1, -1]
    assert 5.5 * rnd < tail_f < 7.5 * rnd
    assert tail_p < 0.7 * tail_f


def test_rail_chains_gap_no_wider(rail):
    # The gap the case above explains: +9.6% (3,605.0 against 3,950.2 us; +12.0% before the
    # port's turns went by its order, not the fluid's); the flow backend has no model of the
    # uplink's turns under PFC yet (the xfail below), and the gap grows no wider.
    pk, fl = rail
    assert fl.run["makespan_ps"] < 1.11 * pk.run["makespan_ps"]


@pytest.mark.xfail(
    reason="the uplink's 8 inputs carry one merged flow each: its shares are even either way, and "
    "the flow backend ends a round's chunks together where PFC and DCQCN spread them"
)
def test_rail_chains_within_five_percent(rail):
    pk, fl = rail
    assert fl.run["makespan_ps"] == pytest.approx(pk.run["makespan_ps"], rel=0.05)
