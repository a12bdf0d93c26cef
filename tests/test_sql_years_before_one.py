"""Text with a year before 1 (``'-0044-03-15'``, ``'0000-01-01'``), which Spark reads as a date of its
proleptic calendar (45 BC, 1 BC): the python engine refuses it at the text, never a different answer
(cep/duckdb_nodes.py). Spark's own answers are checked on the ``spark`` fixture."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import cep
from tests.spark_answers import SparkAnswers, answers_over_matched_rows, assert_the_whole_statement_agrees, select_list

TABLE = "sqly_events"
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES A.s AS s ONE ROW PER MATCH "
    "PATTERN (A) DEFINE A AS TRUE) r)\n"
)
ROWS = [{"id": 1, "s": "-0044-03-15"}]


def statement(expression: str) -> str:
    return HEAD + f"SELECT {expression} AS v FROM m"


def select_statement(columns: list[tuple[str, str]], head: str = HEAD) -> str:
    """The statement that selects each (name, expression) of ``columns`` (tests/spark_answers.py)."""
    return head + f"SELECT {select_list(columns)} FROM m"


def python_values(expression: str) -> list:
    table = pa.Table.from_pylist(ROWS, schema=pa.schema([("id", pa.int32()), ("s", pa.string())]))
    return [row["v"] for row in cep.compile_sql(statement(expression)).run({TABLE: table}, kind="rows")]


@pytest.fixture(scope="module")
def events(spark):
    spark.createDataFrame([(1, "-0044-03-15")], "id INT, s STRING").createOrReplaceTempView(TABLE)
    return spark


@pytest.fixture(scope="module")
def answers(events) -> SparkAnswers:
    """Spark's answers over the clause's rows, matched once and held as a view, side by side in one query
    (tests/spark_answers.py): the expressions below that read the one-row clause's output."""
    expressions = [*SPARK_READS, *READ_FROM_A_ROW, *HELD]
    return answers_over_matched_rows(events, HEAD, "sqly_matched", select_statement, expressions)


@pytest.fixture(scope="module")
def all_rows_answers(events) -> SparkAnswers:
    """Likewise over the ALL ROWS PER MATCH clause's rows (``id`` from a row: nothing folded before running)."""
    return answers_over_matched_rows(events, ALL_ROWS, "sqly_all_rows", select_statement, FAR_YEARS_ON_SPARK)


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


READ_FROM_A_ROW = {"year(CAST(s AS DATE))": -44}


@pytest.mark.spark
def test_spark_reads_the_years_the_python_engine_refuses(answers) -> None:
    for expression, year in {**SPARK_READS, **READ_FROM_A_ROW}.items():
        assert answers[expression].values() == [year], expression


@pytest.mark.spark
def test_the_matched_rows_give_the_whole_statements_answers(events, answers) -> None:
    """The answers read the clause's rows from a view; the whole statement (``cep.sql``: the clause run on
    Spark) gives the same values and types."""
    assert_the_whole_statement_agrees(events, select_statement, answers, SPARK_READS)


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


HELD = {
    "year(DATE '0001-01-01' - INTERVAL 1 DAY)": 0,
    "CAST(DATE '0001-01-01' - INTERVAL 1 DAY AS STRING)": "0000-12-31",
    "year(DATE '9999-12-31' + 14)": 10000,
}


@pytest.mark.spark
def test_spark_holds_a_result_outside_pythons_years(answers) -> None:
    for expression, value in HELD.items():
        assert answers[expression].values() == [value], expression


