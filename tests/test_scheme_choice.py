"""The weight-sync scheme chosen by one rule (DESIGN §12, "the best each can run by one rule"):
``WeightSyncForest(choose="faster")`` keeps the forest or the trace's own weight sync by
``rfabric.controllers.forest.sync_time``; each shard's sends wait for its own holder."""

import numpy as np
import pytest
from conftest import weight_sync_trace

import rfabric as rf
from rfabric.controllers.forest import sync_time
from rfabric.rewrites import Locality, WeightSyncForest, apply_rewrites, locality

S = 1000.0


def one(ops, pod_of=(0, 0, 0, 0, 0, 0, 0, 0), budget=(1,)):
    """sync_time of ops given as (ranks, kind, algorithm, deps)."""
    ranks = [o[0] for o in ops]
    return sync_time(
        ranks,
        [o[1] for o in ops],
        [o[2] for o in ops],
        [S] * len(ops),
        [o[3] for o in ops],
        list(range(len(ops))),
        np.asarray(pod_of),
        np.asarray(budget),
    )


def test_sync_time_closed_forms():
    """Oracle: each op's bytes at line rate, one after another on a shared NIC or boundary."""
    send = "send", "direct"
    assert one([([0, 1], *send, [])]) == S
    assert one([([0, 1], *send, []), ([2, 3], *send, [])]) == S  # disjoint NICs: together
    assert one([([0, 1], *send, []), ([2, 1], *send, [])]) == 2 * S  # one receiving NIC
    assert one([([0, 1], *send, []), ([0, 2], *send, [])]) == 2 * S  # one sending NIC
    assert one([([0, 1], *send, []), ([1, 2], *send, [0])]) == 2 * S  # store and forward
    assert one([([0, 1, 2, 3], "broadcast", "direct", [])]) == 3 * S  # the root sends 3 copies
    assert one([([0, 1, 2, 3], "broadcast", "chain", [])]) == S  # a pipelined chain
    assert one([([0, 1, 2, 3], "broadcast", "auto", [])]) == S  # (the executor's auto is a chain)
    # PoD boundaries: 4 sends from PoD 0 to PoD 1 over 2 circuits each way take two rounds
    pods = (0, 0, 0, 0, 1, 1, 1, 1)
    four = [([g, g + 4], *send, []) for g in range(4)]
    assert one(four, pods, (2, 2)) == 2 * S
    assert one(four, pods, (4, 4)) == S
    assert one(four, pods, (4, 1)) == 4 * S
    # a direct broadcast across a boundary of 1 circuit: three transfers through it
    assert one([([0, 4, 5, 6], "broadcast", "direct", [])], pods, (1, 1)) == 3 * S


def choice(trace, fabric):
    """The rule's choices on ``fabric``, as the results record them."""
    _, applied, _ = apply_rewrites(trace, [WeightSyncForest(choose="faster")], locality(fabric))
    (r,) = applied
    return r.summary()["choices"]


def weight_sync_end(trace, fabric, forest, backend):
    ctl = rf.controllers.StageAwareController(forest=forest)
    res = rf.simulate(fabric, trace, controller=ctl, backend=backend, t_ocs="1ms")
    stage = res.ops["stage"].to_numpy(zero_copy_only=False)
    return int(res.ops["end_ps"].to_numpy()[stage == "weight_sync"].max()), ctl


@pytest.mark.parametrize(
    ("gen_gpus", "faster"),
    [
        # the train PoD seeds one generation PoD: Phase B spreads the 16 shards over the PoD's
        # NICs, where two_level in-casts them into the first instance (packets: the weight sync
        # ends 7.4 ms after training, 14.8 ms with two_level)
        (64, "forest"),
        # three generation PoDs: the forest's three waves and each PoD's fan-out after its
        # wave take longer than two_level's one in-cast and one broadcast (22.1 ms after
        # training against 15.2 ms)
        (192, "own"),
    ],
)
def test_the_rule_picks_the_scheme_that_runs_faster_in_packets(gen_gpus, faster):
    """Oracle: a packet run of each scheme under the stage-aware controller (RFabric 256 in
    PoDs of 64 GPUs, train in PoD 0); the rule, which sees only the ops and the locality,
    picks the one that ends first."""
    trace = weight_sync_trace(gen_gpus)
    fabric = rf.topologies.RFabric(256, pod_servers=8)
    (c,) = choice(trace, fabric)
    forest_end, _ = weight_sync_end(trace, fabric, "always", "packet")
    own_end, _ = weight_sync_end(trace, fabric, False, "packet")
    assert ("forest" if forest_end < own_end else "own") == faster
    assert c["chosen"] == faster
    assert (c["forest_bytes"] < c["own_bytes"]) == (faster == "forest")


