import pytest

import rfabric as rf
from rfabric import catalog


def test_every_catalog_fabric_builds_its_family():
    for name, (family, params) in catalog.FABRICS.items():
        cls = rf.topologies.FAMILIES[family]
        fab = cls(128, "200Gbps", **params)
        assert fab.family == family, name
    assert set(catalog.FAMILIES) == set(rf.topologies.FAMILIES)
    assert set(catalog.PAPER_FABRICS) <= set(catalog.FABRICS)


@pytest.mark.parametrize(
    "name, kind, want",
    [
        ("all-to-all", "pattern", "all_to_all"),
        ("all_to_all", "pattern", "all_to_all"),
        ("stage-aware", "controller", "stage_aware"),
        ("Weight-Sync", "stage", "weight_sync"),
        ("FT-OS", "fabric", "FT-OS"),
    ],
)
def test_canonical_spellings(name, kind, want):
    assert catalog.canonical(name, kind) == want


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"pattern: unknown name 'ring' \(known: permutation, all_to_all"):
        catalog.canonical("ring", "pattern")
    with pytest.raises(ValueError, match="unknown name 'ft'"):
        catalog.canonical("ft", "fabric")  # fabric labels are case-sensitive row labels
    with pytest.raises(ValueError, match="unknown kind"):
        catalog.canonical("x", "colour")
