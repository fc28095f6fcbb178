import pytest

import rfabric as rf
from rfabric.units import format_rate, format_size, format_time, parse_rate, parse_size, parse_time


@pytest.mark.parametrize(
    "text,ps",
    [
        ("1us", 10**6),
        ("0.8 us", 800_000),
        ("25ms", 25 * 10**9),
        ("2s", 2 * 10**12),
        ("1.5ns", 1500),
        ("7ps", 7),
        ("2min", 120 * 10**12),
        ("1e3ns", 10**6),
        (42, 42),
    ],
)
def test_parse_time(text, ps):
    assert parse_time(text) == ps


@pytest.mark.parametrize(
    "text,n",
    [
        ("4MiB", 4 << 20),
        ("9216B", 9216),
        ("2MB", 2_000_000),
        ("1KiB", 1024),
        ("3 GiB", 3 << 30),
        ("100", 100),
        (1024, 1024),
        ("1.5KiB", 1536),
    ],
)
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize(
    "text,bps",
    [
        ("200Gbps", 200 * 10**9),
        ("100 Gbit/s", 10**11),
        ("1.6Tbps", 1_600 * 10**9),
        ("5Mbps", 5 * 10**6),
        (10**9, 10**9),
    ],
)
def test_parse_rate(text, bps):
    assert parse_rate(text) == bps


@pytest.mark.parametrize(
    "fn,bad,needle",
    [
        (parse_rate, "200 Gbs", "malformed"),
        (parse_rate, "fast", "malformed"),
        (parse_rate, "0Gbps", "positive"),
        (parse_rate, -5, "positive"),
        (parse_time, "1 hour", "malformed"),
        (parse_time, "-1us", "malformed"),
        (parse_size, "1.3B", "whole number"),
        (parse_size, True, "bool"),
        (parse_time, [1], "type list"),
        (parse_time, "1e400ps", "not a finite number"),
        (parse_time, float("nan"), "not a finite number"),
        (parse_time, float("inf"), "not a finite number"),
        (parse_time, "1e30ps", "beyond the engine's limit"),
        (parse_time, 2**62, "beyond the engine's limit"),
        (parse_size, "1e30B", "beyond the engine's limit"),
        (parse_size, 2**50, "beyond the engine's limit"),
        (parse_rate, "2Pbps", "malformed"),
        (parse_rate, 2**51, "beyond the engine's limit"),
    ],
)
def test_bad_units_raise_spec_error_naming_the_value(fn, bad, needle):
    with pytest.raises(rf.SpecError) as err:
        fn(bad)
    assert needle in str(err.value)
    assert repr(bad) in str(err.value) or str(bad) in str(err.value)


def test_format_round_trip():
    assert format_time(1_500_000) == "1.5us"
    assert format_rate(2e11) == "200Gbps"
    assert format_size(4 << 20) == "4MiB"
    assert issubclass(rf.SpecError, ValueError) and issubclass(rf.TraceError, ValueError)


def test_limits_are_inclusive_and_two_times_add_without_wrapping():
    from rfabric.units import MAX_SIZE_BYTES, MAX_TIME_PS

    assert parse_time(MAX_TIME_PS) == MAX_TIME_PS
    assert parse_size(MAX_SIZE_BYTES) == MAX_SIZE_BYTES
    assert MAX_TIME_PS + MAX_TIME_PS < 2**63  # two times at the horizon still fit an int64


def test_a_time_beyond_the_horizon_is_refused_where_a_run_takes_it(ft128):
    flows = rf.Flows.permutation(128, 1 << 20, seed=1)
    sim = rf.Simulation(ft128, flows)
    with pytest.raises(rf.SpecError, match="beyond the engine's limit"):
        sim.run(until="1e30ps")
    with pytest.raises(rf.SpecError, match="beyond the engine's limit"):
        rf.simulate(ft128, flows, t_ocs="1e30ps")


def test_flows_take_unit_strings_and_refuse_sizes_beyond_the_limit():
    flows = rf.Flows.permutation(8, "4MiB", start_ps="10us", seed=0)
    assert (flows.size_bytes == 4 << 20).all() and (flows.start_ps == 10_000_000).all()
    mixed = rf.Flows([0, 1], [1, 0], ["1MiB", 2048])
    assert mixed.size_bytes.tolist() == [1 << 20, 2048]
    with pytest.raises(rf.SpecError, match=r"flow 1: size_bytes.*beyond the engine's limit"):
        rf.Flows([0, 1], [1, 0], [1, 2**60])
    with pytest.raises(rf.SpecError, match=r"flow 1: size_bytes: size 'x' is malformed"):
        rf.Flows([0, 1], [1, 0], ["1MiB", "x"])
    with pytest.raises(rf.SpecError, match=r"start_ps.*not a finite number"):
        rf.Flows([0], [1], 1, start_ps="1e400ps")


def _chain(n: int, gap_ps: int):
    from rfabric.traces import Trace

    return Trace.from_columns(
        op_id=list(range(n)),
        iteration=[0] * n,
        stage=["train"] * n,
        phase=["x"] * n,
        kind=["send"] * n,
        ranks=[[0, 9]] * n,
        size_bytes=[1 << 16] * n,
        algorithm=["auto"] * n,
        deps=[[]] + [[i] for i in range(n - 1)],
        compute_ps=[gap_ps] * n,
        period=[0] * n,
    )


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_a_chain_of_ops_past_the_horizon_is_named_not_wrapped(backend):
    ft16 = rf.topologies.FatTree(16)
    # each gap is within the horizon, their chain is not: op 1 would start at 2^61 + op 0's
    # transfer + 2^61 > 2^62 - 1 (it used to wrap to a negative start_ps at op 3)
    from rfabric.units import MAX_TIME_PS

    assert rf._engine.MAX_TIME_PS == MAX_TIME_PS
    with pytest.raises(rf.SpecError, match=r"op 1: would start at \d+ ps .* past the engine's horizon"):
        rf.simulate(ft16, _chain(5, 2**61), backend=backend)
    # just inside: op 1 starts before the horizon, and every time is non-negative and ordered
    res = rf.simulate(ft16, _chain(2, 2**61 - 2**40), backend=backend)
    ops = res.ops.to_pylist()
    assert 0 < ops[0]["start_ps"] < ops[0]["end_ps"] < ops[1]["start_ps"] < ops[1]["end_ps"]
    assert ops[1]["start_ps"] <= MAX_TIME_PS
    # with a controller's stepping loop too
    sim = rf.Simulation(ft16, _chain(3, 2**61), backend=backend)
    with pytest.raises(rf.SpecError, match="op 1: would start"):
        sim.run()


@pytest.mark.parametrize("backend", ["packet", "flow"])
def test_a_flow_starting_at_the_horizon_ends_after_it(backend):
    ft16 = rf.topologies.FatTree(16)
    from rfabric.units import MAX_TIME_PS

    res = rf.simulate(ft16, rf.Flows([0], [9], [1 << 20], [MAX_TIME_PS]), backend=backend)
    (row,) = res.flows.to_pylist()
    assert row["start_ps"] == MAX_TIME_PS < row["end_ps"] < MAX_TIME_PS + 10**9  # ~42 us at 200 Gb/s


def test_a_flow_level_finish_past_int64_time_is_named_not_wrapped():
    # 256 TiB at 1 kb/s would take ~7e4 years: its finish saturates and is refused
    fab = rf.topologies.FatTree(16, link="1kbps")
    with pytest.raises(rf.SpecError, match="flow 0: still sending at .* the end of the engine's time range"):
        rf.simulate(fab, rf.Flows([0], [9], [2**48], [0]), backend="flow")
