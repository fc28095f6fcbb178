"""rfabric/simulation/runner.py: simulate() is Simulation + failures + run + results."""

import pytest

import rfabric as rf

FLOWS = rf.Flows.permutation(16, 256 << 10, seed=3)


def test_simulate_is_the_steps_it_stands_for():
    fab = rf.topologies.RailOptimized(16)
    link = fab.to_spec().nic_link(2)
    res = rf.simulate(fab, FLOWS, seed=5, failures=[(link, "3us")], transport="dctcp")
    sim = rf.Simulation(fab, FLOWS, transport="dctcp", seed=5)
    sim.fail_link(link, "3us")
    by_hand = sim.run().results()
    assert res.flows.equals(by_hand.flows) and res.links.equals(by_hand.links)
    assert (res.run["transport"], res.run["seed"]) == ("dctcp", 5)


def test_simulate_stops_at_until():
    res = rf.simulate(rf.topologies.FatTree(16), FLOWS, until="2us")
    assert res.run["sim_ps"] <= 2_000_000 and res.run["makespan_ps"] == -1


@pytest.mark.parametrize(
    "failures, match",
    [(3, "an iterable of \\(link, time\\) pairs"), ([5], "expected \\(link, time\\) pairs, got 5")],
)
def test_a_malformed_failure_schedule_is_refused(failures, match):
    with pytest.raises(rf.SpecError, match=match):
        rf.simulate(rf.topologies.FatTree(16), FLOWS, failures=failures)
