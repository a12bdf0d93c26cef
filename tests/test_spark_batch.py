"""The Spark batch bridge: ``q.on_spark(df)`` gives what ``q.run`` gives, with Spark types kept.

One shared session (tests/conftest.py); each test runs one or two small jobs.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from vshape_reference import normalize, vshape_matches

from cep.spark_bridge.spark.types import normalize_type_name

REPO = Path(__file__).resolve().parent.parent
TICKS = REPO / "patterns" / "data" / "ticks.csv"
VSHAPE = (REPO / "patterns" / "v_shape.sql").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def ticks_df(spark):
    return spark.read.option("header", True).option("inferSchema", True).csv(str(TICKS))


@pytest.fixture(scope="module")
def ticks_pdf():
    return pd.read_csv(TICKS, parse_dates=["ts"])


def _records(pdf: pd.DataFrame) -> list[dict]:
    return pdf.to_dict("records")


@pytest.mark.spark
def test_on_spark_equals_python_run(ticks_df, ticks_pdf):
    import cep

    q = cep.compile(VSHAPE)
    spark_out = q.on_spark(ticks_df).toPandas()
    python_out = q.run(ticks_pdf)
    assert list(spark_out.columns) == list(python_out.columns)
    assert normalize(_records(spark_out)) == normalize(_records(python_out))
    assert normalize(_records(spark_out)) == normalize(vshape_matches(_records(ticks_pdf)))
    # Times are UTC wall-clock times end to end: the first ACME match starts at 09:32 as in the file.
    first = normalize(_records(spark_out))[0]
    assert first[:2] == ("ACME", datetime(2024, 1, 2, 9, 32))


@pytest.mark.spark
def test_output_schema_keeps_spark_types(ticks_df):
    from pyspark.sql import types as T

    import cep

    schema = cep.compile(VSHAPE).on_spark(ticks_df).schema
    types = {field.name.lower(): field.dataType for field in schema.fields}
    assert [f.name.lower() for f in schema.fields] == ["symbol", "start_ts", "bottom", "end_ts", "n"]
    assert isinstance(types["symbol"], T.StringType)
    assert isinstance(types["start_ts"], T.TimestampType)
    assert isinstance(types["end_ts"], T.TimestampType)
    assert isinstance(types["bottom"], T.DoubleType)
    assert isinstance(types["n"], T.LongType)


@pytest.mark.spark
def test_no_partition_by(ticks_df, ticks_pdf):
    import cep

    text = VSHAPE.replace("PARTITION BY symbol ORDER BY ts", "ORDER BY ts")
    q = cep.compile(text)
    acme = ticks_df.where("symbol = 'ACME'")
    spark_out = q.on_spark(acme).toPandas()
    assert [c.lower() for c in spark_out.columns] == ["start_ts", "bottom", "end_ts", "n"]
    expected = vshape_matches(_records(ticks_pdf[ticks_pdf.symbol == "ACME"]))
    assert len(expected) == 7
    got = [dict(r, symbol="ACME") for r in _records(spark_out)]
    assert normalize(got) == normalize(expected)
    python_out = q.run(ticks_pdf[ticks_pdf.symbol == "ACME"].drop(columns=["symbol"]))
    assert normalize([dict(r, symbol="ACME") for r in _records(python_out)]) == normalize(expected)


@pytest.mark.spark
def test_outer_order_by_and_limit_apply_globally(ticks_df, ticks_pdf):
    import cep

    q = cep.compile(VSHAPE.rstrip() + "\nORDER BY n DESC, symbol, start_ts\nLIMIT 4\n")
    assert q.plan.limit == 4
    spark_out = q.on_spark(ticks_df).toPandas()
    python_out = q.run(ticks_pdf)
    assert len(spark_out) == 4
    assert _records(spark_out) == _records(python_out)
    ns = list(spark_out["n"])
    assert ns == sorted(ns, reverse=True)
    assert ns[0] == max(m["n"] for m in vshape_matches(_records(ticks_pdf)))


@pytest.mark.spark
def test_columns_resolve_case_insensitively(spark, ticks_pdf):
    import cep

    df = spark.createDataFrame(ticks_pdf.rename(columns={"symbol": "Symbol", "price": "PRICE"}))
    out = cep.compile(VSHAPE).on_spark(df).toPandas()
    assert len(out) == 27


def test_type_names_normalize():
    assert normalize_type_name("string") == "VARCHAR"
    assert normalize_type_name("int") == "INTEGER"
    assert normalize_type_name("long") == "BIGINT"
    assert normalize_type_name("decimal(10, 2)") == "DECIMAL(10,2)"
    assert normalize_type_name("array<int>") == "ARRAY<INTEGER>"
    with pytest.raises(ValueError):
        normalize_type_name("blob")


def test_spark_sql_type_round_trip():
    pytest.importorskip("pyspark")
    from pyspark.sql import types as T

    import cep
    from cep.spark_bridge.spark.types import spark_to_sql, sql_to_spark

    for spark_type, name in [
        (T.LongType(), "BIGINT"),
        (T.IntegerType(), "INTEGER"),
        (T.DoubleType(), "DOUBLE"),
        (T.StringType(), "VARCHAR"),
        (T.BooleanType(), "BOOLEAN"),
        (T.TimestampType(), "TIMESTAMP"),
        (T.DateType(), "DATE"),
        (T.ArrayType(T.DoubleType()), "ARRAY<DOUBLE>"),
    ]:
        assert spark_to_sql(spark_type) == name
        assert sql_to_spark(name) == spark_type or isinstance(spark_type, T.ArrayType)
    assert spark_to_sql(T.BinaryType()) == "VARCHAR"
    assert sql_to_spark("DECIMAL(10,2)") == T.DecimalType(10, 2)
    with pytest.raises(cep.CepError, match="no Spark equivalent"):
        sql_to_spark("INTERVAL DAY", column="gap")


@pytest.mark.spark
def test_cep_sql_over_a_temp_view(spark):
    import cep

    rows = [("A", i, float(p)) for i, p in enumerate([5, 4, 3, 4, 5, 6, 2, 1, 3])]
    spark.createDataFrame(rows, "symbol string, id long, price double").createOrReplaceTempView("cep_sql_ticks")
    text = """SELECT * FROM cep_sql_ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY id
      MEASURES FIRST(A.id) AS first_id, LAST(C.id) AS last_id
      PATTERN (A B+ C+) DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))"""
    got = sorted(tuple(r) for r in cep.sql(spark, text).collect())
    expected = sorted(
        tuple(d.values()) for d in cep.compile(text).run([dict(symbol=s, id=i, price=p) for s, i, p in rows])
    )
    assert got == expected == [("A", 0, 5), ("A", 6, 8)]  # A B B C C C, then A B C


def _plain(value):
    """NaN/NaT/NA/None -> None and pandas Timestamps -> datetime, so Spark's and pandas' rows compare
    (a NULL in a pandas result's nullable column is pd.NA)."""
    if value is None or (isinstance(value, float) and value != value) or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if hasattr(value, "item") and type(value).__module__ == "numpy":  # a numpy scalar of a nullable column
        return value.item()
    return value


@pytest.mark.spark
@pytest.mark.parametrize("rows_per_match", ["ONE ROW PER MATCH", "ALL ROWS PER MATCH"])
def test_arrow_batches_of_three_rows_keep_nulls_and_types(spark, rows_per_match):
    """The replay reads Arrow batches (here three rows each, so groups span batches) and gives what
    ``q.run`` gives on the same rows: NULL keys, NULL prices and measures, ints, times kept."""
    from pyspark.sql import types as T

    import cep

    prices = [5, 4, None, 3, 4, 5, 6, 2, 1, None, 2, 3, 3, 1, 2]
    rows = [
        (symbol, i, None if p is None else float(p), datetime(2024, 1, 2, 9, 30, i // 3))
        for i, (symbol, p) in enumerate(zip(["A", "B", None] * 5, prices))
    ]
    pdf = pd.DataFrame(rows, columns=["symbol", "id", "price", "ts"])
    text = f"""SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts, id
      MEASURES FIRST(A.id) AS first_id, LAST(B.price) AS bottom, LAST(C.ts) AS end_ts, COUNT(*) AS n,
               MATCH_NUMBER() AS m
      {rows_per_match}
      PATTERN (A B+ C*) DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))"""
    q = cep.compile(text)
    schema = "symbol string, id long, price double, ts timestamp"
    df = spark.createDataFrame(rows, schema)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    saved = spark.conf.get(key)
    spark.conf.set(key, "3")
    try:
        out = q.on_spark(df)
        got = out.collect()
    finally:
        spark.conf.set(key, saved)
    expected = q.run(pdf)
    assert len(expected) > 2
    assert sorted(map(repr, [tuple(map(_plain, r)) for r in got])) == sorted(
        map(repr, [tuple(map(_plain, r)) for r in expected.itertuples(index=False)])
    )
    types = {field.name: field.dataType for field in out.schema.fields}
    assert isinstance(types["first_id"], T.LongType) and isinstance(types["end_ts"], T.TimestampType)
    assert isinstance(types["bottom"], T.DoubleType) and isinstance(types["n"], T.LongType)


def test_a_spark_smallint_or_tinyint_column_keeps_its_type_for_the_clause():
    """Spark's ShortType and ByteType are the clause's SMALLINT and TINYINT (issue #28), both ways, so a batch, a
    stream (``streaming.py``) and a rule-set worker type their arithmetic as Spark SQL does; a schema's spellings
    (Spark's DDL: smallint, short, tinyint, byte) name them too. They were read as INTs."""
    pytest.importorskip("pyspark")
    from pyspark.sql import types as T

    from cep.matcher.sql.types import narrow_integer_columns
    from cep.spark_bridge.spark.types import spark_to_sql, sql_to_spark

    for spark_type, name, spellings in [
        (T.ShortType(), "SMALLINT", ("smallint", "short")),
        (T.ByteType(), "TINYINT", ("tinyint", "byte")),
    ]:
        assert spark_to_sql(spark_type) == name
        assert sql_to_spark(name) == spark_type
        assert {normalize_type_name(spelling) for spelling in spellings} == {name}
    input_types = {"sm": spark_to_sql(T.ShortType()), "t": spark_to_sql(T.ByteType()), "b": "BIGINT"}
    assert narrow_integer_columns(input_types) == {"sm": "SMALLINT", "t": "TINYINT"}
