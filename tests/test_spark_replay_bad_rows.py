"""One bad row must not stop a backtest: the static Spark replay sets bad rows aside as
``q.run`` does, with the same reasons, codes and counts, and matches the good rows as if the bad ones
had never been there. The Python engine is the reference."""

from __future__ import annotations

import datetime as dt
import math

import pytest

import cep
from cep.cli_io import spark_result

NAN = math.nan
COLUMNS = ["s", "the time", "x"]  # a name with a space: Spark's replay takes any name
QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY s ORDER BY "the time", x
  MEASURES COUNT(*) AS n, FIRST("the time") AS start, LAST(x) AS last_x
  AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) DEFINE B AS x > PREV(x))"""
GOOD = [
    ("a", 1.0, 1.0),
    ("a", 2.0, 2.0),
    ("a", 3.0, 3.0),
    ("b", 1.0, 5.0),
    ("b", 2.0, 6.0),
    ("a", 4.0, 1.0),
    ("a", 5.0, 4.0),
]
# Each bad row with its reason (docs/reliability.md): NULL event time, NaN event time, NaN in another ORDER BY column.
BAD = [(("a", None, 9.0), "null_event_time"), (("b", NAN, 7.0), "bad_event_time"), (("a", 2.5, NAN), "wrong_type")]
MIXED = GOOD[:2] + [BAD[0][0]] + GOOD[2:5] + [BAD[1][0], BAD[2][0]] + GOOD[5:]
COUNTS = ("events_in", "dead_lettered", "events_matched", "by_reason")


def records(rows) -> list[dict]:
    """Rows as dicts: a list keeps NaN apart from NULL (a pandas float64 column would not)."""
    return [dict(zip(COLUMNS, row)) for row in rows]


def described(dead: list[dict]) -> list[tuple]:
    return sorted((d["s"], d["_cep_error"], d["_cep_error_code"], d["_cep_error_detail"]) for d in dead)


@pytest.mark.spark
def test_the_spark_replay_sets_bad_rows_aside_as_the_python_engine_does(spark):
    q = cep.compile(QUERY)
    python_dead: list[dict] = []
    python_stats: dict = {}
    expected = q.run(records(MIXED), dead_letter=python_dead, stats=python_stats)
    assert expected == q.run(records(GOOD))  # bad rows change nothing for the good ones
    assert [d["_cep_error"] for d in python_dead] == [reason for _, reason in BAD]

    df = spark.createDataFrame(MIXED, "s string, `the time` double, x double")
    spark_dead: list = []
    spark_stats: dict = {}
    got = spark_result(q.on_spark(df, dead_letter=spark_dead, stats=spark_stats))
    assert sorted(map(tuple, got.itertuples(index=False))) == sorted(tuple(row.values()) for row in expected)
    assert len(spark_dead) == 1  # one DataFrame of the bad rows
    assert described([row.asDict() for row in spark_dead[0].collect()]) == described(python_dead)
    assert {k: spark_stats[k] for k in COUNTS} == {k: python_stats[k] for k in COUNTS}


@pytest.mark.spark
def test_without_a_dead_letter_a_null_event_time_stops_a_replay_with_ids_on_both_engines(spark):
    """A replay with match ids cannot place a NULL event time: E0440 from both engines, naming the fix."""
    rows = [("a", dt.datetime(2024, 1, 1), 1.0), ("a", None, 2.0)]
    q = cep.compile(QUERY)
    with pytest.raises(cep.CepError) as python_error:
        q.run(records(rows), match_ids=True)
    df = spark.createDataFrame(rows, "s string, `the time` timestamp, x double")
    with pytest.raises(cep.CepError) as spark_error:
        spark_result(q.on_spark(df, match_ids=True))
    assert python_error.value.code == spark_error.value.code == "E0440"
    assert "dead_letter" in spark_error.value.hint or "dead_letter" in str(spark_error.value)
