"""Spark functions the differential found the python engine missing or answering otherwise (issue #28):
``try_add``/``try_subtract``/``try_multiply`` (NULL on an overflow), ``upper`` and friends of a number,
``typeof`` in Spark's spelling, ``signum`` of -0.0 and NaN, ``isnull``/``isnotnull``, and ``soundex`` and
``to_number``, refused at their place.

Expected values and types are Spark's own, written down from a run on the same rows and checked again by each
test on the ``spark`` fixture: a case passes when Spark still gives the written answer and the python engine
gives the same values of the same type.
"""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pytest

import cep
from tests.spark_answers import SparkAnswers, select_list

TABLE = "sqll_events"
ROWS = [
    {"id": 1, "b": 9223372036854775807, "i": 2147483647, "x": 2.7, "s": "abcabc"},
    {"id": 2, "b": -5, "i": -3, "x": -0.0, "s": "a_b"},
    {"id": 3, "b": None, "i": None, "x": None, "s": None},
]
ARROW = pa.schema([("id", pa.int32()), ("b", pa.int64()), ("i", pa.int32()), ("x", pa.float64()), ("s", pa.string())])
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id, A.b AS b, A.i AS i, "
    "A.x AS x, A.s AS s ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE) r)\n"
)
# Spark's type names of the python engine's Arrow columns these cases give.
SPARK_NAME = {
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.float64(): "double",
    pa.string(): "string",
    pa.bool_(): "boolean",
    pa.timestamp("us"): "timestamp",
    pa.date32(): "date",
}


def select_statement(columns: list[tuple[str, str]]) -> str:
    """The statement that selects each (name, expression) of ``columns``, in the rows' order."""
    return HEAD + "SELECT " + select_list(columns) + " FROM m ORDER BY id"


def statement(expression: str) -> str:
    return select_statement([("v", expression)])


@pytest.fixture(scope="module")
def events(spark):
    frame = spark.createDataFrame([tuple(row.values()) for row in ROWS], "id INT, b BIGINT, i INT, x DOUBLE, s STRING")
    frame.createOrReplaceTempView(TABLE)
    return spark


def python_answer(expression: str) -> tuple[list, str]:
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    result = cep.compile_sql(statement(expression)).run({TABLE: table}, kind="arrow")
    return result.column("v").to_pylist(), SPARK_NAME[result.schema.field("v").type]


@pytest.fixture(scope="module")
def answers(events) -> SparkAnswers:
    """Spark's value and type for every expression of this file's cases, from a few queries
    (tests/spark_answers.py)."""
    return SparkAnswers(events, select_statement, [*SPARKS_TIMES, *SPARKS_ANSWERS, *SPARK_RUNS])


def same(left: list, right: list) -> bool:
    """Equal values, -0.0 told from 0.0 and NaN equal to NaN (Java's signum keeps both)."""

    def key(value):
        if isinstance(value, float):
            return ("nan",) if math.isnan(value) else (value, math.copysign(1.0, value))
        return value

    return [key(value) for value in left] == [key(value) for value in right]


