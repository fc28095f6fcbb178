"""The loop that runs the surfaces and classifies their outcomes (see the package docstring)."""

from __future__ import annotations

import collections
import random
import signal
import tempfile
from pathlib import Path

import rfabric as rf

from .surfaces_api import (
    api_args,
    circuit_plan,
    controller_plans,
    engine_config,
    fabric_size,
    failures_spec,
    flows_args,
    link_calls,
    sweep_config,
    topology_toml,
    unit_string,
    user_topology,
)
from .surfaces_files import import_file, importer_text, toml_bytes, trace_columns, trace_file, trace_schema

OUTCOMES = ("accepted", "named", "generic", "hang")


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


SURFACES = {
    "trace_file": trace_file,
    "import_file": import_file,
    "unit_string": unit_string,
    "flows_args": flows_args,
    "topology_toml": topology_toml,
    "link_calls": link_calls,
    "circuit_plan": circuit_plan,
    "controller_plans": controller_plans,
    "engine_config": engine_config,
    "failures_spec": failures_spec,
    "user_topology": user_topology,
    "fabric_size": fabric_size,
    "importer_text": importer_text,
    "trace_columns": trace_columns,
    "trace_schema": trace_schema,
    "toml_bytes": toml_bytes,
    "sweep_config": sweep_config,
    "api_args": api_args,
}


def run(n: int, seed: int = 0, surfaces=None, timeout_s: int = 20) -> dict:
    """Run ``n`` inputs spread over ``surfaces`` (default all); returns
    ``{surface: Counter(outcome)}`` and, under the key ``"generic"``, the first examples
    of generic exceptions as ``(surface, input seed, repr)``."""
    names = list(surfaces or SURFACES)
    table = {s: collections.Counter() for s in names}
    examples: list[tuple[str, int, str]] = []
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            for i in range(n):
                name = names[i % len(names)]
                k = seed * 1_000_003 + i
                rng = random.Random(f"{name}:{k}")
                signal.alarm(timeout_s)
                try:
                    SURFACES[name](rng, workdir)
                    outcome = "accepted"
                except (rf.SpecError, rf.TraceError):
                    outcome = "named"
                except Hang:
                    outcome = "hang"
                    examples.append((name, k, "hang"))
                except Exception as exc:  # the bug class the harness exists to find
                    outcome = "generic"
                    if len(examples) < 20:
                        examples.append((name, k, f"{type(exc).__name__}: {exc}"[:200]))
                finally:
                    signal.alarm(0)
                table[name][outcome] += 1
    finally:
        signal.signal(signal.SIGALRM, old)
    return {"table": table, "examples": examples}


def format_table(result: dict) -> str:
    rows = [("surface", *OUTCOMES, "total")]
    totals = collections.Counter()
    for name, c in result["table"].items():
        rows.append((name, *(str(c[o]) for o in OUTCOMES), str(sum(c.values()))))
        totals.update(c)
    rows.append(("all", *(str(totals[o]) for o in OUTCOMES), str(sum(totals.values()))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(x.rjust(w) if j else x.ljust(w) for j, (x, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    for name, k, text in result["examples"]:
        lines.append(f"  {name} #{k}: {text}")
    return "\n".join(lines)
