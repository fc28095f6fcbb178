"""bench/validate_real.py: the compute group's validation table (rfabric's compute model
against published training MFU and generation speed)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def driver():
    return load(ROOT / "bench" / "validate_real.py", "validate_real")


@pytest.fixture(scope="module")
def comp():
    return load(ROOT / "bench" / "validation" / "compute.py", "validation_compute")


@pytest.fixture(scope="module")
def rows(comp):
    """The quick subset: every row that needs no fabric simulation (the single-GPU decode
    rows; `bench/validate_real.py --group compute` runs them all, about 20 s)."""
    return comp.generation_rows(simulated=False)


def test_rows_have_the_keys_and_a_source(driver, rows):
    assert len(rows) >= 8
    for r in rows:
        assert set(driver.KEYS) <= set(r)
        assert r["group"] == "compute"
        assert isinstance(r["calibrated"], bool)
        assert "http" in r["source"], r["what"]  # every row names where its number is
        for k in ("measured", "simulated"):
            assert isinstance(r[k], float) and math.isfinite(r[k]) and r[k] > 0, (r["what"], k)
        if not r["calibrated"] and abs(driver.error_pct(r)) > driver.LIMIT:
            assert r["note"], f"{r['what']} misses by more than {driver.LIMIT} % without a note"
    assert any(r["calibrated"] for r in rows) and any(not r["calibrated"] for r in rows)


def test_decode_calibration_rows_are_matched(rows):
    cal = [r for r in rows if r["calibrated"] and r["unit"] == "tok/s"]
    assert len(cal) == 2 and all(abs(r["simulated"] / r["measured"] - 1) < 0.005 for r in cal)


def test_calibration_solution_matches_the_library(comp):
    from rfabric.traces.models import A100_VLLM, VLLM_HBM_EFFICIENCY, VLLM_STEP_OVERHEAD_S

    e, c = comp.calibrate_decode()
    assert e == pytest.approx(VLLM_HBM_EFFICIENCY, abs=5e-4)
    assert c == pytest.approx(VLLM_STEP_OVERHEAD_S, abs=5e-6)
    assert A100_VLLM.hbm_efficiency == VLLM_HBM_EFFICIENCY


def test_train_calibration_row_is_matched_end_to_end(comp):
    """MEGATRON_TRAIN_MFU reproduces the calibration row (Llama 3 405B, 43 % MFU) when its
    step is simulated end to end: `calibrate_train`'s solution is the library's constant."""
    import dataclasses

    from rfabric.traces.models import MEGATRON_TRAIN_MFU

    hw = dataclasses.replace(comp.H100, train_mfu=MEGATRON_TRAIN_MFU)
    sim = comp.train_step(comp.LLAMA31_405B, hw, **comp.LLAMA_CAL)
    assert sim["mfu"] == pytest.approx(comp.LLAMA_CAL_MFU, rel=0.005)
    assert sim["mfu"] < 0.6 * MEGATRON_TRAIN_MFU  # bubble and communication are in the step


def test_train_step_adds_one_stage_compute_per_micro_batch(comp):
    """Oracle: in 1F1B, each extra micro-batch adds one forward + backward of the slowest
    stage (and its two PP sends) to the step; with every stage alike that is the stage's
    FLOPs / (peak x train_mfu). A vocabulary of 256 keeps the output layer negligible."""
    import dataclasses

    from rfabric.traces.models import ModelConfig

    m = ModelConfig("toy", layers=8, hidden=2048, heads=16, kv_heads=4, ffn=8192, vocab=256)
    hw = dataclasses.replace(comp.H100, train_mfu=0.5)
    seq, pp = 4096, 4
    step = {
        mb: comp.train_step(
            m,
            hw,
            dict(tp=1, pp=pp),
            seq=seq,
            micro_seqs=1,
            micro_batches=mb,
            nic="400Gbps",
            nvlink="3600Gbps",
        )["step_s"]
        for mb in (4, 8)
    }
    per_mb = (
        (m.layers // pp)
        * comp.model_flops_per_token(dataclasses.replace(m, layers=1, vocab=1), seq)
        * seq
        / (hw.peak_flops * hw.train_mfu)
    )
    assert (step[8] - step[4]) / 4 == pytest.approx(per_mb, rel=0.03)
    assert step[4] > (4 + pp - 1) * per_mb  # the pipeline bubble: (pp - 1) stage times


def test_decode_extrapolation_is_exact(comp):
    """decode_e2e's quadratic through three simulated step counts equals a direct
    simulation of another count (TP 2: every step's all-reduces on the fabric)."""
    from rfabric.traces.models import A100_VLLM, MODELS

    kw = dict(tp=2, prompt=100, nvlink="2400Gbps")
    m = MODELS["qwen2.5-14b"]
    direct = comp.gen_time(m, A100_VLLM, steps=20, **kw)
    assert comp.decode_e2e(m, A100_VLLM, out=20, **kw) == pytest.approx(direct, rel=1e-6)
    # and the communication is in it: more than the compute-only roofline time
    tok_s, _ = comp.decode_speed(m, A100_VLLM, prompt=100, out=20, tp=2)
    assert direct > 20 / tok_s


def test_ep_decode_step_is_one_step_with_its_all_to_alls(comp):
    """ep_decode_step (T(2) - T(1)) is the step of any later pair too, and it holds the
    EP all-to-alls: more than the compute-only roofline step at the same batch and context."""
    import numpy as np

    from rfabric.traces.rl.compute import Roofline
    from rfabric.traces.rl.layout import GenLayout, TrainLayout

    m, hw = comp.DSV3_EPLB, comp.H100_FP8_SERVE
    kw = dict(gpus=16, batch=32, prompt=500, nic="400Gbps", nvlink="3600Gbps")
    t = [comp.ep_gen_time(m, hw, steps=k, **kw) for k in (1, 2, 3)]
    step = comp.ep_decode_step(m, hw, gpus=16, batch=32, ctx=500, nic="400Gbps", nvlink="3600Gbps")
    assert step == pytest.approx(t[1] - t[0], rel=1e-12)
    assert t[2] - t[1] == pytest.approx(step, rel=1e-3)
    gl = GenLayout(m, 16, {"tp": 1, "ep": 16}, offset=0)
    r = Roofline(m, TrainLayout(m, 8, {"tp": 1, "ep": 8}), gl, hw, prompt=500, act=2, param=1)
    A_u, A_i = np.full((16, 1), 32, dtype=np.int64), np.full((1, 1), 32 * 16, dtype=np.int64)
    assert step > float(r.decode_step_s(A_u, A_i)[0, 0])


def test_report_is_a_readable_table(driver, rows):
    out = driver.report(rows)
    assert out.startswith("== compute: ")
    assert "held-out |error| median" in out and "sources:" in out
    for r in rows:
        assert r["what"] in out
    s = driver.summary(rows)
    held = sorted(abs(driver.error_pct(r)) for r in rows if not r["calibrated"])
    assert s["held_out"] == len(held) and s["max_abs_error"] == held[-1]
    assert driver.main(["--group", "no-such-group"]) == 1


def test_decode_step_overhead_is_paid_once_per_step():
    """Hardware.decode_step_overhead_s adds exactly steps x overhead to a unit's decode compute
    (one TP-2 instance, every response n tokens long: n decode steps)."""
    import dataclasses

    import pyarrow.compute as pc

    import rfabric.traces as rt
    from rfabric.errors import SpecError

    n, c = 40, 1e-3
    args = dict(
        train_gpus=2,
        gen_gpus=2,
        train=dict(tp=2),
        gen=dict(tp=2),
        global_batch=4,
        prompt_len=16,
        response=dict(median=n, sigma=0, max=n),
        decode_steps_per_op=8,
    )
    m = rt.MODELS["qwen2.5-14b"]

    def decode_ps(hw):
        t = rt.generate_rl(m, hardware=hw, **args).table
        sel = pc.and_(
            pc.equal(t["stage"].cast("string"), "gen"), pc.equal(t["phase"].cast("string"), "decode")
        )
        return sum(t.filter(sel)["compute_ps"].to_pylist())

    base = decode_ps(rt.H800)
    more = decode_ps(dataclasses.replace(rt.H800, decode_step_overhead_s=c))
    assert abs((more - base) - n * c * 1e12) <= 64  # rounding of a few dozen ops
    with pytest.raises(SpecError, match="decode_step_overhead_s"):
        rt.Hardware(decode_step_overhead_s=-1.0)


def test_driver_collects_every_module_with_rows(driver, tmp_path, monkeypatch, capsys):
    row = (
        "dict(group={g!r}, what={w!r}, hardware='x', setup='s', measured={m}, unit='u', "
        "source='https://example.org', calibrated={c}, simulated={s}, note='n')"
    )
    (tmp_path / "alpha.py").write_text(
        "def rows():\n    return ["
        + ", ".join(
            row.format(g="alpha", w=w, m=m, c=c, s=s)
            for w, m, c, s in (
                ("a1", 100.0, True, 90.0),
                ("a2", 100.0, False, 104.0),
                ("a3", 10.0, False, 12.0),
            )
        )
        + "]\n"
    )
    (tmp_path / "beta.py").write_text(
        "GROUP = 'beta'\ndef rows():\n    return ["
        + row.format(g="beta", w="b1", m=1.0, c=False, s=1.0)
        + "]\n"
    )
    (tmp_path / "helper.py").write_text("X = 1\n")  # no rows(): ignored
    (tmp_path / "broken.py").write_text("GROUP = 'gamma'\ndef rows():\n    raise RuntimeError\n")
    monkeypatch.setattr(driver, "VALIDATION", tmp_path)
    assert [r["what"] for r in driver.load_rows("alpha")] == ["a1", "a2", "a3"]  # gamma never run
    s = driver.summary(driver.load_rows("alpha"))
    assert (s["held_out"], s["calibration"]) == (2, 1)
    assert s["median_abs_error"] == pytest.approx(12.0) and s["max_abs_error"] == pytest.approx(20.0)
    assert [r["what"] for r in s["over_limit"]] == ["a3"]
    assert driver.main(["--group", "beta"]) == 0
    out = capsys.readouterr().out
    assert "== beta: 1 rows" in out and "a1" not in out


def test_moe_layer_budget_against_closed_forms(comp):
    """A square GEMM (tokens per expert = hidden = 2 x expert width) has arithmetic
    intensity n / 3 in BF16 (2 n^3 FLOPs over 3 n^2 x 2 bytes); balanced routing gives
    ep x tokens x top_k / experts tokens per expert."""
    from rfabric.traces.models import ModelConfig

    m = ModelConfig(
        "sq", layers=1, hidden=1024, heads=8, kv_heads=8, ffn=0, vocab=8, experts=16, top_k=2, expert_ffn=512
    )
    b = comp.moe_layer_budget(m, comp.H100, tokens_per_rank=4096, ep=2, seq=1024)
    assert b["tokens_per_expert"] == 2 * 4096 * 2 / 16 == 1024
    assert b["intensity"] == pytest.approx(1024 / 3)
    assert b["ridge"] == pytest.approx(comp.H100.peak_flops * comp.H100.train_mfu / comp.H100.hbm_bytes_per_s)
    assert 0 < b["memory_share"] < 1