# Spark's answers over ROWS (Spark 4, ANSI mode): values and simpleString.
SPARKS_ANSWERS = {
    # NULL where Spark's ANSI arithmetic would overflow; the wider operand's type (sqlglot: no DuckDB form)
    "try_add(b, 1)": ([None, -4, None], "bigint"),
    "try_add(i, 1)": ([None, -2, None], "int"),
    "try_add(i, b)": ([None, -8, None], "bigint"),
    "try_subtract(b, -1)": ([None, -4, None], "bigint"),
    "try_subtract(i, 1)": ([2147483646, -4, None], "int"),
    "try_multiply(b, 2)": ([None, -10, None], "bigint"),
    "try_multiply(i, 2)": ([None, -6, None], "int"),
    "try_add(x, 1)": ([3.7, 1.0, None], "double"),
    # a number given to a text function is cast to STRING (DuckDB has no upper() of a number)
    "upper(1.5)": (["1.5", "1.5", "1.5"], "string"),
    "upper(i)": (["2147483647", "-3", None], "string"),
    "lower(b)": (["9223372036854775807", "-5", None], "string"),
    "upper(CAST(x AS DECIMAL(10,2)))": (["2.70", "0.00", None], "string"),
    "lower(true)": (["true", "true", "true"], "string"),
    "upper(DATE '2021-01-01')": (["2021-01-01", "2021-01-01", "2021-01-01"], "string"),
    "initcap(i)": (["2147483647", "-3", None], "string"),
    "reverse(i)": (["7463847412", "3-", None], "string"),
    # Spark's simpleString (DuckDB wrote INTEGER, DECIMAL(10,2), INTEGER[], VARCHAR, "NULL")
    "typeof(i)": (["int", "int", "int"], "string"),
    "typeof(CAST(x AS DECIMAL(10,2)))": (["decimal(10,2)"] * 3, "string"),
    "typeof(array(i))": (["array<int>"] * 3, "string"),
    "typeof(s)": (["string"] * 3, "string"),
    "typeof(map(1, 2))": (["map<int,int>"] * 3, "string"),
    "typeof(named_struct('a', 1, 'b', 'x'))": (["struct<a:int,b:string>"] * 3, "string"),
    "typeof(NULL)": (["void"] * 3, "string"),
    "typeof(length(s))": (["int"] * 3, "string"),
    "typeof(array(array(1)))": (["array<array<int>>"] * 3, "string"),
    # Java's signum keeps -0.0 and NaN (DuckDB's sign gave 0 for both); -0.0D is the DOUBLE -0.0
    "signum(x)": ([1.0, -0.0, None], "double"),
    "signum(-0.0D)": ([-0.0, -0.0, -0.0], "double"),
    "signum(CAST('NaN' AS DOUBLE))": ([math.nan] * 3, "double"),
    "signum(-0.0)": ([0.0, 0.0, 0.0], "double"),  # a DECIMAL 0.0: no negative zero
    # Spark's isnull and isnotnull (refused as unknown functions)
    "isnull(s)": ([False, False, True], "boolean"),
    "isnotnull(i)": ([True, True, False], "boolean"),
    # collect_list and collect_set skip NULLs: sqlglot's FILTER came only with a column (seed 33: the row count)
    "size(collect_list(CASE WHEN false THEN 'a' END) OVER ())": ([0, 0, 0], "int"),
    "size(collect_list(NULL) OVER ())": ([0, 0, 0], "int"),
    "size(collect_list(nullif(1, 1)) OVER ())": ([0, 0, 0], "int"),
    # sqlglot wrote a second FILTER for its NULL test, or `NOT DISTINCT i IS NULL`, or LIST(DISTINCT DISTINCT i):
    # DuckDB's syntax errors, for a query Spark runs
    "(SELECT size(collect_list(DISTINCT i) FILTER (WHERE id > 0)) FROM m)": ([2, 2, 2], "int"),
    "(SELECT size(collect_set(i) FILTER (WHERE id > 1)) FROM m)": ([1, 1, 1], "int"),
    "(SELECT size(collect_set(DISTINCT s) FILTER (WHERE id < 3)) FROM m)": ([2, 2, 2], "int"),
    "(SELECT size(collect_set(DISTINCT i)) FROM m)": ([2, 2, 2], "int"),
    "size(collect_set(s) FILTER (WHERE id > 1) OVER ())": ([1, 1, 1], "int"),
    # the statistics of a text read it as a DOUBLE, as SUM and AVG do (DuckDB has none for text: seed 37)
    "(SELECT variance(CAST(id AS STRING)) FROM m)": ([1.0, 1.0, 1.0], "double"),
    "(SELECT stddev(CAST(id AS STRING)) FROM m)": ([1.0, 1.0, 1.0], "double"),
    "(SELECT covar_samp(id, CAST(id AS STRING)) FROM m)": ([1.0, 1.0, 1.0], "double"),
    "(SELECT var_pop(CAST(id * 3 AS STRING)) FROM m)": ([6.0, 6.0, 6.0], "double"),
    # text beside a BOOLEAN is read by Spark's words, trimmed, in any case (DuckDB's cast refused ' N ': seed 63)
    "' N ' IN (i > 0, NULL)": ([None, True, None], "boolean"),
    "(i > 0) = ' y '": ([True, False, None], "boolean"),
    "' 0 ' BETWEEN (i > 0) AND true": ([False, True, None], "boolean"),
    # a decimal literal is Spark's DECIMAL of its digits without leading zeros (DuckDB: 0.5 a DECIMAL(2,1))
    "typeof(0.5)": (["decimal(1,1)"] * 3, "string"),
    "typeof(-0.05)": (["decimal(2,2)"] * 3, "string"),
    "typeof(array(0.5, 0.05))": (["array<decimal(2,2)>"] * 3, "string"),
    "typeof(if(i > 0, 0.5, 0.05))": (["decimal(2,2)"] * 3, "string"),
    # ... but a percentile's fraction stays as written (DuckDB's WITHIN GROUP takes no cast there)
    "(SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY i) FROM m)": ([1073741822.0] * 3, "double"),
    # a cast of array_max/array_min reads the element's type, so it runs (it was refused: type not told)
    "CAST(array_min(array(x, 2.5)) AS INT)": ([2, 0, 2], "int"),
    "typeof(CAST(array_max(array(i, 2)) AS INT) * 1.25)": (["decimal(14,2)"] * 3, "string"),
    # a TIME literal, which Spark 4.2 reads (its casts to TIME it refuses: tests/test_sql_names.py)
    "typeof(TIME '01:02:03')": (["time(6)"] * 3, "string"),
    "CAST(TIME '01:02:03.5' AS STRING)": (["01:02:03.5"] * 3, "string"),
}


