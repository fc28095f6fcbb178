"""Results do not move when code moves: a digest of every result table of a fixed set of runs.

Each run below (every fabric on both backends with its controller, flows under failures on
both transports and both flow models, the collective tables) is reduced to a SHA-256 of its tables' contents and
compared with ``tests/golden/results_hashes.txt``. A restructuring must keep every line; a
change meant to alter results regenerates the file and says why in its commit:

    pytest tests/test_results_hash.py --update-golden

The golden lines carry each run's makespan and event count beside the hash, so a diff of the
file shows which runs moved and by how much.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import tiny_rl_trace

import rfabric as rf

GOLDEN = Path(__file__).parent / "golden" / "results_hashes.txt"

# run-dict keys that measure the host, not the simulation
_HOST_KEYS = {"wall_s", "events_per_s", "packet_hops_per_s", "controller_wall_s", "peak_rss_bytes"}


def _digest_table(h, name, table):
    if table is None:
        h.update(f"{name}:none;".encode())
        return
    h.update(f"{name}:{table.num_rows};".encode())
    for col in table.schema.names:
        h.update(f"{col}={table[col].to_pylist()!r};".encode())


def _digest(res) -> tuple[str, int, int]:
    h = hashlib.sha256()
    for name in ("flows", "ops", "stages", "links"):
        table = getattr(res, name, None) if name != "flows" or res.run.get("flows_recorded") else None
        _digest_table(h, name, table)
    run = {k: v for k, v in res.run.items() if k not in _HOST_KEYS}
    h.update(repr(sorted(run.items(), key=lambda kv: kv[0])).encode())
    return h.hexdigest()[:32], int(res.run["makespan_ps"]), int(res.run["events"])


def _fabrics():
    return {
        "FatTree": rf.topologies.FatTree(64),
        "FatTree-OS3": rf.topologies.FatTree(64, oversubscription=3),
        "RailOptimized": rf.topologies.RailOptimized(64),
        "TopoOpt": rf.topologies.TopoOpt(64),
        "MixNet": rf.topologies.MixNet(64),
        "RFabric": rf.topologies.RFabric(64),
    }


def _runs():
    """(name, thunk) pairs; each thunk returns (hash, makespan_ps, events)."""
    trace = tiny_rl_trace()
    out = []
    for fname, fab in _fabrics().items():
        for backend in ("packet", "flow"):

            def run(fab=fab, backend=backend):
                return _digest(rf.simulate(fab, trace, backend=backend, seed=1, controller=fab.controller()))

            out.append((f"trace/{fname}/{backend}", run))
    flows = rf.Flows.permutation(64, size_bytes=256 << 10, seed=2)
    ft = rf.topologies.FatTree(64, oversubscription=3)
    spec = ft.to_spec()
    uplink = int(spec.links_of(spec.node_id("tor0"))[-1])
    for backend, transport, model in (
        ("packet", "roce", None),
        ("packet", "dctcp", None),
        ("flow", "roce", "max-min"),
        ("flow", "roce", "dynamic"),
    ):

        def run(backend=backend, transport=transport, model=model):
            kw = {} if model is None else {"flow_model": model}
            sim = rf.Simulation(
                ft, flows, backend=backend, transport=transport, seed=4, record_flows=True, **kw
            )
            sim.fail_nic(3, at="2us")
            sim.fail_link(uplink, at="5us")
            sim.run()
            return _digest(sim.results())

        label = "flow-dynamic" if model == "dynamic" else backend
        out.append((f"flows-failures/FatTree-OS3/{label}/{transport}", run))
    for kind in ("all_reduce", "all_gather", "all_to_all", "broadcast"):
        for backend in ("packet", "flow"):

            def run(kind=kind, backend=backend):
                t = rf.collective(
                    rf.topologies.RailOptimized(32), kind, sizes=[1 << 10, 1 << 16, 1 << 22], backend=backend
                )
                h = hashlib.sha256()
                _digest_table(h, kind, t)
                time_col = next(c for c in t.schema.names if c.startswith("time_"))
                return h.hexdigest()[:32], max(t[time_col].to_pylist()), t.num_rows

            out.append((f"collective/{kind}/RailOptimized/{backend}", run))
    return out


def _read_golden() -> dict[str, str]:
    lines = [ln.split() for ln in GOLDEN.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return {parts[0]: " ".join(parts[1:]) for parts in lines}


def test_results_are_bit_identical_to_golden(update_golden):
    measured = {name: "{} {} {}".format(*thunk()) for name, thunk in _runs()}
    if update_golden:
        width = max(map(len, measured))
        body = "".join(f"{name:<{width}}  {line}\n" for name, line in measured.items())
        GOLDEN.write_text(
            "# tests/test_results_hash.py: run  sha256[:32]  makespan_ps (collectives: max time)  events (collectives: rows)\n"
            + body
        )
        pytest.skip("golden file rewritten")
    golden = _read_golden()
    assert sorted(golden) == sorted(measured), "the set of runs changed: regenerate the golden file"
    moved = {name: (golden[name], line) for name, line in measured.items() if golden[name] != line}
    assert not moved, "results moved (golden -> now):\n" + "\n".join(
        f"  {name}: {a} -> {b}" for name, (a, b) in moved.items()
    )