# Dates past the year 9999 and before the year 1, computed from a row (id is 1, so nothing is folded before
# running), written as text: Spark's answers on the `spark` fixture (java.time's years: `+10183`, `-0221`, `0000`;
# DuckDB's own text would be `10183-09-21` and `0222-09-04 (BC)`, its %Y `0004` for Spark's `y` of `4`).
ALL_ROWS = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id ALL ROWS PER MATCH PATTERN (A) "
    "DEFINE A AS TRUE) r)\n"
)
SPARK_WRITES_FAR_YEARS = {
    "CAST(date_from_unix_date(id * 3000000) AS STRING)": "+10183-09-21",
    "CAST(date_from_unix_date(id * -800000) AS STRING)": "-0221-09-04",
    "CAST(date_from_unix_date(id * -719163) AS STRING)": "0000-12-31",
    "concat('d=', date_from_unix_date(id * 3000000))": "d=+10183-09-21",
    "date_from_unix_date(id * -800000) || ''": "-0221-09-04",
    "CAST(CAST(date_from_unix_date(id * -800000) AS TIMESTAMP) AS STRING)": "-0221-09-04 00:00:00",
    "date_format(date_from_unix_date(id * 3000000), 'yyyy-MM-dd y yy D MMM')": "+10183-09-21 10183 83 264 Sep",
    "date_format(date_from_unix_date(id * -800000), 'yyyy/y/yy')": "-0221/-221/21",
    "date_format(date_from_unix_date(id * -718000), 'y/yy/yyyy')": "4/04/0004",
    "to_char(date_from_unix_date(id * 2932897), 'yyyy')": "+10000",
    "from_unixtime(id * 300000000000)": "+11476-08-15 05:20:00",
    "from_unixtime(id * 300000000000, 'yy-MM')": "76-08",
    "year(date_from_unix_date(id * 2147483646))": 5881580,
    "year(date_from_unix_date(id * -2147483646))": -5877641,
    "date_from_unix_date(factorial(id + 2))": dt.date(1970, 1, 7),  # a BIGINT argument (found by the differential)
}


def all_rows_values(expression: str) -> list:
    table = pa.Table.from_pylist(ROWS, schema=pa.schema([("id", pa.int32()), ("s", pa.string())]))
    text = ALL_ROWS + f"SELECT {expression} AS v FROM m"
    return [row["v"] for row in cep.compile_sql(text).run({TABLE: table}, kind="rows")]


@pytest.mark.parametrize("expression", sorted(SPARK_WRITES_FAR_YEARS))
def test_a_date_of_any_year_is_written_as_spark_writes_it(expression) -> None:
    assert all_rows_values(expression) == [SPARK_WRITES_FAR_YEARS[expression]]


FAR_YEARS_ON_SPARK = {**SPARK_WRITES_FAR_YEARS, "year(date_from_unix_date(id * 2147483647))": 5881580}


@pytest.mark.spark
def test_spark_writes_the_far_years_so(all_rows_answers) -> None:
    for expression, value in FAR_YEARS_ON_SPARK.items():
        assert all_rows_answers[expression].values() == [value], expression


def test_a_day_duckdb_keeps_for_infinity_fails_at_the_call_pointing_to_spark() -> None:
    """Day 2^31 - 1 is 5881580-07-11 on Spark and DuckDB's infinity: an error at date_from_unix_date, never
    DuckDB's 'Date out of range' at 1:1 or a wrong date."""
    with pytest.raises(cep.CepError) as caught:
        all_rows_values("year(date_from_unix_date(id * 2147483647))")
    error = caught.value
    assert "--engine spark" in str(error) and "cannot compute" in str(error), str(error)
    assert (error.span.line, error.span.column) == (2, len("SELECT year(") + 1), str(error)


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_a_time_past_year_9999_in_any_unit_is_refused_not_a_python_overflow(unit) -> None:
    """A table's TIMESTAMP column in another unit than DuckDB's microseconds (a Parquet file's milliseconds)
    keeps its unit through the statement: one check (cep/duckdb_results.py, ``time_python_cannot_hold``, which
    ``cep run --engine spark`` uses too) reads every unit, so a time past 9999-12-31 is a CepError, never
    Python's OverflowError. 10001-01-01 is 2,932,897 + 366 days after 1970 (10000 is a leap year)."""
    per_day = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}[unit]
    far = pa.table({"ts": pa.array([(2_932_897 + 366) * per_day if unit != "ns" else 2**62], pa.timestamp(unit))})
    text = HEAD + "SELECT f.ts FROM far f CROSS JOIN m"
    if unit == "ns":  # nanoseconds end in 2262: Python's dates hold them all, so the value comes back
        assert cep.compile_sql(text).run({TABLE: ROWS, "far": far}, kind="arrow").num_rows == 1
        return
    with pytest.raises(cep.CepError, match="outside the years 1 to 9999"):
        cep.compile_sql(text).run({TABLE: ROWS, "far": far}, kind="arrow")
