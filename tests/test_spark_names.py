"""Column and table names on Spark: the static replay takes
any column name the Python engine takes (a backtick, a dot in the event time's name, ``ts`` and ``Ts``
together) and gives the Python engine's matches; a stream refuses the names its stateful operator cannot
carry with E0287; ``cep.sql`` naming a table Spark cannot find is E0291 pointing at the name. Never a raw
AnalysisException, ParseException or Py4JJavaError."""

from __future__ import annotations

import datetime as dt

import pytest

import cep
from cep.cli_io import spark_result

QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY "k`ey" ORDER BY "t.s"
  MEASURES FIRST("ts") AS small_t, LAST("Ts") AS big_t, LAST(x) AS last_x, FIRST("t.s") AS start
  PATTERN (A B+) DEFINE B AS x > PREV(x))"""
NAMES = ["k`ey", "t.s", "ts", "Ts", "x"]
SCHEMA = "`k``ey` string, `t.s` timestamp, ts bigint, Ts bigint, x double"
ROWS = [
    (key, dt.datetime(2024, 1, 1, 0, 0, i), 10 - i, i * i, x)
    for key, xs in (("a", [5.0, 3.0, 4.0, 6.0, 2.0, 7.0]), ("b", [1.0, 2.0, 0.0, 1.0]))
    for i, x in enumerate(xs)
]


@pytest.mark.spark
def test_the_static_replay_takes_any_column_name_and_matches_as_the_python_engine(spark):
    spark.conf.set("spark.sql.caseSensitive", "false")  # Spark's default: ts and Ts are told apart anyway
    q = cep.compile(QUERY)
    expected = q.run([dict(zip(NAMES, row)) for row in ROWS])
    # By hand: a rises over rows 1-3 (3, 4, 6) and 4-5 (2, 7); b over rows 0-1 (1, 2) and 2-3 (0, 1).
    # FIRST("ts") is 10 - i of the first row, LAST("Ts") is i * i of the last: ts and Ts are two columns.
    assert [(row["k`ey"], row["small_t"], row["big_t"], row["last_x"]) for row in expected] == [
        ("a", 9, 9, 6.0),
        ("a", 6, 25, 7.0),
        ("b", 10, 1, 2.0),
        ("b", 8, 9, 1.0),
    ]
    df = spark.createDataFrame(ROWS, SCHEMA)
    assert df.columns == NAMES
    for options in ({}, {"match_ids": True}):
        got = spark_result(q.on_spark(df, **options)).to_dict("records")
        got = [{k: v for k, v in row.items() if k != "match_id"} for row in got]
        key = lambda row: (row["k`ey"], row["start"])  # noqa: E731
        assert sorted(got, key=key) == sorted(expected, key=key), options


@pytest.mark.spark
def test_a_stream_refuses_names_its_stateful_operator_cannot_carry(spark, tmp_path):
    for schema, named in (
        (SCHEMA, "'k`ey'"),
        ("s string, `t.s` timestamp, ts bigint, Ts bigint, x double", "'ts' and 'Ts'"),
    ):
        stream = spark.readStream.schema(schema).json(str(tmp_path))
        query = QUERY if "k``ey" in schema else QUERY.replace('"k`ey"', "s")
        with pytest.raises(cep.CepError) as raised:
            cep.compile(query).on_spark(stream, watermark="1 minute")
        assert raised.value.code == "E0287" and named in str(raised.value)


@pytest.mark.spark
def test_cep_sql_naming_a_table_spark_cannot_find_is_E0291_at_the_name(spark):
    for name in ("nope", '"a;b"', '"data/ticks.parquet"'):
        text = f"SELECT * FROM {name} MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A))"
        with pytest.raises(cep.CepError) as raised:
            cep.sql(spark, text)
        error = raised.value
        assert error.code == "E0291", name
        assert "FROM 'data/ticks.parquet'" in error.hint  # how to name a file instead
        assert str(error).splitlines()[0].startswith(f"query:1:{text.index(name) + 1}:"), str(error)
