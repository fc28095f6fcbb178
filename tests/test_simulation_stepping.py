"""rfabric/simulation/stepping.py: run() honours until and max_events, with or without the
progress bar, and a run cut into epochs ends where one run ends."""

import pytest

import rfabric as rf

FLOWS = rf.Flows.permutation(16, 256 << 10, seed=2)


def sim():
    return rf.Simulation(rf.topologies.FatTree(16), FLOWS, seed=4)


def test_max_events_holds_with_and_without_progress(capsys):
    got = []
    for progress in (False, True):
        s = sim()
        s.run(max_events=700, progress=progress)
        got.append((s.engine.events_processed, s.now, s.done))
    assert got[0] == got[1]
    assert got[0][0] == 700 and not got[0][2]  # it stopped there, not at the end
    assert "flows" in capsys.readouterr().err  # (the bar was drawn)


def test_until_holds_with_and_without_progress(capsys):
    got = []
    for progress in (False, True):
        s = sim()
        s.run(until="5us", progress=progress)
        got.append((s.engine.events_processed, s.now))
    assert got[0] == got[1] and 0 < got[0][1] <= 5_000_000


def test_a_run_in_epochs_ends_as_one_run():
    whole = sim().run().results()
    s = sim()
    s.run(max_events=500)
    s.run(until="3us")
    s.run(max_events=1000, progress=False)
    s.run()
    assert s.results().flows.equals(whole.flows)
    assert s.results().run["events"] == whole.run["events"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_events": -1}, "max_events"),
        ({"max_events": 1.5}, "max_events"),
        ({"progress": "yes"}, "progress"),
        ({"until": "soon"}, "until"),
    ],
)
def test_wrong_arguments_are_refused_by_name(kwargs, match):
    with pytest.raises(rf.SpecError, match=match):
        sim().run(**kwargs)
