"""Heterogeneous GPU pools: the GPU catalog, per-pool rooflines, fabrics' gpu= and GPU prices.

Oracles: the roofline's time ratios between two types are the ratios of their peak FLOP/s
(compute-bound) or HBM bandwidths (memory-bound), worked by hand from the catalog figures;
the fabrics' NVLink link rates are the types' figures; the bill's gpu rows are count x price
per type.
"""

import dataclasses

import numpy as np
import pyarrow.compute as pc
import pytest
from conftest import tiny_rl_trace

import rfabric as rf
from rfabric import cost
from rfabric.traces.models import A100, DEFAULT_GPU, GPU_TYPES, H20, H100, H800, get_gpu
from rfabric.traces.rl.compute import Roofline
from rfabric.traces.rl.layout import GenLayout, TrainLayout
from rfabric.units import parse_rate

FAMILIES = (
    rf.topologies.FatTree,
    rf.topologies.RailOptimized,
    rf.topologies.TopoOpt,
    rf.topologies.MixNet,
    rf.topologies.RFabric,
)


def test_catalog_figures_are_the_datasheets():
    # StreamRL / RollMux table 1 (H800, H20), NVIDIA datasheets (H100, A100); NVLink per
    # direction = half the bidirectional GB/s, in bit/s
    assert (H800.peak_flops, H800.hbm_bytes_per_s, H800.hbm_capacity_bytes) == (989.5e12, 3.35e12, 80e9)
    assert (H20.peak_flops, H20.hbm_bytes_per_s, H20.hbm_capacity_bytes) == (148e12, 4.0e12, 96e9)
    assert (H100.peak_flops, H100.hbm_bytes_per_s, H100.hbm_capacity_bytes) == (989.5e12, 3.35e12, 80e9)
    assert H800.nvlink_bps == 400e9 / 2 * 8 and H20.nvlink_bps == H100.nvlink_bps == 900e9 / 2 * 8
    assert A100.nvlink_bps == 600e9 / 2 * 8
    assert set(GPU_TYPES) >= {"H800", "H20", "H100", "A100"} and DEFAULT_GPU == "H800"
    # the fabrics' default NVLink rate is the default GPU type's
    assert parse_rate(rf.topologies.DEFAULTS["nvlink"]) == GPU_TYPES[DEFAULT_GPU].nvlink_bps
    assert get_gpu("h20") is H20 and get_gpu("A100-80GB") is A100 and get_gpu(H100) is H100


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: get_gpu("B200", "gpu"), "gpu"),
        (lambda: tiny_rl_trace(gen_hardware="B200"), "gen_hardware"),
        (lambda: tiny_rl_trace(train_hardware="B200"), "train_hardware"),
        (lambda: rf.topologies.FatTree(16, gpu="B200"), "FatTree: gpu"),
        (lambda: rf.topologies.RFabric(16, gpu={"H800": 8, "B200": 8}), r"RFabric: gpu\[1\]"),
    ],
)
def test_unknown_gpu_types_name_the_field_and_the_known_types(call, field):
    with pytest.raises(
        rf.SpecError, match=rf"{field}: unknown GPU type 'B200' \(known: H800, H20, H100, A100"
    ):
        call()


def _roofline(gen_hw, train_hw=None):
    m = rf.traces.MODELS["qwen2.5-14b"]
    tl = TrainLayout(m, 8, dict(tp=8))
    gl = GenLayout(m, 8, dict(tp=8), offset=8)
    return Roofline(m, tl, gl, gen_hw, prompt=512, act=2, param=2, train_hw=train_hw)


