"""The python engine's translation of the SQL around MATCH_RECOGNIZE (cep/duckdb_sql.py): Spark's answer, or
a refusal with its place before anything runs; DuckDB's and sqlglot's errors as cep's.

Expected values come from Spark itself: each case runs on the ``spark`` fixture and on the python engine.
The property test over random expressions is tests/test_sql_differential.py; these are the cases an
analyst met (issue reports) and Spark's datetime pattern letters one by one.
"""

from __future__ import annotations

import datetime as dt
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest

import cep
from cep.cli import main
from cep.grammar.functions import duckdb_strftime
from tests.spark_answers import SparkAnswers, matched_rows, rows_as_view, select_list, spark_sql

TABLE = "sqlt_events"
ROWS = [
    {"id": 1, "ts": dt.datetime(2019, 4, 10, 13, 0), "d": dt.date(2020, 10, 1), "x": 2.7, "s": " 12 "},
    {"id": 2, "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 500000), "d": dt.date(2020, 12, 31), "x": -2.7, "s": "-3"},
    {"id": 3, "ts": dt.datetime(2021, 3, 28, 1, 30, 5, 123456), "d": dt.date(2021, 1, 3), "x": None, "s": None},
    {"id": 4, "ts": dt.datetime(2024, 12, 31, 15, 4, 5), "d": dt.date(2024, 2, 29), "x": 0.5, "s": "+7"},
]
ARROW = pa.schema(
    [("id", pa.int32()), ("ts", pa.timestamp("us")), ("d", pa.date32()), ("x", pa.float64()), ("s", pa.string())]
)
SPARK_SCHEMA = "id INT, ts TIMESTAMP, d DATE, x DOUBLE, s STRING"
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES A.ts AS first_ts, A.d AS start_date, "
    "A.x AS x, A.s AS s ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE) r)\n"
)


def select_statement(columns: list[tuple[str, str]], head: str = HEAD) -> str:
    """The statement that selects each (name, expression) of ``columns``, in the rows' order."""
    return head + "SELECT " + select_list(columns) + " FROM m ORDER BY first_ts"


def statement(expression: str) -> str:
    return select_statement([("v", expression)])


def unordered_statement(columns: list[tuple[str, str]], head: str = HEAD) -> str:
    return head + "SELECT " + select_list(columns) + " FROM m"


def python_values(expression: str) -> list:
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    return [row["v"] for row in cep.compile_sql(statement(expression)).run({TABLE: table}, kind="rows")]


@pytest.fixture(scope="module")
def events(spark):
    return rows_as_view(spark, ROWS, SPARK_SCHEMA, TABLE)


@pytest.fixture(scope="module")
def matched_head(events) -> str:
    """The clause's rows, matched once by cep on Spark and held as a view: Spark's answers are the SQL
    around the clause over them (tests/spark_answers.py, ``matched_rows``)."""
    return matched_rows(events, HEAD, "sqlt_matched")


@pytest.fixture(scope="module")
def answers(events, matched_head) -> SparkAnswers:
    """Spark's answer for every expression of this file's cases, from a few queries (tests/spark_answers.py)."""
    return SparkAnswers(
        events,
        partial(select_statement, head=matched_head),
        [
            *SAME_ON_BOTH,
            *FOUND_BY_THE_DIFFERENTIAL,
            *REFUSED_BY_THE_DIFFERENTIAL,
            *(f"date_format(first_ts, '<{field}>')" for field in FORMAT_FIELDS),
            *(f"date_format(first_ts, '{field}')" for field in REFUSED_BY_PYTHON),
            *TEXT_GIVEN_AS_A_DATE,
            *TEXT_EDGES,
            SPARK_WRAPS_AROUND,
            COMPUTED_SPECIAL_VALUE_WITH_A_ZONE,
            *EXTRACT_OF_A_NULL_DATE,
        ],
        expected_to_fail=[
            *SPARK_REFUSES,
            *(expression for expression, _, _, _ in RUN_TIME_ERRORS),
            NOT_A_TIME_BESIDE_A_TIME,
            *SPARK_TAKES_NO_TEXT,
            SUM_PAST_BIGINT_IN_A_WINDOW,
        ],
        run=spark_sql,
    )


@pytest.fixture(scope="module")
def aggregate_answers(events, matched_head) -> SparkAnswers:
    """The aggregates' answers: one row each, from a statement without the rows' order."""
    return SparkAnswers(
        events,
        partial(unordered_statement, head=matched_head),
        [*FOUND_AGGREGATES, *COUNTS_UNEVALUATED],
        expected_to_fail=CORR_THAT_DOES_NOT_VARY,
        run=spark_sql,
    )


@pytest.mark.spark
def test_the_matched_rows_give_the_whole_statements_answers(events, answers) -> None:
    """The answers read the clause's rows from a view; the whole statement (``cep.sql``: the clause run on
    Spark in each query) gives the same values, types and errors, here for one chunk and one error."""
    failing, _, fragment, kind = RUN_TIME_ERRORS[0]
    whole = SparkAnswers(events, select_statement, SAME_ON_BOTH, expected_to_fail=[failing])
    for expression in SAME_ON_BOTH:
        assert whole[expression].typed() == answers[expression].typed(), expression
    errors = [whole[failing].error, answers[failing].error]
    assert all(kind in str(error) for error in errors), errors
    assert len({(type(error), error.getCondition()) for error in errors}) == 1, errors
    assert [[context.fragment() for context in error.getQueryContext()] for error in errors] == [[fragment]] * 2
    assert whole.queries == 2  # the chunk in one query, the error alone


def spark_values(answers: SparkAnswers, expression: str) -> list:
    return answers[expression].values()


