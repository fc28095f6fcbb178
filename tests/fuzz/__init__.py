"""A seeded fuzzing harness for rfabric's public input surfaces (issue 13).

Each *surface* turns an integer seed into one input and feeds it to the API a user would
call. Every input must end in exactly one of:

* ``accepted``: the call returned (and, where it simulates, the run's invariants held);
* ``named``: an rfabric error (``SpecError``, ``TraceError``) was raised;

and never in ``generic`` (any other exception: a bug to fix), a crash (the process dies:
the harness then dies with it, loudly) or a ``hang`` (an input taking longer than the
per-input limit).

``python -m tests.fuzz --n 20000`` runs the full set and prints the outcome table;
``tests/test_fuzz.py`` runs a fast slice in CI.
"""

from .harness import SURFACES, run

__all__ = ["SURFACES", "run"]