def test_roofline_scales_with_the_pools_gpu():
    h800, h20 = _roofline(H800), _roofline(H20, train_hw=H800)
    # decode at batch 1: weights and KV read from HBM (2 FLOP per 2-byte weight, far under
    # both ridge points, 295 and 37 FLOP/byte): time ratio = HBM bandwidth ratio 4.0 / 3.35
    one = np.ones((1, 8), dtype=np.int64)
    ratio = h800.decode_step_s(one, one) / h20.decode_step_s(one, one)
    np.testing.assert_allclose(ratio, 4.0 / 3.35, rtol=1e-12)
    # prefill of 1,024 prompts of 512 tokens: compute-bound on both (the output layer too,
    # 1,024 FLOP/byte): ratio = peak ratio
    n = np.array([1024])
    np.testing.assert_allclose(h20.prefill_s(n, n) / h800.prefill_s(n, n), 989.5 / 148, rtol=1e-12)
    # training ran on the train pool's GPU: H800 in both
    assert h20.train_flops(4096, 2048) == h800.train_flops(4096, 2048)
    on_h20 = _roofline(H800, train_hw=H20)
    for k, v in on_h20.train_flops(4096, 2048).items():
        assert v == pytest.approx(h800.train_flops(4096, 2048)[k] * 989.5 / 148, rel=1e-12)
    # the optimizer step is HBM-bound: HBM ratio
    assert on_h20.optimizer_s(1e9, 16) == pytest.approx(h800.optimizer_s(1e9, 16) * 3.35 / 4.0, rel=1e-12)


def _stage_compute(trace) -> dict[str, int]:
    tab = trace.table
    return {
        st: pc.sum(pc.filter(tab["compute_ps"], pc.equal(tab["stage"], st))).as_py()
        for st in set(tab["stage"].to_pylist())
    }


def test_generate_rl_computes_each_pool_on_its_gpu():
    base = _stage_compute(tiny_rl_trace())
    gen_h20 = _stage_compute(tiny_rl_trace(gen_hardware="H20"))
    train_a100 = _stage_compute(tiny_rl_trace(train_hardware="A100"))
    # the gen pool's type moves only generation ...
    assert gen_h20["train"] == base["train"] and gen_h20["experience"] == base["experience"]
    assert gen_h20["gen"] != base["gen"]
    # ... the train pool's only training and experience: FLOPs by the peak ratio
    assert train_a100["gen"] == base["gen"]
    assert train_a100["train"] / base["train"] == pytest.approx(989.5 / 312, rel=1e-6)
    # a GPU of half H800's peak and HBM bandwidth doubles every train-side compute (FLOP- or
    # HBM-bound: the optimizer step too), whole ps per op
    half = dataclasses.replace(H800, name="half", peak_flops=H800.peak_flops / 2, hbm_bytes_per_s=1.675e12)
    slow = _stage_compute(tiny_rl_trace(train_hardware=half))
    assert slow["gen"] == base["gen"]
    for stage in ("train", "experience", "weight_sync"):
        assert slow[stage] == pytest.approx(2 * base[stage], rel=1e-8)  # ps rounding per op
    # hardware= still sets both pools, and the metadata records each
    both = tiny_rl_trace(hardware="H20")
    assert _stage_compute(both)["gen"] == gen_h20["gen"]
    p = tiny_rl_trace(train_hardware="H800", gen_hardware="h20").metadata["parameters"]
    assert (p["train_hardware"]["name"], p["gen_hardware"]["name"], p["hardware"]["name"]) == (
        "H800",
        "H20",
        "H800",
    )
    assert p["gen_hardware"]["nvlink_bps"] == H20.nvlink_bps


def test_memory_check_uses_each_pools_capacity():
    need = tiny_rl_trace(memory_check="off").metadata["parameters"]["memory_bytes_per_gpu"]
    tight = dataclasses.replace(H800, name="tight", hbm_capacity_bytes=need["train"] - 1)
    with pytest.raises(rf.SpecError, match=r"does not fit the train layout.*\(tight\)"):
        tiny_rl_trace(train_hardware=tight, memory_check="error")
    # the same GPU in the gen pool only fits: generation needs less than training here
    assert need["gen"] < need["train"] - 1
    tiny_rl_trace(gen_hardware=tight, memory_check="error")


