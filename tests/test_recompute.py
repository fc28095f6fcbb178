"""Full activation recomputation (generate_rl's ``recompute="full"``): memory and trace."""

import warnings

import numpy as np
import pytest
from conftest import tiny_rl_trace

import rfabric as rf
from rfabric.traces.rl import memory


def _cols(trace, *names):
    return {c: np.asarray(trace.table[c].to_pylist()) for c in names}


@pytest.fixture(scope="module")
def pair():
    return {rc: tiny_rl_trace(recompute=rc, iterations=1) for rc in ("none", "full")}


def test_backward_reruns_the_layer_collectives(pair):
    """Every TP all-reduce of a layer's forward runs again, same size, in fwd_recompute."""
    d = {rc: _cols(t, "stage", "phase", "kind", "size_bytes") for rc, t in pair.items()}
    full = d["full"]
    fwd = (full["stage"] == "train") & (full["phase"] == "fwd") & (full["kind"] == "all_reduce")
    rec = (full["stage"] == "train") & (full["phase"] == "fwd_recompute")
    assert rec.sum() > 0
    assert sorted(full["size_bytes"][rec]) == sorted(full["size_bytes"][fwd])
    assert set(full["kind"][rec]) == {"all_reduce"}
    # nothing else changed: the ops without recomputation are the same ops
    none = d["none"]
    keep = full["phase"] != "fwd_recompute"
    assert len(none["kind"]) == keep.sum()
    assert (none["kind"] == full["kind"][keep]).all() and (
        none["size_bytes"] == full["size_bytes"][keep]
    ).all()


def test_recompute_adds_one_forward_of_compute(pair):
    """A layer's backward is 2x its forward FLOPs; recomputation adds the forward once:
    the training stage's compute grows by exactly half of the layers' backward compute
    (the compute before each backward TP all-reduce; tp > 1 puts one after every block)."""
    total = {}
    for rc, t in pair.items():
        d = _cols(t, "stage", "phase", "kind", "compute_ps")
        total[rc] = int(d["compute_ps"][d["stage"] == "train"].sum())
        if rc == "full":
            bwd = (d["stage"] == "train") & (d["phase"] == "bwd") & (d["kind"] == "all_reduce")
            layers_bwd = int(d["compute_ps"][bwd].sum())
    assert total["full"] - total["none"] == pytest.approx(layers_bwd / 2, abs=len(pair["full"].table))


def test_activation_bytes_by_hand():
    """Per stage: pp - s micro-batches in flight keep h elements per token and layer, plus one
    layer's full activations (Korthikanti's per-token count) while it is recomputed."""
    m = rf.traces.ModelConfig(name="t", layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=32000)

    class L:
        tp, pp, cp, dp, ep = 2, 2, 1, 1, 1

    tokens, act = 4096, 2
    per_token = (4 * 1024 + (1024 + 2 * 1024 + 1024 + 3 * 4096) / 2) * act
    assert memory.activation_bytes_per_token(m, 2, act) == per_token
    stage0 = 2 * 2 * tokens * 1024 * act + tokens * per_token  # 2 in flight, 2 layers
    stage1 = 1 * 2 * tokens * 1024 * act + tokens * per_token + tokens * 32000 / 2 * (act + 4)
    assert memory.train_activation_bytes(m, L, tokens, act, "full") == max(stage0, stage1)
    assert memory.train_activation_bytes(m, L, tokens, act) == max(
        2 * 2 * tokens * per_token, 2 * tokens * per_token + tokens * 32000 / 2 * (act + 4)
    )


def test_the_papers_moe_layout_fits_only_with_recomputation():
    """Qwen2-57B-A14B at the paper's TP 4 EP 16 (Appendix C) on 64 train GPUs: 105.6 GB per
    GPU keeping every activation, under 80 GB recomputing them."""
    kw = dict(
        train_gpus=64,
        gen_gpus=64,
        train=dict(tp=4, ep=16),
        gen=dict(tp=4, afd=dict(attn=16, ffn=16)),
        global_batch=64,
        iterations=1,
        seed=0,
    )
    with pytest.raises(rf.SpecError, match="recompute='full'"):
        rf.traces.generate_rl("qwen2-57b-a14b", memory_check="error", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = rf.traces.generate_rl("qwen2-57b-a14b", memory_check="error", recompute="full", **kw)
    need = tr.metadata["parameters"]["memory_bytes_per_gpu"]
    assert need["train"] < 80e9 and tr.metadata["parameters"]["recompute"] == "full"


def test_unknown_recompute_is_refused():
    with pytest.raises(rf.SpecError, match="recompute must be one of 'none', 'full', got 'selective'"):
        tiny_rl_trace(recompute="selective")
