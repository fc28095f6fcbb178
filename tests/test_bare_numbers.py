"""The bare-number rule (docs/units.md) at every API site that takes a rate, time or size.

A number without a unit is a count of the base unit (bit/s, ps, bytes). Below its quantity's
floor (a rate under 1 Mbit/s, a time under 1 ns other than 0, a buffer under 1 KiB) it is a
unit left out: refused with an rf.SpecError naming the argument and suggesting the unit
string. Each site is driven with such a value (refused, with the suggestion) and with a
plausible base-unit integer (accepted, and equal to the unit string's value).
"""

import numpy as np
import pytest

import rfabric as rf
from rfabric.units import BARE_FLOOR, check_bare

FT = rf.topologies.FatTree


class OwnFabric(rf.Topology):
    """A user fabric (docs/tutorials/own-fabric.md) whose link rows take ``rate``, ``latency``
    and ``buffer`` from its arguments as given."""

    family = "own_bare"

    def __init__(self, gpus=16, rate=None, latency=None, buffer=None, node_latency=None, **kw):
        super().__init__(gpus, **kw)
        self.args = dict(rate=rate, latency=latency, buffer=buffer, node_latency=node_latency)

    def build(self, net):
        a = self.args
        gpu = net.add_servers(self.servers, self.gpus_per_server)
        leaf = net.add_nodes("eps", self.servers, prefix="leaf", latency=a["node_latency"])
        spine = net.add_nodes("eps", 8, prefix="spine")
        rate = self.link_bps if a["rate"] is None else a["rate"]
        net.add_links(gpu.ravel(), np.repeat(leaf, self.gpus_per_server), rate=self.link_bps, kind="nic")
        net.add_links(
            np.repeat(leaf, 8),
            np.tile(spine, self.servers),
            rate=rate,
            latency=a["latency"],
            buffer=a["buffer"],
            kind="leaf-spine",
        )


def _sim(**kw):
    return rf.Simulation(FT(16), rf.Flows([0], [9], 1 << 16), **kw)


def _plan_sim():
    fab = rf.topologies.MixNet(64)
    sim = rf.Simulation(fab, rf.Flows([0], [9], 1 << 16))
    return sim, rf.Forwarding(fab).current_circuits()


def _sweep(links, tmp_path):
    return rf.sweep(
        fabrics=["FT"],
        links=links,
        gpus=[16],
        workload={"flows": {"size": "64KiB"}},
        executor="serial",
        out=tmp_path / "sweep.parquet",
    )


def _sweep_toml(link, tmp_path):
    from rfabric.sweeps import run_config

    p = tmp_path / "sweep.toml"
    p.write_text(
        f'fabrics = ["FT"]\nlinks = [{link}]\ngpus = [16]\nout = "{tmp_path / "sweep.parquet"}"\nexecutor = "serial"\n\n'
        '[workload.flows]\nsize = "64KiB"\n'
    )
    return run_config(p)


def _toml_preset(link, tmp_path):
    p = tmp_path / "ft.toml"
    value = f'"{link}"' if isinstance(link, str) else str(link)
    p.write_text(f'family = "fat_tree"\n\n[params]\ngpus = 16\nlink = {value}\n')
    return rf.topologies.load(p).to_spec()


def _cli(args):
    from rfabric import cli

    return cli.main(args)