def test_colocated_pools_must_be_one_type():
    with pytest.raises(rf.SpecError, match="train_hardware .H800. and gen_hardware .H20. must be the same"):
        tiny_rl_trace(placement="colocated", train_gpus=32, gen_gpus=32, gen=dict(tp=8), gen_hardware="H20")


@pytest.mark.parametrize("family", FAMILIES)
def test_fabric_pools_set_types_and_nvlink_rates(family):
    fab = family(64, gpu={"H800": 32, "H20": 32})
    spec = fab.to_spec()
    assert fab.gpu_types.tolist() == ["H800"] * 32 + ["H20"] * 32
    nv = spec.links.kind.astype(str) == "nvlink"
    src, dst = spec.links.src[nv], spec.links.dst[nv]
    gpu_node = np.where(spec.nodes.kind[src] == 0, src, dst)
    gpu_index = np.searchsorted(spec.gpu_nodes, gpu_node)
    want = np.array([GPU_TYPES[t].nvlink_bps for t in spec.gpu_types[gpu_index]])
    assert nv.sum() == 64 and np.array_equal(spec.links.rate_bps[nv], want.astype(np.int64))
    # nvlink= overrides the types' rate on every server
    spec = family(64, gpu=[(32, "H800"), (32, "H20")], nvlink="1Tbps").to_spec()
    assert set(spec.links.rate_bps[spec.links.kind.astype(str) == "nvlink"].tolist()) == {10**12}


def test_default_fabric_is_all_h800_at_the_default_nvlink_rate():
    spec = rf.topologies.FatTree(16).to_spec()
    assert spec.gpu_types.tolist() == ["H800"] * 16
    nv = spec.links.kind.astype(str) == "nvlink"
    assert set(spec.links.rate_bps[nv].tolist()) == {parse_rate(rf.topologies.DEFAULTS["nvlink"])}
    # one type for all servers, by name or Hardware
    assert set(rf.topologies.RailOptimized(16, gpu=H100).gpu_types) == {"H100"}


@pytest.mark.parametrize(
    ("gpu", "match"),
    [
        ({"H800": 12, "H20": 4}, r"gpu\[0\] \(H800\): 12 GPUs is not a multiple of gpus_per_server=8"),
        ([(8, "H800")], r"FatTree: gpu: the pools hold 8 GPUs, the fabric gpus=16"),
        ([(8, "H800"), "H20"], r"gpu\[1\]: expected a \(gpus, type\) pair"),
        (7, r"FatTree: gpu: expected a GPU type name"),
        ({}, r"FatTree: gpu: no GPU pools given"),
        ({"H800": 0, "H20": 16}, r"gpu\[0\] \(H800\): gpus"),
    ],
)
def test_bad_pools_are_spec_errors(gpu, match):
    with pytest.raises(rf.SpecError, match=match):
        rf.topologies.FatTree(16, gpu=gpu)


def test_a_preset_takes_pools(tmp_path):
    path = tmp_path / "pools.toml"
    path.write_text('family = "fat_tree"\n[params]\ngpus = 32\ngpu = [[16, "H800"], [16, "H20"]]\n')
    fab = rf.topologies.load(path)
    assert fab.gpu_types.tolist() == ["H800"] * 16 + ["H20"] * 16


def _gpu_rows(bom):
    return {r["gpu_type"]: r for r in bom.to_pylist() if r["component"] == "gpu"}


