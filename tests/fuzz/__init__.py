"""A seeded fuzzing harness for rfabric's public input surfaces (issue 13).

Each *surface* turns an integer seed into one input and feeds it to the API a user would
call. Every input must end in exactly one of:

* ``accepted``: the call returned (and, where it simulates, the run's invariants held);
* ``named``: an rfabric error (``SpecError``, ``TraceError``) was raised;

and never in ``generic`` (any other exception: a bug to fix), a crash (the process dies:
the harness then dies with it, loudly) or a ``hang`` (an input taking longer than the
per-input limit).

An input that is accepted must also pass its surface's oracle, an independent check that
it was right to accept it (an ``AssertionError`` there counts as ``generic``): a run keeps
the engine's invariants; an accepted trace, damaged or imported, replays to the end; a user
fabric's tables have every node wired to the GPUs (checked with networkx); ``from_columns``
holds each size and time equal to its value parsed on its own; a trace file whose columns
were changed reads back equal to the original; a sweep has one complete row per grid point.

Surfaces (issue 13): damaged trace files and imports, unit strings, ``rf.Flows`` arguments,
mutated presets, link calls, circuit plans, controllers, engine settings, failure schedules.
Added for issue 23: ``user_topology`` (a Topology subclass with random node and link tables:
parallel links, unwired nodes and islands, junk ids and rates), ``fabric_size`` (every
fabric class with sizes and port counts beyond what can be built), ``importer_text`` (SimAI
workloads under every header SimAI decodes and htsim matrices, generated field by field),
``trace_columns`` (``Trace.from_columns`` with unit strings and wrong types),
``trace_schema`` (trace files with a column dropped, renamed, retyped, duplicated or moved),
``toml_bytes`` (binary presets and sweep configs), ``sweep_config`` (small sweeps run
serially) and ``api_args`` (the file and trace entry points with arguments of the wrong
type).

``python -m tests.fuzz --n 20000`` runs the full set and prints the outcome table
(``--seed``, ``--surface NAME`` to narrow it); ``tests/test_fuzz.py`` runs a fast slice in CI.
"""

from .harness import SURFACES, run

__all__ = ["SURFACES", "run"]
