"""rfabric/sweeps/fabrics.py: fabric specs (catalog names, FT-OS<ratio>, classes, factories,
tables) into builders with row labels."""

import pytest

import rfabric as rf
import rfabric.sweeps as sweep_mod


def test_fabric_names():
    assert sweep_mod.resolve_fabric("FT-OS").build(128, 200 * 10**9).oversubscription == 3
    assert sweep_mod.resolve_fabric("FT-OS7").build(128, 200 * 10**9).tor_ports == (14, 2)
    for name, family in [("RO", "rail_optimized"), ("fat_tree", "fat_tree"), ("TopoOpt", "topoopt")]:
        assert sweep_mod.resolve_fabric(name).build(16, 100 * 10**9).family == family


def test_every_catalog_fabric_name_builds_its_family():
    for name, (family, params) in rf.catalog.FABRICS.items():
        fab = sweep_mod.resolve_fabric(name).build(128, 200 * 10**9)
        assert fab.family == family, name
        for key, value in params.items():
            assert getattr(fab, key) == value, (name, key)


def test_tables_factories_and_their_errors():
    fab = sweep_mod.resolve_fabric({"family": "fat_tree", "name": "FT3", "oversubscription": 3})
    assert fab.label == "FT3" and fab.build(128, 200 * 10**9).oversubscription == 3

    def tiny(gpus, link):
        return rf.topologies.FatTree(gpus, link)

    made = sweep_mod.resolve_fabric(tiny, label="mine")
    assert made.label == "mine" and made.build(16, 10**11).gpus == 16
    with pytest.raises(rf.SpecError, match="unknown fabric 'Torus'.*FT-OS<ratio>"):
        sweep_mod.resolve_fabric("Torus")
    with pytest.raises(rf.SpecError, match="sets 'gpus'; the sweep's grid sets it"):
        sweep_mod.resolve_fabric({"family": "fat_tree", "gpus": 8})
    with pytest.raises(rf.SpecError, match="unknown parameter\\(s\\) radixx"):
        sweep_mod.resolve_fabric({"family": "fat_tree", "radixx": 8})
    with pytest.raises(rf.SpecError, match="the factory returned int, not a Topology"):
        sweep_mod.resolve_fabric(lambda g, link: 3).build(16, 10**11)
