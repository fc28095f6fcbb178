"""rfabric/simulation/circuits.py: link states, the failed-port mask and circuit plans
through Simulation's public calls (the ones the control loop uses)."""

import numpy as np
import pytest

import rfabric as rf
from rfabric.controllers.loop import same_plan

US = 1_000_000


@pytest.fixture(scope="module")
def rfab():
    return rf.topologies.RFabric(128)  # two rail groups joined by circuits


def new_sim(rfab):
    return rf.Simulation(rfab, rf.Flows([0], [64], [1 << 20]), t_ocs="10us")


def test_down_links_follow_the_scheduled_changes(rfab):
    sim = new_sim(rfab)
    nic = sim.spec.nic_link(3)
    sim.fail_link(nic, "1us")
    sim.set_link_state(nic, "3us", True)
    assert sim.down_links() == [] and sim.down_links("500ns") == []
    assert sim.down_links("1us") == [nic] and sim.down_links("2us") == [nic]
    assert sim.down_links("3us") == []
    sim.fail_nic(5, 0)
    assert sim.down_links() == [sim.spec.nic_link(5)]


def test_a_plan_on_a_failed_ocs_port_is_refused_and_changes_nothing(rfab):
    sim = new_sim(rfab)
    plan = sim.current_circuits()
    assert len(plan) > 0
    sim.check_plan(plan)  # the initial plan is valid
    sim.fail_link(int(plan.a[0]), "2us")
    sim.check_plan(plan, at="1us")  # not failed yet
    sim.run(until="2us")
    with pytest.raises(rf.SpecError, match=r"mine: circuit 0 .* uses failed OCS port"):
        sim.check_plan(plan, where="mine")
    with pytest.raises(rf.SpecError, match="apply_circuits_now: circuit 0"):
        sim.apply_circuits_now(plan)
    assert same_plan(sim.current_circuits(), plan) and sim.results().circuits.num_rows == 0


def test_apply_circuits_now_switches_at_once_and_logs_the_period(rfab):
    sim = new_sim(rfab)
    sim.run(until="1us")
    now = sim.now
    before = sim.current_circuits()
    fewer = rf.CircuitTable.build(before.ocs[1:], before.a[1:], before.b[1:])
    assert sim.apply_circuits_now(fewer, period=7, job="a") == 0  # the first plan id
    assert same_plan(sim.current_circuits(), fewer)
    lit = sim.circuits_lit_at()
    assert len(lit) == len(fewer) and np.all(lit <= now)  # kept circuits stay lit
    sim.run()
    c = sim.results().circuits.to_pylist()
    assert c == [
        {"time_ps": now, "plan_id": 0, "added": 0, "removed": 1, "dark_ps": 10 * US, "period": 7, "job": "a"}
    ]


def test_apply_circuits_schedules_and_new_circuits_go_dark_for_t_ocs(rfab):
    sim = new_sim(rfab)
    plan = sim.current_circuits()
    fewer = rf.CircuitTable.build(plan.ocs[1:], plan.a[1:], plan.b[1:])
    assert sim.apply_circuits(fewer, "1us") == 0
    assert sim.apply_circuits(plan, "2us", t_ocs="5us") == 1
    sim.run(until="2us")
    lit = sim.circuits_lit_at()
    assert sorted(lit.tolist())[-1] == 7 * US  # the circuit put back is dark until 2 us + 5 us
    with pytest.raises(rf.SpecError, match="plan must be a CircuitTable"):
        sim.apply_circuits([(0, 1, 2)], 0)