# The issue's silent wrong answers and rough edges, and the casts sqlglot wrote as TRY_CAST or DuckDB rounds.
SAME_ON_BOTH = [
    "CAST(first_ts AS BIGINT)",
    "CAST(first_ts AS INT)",
    "first_ts::bigint",
    "CAST(first_ts AS DOUBLE)",
    "TO_CHAR(start_date, 'yyyy-MM-dd')",
    "DATE_FORMAT(first_ts, 'yyyy-MM-dd HH:mm:ss.SSS a EEE MMM')",
    "unix_timestamp(first_ts)",
    "unix_timestamp(start_date)",
    "TRUNC(first_ts, 'MM')",
    "TRUNC(start_date, 'YEAR')",
    "TRUNC(start_date, 'DD')",
    "date_trunc('MM', first_ts)",
    "date_trunc('HOUR', first_ts)",
    "CAST(x AS INT)",
    "TRY_CAST(x AS INT)",
    "CAST(s AS INT)",
    "TRY_CAST(s AS BIGINT)",
    "CAST(start_date AS TIMESTAMP)",
    "to_date(date_format(start_date, 'dd/MM/yyyy'), 'dd/MM/yyyy')",
    "to_timestamp(date_format(first_ts, 'yyyy-MM-dd HH:mm'), 'yyyy-MM-dd HH:mm')",
    "CAST(first_ts AS STRING)",
    "dayofweek(start_date)",
    "date_add(start_date, 1)",
    "7 / 2",
    "unix_timestamp(first_ts) DIV 7",
    "round(x, 0)",
    "floor(x)",
    # A guarded division, cast or parse in a window's ORDER BY or PARTITION BY (DuckDB refuses a volatile
    # expression there, so the guard must not be one); NULL % NULL is NULL, ordered first as in Spark.
    "dense_rank() OVER (ORDER BY (x % x))",
    "rank() OVER (PARTITION BY x > 0 ORDER BY x / x, first_ts)",
    "dense_rank() OVER (ORDER BY CAST(s AS INT))",
    "CAST(NULL AS INT) / 0",  # NULL: Spark checks the divisor only for a dividend that is not NULL
    "sum(CAST(s AS INT) % (year(start_date) - 2021)) OVER ()",  # s is NULL where the divisor is 0
    "row_number() OVER (ORDER BY to_date(date_format(start_date, 'dd/MM/yyyy'), 'dd/MM/yyyy') DESC)",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", SAME_ON_BOTH)
def test_the_python_engine_gives_sparks_answer(answers, expression) -> None:
    assert python_values(expression) == spark_values(answers, expression)


# Differences the differential test found (tests/test_sql_differential.py), each now Spark's answer.
FOUND_BY_THE_DIFFERENTIAL = [
    "CAST(concat(chr(9), '7', chr(10)) AS INT)",  # Spark trims a tab and a newline too (DuckDB's trim: spaces)
    "extract(DOW FROM first_ts)",  # 1 = Sunday (DuckDB counts from 0)
    "extract(SECOND FROM first_ts)",  # a DECIMAL(8, 6) with the fraction (DuckDB: an integer)
    "sign(x)",  # a DOUBLE (DuckDB: an integer)
    "sign(year(start_date))",
    "CAST(x AS DECIMAL)",  # DECIMAL(10, 0) (DuckDB's DECIMAL is (18, 3))
    "exp(2)::numeric",
    "date_from_unix_date(year(start_date) * 9)",  # a DATE (sqlglot's translation: a TIMESTAMP)
    "start_date - INTERVAL 1 DAY",  # a DATE
    "start_date + INTERVAL 1 MONTH",
    "start_date + INTERVAL 2 HOUR",  # a TIMESTAMP
    "unix_seconds(first_ts)",  # rounded down (sqlglot's cast of epoch() rounds)
    "unix_millis(first_ts)",
    "from_utc_timestamp(first_ts, 'Europe/Berlin')",  # the UTC instant's local time (not the reverse)
    "to_utc_timestamp(first_ts, 'America/New_York')",
    "to_utc_timestamp(TIMESTAMP '2021-10-31 02:30:00', 'Europe/Berlin')",  # passed twice: the earlier instant
    "to_utc_timestamp(TIMESTAMP '2021-11-07 01:30:00', 'America/New_York')",
    "to_utc_timestamp(TIMESTAMP '2021-03-28 02:30:00', 'Europe/Berlin')",  # skipped: shifted forward
    "upper(concat('straße ', s))",  # Java's full case mapping: STRASSE (DuckDB: STRAẞE)
    "lower(concat('İx', s))",
    "initcap(concat('ǆemal ßx ', s))",
    "CAST(CASE WHEN x > 0 THEN ' yes ' ELSE 'N' END AS BOOLEAN)",  # Spark trims and reads y/yes/n/no too
    "TRY_CAST(CASE WHEN x > 0 THEN 'maybe' ELSE ' f' END AS BOOLEAN)",
    "reverse(concat('e\u0301x', s))",
    "ln(x)",  # NULL for 0 and below, as Spark's (DuckDB: -inf, NaN)
    "log10(x - x)",
    "log(2, -abs(x))",
    "year(start_date) * 1000000",  # an INT, as Spark's (an overflow is an error on both)
    "timestampdiff(HOUR, first_ts, TIMESTAMP '2021-03-28 03:10:00')",  # whole hours (DuckDB's date_diff: 2)
    "timestampdiff(MONTH, first_ts, TIMESTAMP '2021-01-01 00:00:00')",
    "timestampdiff(MONTH, TIMESTAMP '2021-01-01 00:00:00', first_ts)",
    "datediff(HOUR, first_ts, TIMESTAMP '2021-03-28 03:10:00')",
    "CAST(DATE '2021-03-28' AS TIMESTAMP)",
    "(DATE '2021-03-28')::timestamp",  # Spark's timestampdiff (sqlglot: of DATEs)
    "count_if(x > 100) OVER ()",  # 0, not NULL, where no row is TRUE
    "sum(round(CAST(x AS BIGINT), -1)) OVER ()",  # a BIGINT
    "left(s, -1)",  # '' for a length below 1 (DuckDB counts from the end)
    "right(s, CAST(x AS INT))",
    "split_part(s, '2', -1)",  # by code point: 'x', the accent, 'e' (DuckDB keeps 'é' whole)
    "sum(nvl2(s, year(start_date), 2)) OVER (ORDER BY first_ts)",  # a BIGINT (DuckDB: HUGEINT), NVL2's type told
    "sum(unix_timestamp(first_ts)) OVER ()",
    "min_by(s, x IS NOT NULL) OVER ()",  # the NULL value of the least key (DuckDB's arg_min skips it)
    "max_by(x, s IS NULL) OVER ()",
    "percentile(x, 0.5) OVER ()",  # interpolated, a DOUBLE (DuckDB's quantile picks a value)
    "percentile(year(start_date), 0.25) OVER ()",
    "median(CAST(x AS DECIMAL(10,2))) OVER ()",  # a DOUBLE
    "-1::string",  # '-1': the minus belongs to the literal in Spark's grammar (sqlglot: the minus of a text)
    "- 1::boolean",
    "-1::boolean::boolean",  # a chain of casts: the minus still belongs to the literal
    "start_date + -2",  # DATE + INT: -2 is an INT literal (not a checked, widened negation)
    "start_date + (year(start_date) - 2020)",
    "(year(start_date) - 2020) + start_date",
    "date_from_unix_date(-2)",
    "make_timestamp(2020, 24, 14, 38, 10, 26) IS NULL",  # never NULL for Spark: FALSE, the call unevaluated
    "make_timestamp(2020, 24, 14, 38, 10, 26) IS NOT NULL",
    "any_value(x) OVER (ORDER BY x NULLS FIRST ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
    "-s",  # the minus of a text reads it as a DOUBLE
    "sum(decode(year(start_date), 2020, 1, 2)) OVER ()",  # a BIGINT, though sqlglot cannot type DECODE
    "count(make_timestamp(2021, 3, 28, 40, 30, 0)) OVER ()",  # Spark counts rows: it never evaluates the call
    "count(2147483647 + 1) OVER ()",  # never NULL: not evaluated, so no overflow
    "make_timestamp(2021, 3, 28, 1, 30, 60)",  # seconds of 60: the next minute
    "make_timestamp(2021, 3, 28, 1, 30, 59.999999)",
    "CAST('1.5d' AS DOUBLE)",  # Java's suffix (DuckDB refuses it)
    "CAST('-inf' AS DOUBLE)",
    "s + 1",  # the text as a BIGINT beside an integer
    "s * 2",
    "s + x",  # as a DOUBLE beside a DOUBLE
    # Text beside a DATE or TIMESTAMP is Spark's cast of it: '2021' is 2021-01-01 (DuckDB's cast refuses it),
    # and a text Spark computes before running may be a special value ('yesterday'; DuckDB: an error).
    "start_date < 'yesterday'",
    "'Yesterday' < start_date",
    "start_date < '2021'",
    "first_ts BETWEEN '2019' AND 'now'",
    "start_date IN ('2021', '2020-10-01')",
    "first_ts > ' epoch '",
    "CAST('today' AS DATE) = current_date()",
    "CAST('tomorrow' AS TIMESTAMP) = CAST(date_add(current_date(), 1) AS TIMESTAMP)",
    "DATE 'epoch'",
    "to_timestamp('epoch')",
    "CAST(concat('ep', 'och') AS DATE)",  # computed before running: special too
    "extract(DAY FROM start_date - '2021-01-05')",  # DATE - text: the text as a DATE, an INTERVAL DAY
    # An array's element: NULL only where Spark's is (try_element_at, a NULL index); element_at from the end.
    "try_element_at(array(1, 2), CAST(x AS INT) + 1)",
    "element_at(split(s, '2'), -1)",
    "split(s, '2')[0]",
    "array_join(array(s, NULL), '/')",  # '' where every element is NULL (DuckDB: NULL)
    "array(s, s)[3]",  # Spark's optimizer: NULL for a written array and index (array(1, 2)[3] fails, folded)
    "array(s, s)[-2]",  # below 0 too (not DuckDB's reading from the end, not an error)
    "array(x, x)[(-1)]",
    "size(collect_list(CASE WHEN x > 100 THEN x END) OVER (ORDER BY first_ts))",  # [] of no value (DuckDB: NULL)
    "collect_set(CASE WHEN x > 100 THEN s END) OVER ()",
    "CASE WHEN x > 100 THEN first_ts IN ('abc') END",  # a conditional branch: Spark casts at run time, if taken
    "coalesce(start_date, '2021-02-30')",  # COALESCE's later operands too
    "avg(-s) OVER ()",  # the minus of a text is a DOUBLE already: no second reading of it as text
    "sum(-s) OVER (ORDER BY first_ts)",
    "from_unixtime(year(start_date) * 3607, 'M/d/yy H:m EEE')",  # the pattern mapped field by field
    "from_unixtime(year(start_date) * 86400)",
    "isnan(x)",  # FALSE of NULL (DuckDB: NULL)
    "array_contains(array(CAST(x AS INT), 1), 5)",  # NULL where a NULL is there and 5 is not (DuckDB: FALSE)
    "coalesce(CASE WHEN x > 0 THEN start_date END, '2021')",  # the text as Spark casts it beside a DATE
    "nvl(CASE WHEN x > 0 THEN first_ts END, 'epoch')",
    # A constant PARTITION BY key: Spark drops it unevaluated (this one would fail)
    "count(*) OVER (PARTITION BY make_timestamp(2020, 30, 26, 1, -2, 14) IN ('2021-03-28 01:30:00'))",
    "chr(CAST(x AS INT) + 300)",  # the code modulo 256 (DuckDB: U+012C...), '' below 0 (DuckDB: an error)
    "chr(CAST(x AS INT) - 1)",
    "dayname(start_date)",  # 'Thu' (DuckDB: 'Thursday')
    "monthname(first_ts)",
    "base64(s)",  # of the text's UTF-8 bytes (DuckDB's to_base64 takes a BLOB only)
    # Text literals beside a number: Spark's cast of the text to the number's type
    "make_timestamp(2021, 3, 28, 3, 30, 0) = '2021-03-28 03:30'",  # make_timestamp's TIMESTAMP beside text
    "x IN ('-2.7', '1.5d')",
    "CAST(x AS INT) BETWEEN ' 1 ' AND '3'",
    "year(start_date) = '2020'",
    "nvl2(make_timestamp(2020, 21, 25, 3, 30, -2), year(start_date), x)",  # never NULL for Spark: unevaluated
    # A DATE or TIMESTAMP given a pattern to read: no text, the pattern unused (DuckDB: no strptime for DATE)
    "to_date(start_date, 'yyyyMMdd')",
    "to_timestamp(start_date, 'dd/MM/yyyy')",
    "unix_timestamp(first_ts, 'yyyy-MM-dd')",
    "try_divide(2, CAST(x AS INT))",  # a DOUBLE, NULL for a divisor of 0
    "to_unix_timestamp(first_ts)",  # unix_timestamp's other name (sqlglot: a parse of a TIMESTAMP, DuckDB's error)
    "to_unix_timestamp(date_format(first_ts, 'yyyy-MM-dd'), 'yyyy-MM-dd')",
    # An integral literal past INT's range is a BIGINT: INT arithmetic beside it is BIGINT's (no INT overflow)
    "3000000000 + month(start_date)",
    "month(start_date) * -3000000000",
    "9223372036854775795 + month(start_date)",
    "bit_or(round(unix_timestamp(first_ts) * 1000000, -2)) OVER ()",  # a BIGINT (sqlglot cast it to INT)
    "bit_xor(round(unix_timestamp(first_ts), -1)) OVER ()",
]
CORR_THAT_DOES_NOT_VARY = ["corr(x, 2)", "corr(x, CASE WHEN x > 0 THEN 1 END)"]
EXTRACT_OF_A_NULL_DATE = ["extract(MONTH FROM TRY_CAST('infinity' AS DATE))", "extract(DOW FROM CAST(NULL AS DATE))"]
FOUND_AGGREGATES = [
    "percentile_disc(0.25) WITHIN GROUP (ORDER BY year(start_date))",  # a DOUBLE (DuckDB keeps the integer)
    "percentile_cont(0.5) WITHIN GROUP (ORDER BY CAST(x AS DECIMAL(10,2)))",
    "sum(s)",  # text read as a DOUBLE (DuckDB has no SUM of text)
    "avg(s)",
    "regr_slope(x, 1)",  # NULL where x does not vary (DuckDB: NaN)
    "corr(x, CASE WHEN x > 2 THEN 1.0 END)",  # NULL for fewer than two pairs (rows where neither is NULL)
    "regr_intercept(x, 2)",
    "corr(x, x)",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", FOUND_BY_THE_DIFFERENTIAL)
def test_what_the_differential_found_is_sparks_answer(answers, expression) -> None:
    python, spark = python_typed(expression), spark_typed(answers, expression)
    assert python == spark


@pytest.mark.spark
@pytest.mark.parametrize("expression", FOUND_AGGREGATES)
def test_aggregates_the_differential_found_are_sparks_answer(aggregate_answers, expression) -> None:
    text = unordered_statement([("v", expression)])
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    python = cep.compile_sql(text).run({TABLE: table}, kind="arrow")
    spark = aggregate_answers[expression]
    assert python.column("v").to_pylist() == spark.values()
    assert pa.types.is_floating(python.schema.field("v").type) and spark.type_name == "double"


# A bare interval as a result column: Spark's day-time interval (`interval day`, `interval day to second`,
# `interval hour`) is a timedelta in PySpark and a duration in microseconds in Arrow; DuckDB's (months, days,
# nanoseconds) is converted to it.
BARE_INTERVALS = [
    "INTERVAL '1' DAY",
    "first_ts - TIMESTAMP '2020-01-01 00:00:00'",
    "start_date - DATE '2020-01-01'",
    "INTERVAL 3 HOURS",
    "INTERVAL '3 04:05:06.5' DAY TO SECOND",
    "-(first_ts - TIMESTAMP '2021-03-28 02:00:00')",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", BARE_INTERVALS)
def test_a_bare_interval_is_sparks_timedelta(answers, expression) -> None:
    python, spark = python_typed(expression), spark_typed(answers, expression)
    assert python == spark and python[1] == "timedelta", (python, spark)
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    arrow = cep.compile_sql(statement(expression)).run({TABLE: table}, kind="arrow")
    assert arrow.schema.field("v").type == pa.duration("us")  # Spark's Arrow type of a day-time interval


def test_a_bare_interval_of_months_is_refused_naming_the_column() -> None:
    """Spark's year-month interval, which PySpark cannot collect ("YearMonthIntervalType.fromInternal is not
    implemented"): refused, not DuckDB's (months, days, nanoseconds)."""
    with pytest.raises(cep.CepError) as caught:
        python_values("INTERVAL '1-2' YEAR TO MONTH")
    assert caught.value.code == "E0252" and "column v holds an interval of months" in str(caught.value)


# Spark counts the rows where its analyser deems the argument never NULL (NullPropagation), the invalid day 35
# never computed; where an operand is a column it computes it, and fails (the last).
COUNTS_UNEVALUATED = [
    "count(datediff(MINUTE, make_timestamp(2020, 7, 35, 1, 1, 1), TIMESTAMP '2021-01-01 00:00:00'))",
    "count(timestampdiff(HOUR, make_timestamp(2020, 7, 35, 1, 1, 1), make_timestamp(2020, 7, 3, 1, 1, 1)))",
    "count(year(make_timestamp(2020, 7, 35, 1, 1, 1)) + 1)",
    "count(make_timestamp(2020, 7, 35, 1, 1, 1) + INTERVAL 1 HOUR)",
    "count(make_timestamp(2020, 7, 35, 1, 1, 1) > TIMESTAMP '2021-01-01 00:00:00')",
    "count(timestampadd(MINUTE, 3, make_timestamp(2020, 7, 35, 1, 1, 1)))",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", COUNTS_UNEVALUATED)
def test_a_count_spark_leaves_unevaluated_is_sparks_count(aggregate_answers, expression) -> None:
    text = unordered_statement([("v", expression)])
    python = cep.compile_sql(text).run({TABLE: pa.Table.from_pylist(ROWS, schema=ARROW)}, kind="rows")
    assert [row["v"] for row in python] == aggregate_answers[expression].values() == [len(ROWS)]


def test_a_count_of_a_column_s_time_computes_it() -> None:
    text = HEAD + "SELECT count(datediff(MINUTE, make_timestamp(2020, 7, 35, 1, 1, 1), first_ts)) AS v FROM m"
    with pytest.raises(cep.CepError, match="MAKE_TIMESTAMP: a field is out of its range"):
        cep.compile_sql(text).run({TABLE: pa.Table.from_pylist(ROWS, schema=ARROW)}, kind="rows")


@pytest.mark.spark
@pytest.mark.parametrize("expression", CORR_THAT_DOES_NOT_VARY)
def test_corr_of_a_value_that_does_not_vary_fails_on_both(aggregate_answers, expression) -> None:
    """Spark's CORR divides by zero where x or y does not vary over two pairs or more (ANSI mode: an error);
    DuckDB's is NaN."""
    text = unordered_statement([("v", expression)])
    with pytest.raises(cep.CepError) as caught:
        cep.compile_sql(text).run({TABLE: pa.Table.from_pylist(ROWS, schema=ARROW)}, kind="arrow")
    assert "division by zero" in str(caught.value) and caught.value.span.column > 1, str(caught.value)
    with pytest.raises(Exception, match="DIVIDE_BY_ZERO"):
        spark_values(aggregate_answers, expression)


@pytest.mark.spark
@pytest.mark.parametrize("expression", EXTRACT_OF_A_NULL_DATE)
def test_extract_of_a_null_date_is_an_int_as_on_spark(answers, expression) -> None:
    """DuckDB folds EXTRACT of a NULL it can see to a DOUBLE NULL; Spark's is an INT NULL."""
    text = unordered_statement([("v", expression)])
    python = cep.compile_sql(text).run({TABLE: pa.Table.from_pylist(ROWS, schema=ARROW)}, kind="arrow")
    spark = answers[expression]
    assert python.column("v").to_pylist() == spark.values()
    assert pa.types.is_integer(python.schema.field("v").type) and spark.type_name == "int"


def python_typed(expression: str) -> tuple[list, str]:
    """The values and their type, the type as the Python class of the first value that is not NULL."""
    values = python_values(expression)
    return values, next((type(value).__name__ for value in values if value is not None), "NULL")


def spark_typed(answers: SparkAnswers, expression: str) -> tuple[list, str]:
    values = spark_values(answers, expression)
    return values, next((type(value).__name__ for value in values if value is not None), "NULL")


# Refused on the python engine, narrowly: Spark runs each (the test below), the python engine cannot as Spark does.
YEARLESS_READ = "to_date(date_format(first_ts, 'MM/'), 'MM/')"
REFUSED_BY_THE_DIFFERENTIAL = {
    "months_between(first_ts, TIMESTAMP '2021-03-28 01:30:00')": "MONTHS_BETWEEN",  # time of day, 8 digits
    "concat(s, x)": "DOUBLE",  # Java writes 1.0E10
    "s || x": "DOUBLE",
    "start_date < date_format(first_ts, 'yyyy-MM-dd')": "compare a DATE with text",
    "CAST(x AS INT) = s": "compare a INT with text",
    "substring_index(date_format(first_ts, 'yyyy-MM-dd'), '-', 1)": "SUBSTRING_INDEX()",  # DuckDB has none
    "extract(YEAROFWEEK FROM first_ts)": "EXTRACT(YEAROFWEEK",
    "DATE '2021-03-28'::timestamp": "DATE '...'::type",  # sqlglot casts the text: a DATE, where Spark's is a TIMESTAMP
    "s / 2": "arithmetic on text",
    "first_ts < 'today UTC'": "with a time zone",  # Spark's special value in another zone
    "CAST('2021-03-28 01:30:00Z' AS TIMESTAMP)": "time zone",  # Spark reads the zone
    "first_ts < '2021-03-28 01:30:00+01:00'": "time zone",
    "avg(extract(SECOND FROM first_ts)) OVER ()": "AVG of a DECIMAL",  # EXTRACT(SECOND): a DECIMAL(8, 6)
    "first_ts::numeric": "to DECIMAL",  # DuckDB has no TIMESTAMP -> DECIMAL cast; Spark: seconds since 1970
    "CAST(first_ts AS DECIMAL(20, 6))": "to DECIMAL",
    "shiftleft(CAST(x AS INT), 33)": "SHIFTLEFT",  # Java's: the shift modulo 32, wrapping (DuckDB: an error)
    "split(s, '2', 2)[0]": "SPLIT only without a limit",
    "try_divide(CAST(x AS DECIMAL(10,2)), 2)": "divide a DECIMAL",  # Spark's: an exact DECIMAL(14,6)
    "nvl(s, 1)": "mix text with INT in COALESCE",  # Spark: a BIGINT, the text cast (DuckDB refuses to mix)
    "coalesce(CASE WHEN x > 0 THEN '2021-01-01' END, start_date)": "mix text with DATE",
    "nvl(first_ts, s)": "mix text with a TIMESTAMP",
    # A constant PARTITION BY key with a function Spark replaces after analysing: computed (and may fail)
    "count(*) OVER (PARTITION BY to_timestamp('2021'))": "constant PARTITION BY key",
    "corr(x, x) OVER ()": "CORR only as a plain aggregate",
    "kurtosis(x) OVER ()": "KURTOSIS",  # Spark's population statistics, DuckDB's the sample ones
    "skewness(x) OVER ()": "SKEWNESS",
    YEARLESS_READ: "reads no year",  # Spark's year 1970, DuckDB's strptime 1900
    "overlay(s PLACING 'zz' FROM -2 FOR 0)": "OVERLAY only FROM",  # Spark: 'zz2 ' of ' 12 ' (from the end)
}


@pytest.mark.parametrize("expression", sorted(REFUSED_BY_THE_DIFFERENTIAL))
def test_what_the_python_engine_cannot_run_as_spark_does_is_refused_by_name(expression) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    error = caught.value
    assert error.code == "E0252" and "--engine spark" in str(error), str(error)
    assert REFUSED_BY_THE_DIFFERENTIAL[expression] in str(error) and error.span.column > len("SELECT"), str(error)


@pytest.mark.spark
@pytest.mark.parametrize("expression", sorted(REFUSED_BY_THE_DIFFERENTIAL))
def test_spark_runs_what_the_python_engine_refuses(answers, expression) -> None:
    assert len(spark_values(answers, expression)) == len(ROWS)


@pytest.mark.spark
def test_a_date_read_without_its_year_is_in_1970_on_spark(answers) -> None:
    """Found by the differential: the python engine gave 1900-02-01 (DuckDB's strptime), Spark 1970-02-01."""
    in_order = sorted(ROWS, key=lambda row: row["ts"])  # the statement's ORDER BY first_ts
    assert spark_values(answers, YEARLESS_READ) == [dt.date(1970, row["ts"].month, 1) for row in in_order]


@pytest.mark.parametrize("expression", ["2 / x", "x / 2.5", "CAST(first_ts AS BIGINT) DIV 7"])
def test_a_quotient_spark_makes_a_double_or_an_integer_runs(expression) -> None:
    assert len(python_values(expression)) == len(ROWS)


@pytest.mark.parametrize("expression", ["CAST(x AS DECIMAL(10,2)) DIV 2"])
def test_a_decimal_quotient_is_refused_before_running(expression) -> None:
    """Spark's DIV of a DECIMAL truncates its exact quotient; DuckDB's divides a DOUBLE (the quotients with
    ``/``, which the python engine computes as Spark does, are in tests/test_sql_decimals.py)."""
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    assert caught.value.code == "E0252" and "DECIMAL" in str(caught.value) and "--engine spark" in str(caught.value)
    assert caught.value.span.column > 1


def test_the_issues_three_silent_answers_are_sparks() -> None:
    # Spark's answers (2019-04-10 13:00 UTC is 1554901200 s; the test above checks each against Spark).
    assert python_values("CAST(first_ts AS BIGINT)")[:2] == [-1, 1554901200]
    assert python_values("TO_CHAR(start_date, 'yyyy-MM-dd')")[1] == "2020-10-01"
    with pytest.raises(cep.CepError) as caught:
        python_values("DATE_FORMAT(start_date, 'YYYY-MM-DD')")
    # Refused as cep check refuses it (E0247), not as a pattern Spark would run (E0252's "--engine spark").
    assert caught.value.code == "E0247" and "'YYYY'" in str(caught.value) and "Spark refuses" in str(caught.value)


SPARK_REFUSES = [
    "x / 0",
    "CAST('abc' AS INT)",
    "CAST(s || 'x' AS INT)",
    "id % 0",
    "dense_rank() OVER (ORDER BY x % 0)",
    "row_number() OVER (ORDER BY CAST(s || 'x' AS INT))",
    "DATE_FORMAT(first_ts, 'YYYY')",
    "to_timestamp('2020-1-05', 'yyyy-MM-dd')",
    "to_date(s, 'yyyy-MM-dd')",
    "CAST(to_date(first_ts) AS DECIMAL(10,2))",
    "unix_timestamp(s, 'yyyy-MM-dd HH:mm')",
    "split_part(s, '2', 0)",
    "year(start_date) * 10000000",  # INT overflow
    "-'abc'",
    "CAST(s || 'x' AS DOUBLE)",
    "make_timestamp(2021, 3, 28, 24, 30, 0)",  # hour 24 (DuckDB: the next day)
    "make_timestamp(2021, 2, 29, 1, 30, 0)",
    "make_timestamp(2021, 3, 28, 1, 30, 60.5)",
    "count(make_timestamp(2021, 3, 28, year(start_date) - 2000, 30, 0)) OVER ()",  # a column: evaluated
    "count(CAST('abc' AS INT)) OVER ()",  # Spark deems a cast of text nullable: evaluated
    "sum(CAST(9223372036854775807 AS BIGINT)) OVER ()",
    "CAST('1_000' AS DOUBLE)",  # DuckDB reads the underscore
    # A typed literal Spark cannot read: its parser refuses the statement, even where the value is unused
    "count(*) OVER (PARTITION BY DATE '-infinity' < DATE '2021-01-01')",
    "DATE '2021-02-30'",
    "TIMESTAMP '2021-03-28 24:00:00'",
    "'2.5' + 1",  # '2.5' is no BIGINT
    # ANSI mode: an array's index out of bounds is an error (DuckDB: NULL; a negative [i] from the end)
    "array(1, 2)[5]",
    "array(1, 2)[-1]",
    "split(s, '2')[1]",
    "element_at(array(1, 2), 3)",
    "try_element_at(array(1, 2), 0)",
    "start_date + 'x'",  # DATE + text (DuckDB: a Binder error)
    "start_date + s",
    "start_date < 'infinity'",  # not one of Spark's special values (DuckDB reads it)
    "CAST(CASE WHEN x > 0 THEN 'epoch' END AS DATE)",  # read from a row: no special value for Spark
    # An error DuckDB's optimizer would drop with a value it proves always NULL (a constant that fails)
    "max(coalesce(to_date(3::string, 'yyyy-MM-dd'), DATE '9999-12-31')) OVER ()",
    "coalesce(CAST('abc' AS INT), 5)",
    "coalesce(array(1, 2)[5], 7)",
    "split_part('a', '-', 0) IS NULL",
    "max(x) OVER (PARTITION BY from_unixtime(unix_timestamp(to_timestamp('abc'))))",  # Spark computes it
    "make_timestamp(2021, 3, 28, 3, 30, 0) IN ('infinity', '2021-03-28 01:30:00')",  # typed: Spark's cast
    "CAST(x AS INT) IN ('+.5', NULL)",  # no BIGINT (DuckDB compared the texts)
    "year(start_date) = '2020.5'",
    "x IS DISTINCT FROM 2::boolean",  # Spark's type error (DuckDB compares TRUE as 1)
    "x = true",
    "start_date <=> (x > 0)",
    "exp(0) IN (x > 0, NULL)",  # in IN and BETWEEN too: no common type for a BOOLEAN and a number
    "(x > 0) IN (1, 2)",
    "x BETWEEN false AND true",
    "start_date BETWEEN (x > 0) AND start_date",
    # A text literal in IN beside a DATE or TIMESTAMP that Spark cannot read: cast (and failing) before
    # running, where DuckDB's IN would drop the failing item beside one that matches
    "TIMESTAMP '2021-03-28 01:30:00' IN ('', '2021-03-28 01:30:00')",
    "first_ts IN ('abc', NULL)",
    "from_unixtime(year(start_date), 'EEEEE F:')",  # Spark refuses EEEEE (sqlglot's reading: '%A%a')
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", SPARK_REFUSES)
def test_both_engines_refuse_what_spark_refuses(answers, expression) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    assert caught.value.span.column > 1, str(caught.value)
    with pytest.raises(Exception):  # noqa: B017 - Spark's errors at collect() are its own classes
        spark_values(answers, expression)


# ------------------------------------------------------------------------------------ datetime patterns

FORMAT_FIELDS = [
    "y",
    "yy",
    "yyyy",
    "M",
    "MM",
    "MMM",
    "MMMM",
    "d",
    "dd",
    "D",
    "DDD",
    "H",
    "HH",
    "h",
    "hh",
    "m",
    "mm",
    "s",
    "ss",
    "SSS",
    "SSSSSS",
    "a",
    "E",
    "EE",
    "EEE",
    "EEEE",
]
REFUSED_BY_PYTHON = ["DD", "k", "kk", "K", "S", "SS", "SSSS", "L", "LLL", "yyyyy"]
REFUSED_BY_SPARK = ["YYYY", "Y", "u", "w", "W", "e", "c", "n", "N", "A", "p", "T"]


@pytest.mark.spark
def test_every_format_letter_writes_what_spark_writes(answers) -> None:
    """Letter by letter (with text around), over instants at a DST change, year ends, before the epoch,
    in the morning and in the afternoon."""
    for field in FORMAT_FIELDS:
        expression = f"date_format(first_ts, '<{field}>')"
        assert python_values(expression) == spark_values(answers, expression), field


@pytest.mark.parametrize("field", REFUSED_BY_PYTHON + REFUSED_BY_SPARK)
def test_a_pattern_without_an_exact_translation_is_refused_at_check_time(field) -> None:
    text = statement(f"date_format(first_ts, 'yyyy {field}')")
    with pytest.raises(cep.CepError) as checked:
        cep.check_sql(text)
    assert checked.value.code == "E0247" and repr(field) in str(checked.value)
    assert checked.value.span.column == text.splitlines()[1].index("'yyyy") + 1
    with pytest.raises(cep.CepError) as ran:
        python_values(f"date_format(first_ts, 'yyyy {field}')")
    if field in REFUSED_BY_SPARK:  # no engine runs it: the refusal of cep check, on both engines
        assert ran.value.code == "E0247" and "--engine spark" not in str(ran.value)
    else:
        assert ran.value.code == "E0252" and "--engine spark" in str(ran.value)


@pytest.mark.spark
@pytest.mark.parametrize("field", REFUSED_BY_PYTHON)
def test_spark_runs_the_patterns_the_python_engine_refuses(answers, field) -> None:
    assert len(spark_values(answers, f"date_format(first_ts, '{field}')")) == len(ROWS)


@pytest.mark.parametrize("field", REFUSED_BY_SPARK)
def test_inside_the_clause_cep_check_refuses_what_spark_refuses(field) -> None:
    text = (
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES DATE_FORMAT(A.ts, '{field}') AS f "
        "PATTERN (A) DEFINE A AS TRUE)"
    )
    with pytest.raises(cep.CepError) as caught:
        cep.compile(text)
    assert caught.value.code == "E0247"


def test_cep_check_refuses_a_week_year_in_measures(tmp_path: Path, capsys) -> None:
    query = tmp_path / "q.sql"
    query.write_text(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts\n  MEASURES DATE_FORMAT(A.ts, 'YYYY-MM-DD') AS day\n"
        "  PATTERN (A) DEFINE A AS TRUE)\n",
        encoding="utf-8",
    )
    assert main(["check", str(query)]) != 0
    err = capsys.readouterr().err
    assert "E0247" in err and "q.sql:2:30" in err and "Traceback" not in err


def test_parsing_patterns_are_the_fixed_width_fields() -> None:
    assert duckdb_strftime("dd/MM/yyyy HH:mm:ss", parsing=True) == "%d/%m/%Y %H:%M:%S"
    for pattern in ("d/M/yyyy", "MMM dd", "hh:mm a", "yy"):
        with pytest.raises(ValueError):
            duckdb_strftime(pattern, parsing=True)


# ------------------------------------------------------------------------------------ errors, refusals


def test_duckdbs_errors_point_at_the_expression_and_name_the_types() -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values("round(first_ts - start_date)")
    error = caught.value
    assert error.code == "E0250" and "round()" in str(error) and "INTERVAL" in str(error)
    assert error.span.line == 2 and error.span.column == len("SELECT ") + 1


@pytest.mark.parametrize("expression", ["CAST(-2 AS DATE)", "-2::date", "count(-2::date)"])
def test_a_refused_cast_of_a_negative_number_points_into_the_expression(expression) -> None:
    """The translation folds a number's minus sign into its literal (Spark's grammar): the new literal keeps
    the place of the number, so the refusal of its cast is placed inside the expression, not at 1:1."""
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    error, text = caught.value, statement(expression)
    assert error.code == "E0250" and "cannot cast INT to DATE" in error.message
    assert text.index(expression) <= error.span.start < text.index(expression) + len(expression), str(error)


# DuckDB's errors at run time, which name no place (its caret points into the translation): each is the
# sentence of its class, at the expression that fails, found by running the statement again (cep/duckdb_results.py,
# failing_expression); Spark fails on each as well, at the same expression where it names one, and with the same
# kind of error. (expression, sentence, what the caret covers, Spark's kind of error)
RUN_TIME_ERRORS = [  # month(start_date): 10, 12, 1 and 2; only December's row overflows
    (  # the window reads its partition's rows (December's first), the cast alone the rows' order (October's
        # first): DuckDB's message names another value, and the error is still the cast's
        "max(CAST(month(start_date) * 100 AS DECIMAL(3,0))) OVER (PARTITION BY base64(s))",
        "cannot be cast to DECIMAL(3,0): it is out of that type's range (as on Spark, in ANSI mode)",
        "CAST(month(start_date) * 100 AS DECIMAL(3,0))",
        "NUMERIC_VALUE_OUT_OF_RANGE",
    ),
    (
        "(9223372036854775800 - 4) + month(start_date)",
        "integer overflow: 9223372036854775796 + 12 does not fit a BIGINT (as on Spark, in ANSI mode)",
        "(9223372036854775800 - 4) + month(start_date)",
        "ARITHMETIC_OVERFLOW",
    ),
    (
        "abs(x) + greatest(month(start_date) - 10, 0) * 4611686018427387904",
        "integer overflow: 2 * 4611686018427387904 does not fit a BIGINT",
        "greatest(month(start_date) - 10, 0) * 4611686018427387904",
        "ARITHMETIC_OVERFLOW",
    ),
    (
        "CASE WHEN x > 0 THEN -(9223372036854775807 - month(start_date)) - 12 END",
        "integer overflow: -9223372036854775797 - 12 does not fit a BIGINT",
        "-(9223372036854775807 - month(start_date)) - 12",
        "ARITHMETIC_OVERFLOW",
    ),
    (
        "max(9223372036854775796 + month(start_date)) OVER (ORDER BY first_ts)",
        "integer overflow: 9223372036854775796 + 12 does not fit a BIGINT",
        "9223372036854775796 + month(start_date)",
        "ARITHMETIC_OVERFLOW",
    ),
    (
        "CAST(x * 1e300 AS INT)",
        "of type DOUBLE cannot be cast to INT: it is out of that type's range (as on Spark, in ANSI mode)",
        "CAST(x * 1e300 AS INT)",
        'CAST_OVERFLOW] The value 2.7000000000000004E300D of the type "DOUBLE" cannot be cast to "INT"',
    ),
    (
        "CAST(x * 1e300 AS BIGINT) + 1",
        "of type DOUBLE cannot be cast to BIGINT: it is out of that type's range",
        "CAST(x * 1e300 AS BIGINT)",
        'of the type "DOUBLE" cannot be cast to "BIGINT"',
    ),
    (
        "upper(s) || CAST(CAST(x AS DECIMAL(10,2)) * 100000000 AS DECIMAL(5,1))",
        "the value 270000000.00 cannot be cast to DECIMAL(5,1): it is out of that type's range",
        "CAST(CAST(x AS DECIMAL(10,2)) * 100000000 AS DECIMAL(5,1))",
        "NUMERIC_VALUE_OUT_OF_RANGE",
    ),
]


@pytest.mark.spark
@pytest.mark.parametrize(("expression", "sentence", "fragment", "sparks_kind"), RUN_TIME_ERRORS)
def test_an_error_at_run_time_is_a_sentence_at_the_expression_that_fails(
    answers, expression, sentence, fragment, sparks_kind
) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    error = caught.value
    assert error.code == "E0250" and sentence in error.message, str(error)
    assert "Error:" not in str(error)  # none of DuckDB's own text ("Out of Range Error: ...")
    assert statement(expression)[error.span.start : error.span.end] == fragment, str(error)
    with pytest.raises(Exception) as spark_caught:  # noqa: B017 - Spark's errors at collect() are its own classes
        spark_values(answers, expression)
    assert sparks_kind in str(spark_caught.value)
    fragments = [context.fragment() for context in spark_caught.value.getQueryContext()]
    assert fragment in fragments or not fragments  # Spark's cast of a DOUBLE names no place


# A window's running SUM past BIGINT (2^62 on each of 4 rows): DuckDB sums into a HUGEINT, whose cast to
# Spark's BIGINT fails on the result column, after the statement ran; its error named no place (1:1).
SUM_PAST_BIGINT_IN_A_WINDOW = "sum(try_multiply(4611686018427387904, 1)) OVER (ORDER BY first_ts)"


@pytest.mark.spark
def test_a_window_sum_past_bigint_is_placed_at_its_column_expression(answers) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values(SUM_PAST_BIGINT_IN_A_WINDOW)
    error, text = caught.value, statement(SUM_PAST_BIGINT_IN_A_WINDOW)
    assert error.code == "E0250" and "does not fit a BIGINT (as on Spark, in ANSI mode)" in error.message
    assert error.span.start == text.index(SUM_PAST_BIGINT_IN_A_WINDOW), str(error)
    with pytest.raises(Exception) as spark_caught:  # noqa: B017 - Spark's errors at collect() are its own classes
        spark_values(answers, SUM_PAST_BIGINT_IN_A_WINDOW)
    assert "ARITHMETIC_OVERFLOW" in str(spark_caught.value)


NOT_A_TIME_BESIDE_A_TIME = "upper(s) || (space(2) IN (first_ts, NULL))"


@pytest.mark.spark
def test_text_that_is_not_a_time_beside_a_time_is_sparks_cast_error_at_the_comparison(answers) -> None:
    """Found by the differential's no-raw-error property: DuckDB's "invalid timestamp field format" is Spark's
    CAST_INVALID_INPUT, as a sentence placed on the IN that compares the text with a TIMESTAMP (Spark's own
    context points at `IN (...)` only)."""
    expression = NOT_A_TIME_BESIDE_A_TIME
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    error = caught.value
    assert error.code == "E0250" and "Error:" not in str(error) and "field format" not in str(error), str(error)
    assert (
        error.message == "the text '  ' cannot be cast to TIMESTAMP: it is not a TIMESTAMP (as on Spark, in ANSI mode)"
    )
    assert statement(expression)[error.span.start : error.span.end] == "space(2) IN (first_ts, NULL)"
    with pytest.raises(Exception) as spark_caught:  # noqa: B017 - Spark's errors at collect() are its own classes
        spark_values(answers, expression)
    assert 'CAST_INVALID_INPUT] The value \'  \' of the type "STRING" cannot be cast to "TIMESTAMP"' in str(
        spark_caught.value
    )


def test_an_error_passed_on_by_a_subquery_points_at_the_expression_that_fails_in_it() -> None:
    """The error goes when the outer query's v * 2 is NULL too (its value is never computed), but stays when
    v stands for v * 2: the search goes on to the subquery's sum, among a few dozen other expressions."""
    others = ", ".join(f"x + {n} AS x{n}" for n in range(40))
    text = HEAD + (
        f"SELECT v * 2 AS doubled, upper(s) AS s FROM (SELECT {others}, 9223372036854775796 + month(start_date) AS v, "
        "s, first_ts FROM m) t ORDER BY first_ts"
    )
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    with pytest.raises(cep.CepError) as caught:
        cep.compile_sql(text).run({TABLE: table}, kind="rows")
    error = caught.value
    assert error.message.startswith("integer overflow: 9223372036854775796 + 12 does not fit a BIGINT"), str(error)
    assert text[error.span.start : error.span.end] == "9223372036854775796 + month(start_date)", str(error)


SPARK_WRAPS_AROUND = "upper(s) || from_unixtime(9223372036854775807 - month(start_date))"


@pytest.mark.spark
def test_a_time_spark_wraps_around_is_the_python_engines_error_with_the_way_to_spark(answers) -> None:
    """from_unixtime of a number past the range of times: Spark's arithmetic wraps around (a time in 1969),
    DuckDB fails: the error says that the python engine cannot compute it, at the call, and points to Spark."""
    expression = SPARK_WRAPS_AROUND
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    error = caught.value
    assert error.message.startswith("the python engine cannot compute this: the seconds since 1970 are out of")
    assert "as on Spark" not in error.message and "--engine spark" in str(error)
    fragment = statement(expression)[error.span.start : error.span.end]
    assert fragment == "from_unixtime(9223372036854775807 - month(start_date))"
    assert len(spark_values(answers, expression)) == len(ROWS)


def test_a_function_sqlglot_does_not_know_is_refused_by_name() -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values("reflect('java.util.UUID', 'randomUUID')")
    assert caught.value.code == "E0252" and "REFLECT()" in str(caught.value) and "--engine spark" in str(caught.value)


def test_nothing_reaches_stderr(capfd) -> None:
    for expression in ("TO_CHAR(start_date, 'yyyy-MM-dd')", "DATE_FORMAT(start_date, 'DD')", "CAST(x AS STRING)"):
        try:
            python_values(expression)
        except cep.CepError:
            pass
    captured = capfd.readouterr()
    assert captured.err == ""


# ------------------------------------------------------------------------------------ check time

CHECKED_EVENTS = "id,ts,x,s\n1,2021-03-28 01:30:05,2.5,a\n2,2021-10-31 02:30:00,-1.25,b\n"
# What the python engine's translation refuses whatever the input's columns: `cep check` says it too.
REFUSED_AT_CHECK_TIME = [
    "months_between(first_ts, TIMESTAMP '2021-03-28 01:30:00')",
    "DATE '2021-03-28'::timestamp",
    "reflect('java.util.UUID', 'randomUUID')",
    "extract(YEAROFWEEK FROM first_ts)",
    "CAST(2.5D AS STRING)",  # a DOUBLE written as text (Java's notation)
    "percentile_approx(x, 0.5) OVER ()",
    "CAST(DATE '2021-03-28' AS INT)",  # Spark refuses this cast too (E0250, as the run says)
    "DATE '2021-03-28' + 'x'",  # Spark's DATE + n takes an INT (E0250 on both)
    "TIMESTAMP '2021-03-28 01:30:00' < 'today Europe/Berlin'",  # a special value in another zone
]


def checked_statement(expression: str) -> str:
    return (
        "WITH m AS (SELECT * FROM events MATCH_RECOGNIZE (\n  ORDER BY id MEASURES A.ts AS first_ts, A.x AS x\n"
        "  ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE) r)\n"
        f"SELECT first_ts,\n       {expression} AS v\nFROM m\n"
    )


def first_error_line(err: str) -> str:
    return next(line for line in err.splitlines() if ": error[" in line)


@pytest.mark.parametrize("expression", REFUSED_AT_CHECK_TIME)
def test_cep_check_reports_what_the_python_engine_refuses_at_its_place(tmp_path: Path, capsys, expression) -> None:
    """The same error, line and column as `cep run --engine python`, without any row read; `--engine spark`
    checks the statement for Spark, which runs these (all but the cast Spark refuses too)."""
    query, events = tmp_path / "q.sql", tmp_path / "events.csv"
    query.write_text(checked_statement(expression), encoding="utf-8")
    events.write_text(CHECKED_EVENTS, encoding="utf-8")
    assert main(["check", str(query)]) != 0
    checked = first_error_line(capsys.readouterr().err)
    assert main(["run", str(query), "--input", f"events={events}", "--engine", "python"]) != 0
    ran = first_error_line(capsys.readouterr().err)
    assert checked == ran and f"{query}:5:" in checked, (checked, ran)
    spark_refuses_it_too = "E0250" in checked
    assert main(["check", "--engine", "spark", str(query)]) == (1 if spark_refuses_it_too else 0)


def test_cep_check_leaves_what_depends_on_a_columns_type_to_the_run(tmp_path: Path, capsys) -> None:
    """`x` is a DOUBLE only once the input is read: the check cannot know it, and refuses nothing; the run
    refuses the DOUBLE written as text, at the same place a check-time refusal would point."""
    query, events = tmp_path / "q.sql", tmp_path / "events.csv"
    query.write_text(checked_statement("CAST(x AS STRING)"), encoding="utf-8")
    events.write_text(CHECKED_EVENTS, encoding="utf-8")
    assert main(["check", str(query)]) == 0
    capsys.readouterr()
    assert main(["run", str(query), "--input", f"events={events}", "--engine", "python"]) != 0
    assert f"{query}:5:13: error[E0252]" in capsys.readouterr().err  # at x, the value cast


def test_cep_check_for_spark_refuses_only_the_patterns_spark_refuses() -> None:
    runs_on_spark = statement("date_format(first_ts, 'yyyy DD')")  # DD: Spark runs it, the python engine cannot
    cep.check_sql(runs_on_spark, engine="spark")
    with pytest.raises(cep.CepError) as caught:
        cep.check_sql(runs_on_spark)
    assert caught.value.code == "E0247"
    with pytest.raises(cep.CepError) as caught:
        cep.check_sql(statement("date_format(first_ts, 'YYYY')"), engine="spark")
    assert caught.value.code == "E0247" and "Spark refuses" in str(caught.value)


# ------------------------------------------------------------------------------------ text read as a date

# Spark casts text given to a function that takes a DATE or a TIMESTAMP, by its CAST's rules (the special
# values of a text it computes before running too); DuckDB's own cast refuses '2021' and reads 'infinity'.
TEXT_GIVEN_AS_A_DATE = [
    "year('2021')",
    "date_add('2021', 1)",
    "month(date_format(first_ts, 'yyyy-M'))",  # computed from a row
    "dayofweek(date_format(first_ts, 'yyyy-M-d'))",
    "datediff('2021-03-04T23:59', start_date)",  # a date ignores what follows the day
    "quarter(' 2021-5 ')",
    "last_day('2021-02')",
    "add_months('2021-01-31 10:00', 1)",
    "next_day('2021-3-2', 'MON')",
    "trunc('2021-05-06', 'MM')",
    "year(concat('to', 'day')) = year(current_date())",  # computed before running: Spark's special value
    "hour('2021-03-04 12:30')",  # a TIMESTAMP's text
    "date_trunc('MM', '2021-05-06 12:00:00.5')",
    "date_format('2021', 'yyyy-MM-dd HH:mm')",
    "timestampdiff(HOUR, '2021', date_format(first_ts, 'yyyy-MM-dd HH:mm'))",
    "timestampadd(MINUTE, 1, '2021-01-01T00:00:01')",
    "extract(YEAR FROM '2020-01-02')",
    "extract(DAYOFWEEK FROM ' 2021-3-7 ')",
    "extract(HOUR FROM '2021-03-04 12:30')",
    "extract(MINUTE FROM date_format(first_ts, 'yyyy-MM-dd HH:mm'))",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", TEXT_GIVEN_AS_A_DATE)
def test_text_given_to_a_date_function_is_read_as_spark_reads_it(answers, expression) -> None:
    assert python_typed(expression) == spark_typed(answers, expression)


SPARK_TAKES_NO_TEXT = ["unix_date('1970-01-02')", "unix_seconds(s)", "unix_millis('2021')"]


@pytest.mark.spark
@pytest.mark.parametrize("expression", SPARK_TAKES_NO_TEXT)
def test_a_function_spark_gives_no_text_refuses_it_on_both(answers, expression) -> None:
    """unix_date, unix_seconds and unix_millis take no text on Spark (a type error, no implicit cast)."""
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    assert caught.value.code == "E0250" and "not text" in str(caught.value) and caught.value.span.column > 1
    with pytest.raises(Exception):  # noqa: B017 - Spark's errors are its own classes
        spark_values(answers, expression)


# Spark's CAST of text to a DATE or TIMESTAMP at its edges: each reads the same value on both engines, or
# fails on both (TRY_CAST: NULL on both).
DATE_TEXT_EDGES = [
    "2021",
    "2021-3",
    "2021-03-04 junk",
    "2021-03-04Tx",
    " \t2021-03-04\n",
    "2021-02-29",
    "2021-03-04junk",
    "21-03-04",
    "2021/03/04",
    "+2021-03-04",
    "12021-03-04",
    "2021-13-01",
    "2021-03-",
]
TIME_TEXT_EDGES = [
    "2021-02-28 24:00",
    "2021-02-28 23:60",
    "2021-02-28 23:59:60",
    "2021-02-28T23:59:59.1234567",
    "2021-3-2 1:2:3",
    "2021-03-02 01:02:03.",
    "2021-03-02 01",
    "2021-02-29 10:00",
    "2021-03-02T01",
    "2021-03-02 01:02:03.1234567",
    "2021-03-02 01:",
    "+2021-03-02 01:02",
    "2021-03-04 1:2:3.000001",
]
TEXT_EDGES = [
    *(f"year('{text}') * 10000 + month('{text}') * 100 + day('{text}')" for text in DATE_TEXT_EDGES),
    *(f"CAST('{text}' AS TIMESTAMP)" for text in TIME_TEXT_EDGES),
    "TRY_CAST('2021-02-30' AS DATE)",
    "TRY_CAST('2021-02-28 24:00' AS TIMESTAMP)",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", TEXT_EDGES)
def test_text_read_as_a_date_at_its_edges_is_sparks_reading(answers, expression) -> None:
    """Spark's value, or Spark's error at the expression, or a refusal before running where Spark reads it."""
    try:
        python = python_values(expression)
    except cep.CepError as error:
        assert error.code in ("E0250", "E0252") and error.span.column > len("SELECT"), str(error)
        if error.code == "E0252":
            assert len(spark_values(answers, expression)) == len(ROWS)
        else:
            with pytest.raises(Exception):  # noqa: B017 - Spark's errors at collect() are its own classes
                spark_values(answers, expression)
    else:
        assert python == spark_values(answers, expression)


COMPUTED_SPECIAL_VALUE_WITH_A_ZONE = "CAST(concat('today', ' UTC') AS DATE) = current_date()"


@pytest.mark.spark
def test_a_computed_special_value_with_a_zone_says_that_spark_reads_it(answers) -> None:
    """Spark reads 'today UTC' in that zone; the python engine cannot (a literal one is refused before
    running), and its error says that Spark gives a value, not that Spark fails too."""
    expression = COMPUTED_SPECIAL_VALUE_WITH_A_ZONE
    assert spark_values(answers, expression) == [True] * len(ROWS)
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    said = str(caught.value)
    assert "time zone" in said and "as on Spark" not in said and "--engine spark" in said, said


# make_date(y, m, d) of integer fields runs on the python engine as Spark's (it was always refused): a DATE, NULL
# where a field is NULL, and an invalid date (February 29 of 2021, month 13) Spark's ANSI error at the call.
MAKE_DATES = [
    "make_date(year(start_date), month(start_date), day(start_date))",
    "make_date(2021, 2, 28)",
    "make_date(CAST(NULL AS INT), 1, 1)",
    "make_date(year(start_date), 1, day(start_date)) + 1",
    "make_date(CAST(month(start_date) AS SMALLINT) + 2000, 12, 31)",
]
MAKE_DATES_FAILING = [
    "make_date(year(start_date), 2, 29)",
    "make_date(2021, 13, 1)",
    "make_date(2021, month(start_date), 31)",
]


@pytest.fixture(scope="module")
def make_date_answers(events) -> SparkAnswers:
    return SparkAnswers(events, select_statement, MAKE_DATES, expected_to_fail=MAKE_DATES_FAILING)


@pytest.mark.spark
@pytest.mark.parametrize("expression", MAKE_DATES)
def test_make_date_is_sparks(make_date_answers, expression) -> None:
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    out = cep.compile_sql(statement(expression)).run({TABLE: table}, kind="arrow")
    assert out.schema.field("v").type == pa.date32()  # Spark's DATE
    assert out.column("v").to_pylist() == spark_values(make_date_answers, expression)


@pytest.mark.spark
@pytest.mark.parametrize("expression", MAKE_DATES_FAILING)
def test_make_date_of_an_invalid_date_fails_at_the_call_as_on_spark(make_date_answers, expression) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_values(expression)
    assert "MAKE_DATE: a field is out of its range" in str(caught.value)
    assert statement(expression)[caught.value.span.start :].startswith("make_date("), str(caught.value)
    with pytest.raises(Exception, match="DATETIME_FIELD_OUT_OF_BOUNDS|Invalid date"):  # noqa: B017 - Spark's own class
        spark_values(make_date_answers, expression)


def test_make_date_of_a_field_that_is_not_an_integer_is_refused_before_running() -> None:
    """Spark casts a DOUBLE or text field to an INT by its own rules; the python engine refuses it, at it."""
    for expression, field in (("make_date(x, 1, 1)", "x"), ("make_date(2021, s, 1)", "s")):
        with pytest.raises(cep.CepError) as caught:
            python_values(expression)
        assert caught.value.code == "E0252" and "MAKE_DATE of integer fields only" in str(caught.value)
        assert statement(expression)[caught.value.span.start :].startswith(field + ","), str(caught.value)


# count(DISTINCT a, b) where an operand's translation holds DuckDB's // (found by the differential, seed 29:
# sqlglot's rewrite of it failed with its own parse error, shown as a syntax error at the statement).
DISTINCT_TUPLES = [
    "(SELECT count(DISTINCT CAST(first_ts AS BIGINT), to_date(first_ts)) FROM m)",
    "(SELECT count(DISTINCT x, s) FROM m)",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", DISTINCT_TUPLES)
def test_count_of_distinct_tuples_is_sparks(events, expression) -> None:
    answers = SparkAnswers(events, select_statement, DISTINCT_TUPLES)
    assert python_values(expression) == spark_values(answers, expression)
