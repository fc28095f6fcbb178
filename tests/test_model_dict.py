"""generate_rl's model as a dict ({"base": NAME, "layers": N}) and `rfabric trace generate
--layers N` (issue 25 item 5), checked against the same model built by hand with
dataclasses.replace."""

import dataclasses

import pytest

import rfabric as rf
from rfabric import traces as rt
from rfabric.cli import main
from rfabric.traces.models import get_model

SMALL = dict(
    train_gpus=8,
    gen_gpus=8,
    train={"tp": 8},
    gen={"tp": 8},
    global_batch=8,
    response={"median": 20, "max": 40},
)


def by_hand(layers):
    shape = get_model("qwen2.5-14b")
    return dataclasses.replace(shape, name=f"{shape.name}-{layers}L", layers=layers)


def test_a_model_dict_is_the_named_model_with_fields_changed():
    assert get_model({"base": "qwen2.5-14b", "layers": 2}) == by_hand(2)
    assert get_model({"base": "Qwen2.5_14B", "layers": 3, "name": "mine"}).name == "mine"
    assert get_model(dataclasses.asdict(by_hand(2))) == by_hand(2)  # every field, no base
    a = rt.generate_rl({"base": "qwen2.5-14b", "layers": 2}, **SMALL)
    b = rt.generate_rl(by_hand(2), **SMALL)
    assert a.equals(b) and a.model == "qwen2.5-14b-2L"
    assert a.num_ops < rt.generate_rl("qwen2.5-14b", **SMALL).num_ops  # fewer layers, fewer ops


@pytest.mark.parametrize(
    "model, match",
    [
        ({"base": "qwen2.5-14b", "layer": 2}, "generate_rl: model: unknown model field.*layer"),
        ({"base": "qwen2.5-14b", "layers": 0}, "generate_rl: model"),
        ({"base": "gpt-9"}, "unknown model 'gpt-9'"),
        ({"layers": 2}, "needs 'base'"),
        (7, "generate_rl: model must be a name, a ModelConfig or a dict"),
    ],
)
def test_bad_model_dicts_name_the_field(model, match):
    with pytest.raises(rf.SpecError, match=match):
        rt.generate_rl(model, **SMALL)


def test_sweep_model_tables_use_the_same_rule():
    from rfabric.sweeps.workloads import _model

    assert _model({"base": "qwen2.5-14b", "layers": 2}, "w") == by_hand(2)
    with pytest.raises(rf.SpecError, match="w: unknown model field"):
        _model({"base": "qwen2.5-14b", "depth": 2}, "w")


def test_trace_generate_layers(tmp_path, capsys):
    out = tmp_path / "t.arrow"
    args = ["trace", "generate", "--train-gpus", "8", "--gen-gpus", "8", "--train-tp", "8", "--gen-tp", "8"]
    args += ["--global-batch", "8", "--response-median", "20", "--response-max", "40", "--layers", "2"]
    assert main([*args, "-o", str(out)]) == 0
    assert "qwen2.5-14b-2L" in capsys.readouterr().out
    assert rt.read(out).equals(rt.generate_rl(by_hand(2), **SMALL))
