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
