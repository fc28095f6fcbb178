"""rf.cost: bill-of-materials counts by hand, prices from Table 4, overrides and their errors."""

import numpy as np
import pytest

import rfabric as rf
from rfabric import cost

TABLE4 = {  # the paper's Appendix G, Table 4, typed in from the paper
    "100Gbps": dict(transceiver=249, nic=736, switch_port=215, ocs_port=350, patch_panel_port=100, fiber=25),
    "200Gbps": dict(transceiver=499, nic=1291, switch_port=876, ocs_port=350, patch_panel_port=100, fiber=45),
    "400Gbps": dict(
        transceiver=799, nic=1710, switch_port=1392, ocs_port=350, patch_panel_port=100, fiber=65
    ),
    "800Gbps": dict(
        transceiver=1599, nic=2347, switch_port=1731, ocs_port=350, patch_panel_port=100, fiber=92
    ),
}


def network_rows(fab, **kw) -> list[dict]:
    """The bill's network rows (its gpu rows, priced per GPU type, are tested below)."""
    return [r for r in cost.bill_of_materials(fab, **kw).to_pylist() if r["component"] != "gpu"]


def counts(fab) -> dict:
    return {r["component"]: r["count"] for r in network_rows(fab)}


def test_shipped_prices_are_table_4():
    p = cost.default_prices()
    assert {rf.units.format_rate(r): row for r, row in p.by_speed.items()} == TABLE4
    assert "Table 4" in p.source and "arXiv:2601.01209" in p.source
    assert p.gpu_usd is None  # the paper gives no GPU price: per type from public estimates
    assert p.gpu_by_type == {"H20": 13_500, "H800": 38_475, "H100": 27_500}


def test_fat_tree_128_by_hand():
    # k = 16, non-blocking: ToRs 8 down / 8 up. 16 servers x 8 NICs = 128 GPUs.
    # ToRs 128 / 8 = 16; pods ceil(16 / (k/2 = 8)) = 2; aggs 2 pods x 8 = 16; cores 8 x 8 = 64.
    # links: NIC 128; ToR-agg 16 x 8 = 128; agg-core 16 x 8 = 128; total 384 (+128 NVLink, free).
    # transceivers: both ends of all 384 links (NIC or EPS) = 768.
    # switch ports: ToR downlinks 128 + 2 x 128 (ToR-agg) + 2 x 128 (agg-core) = 640.
    assert counts(rf.topologies.FatTree(128)) == dict(nic=128, transceiver=768, switch_port=640, fiber=384)


def test_fat_tree_oversubscribed_3_to_1_by_hand():
    # k = 16, 3:1: ToR up u = 16 / 4 = 4, down d = 12. ToRs ceil(128 / 12) = 11;
    # pods ceil(11 / 8) = 2; aggs 2 x 4 = 8; cores 4 x 8 = 32.
    # links: NIC 128; ToR-agg 11 x 4 = 44; agg-core 8 x 8 = 64; total 236.
    # transceivers 2 x 236 = 472; switch ports 128 + 2 x 44 + 2 x 64 = 344.
    fab = rf.topologies.FatTree(128, oversubscription=3)
    assert counts(fab) == dict(nic=128, transceiver=472, switch_port=344, fiber=236)


def test_rail_optimized_128_by_hand():
    # k = 16: rail groups of k/2 = 8 servers -> 2 groups x 8 rails = 16 ToRs <= k: two tiers,
    # k/2 = 8 spines, each ToR linked once to each: 16 x 8 = 128 ToR-spine links.
    # links: NIC 128 + 128 = 256; transceivers 512; switch ports 128 + 2 x 128 = 384.
    fab = rf.topologies.RailOptimized(128)
    assert counts(fab) == dict(nic=128, transceiver=512, switch_port=384, fiber=256)


def test_rfabric_128_by_hand():
    # radix 16, 8 ToR uplinks, 8 down: one PoD of 16 servers, 2 rail groups x 8 rails = 16 ToRs;
    # one OCS-Agg, no core (single PoD). links: NIC 128, ToR-OCS 16 x 8 = 128; total 256.
    # transceivers: NIC links 2 x 128 + ToR end of ToR-OCS 128 = 384 (none in the OCS).
    # switch ports 128 + 128 = 256; OCS ports 128.
    fab = rf.topologies.RFabric(128)
    assert counts(fab) == dict(nic=128, transceiver=384, switch_port=256, ocs_port=128, fiber=256)


