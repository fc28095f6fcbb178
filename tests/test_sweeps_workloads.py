"""rfabric/sweeps/workloads.py: workload specs and the synthetic flow patterns."""

import numpy as np
import pytest

import rfabric as rf
from rfabric.sweeps import pattern_flows, resolve_workload


def test_all_to_all_is_every_ordered_pair_once_in_either_spelling():
    for name in ("all_to_all", "all-to-all"):
        f = pattern_flows(name, 8, 4096, seed=1)
        pairs = set(zip(f.src.tolist(), f.dst.tolist(), strict=True))
        assert len(f) == len(pairs) == 8 * 7 and all(a != b for a, b in pairs)
        assert set(f.size_bytes.tolist()) == {4096}


def test_permutation_is_the_seeded_flows_permutation():
    f = pattern_flows("permutation", 16, 4096, seed=3)
    g = rf.Flows.permutation(16, 4096, seed=3)
    np.testing.assert_array_equal(f.src, g.src)
    np.testing.assert_array_equal(f.dst, g.dst)


def test_incast_draws_distinct_senders_to_gpu_0():
    f = pattern_flows("incast", 16, 4096, seed=2, fan_in=5)
    assert len(set(f.src.tolist())) == 5 and set(f.dst.tolist()) == {0} and 0 not in f.src
    assert len(pattern_flows("incast", 4, 4096, seed=2, fan_in=16)) == 3  # at most gpus - 1
    with pytest.raises(rf.SpecError, match="--fan-in must be at least 1"):
        pattern_flows("incast", 16, 4096, seed=2, fan_in=0, fan_in_name="--fan-in")


def test_an_unknown_pattern_names_the_known_ones():
    with pytest.raises(
        rf.SpecError, match="w: unknown flows pattern 'ring' .*permutation, all_to_all, incast"
    ):
        pattern_flows("ring", 16, 4096, seed=1, where="w")
    with pytest.raises(rf.SpecError, match="unknown flows pattern 1"):
        resolve_workload({"flows": {"pattern": 1}}, None, "w")


def test_resolved_specs_make_the_workload_and_a_label():
    w = resolve_workload({"flows": {"pattern": "all-to-all", "size": "8KiB"}}, None, "w")
    assert w.label == "all_to_all 8KiB"
    made = w.make(4, seed=1)
    assert len(made) == 12 and set(made.size_bytes.tolist()) == {8192}
    fixed = rf.Flows([0], [1], [4096])
    assert resolve_workload(fixed, "mine", "w").make(16, seed=9) is fixed
    with pytest.raises(rf.SpecError, match="exactly one key of generate_rl, flows, trace"):
        resolve_workload({"flows": {}, "trace": "x"}, None, "w")
    with pytest.raises(rf.SpecError, match="generate_rl needs 'model'"):
        resolve_workload({"generate_rl": {}}, None, "w")