# (site, call with a bad bare value, words the error must carry, call with a plausible int)
SITES = {
    "Topology link": (lambda t: FT(16, link=200), ["link=200", "'200Gbps'"], lambda t: FT(16, link=200 * 10**9)),
    "Topology nvlink": (lambda t: FT(16, nvlink=1600), ["nvlink=1600", "'1600Gbps'"], lambda t: FT(16, nvlink=16 * 10**11)),
    "Topology link_latency": (lambda t: FT(16, link_latency=1), ["link_latency=1", "'1us'"], lambda t: FT(16, link_latency=10**6)),
    "Topology switch_latency": (lambda t: FT(16, switch_latency=800), ["switch_latency=800", "'800us'"], lambda t: FT(16, switch_latency=800_000)),
    "Topology nic_latency": (lambda t: FT(16, nic_latency=5), ["nic_latency=5", "ps"], lambda t: FT(16, nic_latency=0)),
    "Topology buffer": (lambda t: FT(16, buffer=12), ["buffer=12", "'12MiB'"], lambda t: FT(16, buffer=1 << 20)),
    "add_links rate": (lambda t: OwnFabric(rate=200).to_spec(), ["rate=200", "'200Gbps'"], lambda t: OwnFabric(rate=4 * 10**11).to_spec()),
    "add_links rate array": (lambda t: OwnFabric(rate=np.full(16, 400)).to_spec(), ["rate=400", "'400Gbps'"], lambda t: OwnFabric(rate=np.full(16, 4 * 10**11)).to_spec()),
    "add_links latency": (lambda t: OwnFabric(latency=2).to_spec(), ["latency=2", "'2us'"], lambda t: OwnFabric(latency=2 * 10**6).to_spec()),
    "add_links buffer": (lambda t: OwnFabric(buffer=4).to_spec(), ["buffer=4", "'4MiB'"], lambda t: OwnFabric(buffer=4 << 20).to_spec()),
    "add_nodes latency": (lambda t: OwnFabric(node_latency=300).to_spec(), ["latency=300", "'300us'"], lambda t: OwnFabric(node_latency=300_000).to_spec()),
    "TOML preset link": (lambda t: _toml_preset(200, t), ["link=200", "'200Gbps'"], lambda t: _toml_preset(200 * 10**9, t)),
    "Simulation t_ocs": (lambda t: _sim(t_ocs=25), ["t_ocs=25", "'25ms'"], lambda t: _sim(t_ocs=25 * 10**9)),
    "EngineConfig time": (lambda t: _sim(pfc_xoff=5), ["pfc_xoff=5", "'5us'"], lambda t: _sim(pfc_xoff=5 * 10**6)),
    "EngineConfig rate": (lambda t: _sim(dcqcn_rai=5), ["dcqcn_rai=5", "'5Gbps'"], lambda t: _sim(dcqcn_rai=5 * 10**6)),
    "Simulation sample_every": (lambda t: _sim(sample_every=10), ["sample_every=10", "'10us'"], lambda t: _sim(sample_every=10**7)),
    "Simulation.run positional": (lambda t: _sim().run(20), ["until=20", "'20us'"], lambda t: _sim().run(20 * 10**6)),
    "Simulation.run until": (lambda t: _sim().run(until=0.5), ["until=0.5", "'0.5ms'"], lambda t: _sim().run(until=1000)),
    "fail_link at": (lambda t: _sim().fail_link(0, at=5), ["at=5", "'5us'"], lambda t: _sim().fail_link(0, at=5 * 10**6)),
    "fail_nic at": (lambda t: _sim().fail_nic(3, at=5), ["at=5", "'5us'"], lambda t: _sim().fail_nic(3, at=0)),
    "apply_circuits at": (lambda t: (lambda s, p: s.apply_circuits(p, at=5))(*_plan_sim()), ["at=5"], lambda t: (lambda s, p: s.apply_circuits(p, at=5000))(*_plan_sim())),
    "apply_circuits t_ocs": (lambda t: (lambda s, p: s.apply_circuits(p, at=0, t_ocs=10))(*_plan_sim()), ["t_ocs=10", "'10us'"], lambda t: (lambda s, p: s.apply_circuits(p, at=0, t_ocs=10**7))(*_plan_sim())),
    "simulate failures": (lambda t: rf.simulate(FT(16), rf.Flows([0], [9], 1 << 16), failures=[(0, 5)]), ["at=5"], lambda t: rf.simulate(FT(16), rf.Flows([0], [9], 1 << 16), failures=[(0, 10**6)])),
    "simulate until": (lambda t: rf.simulate(FT(16), rf.Flows([0], [9], 1 << 16), until=50), ["until=50"], lambda t: rf.simulate(FT(16), rf.Flows([0], [9], 1 << 16), until=5 * 10**7)),
    "sweep links": (lambda t: _sweep([200], t), ["links=200", "'200Gbps'"], lambda t: _sweep([200 * 10**9], t)),
    "sweep config links": (lambda t: _sweep_toml(200, t), ["links=200", "'200Gbps'"], lambda t: _sweep_toml(200 * 10**9, t)),
}  # fmt: skip


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_bare_number_below_its_floor_is_refused_with_the_unit_suggested(site, tmp_path):
    bad, words, good = SITES[site]
    with pytest.raises(rf.SpecError) as err:
        bad(tmp_path)
    assert isinstance(err.value, ValueError)
    for word in words:
        assert word in str(err.value), (site, str(err.value))
    assert "docs/units.md" in str(err.value)
    good(tmp_path)  # a plausible base-unit integer still works there


