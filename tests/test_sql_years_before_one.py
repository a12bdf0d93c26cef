"""Text with a year before 1 (``'-0044-03-15'``, ``'0000-01-01'``), which Spark reads as a date of its
proleptic calendar (45 BC, 1 BC): the python engine refuses it at the text, never a different answer
(cep/duckdb_nodes.py). Spark's own answers are checked on the ``spark`` fixture."""

from __future__ import annotations

import pyarrow as pa
import pytest

import cep

TABLE = "sqly_events"
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES A.s AS s ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS TRUE) r)\n"
)
ROWS = [{"id": 1, "s": "-0044-03-15"}]


def statement(expression: str) -> str:
    return HEAD + f"SELECT {expression} AS v FROM m"


def python_values(expression: str) -> list:
    table = pa.Table.from_pylist(ROWS, schema=pa.schema([("id", pa.int32()), ("s", pa.string())]))
    return [row["v"] for row in cep.compile_sql(statement(expression)).run({TABLE: table}, kind="rows")]


@pytest.fixture(scope="module")
def events(spark):
    spark.createDataFrame([(1, "-0044-03-15")], "id INT, s STRING").createOrReplaceTempView(TABLE)
    return spark


# Spark's answer to each (its year(): the astronomical year, so 45 BC is -44); the python engine refuses.
SPARK_READS = {
    "year(CAST('-0044-03-15' AS DATE))": -44,
    "year(TRY_CAST('-0044-03-15' AS DATE))": -44,
    "year(DATE '-0044-03-15')": -44,
    "year(TIMESTAMP '-0044-03-15 01:02:03')": -44,
    "year('-0044-03-15')": -44,
    "year(to_date('-0044-03-15'))": -44,
    "datediff(DATE '2021-01-01', '-0044-03-15')": 754153,
    "year(CAST('0000-12-31' AS DATE))": 0,
    "month(CAST(' -12021-03-15 ' AS DATE))": 3,
}


@pytest.mark.parametrize("expression", sorted(SPARK_READS))
def test_a_literal_year_before_one_is_refused_at_the_text(expression) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    error = caught.value
    assert error.code == "E0252" and "--engine spark" in str(error), str(error)
    assert "year before 1" in str(error) and error.span.line == 2 and error.span.column > len("SELECT year("), str(
        error
    )


def test_a_year_before_one_read_from_a_row_fails_at_the_cast_saying_spark_reads_it() -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values("year(CAST(s AS DATE))")
    message = str(caught.value)
    assert "year before 1" in message and "as on Spark" not in message and caught.value.span.line == 2, message


@pytest.mark.spark
def test_spark_reads_the_years_the_python_engine_refuses(events) -> None:
    answers = {expression: cep.sql(events, statement(expression)).collect()[0]["v"] for expression in SPARK_READS}
    assert answers == SPARK_READS
    assert cep.sql(events, statement("year(CAST(s AS DATE))")).collect()[0]["v"] == -44


def test_cep_check_refuses_a_literal_year_before_one() -> None:
    with pytest.raises(cep.CepError) as caught:
        cep.check_sql(statement("CAST('-0044-03-15' AS DATE)"))
    assert caught.value.code == "E0252" and "year before 1" in str(caught.value)


def test_a_result_outside_pythons_years_is_an_error_naming_the_column() -> None:
    """DATE '0001-01-01' - INTERVAL 1 DAY is 0000-12-31 (1 BC) on Spark; the python engine's results are
    Python's dates, which start at year 1: an error naming the column, never Python's OverflowError."""
    with pytest.raises(cep.CepError) as caught:
        python_values("DATE '0001-01-01' - INTERVAL 1 DAY")
    assert "column v holds a DATE outside the years 1 to 9999" in str(caught.value)
    assert "--engine spark" in str(caught.value)
    assert python_values("year(DATE '0001-01-01' - INTERVAL 1 DAY)") == [0]
    with pytest.raises(cep.CepError) as caught:
        python_values("DATE '9999-12-31' + 14")
    assert "column v holds a DATE outside the years 1 to 9999" in str(caught.value)
    assert python_values("year(DATE '9999-12-31' + 14)") == [10000]


@pytest.mark.spark
def test_spark_holds_a_result_outside_pythons_years(events) -> None:
    row = cep.sql(events, statement("year(DATE '0001-01-01' - INTERVAL 1 DAY)")).collect()[0]
    assert row["v"] == 0
    text = cep.sql(events, statement("CAST(DATE '0001-01-01' - INTERVAL 1 DAY AS STRING)")).collect()[0]["v"]
    assert text == "0000-12-31"
    assert cep.sql(events, statement("year(DATE '9999-12-31' + 14)")).collect()[0]["v"] == 10000
