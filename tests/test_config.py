"""rfabric/config.py: EngineConfig, as_spec and make_config."""

import dataclasses

import pytest

import rfabric as rf
from rfabric.config import ENGINE_FIELDS, EngineConfig, as_spec, make_config


def test_make_config_replaces_only_the_given_fields():
    base = EngineConfig(transport="dctcp", seed=5)
    got = make_config(base, {"seed": 9})
    assert (got.transport, got.seed) == ("dctcp", 9)
    assert make_config(None, {}) == EngineConfig()
    # every other field is the base's
    for f in dataclasses.fields(EngineConfig):
        if f.name != "seed":
            assert getattr(got, f.name) == getattr(base, f.name)


def test_an_unknown_setting_names_the_closest():
    with pytest.raises(rf.SpecError, match="seed"):
        make_config(None, {"sed": 3})
    with pytest.raises(rf.SpecError, match="mtu_bytes"):
        EngineConfig(mtu_byte=4096)


def test_defaults_are_the_engines():
    cfg = EngineConfig()
    assert cfg.seed == ENGINE_FIELDS["seed"] and cfg.mtu_bytes == ENGINE_FIELDS["mtu_bytes"]
    engine = cfg.to_engine()
    assert engine["mtu_bytes"] == ENGINE_FIELDS["mtu_bytes"]
    assert EngineConfig(ecn_kmin="2us").to_engine()["ecn_kmin_ps"] == 2_000_000


def test_as_spec_takes_a_topology_or_its_spec():
    fab = rf.topologies.FatTree(16)
    spec = as_spec(fab)
    assert isinstance(spec, rf.NetworkSpec) and as_spec(spec) is spec
    with pytest.raises(rf.SpecError, match="expected a Topology or NetworkSpec, got int"):
        as_spec(3)


def test_inconsistent_settings_are_refused_by_name():
    with pytest.raises(rf.SpecError, match="ecn_kmax .* is below ecn_kmin"):
        EngineConfig(ecn_kmin="10us", ecn_kmax="1us").to_engine()
    with pytest.raises(rf.SpecError, match="coll_protocol='ll' needs nccl_model=True"):
        EngineConfig(coll_protocol="ll", nccl_model=False).to_engine()
