"""Differential test of the V-shape query on generated tick series: cep's pure-Python run, cep on
Spark, and the independent reference (tests/vshape_reference.py) must agree.

Series are small random walks in cents with many flat steps (ties are neither falling nor rising)
and irregular time gaps; rows are shuffled across symbols and in time, since neither the matcher
nor Spark may rely on input order.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vshape_reference import normalize, vshape_matches

VSHAPE = (Path(__file__).resolve().parent.parent / "patterns" / "v_shape.sql").read_text(encoding="utf-8")
START = datetime(2024, 1, 2, 9, 30)


@st.composite
def tick_rows(draw, max_symbols: int = 3, max_len: int = 25) -> list[dict]:
    symbols = draw(st.lists(st.sampled_from(["AA", "BB", "CC", "DD"]), min_size=1, max_size=max_symbols, unique=True))
    rows = []
    for symbol in symbols:
        steps = draw(st.lists(st.integers(-3, 3), max_size=max_len))
        gaps = draw(st.lists(st.integers(1, 90), min_size=len(steps) + 1, max_size=len(steps) + 1))
        cents = draw(st.integers(100, 10_000))
        seconds = 0
        for i, gap in enumerate(gaps):
            if i:
                cents += steps[i - 1]
            seconds += gap
            rows.append(
                {
                    "symbol": symbol,
                    "ts": START + timedelta(seconds=seconds),
                    "price": round(cents / 100, 2),
                    "volume": draw(st.integers(1, 500)),
                }
            )
    return draw(st.permutations(rows))


@pytest.fixture(scope="module")
def query():
    import cep

    return cep.compile(VSHAPE)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=tick_rows())
def test_python_run_equals_reference(query, rows):
    expected = normalize(vshape_matches(rows))
    assert normalize(query.run(rows)) == expected
    if rows:
        assert normalize(query.run(pd.DataFrame(rows)).to_dict("records")) == expected


@pytest.mark.spark
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=tick_rows(max_symbols=4, max_len=40))
def test_spark_equals_python_and_reference(spark, query, rows):
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("symbol", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("price", T.DoubleType()),
            T.StructField("volume", T.LongType()),
        ]
    )
    pdf = pd.DataFrame(rows, columns=["symbol", "ts", "price", "volume"])
    # Spread the rows over several input partitions so groups reach the matcher out of order.
    df = spark.createDataFrame(pdf, schema=schema).repartition(3)
    expected = normalize(vshape_matches(rows))
    assert normalize(query.on_spark(df).toPandas().to_dict("records")) == expected
    assert normalize(query.run(rows)) == expected
