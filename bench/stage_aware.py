"""StageAwareController and MixNetController against uniform plans, end to end.

    python bench/stage_aware.py

Rows (each one rf.simulate per controller, t_ocs 10 us inside a 50 us compute gap unless
said otherwise; times are the last op's end, or the weight-sync stage's span):

* skewed all_to_all, RFabric 128 without PXN (with PXN each rail has two ToRs, already
  joined by all their ports, so no plan can differ): 16 MiB among servers 0 and 8, 1 MiB
  among the seven other pairs (server k, server k + 8).
* skewed all_to_all, RFabric 1024 (PXN): 16 MiB among servers 0 and 64 (PoDs 0 and 4),
  1 MiB among servers 2k and 2k + 65 (k = 1 .. 31), all across PoDs.
* skewed all_to_all, MixNet 128: 16 MiB among servers 0 and 1, 1 MiB among (2k, 2k + 1).
* weight sync of one synchronous RL iteration (tiny 4-layer model, train on PoD 0, gen on
  PoD 1 of RFabric 256 with 16 or 64 core ports, t_ocs 0 and 10 us): uniform plan with the
  generator's two-level broadcast; the stage-aware controller with the forest's Phase B as
  chain broadcasts (default) or store-and-forward sends; without the forest.
"""

import time

import rfabric as rf
from rfabric.controllers import MixNetController, StageAwareController, UniformController

US = 1_000_000


def a2a(groups, sizes, gpus):
    return rf.traces.Trace.from_columns(
        op_id=list(range(len(groups))),
        stage="train",
        phase="fwd",
        kind="all_to_all",
        ranks=groups,
        size_bytes=sizes,
        deps=[[]] * len(groups),
        compute_ps=50 * US,
        period=0,
        algorithm="direct",
        gpus=gpus,
    )


def span(res):
    return res.ops["end_ps"].to_numpy().max() / US


def pair(a, b):
    return list(range(8 * a, 8 * a + 8)) + list(range(8 * b, 8 * b + 8))


def main():
    rows = []
    cases = [
        (
            "RFabric 128, no PXN",
            rf.topologies.RFabric(128, pxn=False),
            [pair(0, 8)] + [pair(k, k + 8) for k in range(1, 8)],
            128,
            StageAwareController,
        ),
        (
            "RFabric 1024",
            rf.topologies.RFabric(1024),
            [pair(0, 64)] + [pair(2 * k, (2 * k + 65) % 128) for k in range(1, 32)],
            1024,
            StageAwareController,
        ),
        (
            "MixNet 128",
            rf.topologies.MixNet(128),
            [pair(0, 1)] + [pair(2 * k, 2 * k + 1) for k in range(1, 8)],
            128,
            MixNetController,
        ),
    ]
    for name, top, groups, gpus, ctl in cases:
        trace = a2a(groups, [16 << 20] + [1 << 20] * (len(groups) - 1), gpus)
        t0 = time.perf_counter()
        uni = span(rf.simulate(top, trace, controller=UniformController(), t_ocs="10us"))
        own = span(rf.simulate(top, trace, controller=ctl(), t_ocs="10us"))
        rows.append(
            (f"skewed all_to_all, {name}", "uniform", uni, ctl.__name__, own, time.perf_counter() - t0)
        )

    tiny = rf.traces.ModelConfig(
        name="tiny", layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=32000
    )
    trace = rf.traces.generate_rl(
        model=tiny,
        train_gpus=128,
        gen_gpus=128,
        train=dict(tp=8, pp=2, dp=8),
        gen=dict(tp=8),
        iterations=1,
        seed=3,
        global_batch=16,
        decode_steps_per_op=256,
        pod_gpus=64,
    )
    for cp in (16, 64):
        top = rf.topologies.RFabric(256, core_ports=cp)
        for t_ocs in ("0us", "10us"):
            out = {}
            for label, ctl in (
                ("uniform", UniformController()),
                ("forest, chain fan-out", StageAwareController()),
                ("forest, send fan-out", StageAwareController(fanout_ops="send")),
                ("no forest", StageAwareController(forest=False)),
            ):
                res = rf.simulate(top, trace, controller=ctl, t_ocs=t_ocs)
                ws = next(r for r in res.stages.to_pylist() if r["stage"] == "weight_sync")
                out[label] = (ws["end_ps"] - ws["start_ps"]) / US
            print(
                f"weight sync, RFabric 256 core_ports={cp}, t_ocs={t_ocs}: "
                + ", ".join(f"{k} {v:.1f} us" for k, v in out.items())
            )
    print()
    print(f"{'case':<40} {'baseline':>10} {'us':>9} {'controller':>22} {'us':>9} {'ratio':>6}")
    for case, b, tb, c, tc, _ in rows:
        print(f"{case:<40} {b:>10} {tb:9.1f} {c:>22} {tc:9.1f} {tc / tb:6.2f}")


if __name__ == "__main__":
    main()