@pytest.mark.parametrize(
    "args,words",
    [
        (["run", "topologies/fat_tree_128_200g.toml", "--until", "20"], ["until='20' has no unit", "'20us'"]),
        (["cost", "FT", "--gpus", "16", "--link", "200"], ["--link='200' has no unit", "'200Gbps'"]),
    ],
)
def test_the_cli_names_a_number_without_its_unit(args, words, capsys):
    assert _cli(args) == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err


def test_base_unit_integers_mean_what_the_strings_do():
    assert FT(16, link=200 * 10**9).link_bps == FT(16, link="200Gbps").link_bps
    a, b = _sim(), _sim()
    a.run(5 * 10**6)
    b.run("5us")
    assert a.now == b.now == 5 * 10**6


def test_sizes_of_messages_have_no_floor():
    # every byte count is a real message (nccl-tests starts at 8 B): bare sizes pass anywhere
    assert BARE_FLOOR["size"] == 0
    res = rf.simulate(FT(16), rf.Flows([0], [9], 8))
    assert res.flows.column("end_ps")[0].as_py() > 0
    table = rf.collective(FT(16), "all_reduce", sizes=[64])
    assert table.column("size_bytes")[0].as_py() == 64
    rf.Simulation(FT(16), rf.Flows([0], [9], 8), coll_chunk=4096)


def test_arguments_named_with_their_unit_are_explicit():
    # Flows' start_ps and size_bytes, EngineConfig's mtu_bytes: a bare 5 is meant
    flows = rf.Flows([0, 1], [9, 10], [8, 8], start_ps=[0, 5])
    assert flows.start_ps.tolist() == [0, 5]
    check_bare(5, "time", "start_ps")
    check_bare(5, "buffer", "mtu_bytes")
    with pytest.raises(rf.SpecError, match="start=5 is 5 ps"):
        check_bare(5, "time", "start")


def test_zero_and_unit_strings_below_the_floor_pass():
    # 0 is 0 in any unit; a unit string is explicit whatever its size
    _sim(t_ocs=0).fail_link(0, at=0)
    assert FT(16, link="1kbps").link_bps == 1000
    sim = _sim()
    sim.run("1ps")
    assert sim.now == 1


def test_a_fabric_given_a_small_unit_string_takes_its_own_base_unit_values():
    # link="1kbps" is explicit, so its add_links(rate=self.link_bps) = 1000 passes ...
    spec = OwnFabric(link="1kbps").to_spec()
    assert int(spec.links.rate_bps.min()) == 1000
    # ... but not a bare number below what the fabric was given
    with pytest.raises(rf.SpecError, match="rate=10 is 10 bit/s, below the smallest this fabric"):
        OwnFabric(link="1kbps", rate=10).to_spec()
