"""rfabric/simulation/core.py: the Simulation class's constructor and state."""

import inspect

import numpy as np
import pytest

import rfabric as rf
from rfabric.simulation import BACKENDS


def test_backend_is_a_named_keyword_of_the_signature():
    params = inspect.signature(rf.Simulation).parameters
    assert params["backend"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["backend"].default == "packet"
    assert tuple(BACKENDS) == ("packet", "flow")


@pytest.mark.parametrize("bad", ["fluid", 1, None])
def test_an_unknown_backend_is_refused_by_name(bad):
    with pytest.raises(rf.SpecError, match=r"backend: unknown backend .*allowed: 'packet', 'flow'"):
        rf.Simulation(rf.topologies.FatTree(16), rf.Flows([0], [8], [4096]), backend=bad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_before_and_after_a_run(backend):
    size = 1 << 20
    sim = rf.Simulation(rf.topologies.FatTree(16), rf.Flows([0, 3], [8, 12], [size, size]), backend=backend)
    assert sim.backend == backend and sim.now == 0 and not sim.done
    assert sim.trace is None and len(sim.flows) == 2 and sim.routing == sim.spec.routing
    assert sim.engine is sim.engine  # one handle for the whole run
    sim.run()
    assert sim.done and sim.now > 0
    # every byte of both flows arrived (the conservation oracle)
    np.testing.assert_array_equal(sim.delivered_bytes(), [size, size])
    assert sim.results().run["backend"] == backend


def test_a_trace_for_more_gpus_than_the_fabric_is_refused():
    trace = rf.traces.Trace.from_columns(
        op_id=[0],
        stage="train",
        phase="x",
        kind="all_reduce",
        ranks=[[0, 31]],
        size_bytes=4096,
        deps=[[]],
        gpus=32,
    )
    with pytest.raises(rf.SpecError, match="the trace is for 32 GPUs but .* has 16"):
        rf.Simulation(rf.topologies.FatTree(16), trace)