T0 = "TIMESTAMP '2021-01-31 00:00:00'"
# A two-field interval literal (DuckDB's parser had no YEAR TO MONTH: an error at 1:1) and make_interval (sqlglot
# pasted a column's name into DuckDB's interval text), added to a time: Spark's answers, the same on every row.
SPARKS_TIMES = {
    f"{T0} + INTERVAL '1-2' YEAR TO MONTH": dt.datetime(2022, 3, 31),
    f"{T0} - INTERVAL '-1-2' YEAR TO MONTH": dt.datetime(2022, 3, 31),
    "DATE '2021-01-31' + INTERVAL '1-2' YEAR TO MONTH": dt.date(2022, 3, 31),
    f"{T0} + INTERVAL '3 04:05:06.5' DAY TO SECOND": dt.datetime(2021, 2, 3, 4, 5, 6, 500000),
    f"{T0} + INTERVAL '-3 04:05:06' DAY TO SECOND": dt.datetime(2021, 1, 27, 19, 54, 54),
    f"{T0} + INTERVAL '3 04' DAY TO HOUR": dt.datetime(2021, 2, 3, 4),
    f"{T0} + INTERVAL '3 04:05' DAY TO MINUTE": dt.datetime(2021, 2, 3, 4, 5),
    f"{T0} + INTERVAL '04:05' HOUR TO MINUTE": dt.datetime(2021, 1, 31, 4, 5),
    f"{T0} + INTERVAL '04:05:06' HOUR TO SECOND": dt.datetime(2021, 1, 31, 4, 5, 6),
    f"{T0} + INTERVAL '05:06.25' MINUTE TO SECOND": dt.datetime(2021, 1, 31, 0, 5, 6, 250000),
    f"{T0} + make_interval(0, 1)": dt.datetime(2021, 2, 28),
    f"{T0} + make_interval(1, 2, 3, 4, 5, 6, 7.5)": dt.datetime(2022, 4, 25, 5, 6, 7, 500000),
    f"{T0} + make_interval(abs(i) DIV abs(i), 1)": dt.datetime(2022, 2, 28),
    f"{T0} + make_interval()": dt.datetime(2021, 1, 31),
}


@pytest.mark.spark
@pytest.mark.parametrize("expression", sorted(SPARKS_TIMES))
def test_interval_literals_and_make_interval_are_sparks(answers, expression) -> None:
    values, kind = answers[expression].typed()
    expected = SPARKS_TIMES[expression]
    assert values[:2] == [expected] * 2 and kind == ("date" if type(expected) is dt.date else "timestamp"), values
    assert python_answer(expression) == (values, kind)


@pytest.mark.spark
@pytest.mark.parametrize("expression", sorted(SPARKS_ANSWERS))
def test_the_python_engine_gives_sparks_answer_and_type(answers, expression) -> None:
    values, kind = answers[expression].typed()
    assert same(values, SPARKS_ANSWERS[expression][0]) and kind == SPARKS_ANSWERS[expression][1], (values, kind)
    python_values, python_kind = python_answer(expression)
    assert same(python_values, values) and python_kind == kind, (python_values, python_kind)


# Spark runs these; the python engine cannot as Spark does, and refuses at the call, naming it.
REFUSED = {
    "soundex(s)": "SOUNDEX",
    "to_number(s, '999')": "TO_NUMBER",
    "try_add(DATE '2021-01-01', 1)": "TRY_ADD",
    "try_multiply(CAST(x AS DECIMAL(10,2)), 2)": "TRY_MULTIPLY",
    "typeof(INTERVAL 3 DAY)": "interval",
    "upper(x)": "DOUBLE",  # Java writes a DOUBLE's text (-0.0, 1.0E10)
    f"{T0} + make_interval(0, 0, 0, 0, 0, 0, x)": "make_interval",  # Spark casts the DOUBLE to DECIMAL(18,6)
    f"{T0} + INTERVAL '1 2' YEAR TO MONTH": "INTERVAL YEAR TO MONTH",  # Spark's own error: not its form
}


@pytest.mark.parametrize("expression", sorted(REFUSED))
def test_what_the_python_engine_cannot_run_as_spark_does_is_refused_at_the_call(expression) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_answer(expression)
    error = caught.value
    assert error.code == "E0252" and REFUSED[expression] in error.message and "--engine spark" in str(error)
    start = len("SELECT ") + 1  # within the expression, never 1:1 (upper(x): at x, the DOUBLE it cannot write)
    assert error.span.line == 2 and start <= error.span.column < start + len(expression), str(error)


# What Spark runs of REFUSED: not the INTERVAL Spark refuses too, and to_number of a text its format fits (Spark's
# error for 'abcabc', a value its format does not fit).
SPARK_RUNS = [
    "to_number('12', '99')" if expression.startswith("to_number") else expression
    for expression in REFUSED
    if "'1 2'" not in expression
]


@pytest.mark.spark
def test_spark_runs_what_the_python_engine_refuses(answers) -> None:
    for expression in SPARK_RUNS:
        assert len(answers[expression].values()) == len(ROWS), expression
