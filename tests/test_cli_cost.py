"""rfabric/cli/cost.py: a fabric named, or a preset, into its bill of materials."""

import pytest

import rfabric as rf
from rfabric.cli.cost import _fabric_arg
from rfabric.sweeps import resolve_fabric


def test_a_fabric_name_is_built_as_a_sweep_builds_it():
    fab = _fabric_arg("FT-OS", 128, "400Gbps")
    same = resolve_fabric("FT-OS").build(128, 400 * 10**9)
    assert fab.to_spec().arrays().keys() == same.to_spec().arrays().keys()
    assert (fab.name, fab.oversubscription) == (same.name, 3)
    assert rf.cost.network_cost(fab) == rf.cost.network_cost(same)


def test_a_preset_by_path_or_by_name():
    by_path = _fabric_arg("topologies/fat_tree_128_200g.toml", 16, "100Gbps")
    by_name = _fabric_arg("fat_tree_128_200g", 16, "100Gbps")
    assert by_path.gpus == by_name.gpus == 128  # the preset's own size, not --gpus
    with pytest.raises(rf.SpecError, match="unknown fabric 'Torus'"):
        _fabric_arg("Torus", 16, "100Gbps")
