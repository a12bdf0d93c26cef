"""DECIMAL on Spark: SUM, AVG and LAST(x) - FIRST(x) over a DECIMAL
column have Spark's own result types and values, checked against Spark SQL computing the same
expressions over the matched rows; DECIMAL(38,0) with 26 digits and DECIMAL(38,30) go through
``q.on_spark``; a result Spark's type cannot hold fails as Spark SQL itself fails (ANSI mode), with cep's
E0410 in the message, never a wrong number."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

import cep

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
  MEASURES SUM(x) AS s, AVG(x) AS a, LAST(x) - FIRST(x) AS d, COUNT(*) AS n
  AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+) DEFINE B AS x > PREV(x))"""
# Per type: the rows of one key, rising, so that the whole partition is one match.
CASES = {
    "decimal(38,0)": ["12345678901234567890123456", "12345678901234567890123457", "22345678901234567890123457"],
    "decimal(38,30)": [
        "1.123456789012345678901234567890",
        "2.123456789012345678901234567891",
        "7.999999999999999999999999999999",
    ],
    "decimal(38,10)": [
        "1234567890123456789012.0123456789",
        "1234567890123456789012.0123456790",
        "2234567890123456789012.9999999999",
    ],
}


@pytest.mark.spark
@pytest.mark.parametrize("decimal_type", sorted(CASES))
def test_sum_avg_and_a_difference_of_decimals_are_what_spark_sql_says(spark, decimal_type):
    values = [Decimal(text) for text in CASES[decimal_type]]
    df = spark.createDataFrame(
        [("a", dt.datetime(2024, 1, 1, 0, 0, i), v) for i, v in enumerate(values)],
        f"k string, ts timestamp, x {decimal_type}",
    )
    out = cep.compile(QUERY).on_spark(df)
    [row] = out.collect()
    assert row["n"] == len(values)
    # The independent answer: Spark SQL over the same (matched: all) rows.
    df.createOrReplaceTempView("decimals")
    sql = spark.sql("SELECT SUM(x) AS s, AVG(x) AS a, MAX_BY(x, ts) - MIN_BY(x, ts) AS d FROM decimals")
    [want] = sql.collect()
    for name in ("s", "a", "d"):
        assert out.schema[name].dataType == sql.schema[name].dataType, name  # DECIMAL, never DOUBLE
        assert row[name] == want[name] and isinstance(row[name], Decimal), name
    # The Python engine over the same typed rows (Arrow, as the Spark engine hands them) gives the same
    # values with the same scale (tests/test_decimal_types.py checks its rules on many more values).
    [mine] = cep.compile(QUERY).run(df.toArrow()).to_pylist()
    for name in ("s", "a", "d"):
        assert mine[name] == row[name] and mine[name].as_tuple().exponent == row[name].as_tuple().exponent, name


@pytest.mark.spark
def test_a_decimal_result_spark_cannot_hold_fails_as_spark_sql_does(spark):
    """The AVG of DECIMAL(38,10) values with 28 digits before the point is a DECIMAL(38,14), which holds 24:
    Spark SQL raises NUMERIC_VALUE_OUT_OF_RANGE; cep raises its E0410 saying so, never a rounded number."""
    big = Decimal("1234567890123456789012345678.0123456789")
    df = spark.createDataFrame(
        [("a", dt.datetime(2024, 1, 1, 0, 0, i), big) for i in range(2)], "k string, ts timestamp, x decimal(38,10)"
    )
    df.createOrReplaceTempView("too_big")
    with pytest.raises(Exception, match="NUMERIC_VALUE_OUT_OF_RANGE"):
        spark.sql("SELECT AVG(x) FROM too_big").collect()
    q = cep.compile("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES AVG(x) AS a PATTERN (A B))")
    with pytest.raises(Exception, match=r"E0410.*does not fit DECIMAL\(38,14\)"):
        q.on_spark(df).collect()
    with pytest.raises(cep.CepRuntimeError, match=r"E0410.*does not fit DECIMAL\(38,14\)"):
        q.run(df.toArrow())  # the Python engine over the same typed rows
