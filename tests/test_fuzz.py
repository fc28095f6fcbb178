"""The fuzzing harness's CI slice (issue 13): a few hundred seeded inputs over every surface
of tests/fuzz, each accepted or refused by an rfabric error, none generic, none hung. The
full set: ``python -m tests.fuzz --n 20000`` (README "Reliability")."""

from fuzz import SURFACES, run
from fuzz.harness import format_table


def test_every_fuzzed_input_is_accepted_or_named():
    result = run(600, seed=11)
    table = result["table"]
    assert set(table) == set(SURFACES)
    bad = {name: c["generic"] + c["hang"] for name, c in table.items()}
    assert not any(bad.values()), format_table(result)
    # the harness reaches both outcomes on every surface (a surface whose inputs are all
    # refused at the first check tests nothing past it)
    for name, c in table.items():
        assert c["accepted"] > 0 and c["named"] > 0, (name, dict(c))
