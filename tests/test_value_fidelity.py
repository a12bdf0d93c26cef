"""What a value is, the same on every input kind (and the
event-time crashes): NaN is a value equal to itself and larger than every number, time-zone-aware
times are instants, DECIMAL arithmetic is exact, timestamps keep microseconds, and an event time that
cannot be ordered or placed is a CepError."""

from __future__ import annotations

import datetime as dt
import functools
from decimal import Decimal
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import cep
from cep.grammar.errors import CepRuntimeError

NAN = float("nan")
PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture(params=[True, False], ids=["fast path", "vm"])
def engine(request):
    """``cep.compile`` on the column-wise engines where they take the query, or on the Pike VM alone."""
    return functools.partial(cep.compile, column_wise=request.param)


def records(result) -> list[dict]:
    if isinstance(result, pd.DataFrame):
        return [{k: (None if v is pd.NA else v) for k, v in row.items()} for row in result.to_dict("records")]
    if isinstance(result, pa.Table):
        return result.to_pylist()
    return result


def nullable_floats(values: list) -> pd.arrays.FloatingArray:
    """A pandas column keeping NaN values apart from NULLs (None): pandas' nullable Float64."""
    data = np.array([0.0 if v is None else v for v in values], dtype=np.float64)
    return pd.arrays.FloatingArray(data, np.array([v is None for v in values]))


def kinds(rows: list[dict], floats: tuple[str, ...] = ()):
    """The same rows as a list, an Arrow table and a pandas frame (``floats``: columns made Float64)."""
    yield "rows", [dict(row) for row in rows]
    yield "arrow", pa.Table.from_pylist(rows)
    frame = pd.DataFrame(rows)
    for name in floats:
        frame[name] = nullable_floats([row[name] for row in rows])
    yield "pandas", frame


# ------------------------------------------------------------------------------------------------- NaN


def test_nan_partition_keys_are_one_partition_on_every_input_kind(engine):
    q = engine(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n "
        "PATTERN (A+) DEFINE A AS v > 0)"
    )
    rows = [dict(k=NAN if i % 2 else 1.0, ts=i, v=1) for i in range(6)]
    for kind, data in kinds(rows, floats=("k",)):
        out = sorted((r["k"] == r["k"], r["n"]) for r in records(q.run(data)))
        assert out == [(False, 3), (True, 3)], kind  # NaN (not equal to itself in Python) and 1.0, three rows each


def test_nan_is_not_null_and_equals_itself_in_conditions(engine):
    q = engine(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n, COUNT(B.v) AS nans "
        "PATTERN (A B+) DEFINE A AS v IS NOT NULL, B AS v = PREV(v) AND v > 1e308)"
    )
    rows = [dict(ts=i, v=NAN) for i in range(4)]
    for kind, data in kinds(rows, floats=("v",)):
        assert records(q.run(data)) == [{"n": 4, "nans": 3}], kind


def test_nan_is_larger_than_every_number_in_min_max_and_order_by(engine):
    q = engine(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY x MEASURES MIN(x) AS lo, MAX(x) AS hi, "
        "FIRST(id) AS first_id, LAST(id) AS last_id PATTERN (A+))"
    )
    rows = [dict(id=1, x=NAN), dict(id=2, x=float("inf")), dict(id=3, x=-1.0)]
    for kind, data in kinds(rows, floats=("x",)):
        [out] = records(q.run(data))
        assert out["lo"] == -1.0 and out["hi"] != out["hi"], kind
        assert (out["first_id"], out["last_id"]) == (3, 1), kind  # -1, inf, NaN


def test_pandas_float64_nan_is_pandas_own_null():
    """In a numpy float64 column NaN is pandas' missing marker: NULL (as Spark's createDataFrame reads it)."""
    q = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A+) DEFINE A AS v IS NULL)"
    )
    assert records(q.run(pd.DataFrame({"ts": [1, 2], "v": [NAN, NAN]}))) == [{"n": 2}]


# ------------------------------------------------------------------------------------------ time zones


def test_aware_times_are_instants_across_a_dst_change(engine):
    """Paris leaves summer time at 03:00 on 2024-10-27: 02:30+02:00 is 00:30 UTC, 02:10+01:00 is 01:10 UTC."""
    early = dt.datetime(2024, 10, 27, 0, 30, tzinfo=dt.UTC).astimezone(PARIS)
    late = dt.datetime(2024, 10, 27, 1, 10, tzinfo=dt.UTC).astimezone(PARIS)
    assert early.replace(tzinfo=None) > late.replace(tzinfo=None)  # by wall clock the order is reversed
    q = engine(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(v) AS first_v, "
        "LAST(ts) - FIRST(ts) AS took, LAST(ts) AS last_ts PATTERN (A B))"
    )
    rows = [dict(ts=late, v="second"), dict(ts=early, v="first")]
    for kind, data in kinds(rows):
        [out] = records(q.run(data))
        assert out["first_v"] == "first", kind
        assert out["took"] == dt.timedelta(minutes=40), kind
        # answered in UTC (Python never calls a time in a repeated hour equal to one of another zone: compare
        # the instants)
        assert out["last_ts"].timestamp() == late.timestamp() and out["last_ts"].utcoffset() == dt.timedelta(0), kind


