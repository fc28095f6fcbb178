"""Progress bars in a log (issue 25 item 5): when stderr is not a terminal, rf.sweep's bar
and Simulation.run's write whole lines, at most one per tenth of the work, never one per
update and never a carriage return."""

import io
import subprocess
import sys
import textwrap

import rfabric as rf
from rfabric._optional import _LogBar, _PlainBar, progress_bar


class _TTY(io.StringIO):
    def isatty(self):
        return True


def test_a_log_bar_writes_a_line_per_tenth():
    log = io.StringIO()
    bar = progress_bar(1000, desc="sweep", unit="point", file=log)
    assert isinstance(bar, _LogBar)
    for i in range(1000):
        bar.set_postfix_str(f"point {i}", refresh=True)
        bar.update(1)
    bar.close()
    lines = log.getvalue().split("\n")
    assert lines[-1] == "" and "\r" not in log.getvalue()
    lines = lines[:-1]
    assert len(lines) == 11  # the start and each tenth: 0%, 10%, ..., 100%
    assert lines[0].startswith("sweep: 0/1000 point") and lines[-1].startswith("sweep: 1000/1000 point")
    assert [int(line.rsplit("(", 1)[1].rstrip("%)")) for line in lines] == list(range(0, 101, 10))
    assert "point 999" in lines[-1]


def test_a_terminal_gets_a_bar_redrawn_in_place():
    tty = _TTY()
    bar = progress_bar(5, desc="sweep", unit="point", file=tty)
    assert not isinstance(bar, _LogBar)
    for _ in range(5):
        bar.update(1)
    bar.close()
    assert "\r" in tty.getvalue() and "5/5" in tty.getvalue()
    assert isinstance(_PlainBar(1, file=_TTY()), _PlainBar)


_SWEEP = textwrap.dedent(
    """
    import rfabric as rf
    if __name__ == "__main__":
        rows = rf.sweep(fabrics=["FT", "FT-OS", "RO"], links=["100Gbps", "200Gbps"], gpus=[8, 16],
                        workload={"flows": {"pattern": "permutation", "size": "16KiB"}},
                        executor="serial", out=None, progress=True)
        print(rows.num_rows)
    """
)


def test_a_sweep_of_12_points_logs_at_most_11_lines(tmp_path):
    """A real sweep, stderr a pipe (as in a log or CI): the lines are counted. From another
    folder, so that the rfabric under test is imported, not a source tree without its engine."""
    run = subprocess.run(
        [sys.executable, "-c", _SWEEP], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "12"
    assert "\r" not in run.stderr
    lines = run.stderr.splitlines()
    assert all(line.startswith("sweep: ") for line in lines), run.stderr
    assert 2 <= len(lines) <= 11 < 12  # fewer lines than points: not one per update
    assert lines[-1].startswith("sweep: 12/12 point") and lines[-1].endswith("(100%)")


def test_simulation_progress_in_a_log(capsys):
    """capsys's stderr is not a terminal: Simulation.run(progress=True) writes whole lines."""
    fab = rf.topologies.FatTree(16)
    rf.simulate(fab, rf.Flows.permutation(16, "1MiB", seed=1), progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err and err.endswith("\n")
    lines = err.splitlines()
    assert 1 <= len(lines) <= 11 and lines[-1].startswith("run: flows 16/16")
