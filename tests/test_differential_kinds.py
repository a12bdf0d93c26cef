"""The same rows give the same matches whatever carries them: a list of
dicts, a pandas DataFrame, an Arrow table and a Spark DataFrame, over values drawn from hostile pools:
NaN, ±inf, -0.0, big decimals, look-alike strings (``007``/``7``, ``1e3``/``1000``, ``NA``/``null``),
naive and time-zone-aware event times on both sides of a DST change (Europe/Berlin, America/New_York),
and two columns whose names differ only in case (``v`` and ``V``, which the queries quote).

"The same output" (``canonical``), value by value:

* NULL is NULL (pandas' NA, Arrow's null, Python's None); NaN equals NaN (a value, not NULL);
* -0.0 and 0.0 are one value (IEEE and Spark compare them equal, so they are one partition key and equal
  in DEFINE): the sign of a zero is not compared (JSON output keeps it: tests/test_readers.py);
* decimals by exact value (no float in between): a list's ``Decimal('7')`` and an Arrow DECIMAL(38,12)
  column's ``7.000000000000`` are the same number;
* an aware time is its instant (compared in UTC), a naive time its wall-clock reading; an aware time
  never equals a naive one;
* integers, strings and booleans as they are; numpy and pandas scalars as the Python values they hold.

Rows are compared as multisets (Spark gives no row order without an outer ORDER BY)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep

NAN = math.nan
INF = math.inf
UTC = dt.UTC
BERLIN, NEW_YORK = ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")
# The instant each zone's clock jumps: Berlin back at 03:00 CEST on 2024-10-27, New York forward at 02:00 EST
# on 2024-03-10. Events lie within three hours either side, so a wall clock repeats or skips an hour among them.
DST_CHANGE = {BERLIN: dt.datetime(2024, 10, 27, 1, 0, tzinfo=UTC), NEW_YORK: dt.datetime(2024, 3, 10, 7, 0, tzinfo=UTC)}

# Each column holds one kind of value per example (a table's column has one type), NULL included.
KEYS = {
    "text": ["007", "7", "1e3", "1000", "NA", "null", "", "a", "A", None],
    "float": [NAN, INF, -INF, -0.0, 0.0, 7.0, 1000.0, None],
    "decimal": [Decimal("7"), Decimal("7.00"), Decimal("12345678901234567890123456.000000000001"), Decimal("-0"), None],
}
# Decimals with at most 24 digits before the point: the AVG of a DECIMAL(38,10) is a DECIMAL(38,14) (Spark's
# type), which holds 24 (tests/test_spark_decimals.py shows what a larger one does).
VALUES = {
    "float": [NAN, INF, -INF, -0.0, 0.0, 1.5, -2.25, 1e308, -1e308, 5e-324, None],
    "decimal": [
        Decimal("123456789012345678901234.0123456789"),
        Decimal("-0.0000000001"),
        Decimal("0E-10"),
        Decimal("-123456789012345678901234.0123456789"),
        Decimal("1.5000000000"),
        None,
    ],
    "int": [0, -1, 2**62, -(2**62), 7, None],
}
SPARK_TYPES = {
    ("k", "text"): "string",
    ("k", "float"): "double",
    ("k", "decimal"): "decimal(38,12)",
    ("v", "float"): "double",
    ("v", "decimal"): "decimal(38,10)",
    ("v", "int"): "bigint",
}

QUERIES = [
    # PARTITION BY a hostile key, DEFINE comparing the hostile numeric column, IS NULL, the aggregates over it.
    """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
         MEASURES FIRST("v") AS f, LAST("v") AS l, SUM("v") AS s, AVG("v") AS a, COUNT("v") AS c, COUNT(*) AS n,
                  FIRST(ts) AS t0, LAST("V") AS big_v
         PATTERN (A B*) DEFINE B AS "v" > PREV("v") OR "v" IS NULL)""",
    # A query the column-wise fast path takes.
    """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n, FIRST("v") AS f,
         LAST(ts) AS t1 PATTERN (A+) DEFINE A AS "v" > 0 OR k IS NULL)""",
    # Partitioned by the look-alike strings; every input row out, with MIN and MAX running over NaN and ±inf.
    """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY "V" ORDER BY ts MEASURES MIN("v") AS lo, MAX("v") AS hi,
         LAST(k) AS last_k ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS "v" IS NULL OR "v" >= 0)""",
]


@st.composite
def tables(draw, *, mixed_times: bool = True):
    """(key kind, value kind, time kind, rows): columns k, ts, v and V. The time kind is naive, aware (one
    zone per example) or, with ``mixed_times``, naive and aware rows alternating."""
    key_kind = draw(st.sampled_from(sorted(KEYS)))
    value_kind = draw(st.sampled_from(sorted(VALUES)))
    time_kind = draw(st.sampled_from(["naive", "aware", "mixed"] if mixed_times else ["naive", "aware"]))
    zone = draw(st.sampled_from([BERLIN, NEW_YORK]))
    minutes = draw(st.lists(st.integers(-180, 180), min_size=1, max_size=12, unique=True))
    rows = []
    for index, minute in enumerate(minutes):
        local = (DST_CHANGE[zone] + dt.timedelta(minutes=minute)).astimezone(zone)
        aware = time_kind == "aware" or (time_kind == "mixed" and index % 2 == 1)
        rows.append(
            {
                "k": draw(st.sampled_from(KEYS[key_kind])),
                "ts": local if aware else local.replace(tzinfo=None, fold=0),
                "v": draw(st.sampled_from(VALUES[value_kind])),
                "V": draw(st.sampled_from(KEYS["text"])),
            }
        )
    return key_kind, value_kind, time_kind, rows


def as_pandas(rows: list[dict], key_kind: str, value_kind: str) -> pd.DataFrame:
    """The rows as pandas would hold such a table: floats as nullable Float64 (a float64 column's NaN is
    pandas' own NULL, docs/reliability.md), integers as nullable Int64, the rest as objects."""
    frame = pd.DataFrame({"ts": [row["ts"] for row in rows]})
    for name, kind in (("k", key_kind), ("v", value_kind), ("V", "text")):
        values = [row[name] for row in rows]
        if kind == "float":
            data = np.array([0.0 if v is None else v for v in values], dtype=np.float64)
            frame[name] = pd.arrays.FloatingArray(data, np.array([v is None for v in values]))
        elif kind == "int":
            frame[name] = pd.array(values, dtype="Int64")
        else:
            frame[name] = pd.Series(values, dtype=object)
    return frame[["k", "ts", "v", "V"]]


def decimal_text(value: Decimal) -> str:
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def canonical(value) -> tuple:
    """One value as "the same output" compares it (the module docstring)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return ("null",)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float):
        return ("nan",) if value != value else ("float", value + 0.0)  # -0.0 + 0.0 is 0.0
    if isinstance(value, Decimal):
        return ("decimal", decimal_text(value))
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return ("instant", value.astimezone(UTC).replace(tzinfo=None).isoformat())
        return ("wall clock", value.replace(fold=0).isoformat())
    return (type(value).__name__, value)


def output(result) -> list:
    """A result of any kind as a sorted list of canonical rows."""
    if isinstance(result, pd.DataFrame):
        result = result.to_dict("records")
    elif isinstance(result, pa.Table):
        result = result.to_pylist()
    return sorted((tuple(sorted((name, canonical(v)) for name, v in row.items())) for row in result), key=repr)


def outcome(run) -> object:
    """The output of ``run()``, or the CepError it raises as ("error", code)."""
    try:
        return output(run())
    except cep.CepError as error:
        return ("error", error.code)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.sampled_from(QUERIES))
def test_a_list_pandas_and_arrow_give_the_same_matches(table, text):
    key_kind, value_kind, time_kind, rows = table
    q = cep.compile(text)
    from_list = outcome(lambda: q.run([dict(row) for row in rows]))
    from_pandas = outcome(lambda: q.run(as_pandas(rows, key_kind, value_kind)))
    assert from_pandas == from_list
    if time_kind == "mixed":
        # Naive and aware times in one ORDER BY column: E0410 where a partition meets both, on both kinds.
        # Arrow cannot hold such a column (pyarrow turns the aware times into naive UTC when building it).
        assert isinstance(from_list, list) or from_list == ("error", "E0410")
        return
    assert outcome(lambda: q.run(pa.Table.from_pylist(rows))) == from_list


def test_the_comparison_tells_apart_what_differs_and_joins_what_is_one_value():
    """The test's own yardstick: NaN is NaN, ±0 is one value, 7 and 7.00 are one decimal, a time in two
    zones is one instant, naive and aware never meet, NULL is not NaN."""
    berlin = dt.datetime(2024, 10, 27, 2, 30, tzinfo=BERLIN, fold=1)
    assert canonical(NAN) == canonical(float("nan")) != canonical(None)
    assert canonical(-0.0) == canonical(0.0) == canonical(np.float64(-0.0)) != canonical(0)
    assert canonical(Decimal("7")) == canonical(Decimal("7.000")) != canonical(Decimal("7.0001"))
    assert canonical(berlin) == canonical(berlin.astimezone(NEW_YORK)) == canonical(pd.Timestamp(berlin))
    assert canonical(berlin) != canonical(berlin.replace(tzinfo=None))
    assert canonical(pd.NA) == canonical(None) != canonical("NA") != canonical("null")
    assert canonical("007") != canonical("7") and canonical("1e3") != canonical("1000")


# ------------------------------------------------------------------------------------------------- Spark


def spark_frame(spark, rows: list[dict], key_kind: str, value_kind: str, time_kind: str):
    """The rows as a Spark DataFrame with an explicit schema: naive times as TIMESTAMP_NTZ, aware ones as
    TIMESTAMP (instants)."""
    time_type = "timestamp" if time_kind == "aware" else "timestamp_ntz"
    schema = f"k {SPARK_TYPES['k', key_kind]}, ts {time_type}, v {SPARK_TYPES['v', value_kind]}, `V` string"
    return spark.createDataFrame([(row["k"], row["ts"], row["v"], row["V"]) for row in rows], schema)


@pytest.mark.spark
@settings(max_examples=8, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(table=tables(mixed_times=False), text=st.sampled_from(QUERIES))
def test_a_spark_dataframe_gives_the_matches_of_a_list(spark, table, text):
    key_kind, value_kind, time_kind, rows = table
    spark.conf.set("spark.sql.caseSensitive", "false")  # Spark's default: v and V are two columns anyway
    q = cep.compile(text)
    expected = outcome(lambda: q.run([dict(row) for row in rows]))
    got = outcome(lambda: q.on_spark(spark_frame(spark, rows, key_kind, value_kind, time_kind)).toArrow())
    assert got == expected


@pytest.mark.spark
def test_naive_times_stay_naive_on_spark(spark):
    """A TIMESTAMP_NTZ input gave TIMESTAMP (instant) output columns on Spark, where the python engine
    keeps a naive time naive: found by the property above."""
    q = cep.compile(QUERIES[1])
    rows = [
        {"k": "7", "ts": dt.datetime(2024, 10, 27, 2, 30), "v": 1.0, "V": "a"},
        {"k": "7", "ts": dt.datetime(2024, 10, 27, 2, 10), "v": 2.0, "V": "a"},
    ]
    df = spark_frame(spark, rows, "text", "float", "naive")
    out = q.on_spark(df)
    assert out.schema["t1"].dataType.simpleString() == "timestamp_ntz"
    assert (
        out.toArrow().to_pylist()
        == q.run(rows)
        == [{"k": "7", "n": 2, "f": 2.0, "t1": dt.datetime(2024, 10, 27, 2, 30)}]
    )
