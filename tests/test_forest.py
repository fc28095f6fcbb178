"""The weight-sync dissemination forest (paper appendix E): budgets per wave, exactly-once
delivery, causality, PoD scopes of the two phases, seeds, trace ops, and a replay."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rfabric as rf
from rfabric.controllers import Forest, dissemination_forest, forest_ops
from rfabric.controllers.forest import op_rows
from rfabric.traces import Trace

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw):
    n_pods = draw(st.integers(2, 5))
    per_pod = draw(st.lists(st.integers(1, 5), min_size=n_pods, max_size=n_pods))
    pod_of = np.repeat(np.arange(n_pods), per_pod)
    train_pods = draw(st.integers(1, n_pods - 1))
    train = np.flatnonzero(pod_of < train_pods)
    gen = np.flatnonzero(pod_of >= train_pods)
    n_shards = draw(st.integers(1, 6))
    shards = []
    for _ in range(n_shards):
        holders = draw(st.lists(st.sampled_from(train.tolist()), min_size=1, max_size=3, unique=True))
        if draw(st.integers(0, 5)) == 0:  # now and then a replica already sits in a Gen PoD
            holders.append(draw(st.sampled_from(gen.tolist())))
            holders = sorted(set(holders))
        receivers = draw(st.lists(st.sampled_from(gen.tolist()), max_size=len(gen), unique=True))
        shards.append((holders, receivers))
    budget = draw(st.lists(st.integers(1, 4), min_size=n_pods, max_size=n_pods))
    sizes = draw(st.lists(st.integers(1, 100), min_size=n_shards, max_size=n_shards))
    kw = {
        "seeds_per_pod": draw(st.integers(1, 3)),
        "fanout": draw(st.integers(1, 3)),
        "shard_bytes": sizes,
        "max_circuits_per_edge": draw(st.sampled_from([None, 1, 2])),
    }
    return shards, pod_of, budget, kw


def check_forest(f: Forest, shards, pod_of, budget, kw):
    pod_of = np.asarray(pod_of)
    budget = np.asarray(budget)
    a = f.wave >= 0
    # Every wave respects every per-PoD budget (one unit at each end of each circuit).
    for t in range(f.n_waves):
        assert (f.pod_load(t) <= budget).all(), t
        assert (f.wave == t).any()
    # Phase A: inter-PoD, from a holder, >= 1 circuit; Phase B: intra-PoD, no OCS-Core circuit.
    assert (pod_of[f.src[a]] != pod_of[f.dst[a]]).all()
    assert (pod_of[f.src[~a]] == pod_of[f.dst[~a]]).all()
    assert (f.circuits[a] >= 1).all() and (f.circuits[~a] == 0).all()
    cap = kw.get("max_circuits_per_edge")
    nic_out, nic_in = [], []  # circuits each GPU's NIC sends and receives on, per wave
    for t in range(f.n_waves):
        e = f.wave == t
        nic_out.append(np.bincount(f.src[e], weights=f.circuits[e], minlength=pod_of.size))
        nic_in.append(np.bincount(f.dst[e], weights=f.circuits[e], minlength=pod_of.size))
    if cap is not None:
        assert (f.circuits <= cap).all()
    assert (f.level[a] == 0).all() and (f.level[~a] >= 1).all()
    # Exactly once: each (shard, receiver that does not hold it) is the dst of one edge.
    want = sorted((i, r) for i, (h, rs) in enumerate(shards) for r in rs if r not in h)
    got = sorted(zip(f.shard.tolist(), f.dst.tolist(), strict=True))
    assert got == want
    # Causality: a sender holds the shard, or got it over an earlier edge (its parent).
    for e in range(f.shard.size):
        i, s, p = int(f.shard[e]), int(f.src[e]), int(f.parent[e])
        if p < 0:
            assert s in shards[i][0], e
            continue
        assert p < e and f.dst[p] == s and f.shard[p] == i, e
        assert f.level[e] == (1 if f.wave[p] >= 0 else f.level[p] + 1), e
    assert (f.parent[a] == -1).all()
    # Seeds: min(seeds_per_pod, receivers there) per (shard, destination PoD without a holder).
    for i, (h, rs) in enumerate(shards):
        rs = [r for r in rs if r not in h]
        hp = set(pod_of[h].tolist())
        for p in set(pod_of[rs].tolist()) if rs else ():
            n_seeds = int(((f.shard == i) & a & (pod_of[f.dst] == p)).sum())
            here = sum(1 for r in rs if pod_of[r] == p)
            assert n_seeds == (0 if p in hp else min(kw.get("seeds_per_pod", 1), here)), (i, p)
    # Equaliser stops only when no edge of a wave can take one more circuit.
    for t in range(f.n_waves):
        load = f.pod_load(t)
        for e in np.flatnonzero(f.wave == t):
            u, v = pod_of[f.src[e]], pod_of[f.dst[e]]
            # (a schedule under the NIC rule also stops at a NIC that fills its circuits)
            nic_full = cap is not None and (nic_out[t][f.src[e]] >= cap or nic_in[t][f.dst[e]] >= cap)
            assert load[u] == budget[u] or load[v] == budget[v] or f.circuits[e] == cap or nic_full, e


@FAST
@given(problems())
def test_forest_properties(problem):
    shards, pod_of, budget, kw = problem
    f = dissemination_forest(shards, pod_of, budget, **kw)
    check_forest(f, shards, pod_of, budget, kw)
    again = dissemination_forest(shards, pod_of, budget, **kw)
    for name in ("shard", "src", "dst", "wave", "level", "circuits", "parent"):
        assert np.array_equal(getattr(f, name), getattr(again, name)), name


@FAST
@given(problems())
def test_ops_follow_waves_and_parents(problem):
    shards, pod_of, budget, kw = problem
    f = dissemination_forest(shards, pod_of, budget, **kw)
    cols = forest_ops(f, kw["shard_bytes"], first_op_id=3, deps=[0, 2], period=5, iteration=1)
    if f.shard.size == 0:
        assert len(cols["op_id"]) == 0
        return
    pre = {
        "op_id": [0, 1, 2],
        "stage": ["train"] * 3,
        "phase": ["x"] * 3,
        "kind": ["all_reduce"] * 3,
        "ranks": [[0, 1]] * 3,
        "size_bytes": [1, 1, 1],
        "deps": [[], [0], [1]],
    }
    merged = {k: list(pre[k]) + list(cols[k]) for k in pre}
    merged.update(iteration=1, algorithm="direct", period=[0, 0, 0] + cols["period"].tolist())
    trace = Trace.from_columns(**merged)  # the trace checker accepts the ops
    assert len(trace) == 3 + f.shard.size
    ids = np.asarray(cols["op_id"])
    waves = f.waves
    for e in range(f.shard.size):
        deps = cols["deps"][e]
        assert all(d < ids[e] for d in deps)
        t = int(f.wave[e])
        if t > 0:
            assert sorted(deps) == sorted(ids[waves[t - 1]].tolist())
            assert cols["period"][e] == 5 + t and cols["phase"][e] == "inter_pod"
        elif t == 0:
            assert deps == [0, 2] and cols["period"][e] == 5
        else:
            assert cols["phase"][e] == "intra_pod" and cols["period"][e] == 5 + f.n_waves
            assert deps == ([int(ids[f.parent[e]])] if f.parent[e] >= 0 else [0, 2])
        assert cols["ranks"][e] == [int(f.src[e]), int(f.dst[e])]
        assert cols["size_bytes"][e] == kw["shard_bytes"][f.shard[e]]


def test_hand_example_two_gen_pods():
    # PoD 0 trains (GPUs 0-3), PoDs 1 and 2 generate (4-7, 8-11). One shard held by GPU 0,
    # needed everywhere in Gen; 2 seeds per PoD; budgets: 2 at the train PoD, 2 elsewhere.
    pod_of = np.repeat([0, 1, 2], 4)
    f = dissemination_forest([([0], list(range(4, 12)))], pod_of, [2, 2, 2], seeds_per_pod=2)
    a = f.wave >= 0
    # Four inter-PoD edges, two at a time at PoD 0: two waves, one circuit each; the first
    # seeds of both PoDs go first, so both PoDs can start fanning out after wave 0.
    assert f.n_waves == 2
    assert sorted(f.dst[a].tolist()) == [4, 5, 8, 9]  # the lowest ids (shard 0: offset 0)
    assert (f.src[a] == 0).all() and (f.circuits[a] == 1).all()
    assert [f.pod_load(t).tolist() for t in range(2)] == [[2, 1, 1], [2, 1, 1]]
    # Phase B: seed 4 serves 6, seed 5 serves 7 (blocks [6], [7]); likewise 8 -> 10, 9 -> 11.
    b = ~a
    assert sorted(zip(f.src[b].tolist(), f.dst[b].tolist(), strict=True)) == [
        (4, 6),
        (5, 7),
        (8, 10),
        (9, 11),
    ]


def test_circuits_equalise_within_a_wave():
    # Two shards (sizes 300 and 100) to one Gen PoD each; budgets leave 4 spare units at the
    # train PoD and 3 at each Gen PoD: the big edge takes circuits until 300/c <= 100.
    pod_of = np.repeat([0, 1, 2], 2)
    f = dissemination_forest([([0], [2]), ([1], [4])], pod_of, [6, 4, 4], shard_bytes=[300, 100])
    assert f.n_waves == 1
    by_dst = dict(zip(f.dst.tolist(), f.circuits.tolist(), strict=True))
    # Both start at 1; 300/1 -> 2; 300/2=150 -> 3; 300/3 = 100 ties 100/1, larger shard first
    # -> 4; PoD 0 then has 6 - 5 = 1 unit left: 300/4 = 75 < 100 -> the small edge, 2.
    assert by_dst == {2: 4, 4: 2}
    assert f.pod_load(0).tolist() == [6, 4, 2]


def test_chain_and_binary_tree_depths():
    pod_of = np.repeat([0, 1], [1, 8])
    shards = [([0], list(range(1, 9)))]
    chain = dissemination_forest(shards, pod_of, 1, fanout=1)
    assert chain.level.max() == 7  # seed, then 7 more in a chain
    tree = dissemination_forest(shards, pod_of, 1, fanout=2)
    assert tree.level.max() == 3  # 7 below the seed: levels 1 (2), 2 (4), 3 (1)
    four = dissemination_forest(shards, pod_of, 1, seeds_per_pod=4, fanout=2)
    assert four.level.max() == 1  # 4 seeds share 4 receivers


def test_local_holder_is_the_root_and_needs_no_boundary():
    pod_of = np.repeat([0, 1], 3)
    f = dissemination_forest([([0, 3], [4, 5])], pod_of, [0, 0])  # budgets 0: no crossing needed
    assert f.n_waves == 0
    assert sorted(zip(f.src.tolist(), f.dst.tolist(), strict=True)) == [(3, 4), (3, 5)]


def test_seeds_rotate_over_shards():
    pod_of = np.repeat([0, 1], [1, 4])
    f = dissemination_forest([([0], [1, 2, 3, 4])] * 4, pod_of, 1)
    seeds = f.seeds
    assert sorted(seeds[:, 2].tolist()) == [1, 2, 3, 4]  # shard i seeds receiver i
    assert (seeds[:, 3] == 0).all()


def test_roots_spread_over_replicas():
    # PoDs 0 and 1 train, PoD 2 generates; both shards have replicas on GPU 0 (PoD 0) and
    # GPU 2 (PoD 1): the second shard's root is the idle replica in the other PoD.
    f = dissemination_forest([([0, 2], [4]), ([0, 2], [5])], np.repeat([0, 1, 2], 2), 4)
    assert sorted(f.src[f.wave >= 0].tolist()) == [0, 2]


def test_replay_on_a_fabric():
    # 4 PoDs of 4 GPUs on a 16-GPU fat tree: PoD 0 trains, 1-3 generate; every op finishes and
    # no op starts before the op that brought its sender the shard has ended.
    pod_of = np.repeat(np.arange(4), 4)
    shards = [([g], list(range(4, 16))) for g in range(4)]
    sizes = [1 << 20] * 4
    f = dissemination_forest(shards, pod_of, [2, 2, 2, 2], seeds_per_pod=1, shard_bytes=sizes)
    trace = Trace.from_columns(**forest_ops(f, sizes), gpus=16)
    res = rf.simulate(rf.topologies.FatTree(gpus=16, link="200Gbps"), trace, seed=1)
    ops = res.ops.to_pydict()
    start = dict(zip(ops["op_id"], ops["start_ps"], strict=True))
    end = dict(zip(ops["op_id"], ops["end_ps"], strict=True))
    assert len(end) == f.shard.size
    for e in range(f.shard.size):
        if f.parent[e] >= 0:
            assert start[e] >= end[int(f.parent[e])]
    for t in range(1, f.n_waves):
        assert min(start[e] for e in f.waves[t]) >= max(end[e] for e in f.waves[t - 1])


@pytest.mark.parametrize(
    ("args", "kw", "match"),
    [
        (([([0], [2])], [0, 0, -1], 1), {}, r"pod_of\[2\] = -1 is negative"),
        (([([0], [2])], [0, 1, 1], [1]), {}, r"pod_budget has 1 entries, expected 2"),
        (([([0], [2])], [0, 1, 1], [1, -1]), {}, r"pod_budget\[1\] = -1 is negative"),
        (([([0], [2])], [0, 1, 1], [0, 1]), {}, r"pod_budget\[0\] = 0, but shard 0 must cross PoD 0"),
        (([([], [2])], [0, 1, 1], 1), {}, r"shard 0: holders is empty"),
        (([([0], [2, 2])], [0, 1, 1], 1), {}, r"shard 0: receivers lists GPU 2 more than once"),
        (([([0], [7])], [0, 1, 1], 1), {}, r"shard 0: receivers has GPU 7, outside 0..2"),
        (([([0], [2]), (0,)], [0, 1, 1], 1), {}, r"shards\[1\] must be a pair"),
        (([([0], [2])], [0, 1, 1], 1), {"seeds_per_pod": 0}, r"seeds_per_pod must be an integer >= 1"),
        (([([0], [2])], [0, 1, 1], 1), {"fanout": 1.5}, r"fanout must be an integer >= 1"),
        (([([0], [2])], [0, 1, 1], 1), {"shard_bytes": [1, 2]}, r"shard_bytes has 2 entries, expected 1"),
        (([([0], [2])], [0, 1, 1], 1), {"shard_bytes": [-1]}, r"shard_bytes\[0\] = -1 is negative"),
    ],
)
def test_bad_input_names_the_argument(args, kw, match):
    with pytest.raises(rf.SpecError, match=match):
        dissemination_forest(*args, **kw)


def test_forest_ops_bad_input():
    f = dissemination_forest([([0], [2])], [0, 1, 1], 1)
    with pytest.raises(rf.SpecError, match=r"deps entry 5 must be an earlier op_id"):
        forest_ops(f, [10], first_op_id=5, deps=[5])
    with pytest.raises(rf.SpecError, match=r"shard_bytes has 0 entries"):
        forest_ops(f, [])


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_barriers_between_waves_wait_as_the_dense_dependencies_do(backend):
    # Large waves wait on each other through one zero-byte barrier op per wave boundary
    # (barrier_above): every edge op starts and ends exactly when it does with every op of
    # wave t + 1 depending on every op of wave t (barrier_above large: no barrier).
    pod_of = np.repeat(np.arange(4), 4)
    shards = [([g], list(range(4, 16))) for g in range(4)]
    sizes = [1 << 20] * 4
    f = dissemination_forest(shards, pod_of, [2, 2, 2, 2], seeds_per_pod=1, shard_bytes=sizes)
    assert f.n_waves >= 2
    dense = forest_ops(f, sizes, barrier_above=1 << 30)
    barred = forest_ops(f, sizes, barrier_above=0)
    n, b = f.shard.size, f.n_waves - 1
    assert len(dense["op_id"]) == n and len(barred["op_id"]) == n + b
    assert barred["op_id"].tolist() == list(range(n + b))
    row, after = op_rows(f, 0)
    assert after == list(range(b))
    bar = [int(row[f.waves[t][-1]]) + 1 for t in range(b)]  # each right after its wave
    for j, t in enumerate(range(b)):
        assert barred["deps"][bar[j]] == row[f.waves[t]].tolist() and barred["size_bytes"][bar[j]] == 0
        assert all(barred["deps"][row[e]] == [bar[j]] for e in f.waves[t + 1])
    fab = rf.topologies.FatTree(gpus=16, link="200Gbps")
    times = []
    for cols in (dense, barred):
        res = rf.simulate(fab, Trace.from_columns(**cols, gpus=16), seed=1, backend=backend)
        ops = res.ops.to_pydict()
        times.append(
            {i: (s, e) for i, s, e in zip(ops["op_id"], ops["start_ps"], ops["end_ps"], strict=True)}
        )
    assert all(times[0][e] == times[1][int(row[e])] for e in range(n))
    for j, t in enumerate(range(b)):  # a barrier ends as its wave does, and takes no time
        s, e = times[1][bar[j]]
        assert s == e == max(times[0][x][1] for x in f.waves[t].tolist())


def test_seeds_spread_over_the_receivers_when_shards_repeat_with_the_offset():
    """Shards 0, 2, 4, 6 need GPUs {4, 6} of PoD 1, shards 1, 3, 5, 7 GPUs {5, 7}: the
    offset ``(shard * k) mod r`` alone is 0 for every even shard and 1 for every odd one, so
    GPUs 4 and 7 took every seed (as every seed of a rail fell on one ToR on RFabric 2,048
    with Kimi K2). Oracle: equal shards over equal receivers, so each receiver seeds as many
    shards as any other (2 each)."""
    shards = [([i % 4], [4 + i % 2, 6 + i % 2]) for i in range(8)]
    f = dissemination_forest(shards, [0, 0, 0, 0, 1, 1, 1, 1], 4, shard_bytes=[10] * 8)
    seeds = f.dst[f.wave >= 0]
    assert np.bincount(seeds, minlength=8)[4:].tolist() == [2, 2, 2, 2]
    check_forest(f, shards, [0, 0, 0, 0, 1, 1, 1, 1], [4, 4], {"shard_bytes": [10] * 8})


def nic_time(f: Forest, sizes, cap: int) -> float:
    """Phase A back to back, per wave the longest of its edges (bytes / circuits) and of its
    NICs (bytes a GPU sends or receives in the wave / cap), in units of a circuit's rate."""
    total = 0.0
    sizes = np.asarray(sizes, dtype=np.float64)
    for t in range(f.n_waves):
        e = f.wave == t
        b = sizes[f.shard[e]]
        total += max(
            (b / f.circuits[e]).max(),
            np.bincount(f.src[e], b).max() / cap,
            np.bincount(f.dst[e], b).max() / cap,
        )
    return total