def test_topoopt_prices_patch_panel_ports_without_transceivers():
    # every NIC goes to a patch panel: 128 links, a transceiver at the NIC end only
    fab = rf.topologies.TopoOpt(128)
    assert counts(fab) == dict(nic=128, transceiver=128, patch_panel_port=128, fiber=128)


def test_totals_are_count_times_table_4_price():
    fab = rf.topologies.FatTree(128, link="400Gbps")
    bom = cost.bill_of_materials(fab)
    for row in network_rows(fab):
        assert row["link_speed"] == "400Gbps" and row["link_bps"] == 400 * 10**9
        assert row["unit_price_usd"] == TABLE4["400Gbps"][row["component"]]
        assert row["total_usd"] == row["count"] * row["unit_price_usd"]
    # 128 x 1710 + 768 x 799 + 640 x 1392 + 384 x 65
    assert cost.network_cost(fab) == 128 * 1710 + 768 * 799 + 640 * 1392 + 384 * 65 == 1_748_352
    assert bom.schema == cost.BOM_SCHEMA


class LeafSpine(rf.Topology):
    """A user's fabric: one leaf per server (all 8 NICs), every leaf to every spine."""

    family = "leaf_spine_test"

    def __init__(self, gpus, link="200Gbps", spines=4, **kwargs):
        super().__init__(gpus, link, **kwargs)
        self.spines = spines

    def build(self, net):
        gpu = net.add_servers(self.servers)
        leaves = net.add_nodes("eps", self.servers, prefix="leaf")
        spines = net.add_nodes("eps", self.spines, prefix="spine")
        net.add_links(gpu.ravel(), np.repeat(leaves, 8), rate=self.link, kind="nic")
        net.add_links(np.repeat(leaves, self.spines), np.tile(spines, len(leaves)), rate="100Gbps", kind="up")


def test_a_user_subclass_is_priced_at_each_links_speed():
    # 4 servers: 32 NIC links at 200G; 4 leaves x 3 spines = 12 uplinks at 100G
    got = {(r["component"], r["link_speed"]): r["count"] for r in network_rows(LeafSpine(32, spines=3))}
    assert got == {
        ("nic", "200Gbps"): 32,
        ("transceiver", "100Gbps"): 24,
        ("transceiver", "200Gbps"): 64,
        ("switch_port", "100Gbps"): 24,
        ("switch_port", "200Gbps"): 32,
        ("fiber", "100Gbps"): 12,
        ("fiber", "200Gbps"): 32,
    }
    assert cost.network_cost(LeafSpine(32, spines=3)) == (
        32 * 1291 + 24 * 249 + 64 * 499 + 24 * 215 + 32 * 876 + 12 * 25 + 32 * 45
    )


def test_nvlink_is_not_network_cost():
    fab = rf.topologies.FatTree(16)
    spec = fab.to_spec()
    assert np.sum(spec.links.kind == "nvlink") == 16  # present in the fabric ...
    assert counts(fab)["fiber"] == len(spec.links) - 16  # ... not in the bill


def test_prices_override_by_dict_and_toml(tmp_path):
    fab = rf.topologies.RFabric(128)
    base = cost.network_cost(fab)
    cheaper = cost.network_cost(fab, prices={"200Gbps": {"ocs_port": 150}})
    assert base - cheaper == 128 * (350 - 150)
    path = tmp_path / "mine.toml"
    path.write_text('["200Gbps"]\nocs_port = 150\n')
    assert cost.network_cost(fab, prices=path) == cheaper
    assert cost.network_cost(fab, prices=str(path)) == cheaper


