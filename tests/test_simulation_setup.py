"""rfabric/simulation/setup.py: a workload before the engine sees it (controller checks,
rewrites, a controller's own prepare)."""

import pytest

import rfabric as rf
from rfabric.controllers import Controller, UniformController
from rfabric.rewrites import WeightSyncForest
from rfabric.simulation.setup import changed_ops, check_controller, prepare_workload, rewrite_workload


def trace(sizes, kinds=None):
    n = len(sizes)
    return rf.traces.Trace.from_columns(
        op_id=list(range(n)),
        stage="train",
        phase="p",
        kind=kinds or ["all_reduce"] * n,
        ranks=[[0, 1, 2, 3]] * n,
        size_bytes=sizes,
        deps=[[]] + [[i] for i in range(n - 1)],
    )


def test_changed_ops_marks_the_ops_no_old_op_matches_as_a_multiset():
    before = trace([4096, 8192, 4096])
    after = trace([4096, 4096, 4096, 8192])  # one 4 KiB op more
    got = changed_ops(before, after, "new", ["a", "b", "c"])
    # the old ops keep their labels (equal ops in order), the extra one is "new"
    assert got.tolist() == ["a", "c", "new", "b"]
    assert changed_ops(before, before, "new", None).tolist() == [None, None, None]


def test_no_rewrites_leave_the_workload_as_it_is():
    t = trace([4096])
    spec = rf.topologies.FatTree(16).to_spec()
    out, applied, label = rewrite_workload(rf.topologies.FatTree(16), spec, None, t, "none")
    assert out is t and applied == [] and label is None


def test_a_rewrite_of_flows_is_refused():
    flows = rf.Flows([0], [1], [4096])
    fab = rf.topologies.FatTree(16)
    with pytest.raises(rf.SpecError, match="rewrite a trace's ops; the workload is Flows"):
        rewrite_workload(fab, fab.to_spec(), None, flows, [WeightSyncForest()])


def test_controller_checks_name_the_controller():
    t = trace([4096])
    with pytest.raises(rf.SpecError, match="with plan\\(intent, view\\)"):
        check_controller(object(), t)
    with pytest.raises(rf.SpecError, match="controller UniformController: a controller needs a trace"):
        check_controller(UniformController(), rf.Flows([0], [1], [4096]))

    class Odd(UniformController):
        granularity = "step"

    with pytest.raises(rf.SpecError, match="granularity must be one of"):
        check_controller(Odd(), t)


class Doubling(Controller):
    """A controller whose own prepare() doubles the last op's size."""

    name = "doubling"

    def plan(self, intent, view):
        return None

    def prepare(self, workload, spec):
        sizes = workload.table["size_bytes"].to_pylist()
        return trace(sizes[:-1] + [2 * sizes[-1]])


def test_a_controllers_prepare_is_recorded_as_a_private_rewrite():
    t = trace([4096, 8192])
    spec = rf.topologies.FatTree(16).to_spec()
    out, label, private = prepare_workload(Doubling(), t, spec, None)
    assert out.table["size_bytes"].to_pylist() == [4096, 16384]
    assert label.tolist() == [None, "doubling.prepare"]
    assert private[0]["rewrite"] == "doubling.prepare"
    assert (private[0]["ops_replaced"], private[0]["ops_produced"]) == (1, 1)
    # the base Controller.prepare is not called: nothing changes
    assert prepare_workload(UniformController(), t, spec, None) == (t, None, [])

    class Broken(Doubling):
        def prepare(self, workload, spec):
            return "a trace"

    with pytest.raises(rf.SpecError, match="prepare\\(\\) returned str, expected a Trace"):
        prepare_workload(Broken(), t, spec, None)