def test_the_choice_is_in_the_decision_log_and_the_results():
    """The controller's log says which scheme ran and both predictions; the run with the
    rule is the run of the chosen scheme (same end, same ops)."""
    fabric = rf.topologies.RFabric(256, pod_servers=8)
    for gen_gpus, action in ((64, "scheme: forest"), (192, "scheme: trace's own")):
        trace = weight_sync_trace(gen_gpus)
        end, ctl = weight_sync_end(trace, fabric, True, "flow")
        (d,) = [d for d in ctl.log if d.action.startswith("scheme")]
        assert d.action == action and d.stage == "weight_sync"
        (c,) = choice(trace, fabric)
        ms = [f"{c[k] * 8 / 200e9 * 1e3:.3f} ms" for k in ("forest_bytes", "own_bytes")]
        assert f"predicted {ms[0]} over the forest, {ms[1]} over the trace's own ops" in d.detail
        forced = "always" if action == "scheme: forest" else False
        assert end == weight_sync_end(trace, fabric, forced, "flow")[0]
        res = rf.simulate(fabric, trace, controller=rf.controllers.StageAwareController(), backend="flow")
        (summary,) = res.run["rewrites"]
        assert summary["choices"] == [c]
        kept = action != "scheme: forest"
        assert (summary["ops_replaced"] == 0) == kept
        assert (res.ops["rewrite"].null_count == res.ops.num_rows) == kept
        if not kept:  # the forest's first period is the entry's
            rw = res.ops["rewrite"].to_numpy(zero_copy_only=False) == "weight_sync_forest"
            assert d.period == int(res.ops["period"].to_numpy()[rw].min())


def test_the_same_predictions_give_the_same_choice_on_every_fabric():
    """The rule reads the ops and the locality only: fabrics of the same locality (every
    packet-switched fabric, and RFabric of one PoD, are one domain) get the same
    predictions and the same choice; RFabric's PoDs get their own."""
    trace = weight_sync_trace(64)
    one_domain = [
        choice(trace, f)
        for f in (
            rf.topologies.FatTree(128),
            rf.topologies.FatTree(128, oversubscription=3),
            rf.topologies.RailOptimized(128),
            rf.topologies.RFabric(128),
        )
    ]
    assert all(c == one_domain[0] for c in one_domain)
    assert one_domain[0][0]["chosen"] == "forest"
    # a Locality made by hand with RFabric 256's PoDs gives RFabric's choice
    rfl = locality(rf.topologies.RFabric(256, pod_servers=8))
    _, applied, _ = apply_rewrites(
        trace, [WeightSyncForest(choose="faster")], Locality(rfl.pod_of, rfl.pod_budget, "by hand")
    )
    assert applied[0].summary()["choices"] == choice(trace, rf.topologies.RFabric(256, pod_servers=8))


def test_a_shards_sends_wait_for_its_own_holder_not_all_of_training():
    """Each Phase A root send depends on what its shard's holder (and receivers) waited for,
    not on the union over the weight sync: in the three-PoD case the first wave starts as
    the first holders' training ends, 12.3 ms before the last (flow backend)."""
    trace = weight_sync_trace(192)
    fabric = rf.topologies.RFabric(256, pod_servers=8)
    out, applied, _ = apply_rewrites(trace, [WeightSyncForest()], locality(fabric))
    a = trace.arrays()
    ws = a["stage"] == list(a["stage_names"]).index("weight_sync")
    ext = set()
    for d in np.asarray(trace.table["deps"].to_pylist(), dtype=object)[ws]:
        ext |= set(d)
    ext -= set(a["op_id"][ws].tolist())
    (f, first) = applied[0].schedule["forests"][0]
    t = out.table
    period = t["period"].to_numpy()
    deps = t["deps"].to_pylist()
    wave0 = [deps[i] for i in np.flatnonzero(period == first)]
    # the original ops are renumbered in order before the forest: their new ids stay below it
    assert all(len(d) < len(ext) for d in wave0)
    assert len({tuple(d) for d in wave0}) > 1
    res = rf.simulate(
        fabric, trace, controller=rf.controllers.StageAwareController(forest="always"), backend="flow"
    )
    stage = res.ops["stage"].to_numpy(zero_copy_only=False)
    start, end = res.ops["start_ps"].to_numpy(), res.ops["end_ps"].to_numpy()
    train_end = end[stage == "train"].max()
    assert start[stage == "weight_sync"].min() < train_end - 10**10  # 10 ms


def test_bad_choose_is_refused():
    with pytest.raises(rf.SpecError, match="choose must be 'always' or 'faster'"):
        WeightSyncForest(choose="best")
    with pytest.raises(rf.SpecError, match="forest must be True, False or 'always'"):
        rf.controllers.StageAwareController(forest="faster")


def test_forest_ops_wait_for_each_shards_own_deps():
    """Oracle: the Notes of forest_ops. Two shards from PoD 0 to PoD 1 over one circuit: two
    waves; each send waits for its own shard's deps, the second also for the first wave."""
    from rfabric.controllers import dissemination_forest, forest_ops

    f = dissemination_forest([([0], [2]), ([1], [3])], [0, 0, 1, 1], 1)
    assert f.n_waves == 2
    c = forest_ops(f, [10, 10], first_op_id=100, deps=[7], shard_deps=[[5], [6]])
    deps = {tuple(r): d for r, d in zip(c["ranks"], c["deps"], strict=True)}
    first = int(f.src[f.wave == 0][0])
    w0, w1 = (0, 2) if first == 0 else (1, 3), (1, 3) if first == 0 else (0, 2)
    assert deps[w0] == [5 if w0[0] == 0 else 6]
    assert sorted(deps[w1]) == sorted([100, 6 if w1[0] == 1 else 5])
    with pytest.raises(rf.SpecError, match="shard_deps has 1 entries"):
        forest_ops(f, [10, 10], first_op_id=100, shard_deps=[[5]])
    with pytest.raises(rf.SpecError, match="must be an earlier op_id"):
        forest_ops(f, [10, 10], first_op_id=100, shard_deps=[[5], [100]])
