"""rfabric/simulation/collect.py: Results assembled from the engine, mid-run and at the end,
for both backends."""

import numpy as np
import pytest

import rfabric as rf
from rfabric.results import PACKET_ONLY_RUN_KEYS, RUN_KEYS
from rfabric.simulation import BACKENDS

FLOWS = rf.Flows.permutation(16, 256 << 10, seed=7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_mid_run_and_at_the_end(backend):
    sim = rf.Simulation(rf.topologies.FatTree(16), FLOWS, backend=backend)
    sim.run(until="2us")
    mid = sim.results()
    assert mid.run["makespan_ps"] == -1 and mid.run["flows_done"] < mid.run["flows"] == 16
    assert mid.run["sim_ps"] == sim.now
    sim.run()
    res = sim.results()
    end = res.flows["end_ps"].to_numpy()
    # the makespan is the last flow's end; every flow delivered its bytes
    assert res.run["makespan_ps"] == end.max() > 0 and res.complete
    np.testing.assert_array_equal(res.flows["delivered_bytes"].to_numpy(), FLOWS.size_bytes)
    assert set(RUN_KEYS) <= set(res.run)
    # link utilization: busy time over the makespan
    links = res.links
    np.testing.assert_allclose(
        links["utilization"].to_numpy(), links["busy_ps"].to_numpy() / res.run["makespan_ps"]
    )
    packet_only = {k: res.run[k] for k in PACKET_ONLY_RUN_KEYS}
    if backend == "flow":
        assert all(v is None for v in packet_only.values())
        assert res.run["recomputes"] > 0
    else:
        assert all(v is not None for v in packet_only.values())
        assert res.run["packets_delivered"] > 0


def test_controller_keys_without_a_controller():
    res = rf.simulate(rf.topologies.FatTree(16), FLOWS)
    assert res.run["controller"] is None and res.run["controller_calls"] == 0
    assert res.run["plan_changes"] == 0 and res.run["rewrites"] == []
    assert res.circuits.num_rows == 0 and res.ops.num_rows == 0