def test_a_roots_edges_to_every_pod_go_in_separate_waves():
    """Kimi K2's weight sync on RFabric in small: 4 roots in PoD 0, each shard needed in PoDs
    1-4, budgets 4 (the PoD's roots fit one wave by budget alone). Without the NIC rule a
    root's 4 edges share one wave and its NIC while the other roots wait: 4 waves of 4x the
    shard's time. Oracle: one edge per NIC per wave, 4 waves of 1x: Phase A in 4 shard times
    instead of 16."""
    pod_of = np.repeat(np.arange(5), 4)
    shards = [([i], [4 + i, 8 + i, 12 + i, 16 + i]) for i in range(4)]
    f = dissemination_forest(shards, pod_of, 4, shard_bytes=[1] * 4, max_circuits_per_edge=1)
    check_forest(f, shards, pod_of, [4] * 5, {"shard_bytes": [1] * 4, "max_circuits_per_edge": 1})
    assert f.n_waves == 4
    for t in range(4):
        e = f.wave == t
        assert np.bincount(f.src[e]).max() == 1 and np.bincount(f.dst[e]).max() == 1
    assert nic_time(f, [1] * 4, 1) == 4.0
    old = dissemination_forest(shards, pod_of, 4, shard_bytes=[1] * 4)  # no cap: no NIC rule
    assert nic_time(old, [1] * 4, 1) == 16.0


@FAST
@given(problems())
def test_the_nic_rule_is_taken_only_where_it_is_faster(problem):
    """With a cap of 1 the schedule is never slower, by :func:`nic_time`, than the first fit
    on PoD budgets alone (the schedule without a cap, its circuits clipped to 1: the same
    waves and what the equaliser gives at a cap of 1)."""
    shards, pod_of, budget, kw = problem
    if kw["max_circuits_per_edge"] != 1:
        return
    f = dissemination_forest(shards, pod_of, budget, **kw)
    if f.n_waves == 0:
        return
    plain = dissemination_forest(shards, pod_of, budget, **(kw | {"max_circuits_per_edge": None}))
    plain = Forest(
        **{**plain.__dict__, "circuits": np.minimum(plain.circuits, np.where(plain.wave >= 0, 1, 0))}
    )
    assert nic_time(f, kw["shard_bytes"], 1) <= nic_time(plain, kw["shard_bytes"], 1) + 1e-9
