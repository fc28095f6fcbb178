"""The fuzzing harness's CI slice (issues 13 and 23): seeded inputs over every surface of
tests/fuzz, each accepted or refused by an rfabric error, none generic, none hung. The
surfaces of issue 13 get 400 inputs, those added for issue 23 (user fabrics, fabric sizes,
generated imports, from_columns, trace schemas, TOML bytes, sweeps, argument types) 120,
about the wall time the 600 inputs of the first ten took alone. The full set: ``python -m tests.fuzz --n 20000``
(docs/explanation/model.md, "Reliability")."""

from fuzz import SURFACES, run
from fuzz.harness import format_table

#: the surfaces of issue 13, then those of issue 23
FIRST = list(SURFACES)[:10]
ADDED = list(SURFACES)[10:]


def test_every_fuzzed_input_is_accepted_or_named():
    first, added = run(400, seed=11, surfaces=FIRST), run(120, seed=11, surfaces=ADDED)
    table = {**first["table"], **added["table"]}
    result = {"table": table, "examples": first["examples"] + added["examples"]}
    assert set(table) == set(SURFACES)
    bad = {name: c["generic"] + c["hang"] for name, c in table.items()}
    assert not any(bad.values()), format_table(result)
    # the harness reaches both outcomes on every surface (a surface whose inputs are all
    # refused at the first check tests nothing past it)
    for name, c in table.items():
        assert c["accepted"] > 0 and c["named"] > 0, (name, dict(c))