def test_bill_prices_each_gpu_at_its_types_price():
    fab = rf.topologies.RFabric(64, gpu={"H800": 48, "H20": 16})
    rows = _gpu_rows(cost.bill_of_materials(fab))
    price = cost.default_prices().gpu_by_type
    assert list(rows) == ["H800", "H20"]
    assert (rows["H800"]["count"], rows["H20"]["count"]) == (48, 16)
    assert rows["H800"]["total_usd"] == 48 * price["H800"] and rows["H20"]["total_usd"] == 16 * price["H20"]
    # the papers' ratio: an H800 costs 2.85 H20 (RollMux table 1, StreamRL table 1)
    assert price["H800"] / price["H20"] == pytest.approx(2.85)
    assert cost.cluster_cost(fab) == cost.network_cost(fab) + 48 * price["H800"] + 16 * price["H20"]
    assert cost.gpu_counts(fab) == {"H800": 48, "H20": 16}
    # a flat price overrides every type's, still one row per type
    flat = _gpu_rows(cost.bill_of_materials(fab, gpu_price_usd=20_000))
    assert [(r["count"], r["unit_price_usd"]) for r in flat.values()] == [(48, 20_000), (16, 20_000)]
    # [gpus] prices override per type (a catalog alias is the type's name)
    cheap = _gpu_rows(cost.bill_of_materials(fab, prices={"gpus": {"h20": 9_000}}))
    assert cheap["H20"]["unit_price_usd"] == 9_000 and cheap["H800"]["unit_price_usd"] == price["H800"]
    text = cost.format_bill(cost.bill_of_materials(fab))
    assert "gpu          H20" in text and "cluster total" in text


def test_a_gpu_type_without_a_price_is_an_error_until_priced():
    fab = rf.topologies.FatTree(16, gpu="A100")
    with pytest.raises(
        rf.SpecError, match=r"GPU type 'A100-80GB' has no price \(priced types: H20, H800, H100\)"
    ):
        cost.bill_of_materials(fab)
    assert cost.network_cost(fab) == cost.network_cost(rf.topologies.FatTree(16))  # no GPU price needed
    rows = _gpu_rows(cost.bill_of_materials(fab, prices={"gpus": {"A100": 10_000}}))
    assert rows["A100-80GB"]["total_usd"] == 160_000
    with pytest.raises(rf.SpecError, match=r"\[gpus\] must be a table"):
        cost.load_prices({"gpus": 5})


def test_trace_cli_gpu_flags(tmp_path, capsys):
    from rfabric.cli import main

    out = tmp_path / "t.arrow"
    args = ["trace", "generate", "--model", "qwen2.5-14b", "--layers", "2", "--train-gpus", "8"]
    args += ["--gen-gpus", "8", "--iterations", "1", "--global-batch", "8", "-o", str(out)]
    assert main([*args, "--train-gpu", "H800", "--gen-gpu", "H20", "--gen-mfu", "0.3"]) == 0
    p = rf.traces.read(out).metadata["parameters"]
    assert p["train_hardware"]["name"] == "H800-custom"  # the figure flags apply to both pools
    assert (p["gen_hardware"]["name"], p["gen_hardware"]["gen_mfu"]) == ("H20-custom", 0.3)
    assert p["gen_hardware"]["peak_flops"] == H20.peak_flops
    capsys.readouterr()
    assert main([*args, "--gen-gpu", "B200"]) != 0
    assert "--gen-gpu: unknown GPU type 'B200'" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["flow", "packet"])
def test_an_nvlink_flow_runs_at_its_servers_type_rate(backend):
    # one 64 MiB flow inside an H800 server and one inside an H20 server: each serializes at
    # its type's NVLink rate (1.6 and 3.6 Tb/s), so FCT ~ bytes x 8 / rate (+ headers, < 1 %)
    fab = rf.topologies.FatTree(16, gpu=[(8, "H800"), (8, "H20")])
    size = 64 << 20
    res = rf.simulate(fab, rf.Flows([0, 8], [1, 9], size), backend=backend, seed=0, record_flows=True)
    h800, h20 = res.flows["fct_ps"].to_pylist()
    assert h800 == pytest.approx(size * 8 / H800.nvlink_bps * 1e12, rel=0.01)
    assert h20 == pytest.approx(size * 8 / H20.nvlink_bps * 1e12, rel=0.01)
    assert h800 / h20 == pytest.approx(3.6 / 1.6, rel=2e-3)