def test_within_counts_instants_across_a_dst_change():
    """30 minutes of real time, though the wall clock went back an hour in between."""
    q = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n "
        "PATTERN (A B) WITHIN INTERVAL '40' MINUTE DEFINE B AS v = 'b')"
    )
    start = dt.datetime(2024, 10, 27, 0, 45, tzinfo=dt.UTC)
    rows = [
        dict(ts=start.astimezone(PARIS), v="a"),
        dict(ts=(start + dt.timedelta(minutes=30)).astimezone(PARIS), v="b"),
    ]
    assert rows[1]["ts"].replace(tzinfo=None) < rows[0]["ts"].replace(tzinfo=None)
    assert q.run(rows) == [{"n": 2}]


# --------------------------------------------------------------------------------------------- DECIMAL


def test_decimal_arithmetic_is_exact_past_28_digits(engine):
    big = Decimal("1234567890123456789012345678.0123456789")  # DECIMAL(38,10), full
    q = engine(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES SUM(x) AS s, LAST(x) - FIRST(x) AS d, "
        "AVG(x) AS a PATTERN (A B))"
    )
    rows = [dict(ts=1, x=big), dict(ts=2, x=Decimal("1234567890123456789012345678.0123456790"))]
    for kind, data in kinds(rows):
        if kind == "arrow":  # a typed DECIMAL(38,10) column: Spark's result types (test_decimal_types.py)
            continue
        [out] = records(q.run(data))
        assert out["s"] == Decimal("2469135780246913578024691356.0246913579"), kind
        assert out["d"] == Decimal("0.0000000001"), kind
        # AVG of DECIMAL(38,10) is a DECIMAL with 4 more digits of scale, rounded half up (Spark's type)
        assert isinstance(out["a"], Decimal) and out["a"] == Decimal("1234567890123456789012345678.01234567895000"), (
            kind
        )
    # The same values in an Arrow decimal128(38,10) column carry Spark's types: LAST - FIRST is a
    # DECIMAL(38,9) (the 0.0000000001 rounds to 0), and the AVG, a DECIMAL(38,14), cannot hold 28 digits.
    arrow = pa.Table.from_pylist(rows)
    assert arrow.schema.field("x").type == pa.decimal128(38, 10)
    with pytest.raises(cep.CepRuntimeError, match=r"E0410.*does not fit DECIMAL\(38,14\)"):
        q.run(arrow)
    typed = engine(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES SUM(x) AS s, LAST(x) - FIRST(x) AS d PATTERN (A B))"
    )
    [out] = typed.run(arrow).to_pylist()
    assert out == {"s": Decimal("2469135780246913578024691356.0246913579"), "d": Decimal("0E-9")}


def test_avg_of_decimals_in_define_is_the_same_decimal():
    q = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES AVG(x) AS a PATTERN (A+ B) "
        "DEFINE A AS AVG(A.x) < 2, B AS x > 5)"
    )
    rows = [dict(ts=1, x=Decimal("1.5")), dict(ts=2, x=Decimal("2.0")), dict(ts=3, x=Decimal("9.25"))]
    [out] = q.run(rows)
    assert type(out["a"]) is Decimal and str(out["a"]) == "4.250000"  # scale 2 + 4


# ------------------------------------------------------------------------------------ timestamp precision


def test_timestamps_keep_microseconds_on_every_input_kind(engine):
    base = pd.Timestamp("2024-01-01 00:00:00.000001")
    times = [base + pd.Timedelta(nanoseconds=n) for n in (999, 1)]  # the same microsecond
    q = engine(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES FIRST(v) AS first_v, FIRST(ts) AS t0, "
        "LAST(ts) AS t1 PATTERN (A B))"
    )
    frame = pd.DataFrame({"ts": times, "v": ["a", "b"]})
    for kind, data in [("rows", frame.to_dict("records")), ("pandas", frame), ("arrow", pa.Table.from_pandas(frame))]:
        [out] = records(q.run(data))
        assert out["first_v"] == "a", kind  # a tie at microsecond precision keeps input order
        assert out["t0"] == out["t1"] == dt.datetime(2024, 1, 1, 0, 0, 0, 1), kind


# -------------------------------------------------------------------------------- event times as errors


@pytest.mark.parametrize(
    "times",
    [
        [1, "2024-01-01", dt.datetime(2024, 1, 1)],
        [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2, tzinfo=dt.UTC)],
    ],
    ids=["ints strings and datetimes", "naive and aware"],
)
def test_an_event_time_of_mixed_kinds_is_E0410_naming_the_column(engine, times):
    q = engine(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n "
        "PATTERN (A+) WITHIN INTERVAL '1' HOUR)"
    )
    with pytest.raises(CepRuntimeError) as raised:
        q.run([dict(k=1, ts=t) for t in times])
    assert raised.value.code == "E0410" and "'ts'" in raised.value.message
    assert "dead_letter" in (raised.value.hint or "")


def test_events_at_the_end_of_time_with_a_session_timeout_and_within():
    q = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n, "
        "MATCH_STATUS() AS status ONE ROW PER MATCH SHOW TIMEOUT MATCHES PATTERN (A+ B) "
        "WITHIN INTERVAL '1' HOUR DEFINE B AS v < 0)"
    )
    rows = [dict(k=1, ts=dt.datetime(9999, 12, 31, 23, 59, s), v=1) for s in (0, 30)]
    assert q.run(rows, session_timeout="3 minutes") == []  # no timeout can fall past the year 9999
    assert q.run(rows, session_timeout="3 minutes", match_ids=True) == []
