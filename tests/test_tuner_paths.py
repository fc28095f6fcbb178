"""The executor's tuner picks the algorithm of an ``auto`` all-reduce from the paths and port
rates at the op's start. It keeps what it read per rank set (the ops of one group repeat), and
that must not outlive a change of the routes (a circuit plan, a circuit lit, a failure or a
repair): an op tuned after the change must choose as an op tuned on the changed fabric from
the start does. Oracle: the same rank set's first op on a run whose fabric was that way from
the start."""

import pytest

import rfabric as rf
from rfabric.traces import Trace

MS = 10**9  # ps
#: the NICs of GPUs 0 and 4 of servers 0 and 1: their traffic relayed by their servers' others
FAILED = (0, 4, 8, 12)
REPAIR_AT = 30 * MS


def two_rounds(size):
    """A 32-rank all-reduce on FatTree(32) after 1 ms, and the same again 50 ms after it."""
    return Trace.from_columns(
        op_id=[0, 1],
        stage="train",
        phase="grad_sync",
        kind="all_reduce",
        ranks=[list(range(32))] * 2,
        size_bytes=[size] * 2,
        deps=[[], [0]],
        compute_ps=[MS, 50 * MS],
        gpus=32,
    )


def run(size, failed: bool, repair_at=None):
    sim = rf.Simulation(rf.topologies.FatTree(32, "200Gbps"), two_rounds(size), backend="flow", seed=1)
    for gpu in FAILED if failed else ():
        link = sim.spec.nic_link(gpu)
        sim.set_link_state(link, 0, False)
        if repair_at is not None:
            sim.set_link_state(link, repair_at, True)
    sim.run()
    ops = {r["op_id"]: r for r in sim.results().ops.to_pylist()}
    return ops[0], ops[1]


@pytest.mark.parametrize("size", [10**8])
def test_an_op_tuned_after_a_repair_reads_the_repaired_paths(size):
    first, second = run(size, failed=True, repair_at=REPAIR_AT)
    assert first["end_ps"] < REPAIR_AT < second["start_ps"]  # the repair falls between the two
    failed, _ = run(size, failed=True)
    healthy, _ = run(size, failed=False)
    # the first chose on the failed fabric, the second as on the healthy one
    assert first["algorithm"] == failed["algorithm"]
    assert second["algorithm"] == healthy["algorithm"]
    # and the failure changes the choice (tree with the NICs down, ring without): the case
    # tells a choice read from the stale paths from a fresh one
    assert (failed["algorithm"], healthy["algorithm"]) == ("tree", "ring")