def test_unknown_price_keys_name_key_and_file(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text('["200Gbps"]\ntranceiver = 450\n')
    with pytest.raises(rf.SpecError, match=r"typo\.toml.*unknown component 'tranceiver'"):
        cost.network_cost(rf.topologies.FatTree(16), prices=path)
    with pytest.raises(rf.SpecError, match=r"prices dict: unknown key 'optics'"):
        cost.load_prices({"optics": 3})
    with pytest.raises(rf.SpecError, match=r"prices dict: \['200Gbps'\] nic must be a non-negative number"):
        cost.load_prices({"200Gbps": {"nic": -1}})
    with pytest.raises(rf.SpecError, match=r"nope\.toml: no such prices file"):
        cost.load_prices(tmp_path / "nope.toml")


def test_a_link_speed_without_prices_is_an_error():
    with pytest.raises(
        rf.SpecError, match=r"fat_tree-16: nic of a 50Gbps link: link speed 50Gbps has no prices"
    ):
        cost.bill_of_materials(rf.topologies.FatTree(16, link="50Gbps"))
    # ... until the user prices it
    extra = {"50Gbps": dict(nic=1, transceiver=2, switch_port=3, fiber=4)}
    assert cost.network_cost(rf.topologies.FatTree(16, link="50Gbps"), prices=extra) > 0


def test_gpu_price_adds_a_row_but_not_to_network_cost():
    fab = rf.topologies.FatTree(16)
    bom = cost.bill_of_materials(fab, gpu_price_usd=30_000)
    last = bom.to_pylist()[-1]
    assert last["component"] == "gpu" and last["count"] == 16 and last["total_usd"] == 480_000
    assert cost.cluster_cost(fab, gpu_price_usd=30_000) == cost.network_cost(fab) + 480_000
    assert cost.cluster_cost(fab, prices={"gpu": 30_000}) == cost.network_cost(fab) + 480_000


def test_cost_cli_prints_the_bill(capsys, tmp_path):
    from rfabric.cli import main

    assert main(["cost", "topologies/rfabric_128_200g.toml", "--gpu-price", "25000"]) == 0
    out = capsys.readouterr().out
    assert "ocs_port" in out and "network total: 637,440.00 USD" in out and "network share" in out
    assert "devices: 16 packet switches (16 wired ports each), 1 OCS (128 wired ports each)" in out
    # 128 x 1291 + 384 x 499 + 256 x 876 + 128 x 350 + 256 x 45 = 637,440
    assert main(["cost", "FT-OS", "--gpus", "128", "--link", "400Gbps", "-o", str(tmp_path / "bom.csv")]) == 0
    assert "fat_tree-os3-128" in capsys.readouterr().out
    import pyarrow.csv as pacsv

    bom = pacsv.read_csv(tmp_path / "bom.csv")
    assert bom["component"].to_pylist() == ["nic", "transceiver", "switch_port", "fiber", "gpu"]
    assert bom["count"].to_pylist() == [128, 472, 344, 236, 128]  # as counted by hand above
    assert bom["unit_price_usd"].to_pylist() == [1710, 799, 1392, 65, 38_475]  # gpu: an H800


def test_devices_count_boxes_and_their_wired_ports():
    # FatTree 128 (k = 16): 16 ToRs with 8 NIC + 8 agg ports; 16 aggs with 8 ToR + 8 core ports;
    # 64 cores kept whole with one port per pod (2 pods): 96 switches, 2 to 16 wired ports
    assert rf.cost.devices(rf.topologies.FatTree(128)) == {
        "eps": {"count": 96, "min_ports": 2, "max_ports": 16}
    }
    # RFabric 128: 16 ToRs of 8 + 8 ports, one OCS-Agg with the 16 x 8 ToR uplinks
    assert rf.cost.devices(rf.topologies.RFabric(128)) == {
        "eps": {"count": 16, "min_ports": 16, "max_ports": 16},
        "ocs": {"count": 1, "min_ports": 128, "max_ports": 128},
    }


def test_cost_cli_reports_bad_prices_file(tmp_path, capsys):
    from rfabric.cli import main

    path = tmp_path / "bad.toml"
    path.write_text('["400Gbps"]\nswitch = 1\n')
    assert main(["cost", "FT", "--prices", str(path)]) == 2
    err = capsys.readouterr().err
    assert "bad.toml" in err and "'switch'" in err
