"""The python engine's result columns carry Spark's exact type, width included (cep/duckdb_widths.py, and the
matcher's output typed as the Spark engine's in cep/statement_engines.py).

Every expected type and value is Spark's own: each case runs on the ``spark`` fixture and on the python engine
over the same rows, through a MATCH_RECOGNIZE clause, and the two must give the same values and the same type
name (Spark's ``simpleString`` against the Spark type of the python engine's Arrow column). Before these rules
an INT column read through the clause was a BIGINT on the python engine (so ``i + 1`` at INT's largest gave a
value where Spark fails), and Spark's INT functions (``length``, ``year``, ``row_number``) were BIGINTs.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

import cep
from tests.spark_answers import (
    SparkAnswers,
    answers_over_matched_rows,
    assert_the_whole_statement_agrees,
    select_list,
    spark_sql,
)
from tests.test_sql_differential import spark_name_of_arrow

TABLE = "sqlw_events"
ROWS = [
    {"id": 1, "i": 7, "sm": 3, "s": "abc", "d": dt.date(2021, 3, 28), "dec": Decimal("1.25"), "x": 1.5},
    {"id": 2, "i": None, "sm": None, "s": None, "d": None, "dec": None, "x": None},
    {"id": 3, "i": -(2**31), "sm": -(2**15), "s": "xaa", "d": dt.date(1999, 12, 31), "dec": Decimal("-2.50"), "x": 0.0},
]
ARROW = pa.schema(
    [
        ("id", pa.int32()),
        ("i", pa.int32()),
        ("sm", pa.int16()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("dec", pa.decimal128(10, 2)),
        ("x", pa.float64()),
    ]
)
SPARK_SCHEMA = "id INT, i INT, sm SMALLINT, s STRING, d DATE, dec DECIMAL(10,2), x DOUBLE"
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES FIRST(A.i) AS fi, COUNT(*) AS n "
    "ALL ROWS PER MATCH PATTERN (A) DEFINE A AS TRUE) r)\n"
)


def select_statement(columns: list[tuple[str, str]], head: str = HEAD) -> str:
    """The statement that selects each (name, expression) of ``columns``, in the rows' order."""
    return head + "SELECT " + select_list(columns) + " FROM m ORDER BY id"


def statement(expression: str) -> str:
    return select_statement([("v", expression)])


def python_typed(expression: str) -> tuple[list, str]:
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    out = cep.compile_sql(statement(expression)).run({TABLE: table}, kind="arrow")
    return out.column("v").to_pylist(), spark_name_of_arrow(out.schema.field("v").type)


@pytest.fixture(scope="module")
def events(spark):
    spark.createDataFrame([tuple(row.values()) for row in ROWS], SPARK_SCHEMA).createOrReplaceTempView(TABLE)
    return spark


@pytest.fixture(scope="module")
def answers(events) -> SparkAnswers:
    """Spark's value and type for every case of this file, from a few queries over the clause's rows matched
    once (tests/spark_answers.py)."""
    expressions = TYPED + [outside for _, outside in IN_THE_CLAUSE]
    return answers_over_matched_rows(
        events, HEAD, "sqlw_matched", select_statement, expressions, expected_to_fail=OVERFLOWS
    )


@pytest.mark.spark
def test_the_matched_rows_give_the_whole_statements_answers(events, answers) -> None:
    """The answers read the clause's rows from a view; the whole statement (``cep.sql``: the clause run on
    Spark) gives the same values and types."""
    assert_the_whole_statement_agrees(events, select_statement, answers, TYPED)


# The clause's own integer functions, in MEASURES: each has the type Spark gives the same function outside the
# clause (Spark has no MATCH_RECOGNIZE; its answer for the function over the same row is the independent one).
# Each row is a match of its own, so a measure's value on a row is the function of that row.
IN_THE_CLAUSE = [
    ("length(A.s)", "length(s)"),
    ("position('a' IN A.s)", "position('a' IN s)"),
    ("year(A.d)", "year(d)"),
    ("quarter(A.d)", "quarter(d)"),
    ("month(A.d)", "month(d)"),
    ("day(A.d)", "day(d)"),
    ("dayofmonth(A.d)", "dayofmonth(d)"),
    ("dayofweek(A.d)", "dayofweek(d)"),
    ("dayofyear(A.d)", "dayofyear(d)"),
    ("weekofyear(A.d)", "weekofyear(d)"),
    ("weekday(A.d)", "weekday(d)"),
    ("hour(CAST(A.d AS TIMESTAMP))", "hour(CAST(d AS TIMESTAMP))"),
    ("minute(CAST(A.d AS TIMESTAMP))", "minute(CAST(d AS TIMESTAMP))"),
    ("second(CAST(A.d AS TIMESTAMP))", "second(CAST(d AS TIMESTAMP))"),
    ("extract(YEAR FROM A.d)", "extract(YEAR FROM d)"),
    ("date_part('day', A.d)", "date_part('day', d)"),
    ("datediff(A.d, DATE '2000-01-01')", "datediff(d, DATE '2000-01-01')"),
    ("date_diff(A.d, DATE '2000-01-01')", "date_diff(d, DATE '2000-01-01')"),
    ("datediff(DAY, DATE '2000-01-01', A.d)", "datediff(DAY, DATE '2000-01-01', d)"),  # units: a BIGINT
    ("sign(A.i)", "sign(i)"),  # Spark's sign: a DOUBLE
]
TYPED = [
    "i",  # an INT column through the clause: an INT (the matcher's own output is 64 bits)
    "sm",  # a SMALLINT column: Spark's clause gives an INT
    "fi",  # a measure of an INT column: an INT
    "n",  # COUNT(*): a BIGINT
    "i + 1",
    "length(s)",
    "length(s) + i",
    "year(d)",
    "month(d) * 2",
    "dayofweek(d)",
    "datediff(d, DATE '2000-01-01')",
    "instr(s, 'a')",
    "ascii(s)",
    "size(array(i, i))",
    "i div 2",  # Spark's DIV: a BIGINT
    "row_number() OVER (ORDER BY id)",
    "rank() OVER (ORDER BY s)",
    "ntile(2) OVER (ORDER BY id)",
    "dec * i",  # an INT beside a DECIMAL: DECIMAL(10,0), the product DECIMAL(21,2)
    "dec / i",
    "dec + length(s)",
    "coalesce(dec, i)",
    "nvl(dec, CAST(i AS BIGINT))",  # Spark's DECIMAL(22,2): a BIGINT is a DECIMAL(20,0) (DuckDB's: 19 digits)
    "CAST(x AS FLOAT)",
    "CAST(id AS SMALLINT)",
    "array(CAST(id AS TINYINT), 1)",  # the literal an INT: array<int> (DuckDB typed it as a TINYINT)
    "coalesce(CAST(id AS SMALLINT), 2)",
    "CAST(id AS SMALLINT) + 1",
    "array(factorial(id + 2), id)",  # Spark's factorial: a BIGINT (DuckDB's HUGEINT is a DECIMAL(38,0) in an array)
    "floor(dec)",  # Spark's DECIMAL(9,0) (DuckDB's DECIMAL(10,0))
    "ceil(dec)",
    "round(dec, -1)",
    # decode without a default: Spark's ELSE is a STRING's NULL, so a number beside it is a BIGINT or a DOUBLE
    "decode(s, 'abc', 1)",
    "decode(s, 'abc', sm, 'xaa', 2)",
    "decode(s, 'abc', dec)",
    "decode(s, 'abc', 1.5, 'xaa', x)",
    "decode(s, 'abc', NULL)",
    "decode(s, 'abc', 1, 2)",  # with a default: the results' own type
    "decode(s, 'abc', d)",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", TYPED)
def test_the_python_engine_gives_sparks_exact_type(answers, expression) -> None:
    assert python_typed(expression) == answers[expression].typed()


@pytest.mark.spark
@pytest.mark.parametrize(("measure", "outside"), IN_THE_CLAUSE)
def test_a_measure_has_the_type_spark_gives_its_function(answers, measure, outside) -> None:
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    text = (
        f"SELECT id, v FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES {measure} AS v ALL ROWS PER MATCH "
        "PATTERN (A) DEFINE A AS TRUE) r ORDER BY id"
    )
    out = cep.compile_sql(text).run({TABLE: table}, kind="arrow")
    assert (out.column("v").to_pylist(), spark_name_of_arrow(out.schema.field("v").type)) == answers[outside].typed()


# INT arithmetic past INT's range: Spark's ANSI overflow error; a BIGINT (the python engine's width before)
# would give a value, and so would a check of the outermost step alone (``(i + i) - i`` ends within INT's range).
OVERFLOWS = ["i - 1", "-i", "abs(i)", "i * 2", "length(s) * 1000000000", "(i + i) - i", "-(i - 1) + 0"]


@pytest.mark.spark
@pytest.mark.parametrize("expression", OVERFLOWS)
def test_int_arithmetic_overflows_as_on_spark(answers, expression) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_typed(expression)
    assert "overflow" in str(caught.value), str(caught.value)
    with pytest.raises(Exception, match="(?i)overflow"):  # noqa: B017 - Spark's error at collect() is its own class
        answers[expression].values()


# Literals and casts inside the clause (MEASURES) have the type and value Spark SQL gives them outside it: an
# integer literal an INT (a BIGINT past INT's range), a number with a point Spark's DECIMAL of its digits (with an
# exponent a DOUBLE), a CAST to INT an INT that truncates toward zero; CASE and COALESCE bring DECIMALs and
# integers to Spark's common DECIMAL. Before, the clause typed `1` and CAST(... AS INT) as BIGINTs, `1.5` as a
# DOUBLE on the Spark engine (a DECIMAL of Arrow's choosing on the python engine), and rounded CAST(-2.5 AS INT)
# to -3.
CLAUSE_LITERALS_AND_CASTS = [
    ("1", "1"),
    ("3000000000", "3000000000"),
    ("1.5", "1.5"),
    ("0.05", "0.05"),
    ("1.5e3", "1.5e3"),
    ("CAST(A.x AS INT)", "CAST(x AS INT)"),
    ("CAST(A.dec AS INT)", "CAST(dec AS INT)"),
    ("CAST(A.dec AS BIGINT)", "CAST(dec AS BIGINT)"),
    ("A.i * 1.5", "i * 1.5"),
    ("A.dec + 1", "dec + 1"),
    ("coalesce(A.i, 2.5)", "coalesce(i, 2.5)"),
    ("CASE WHEN A.id > 1 THEN 1.5 ELSE 2.25 END", "CASE WHEN id > 1 THEN 1.5 ELSE 2.25 END"),
    ("CASE WHEN A.id > 1 THEN A.dec ELSE A.x END", "CASE WHEN id > 1 THEN dec ELSE x END"),
]
# Casts past the target's range: Spark's ANSI error on both (the clause gave the wider number).
CLAUSE_CAST_OVERFLOWS = [
    ("CAST(A.i AS SMALLINT)", "CAST(i AS SMALLINT)"),
    ("CAST(A.i * CAST(2 AS BIGINT) AS INT)", "CAST(i * 2L AS INT)"),  # A.i * 2 is an INT: it overflows first
]


@pytest.fixture(scope="module")
def clause_answers(events) -> SparkAnswers:
    return SparkAnswers(
        events,
        select_statement,
        [outside for _, outside in CLAUSE_LITERALS_AND_CASTS + CLAUSE_INTEGER_ARITHMETIC] + INTEGER_FLOORS,
        expected_to_fail=[outside for _, outside in CLAUSE_CAST_OVERFLOWS + CLAUSE_INTEGER_OVERFLOWS],
    )


def measured(measure: str) -> pa.Table:
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    text = (
        f"SELECT id, v FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES {measure} AS v ALL ROWS PER MATCH "
        "PATTERN (A) DEFINE A AS TRUE) r ORDER BY id"
    )
    return cep.compile_sql(text).run({TABLE: table}, kind="arrow")


@pytest.mark.spark
@pytest.mark.parametrize(("measure", "outside"), CLAUSE_LITERALS_AND_CASTS)
def test_a_literal_or_cast_in_the_clause_is_sparks_outside_it(clause_answers, measure, outside) -> None:
    out = measured(measure)
    got = (out.column("v").to_pylist(), spark_name_of_arrow(out.schema.field("v").type))
    assert got == clause_answers[outside].typed()


@pytest.mark.spark
@pytest.mark.parametrize(("measure", "outside"), CLAUSE_CAST_OVERFLOWS)
def test_a_cast_in_the_clause_past_its_range_fails_as_on_spark(clause_answers, measure, outside) -> None:
    with pytest.raises(cep.CepError, match="out of that type's range"):
        measured(measure)
    with pytest.raises(Exception, match="(?i)overflow"):  # noqa: B017 - Spark's error at collect() is its own class
        clause_answers[outside].values()


# floor and ceil of an integer: the integer itself, a BIGINT (found by the differential, seed 30: DuckDB's went
# through a DOUBLE, so ceiling(b) at BIGINT's largest failed its cast back, and past 2^53 it was another number).
INTEGER_FLOORS = [
    "floor(CAST(id AS BIGINT) * 10000000000000001)",
    "ceil(9223372036854775807)",
    "ceiling(CAST(id AS BIGINT) - 9223372036854775807)",
    "floor(i)",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", INTEGER_FLOORS)
def test_floor_and_ceil_of_an_integer_are_the_integer(clause_answers, expression) -> None:
    assert python_typed(expression) == clause_answers[expression].typed()


# Integer arithmetic inside the clause (issue #28): a measure has the type and value Spark SQL gives the same
# expression outside the clause, on the python engine and on the Spark engine (``cep.sql``: the clause on Spark),
# and fails where Spark SQL's overflows. An INT + an INT is an INT (it was a BIGINT in the clause), a CAST to
# SMALLINT or TINYINT that type (it was an INT), with its own range.
def clause_statement(columns: list[tuple[str, str]]) -> str:
    """Each (name, expression) of ``columns`` as a measure, every row a match of its own."""
    names = ", ".join(name for name, _ in columns)
    return (
        f"SELECT id, {names} FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES {select_list(columns)} "
        "ALL ROWS PER MATCH PATTERN (A) DEFINE A AS TRUE) r ORDER BY id"
    )


CLAUSE_INTEGER_ARITHMETIC = [
    ("A.i + 1", "i + 1"),
    ("A.id * 2", "id * 2"),
    ("-A.id", "-id"),
    ("abs(A.id - 2)", "abs(id - 2)"),
    ("A.i % 3", "i % 3"),
    ("A.i DIV 2", "i div 2"),
    ("A.i + CAST(A.id AS BIGINT)", "i + CAST(id AS BIGINT)"),
    ("CAST(A.id AS SMALLINT)", "CAST(id AS SMALLINT)"),
    ("CAST(A.id AS SMALLINT) * CAST(100 AS SMALLINT)", "CAST(id AS SMALLINT) * CAST(100 AS SMALLINT)"),
    ("CAST(A.id AS TINYINT) + CAST(A.id AS TINYINT)", "CAST(id AS TINYINT) + CAST(id AS TINYINT)"),
    ("CAST(A.id AS TINYINT) + 1", "CAST(id AS TINYINT) + 1"),
    ("2147483647 + 0", "2147483647 + 0"),
]
CLAUSE_INTEGER_OVERFLOWS = [
    ("A.i - 1", "i - 1"),
    ("A.i * 2", "i * 2"),
    ("-A.i", "-i"),
    ("abs(A.i)", "abs(i)"),
    ("(A.i + A.i) - A.i", "(i + i) - i"),
    ("A.id + 2147483647", "id + 2147483647"),
    ("-2147483648 - A.id", "-2147483648 - id"),  # Spark's literal -2147483648 is an INT (found by the property test)
    ("CAST(A.id AS SMALLINT) * CAST(20000 AS SMALLINT)", "CAST(id AS SMALLINT) * CAST(20000 AS SMALLINT)"),
    ("CAST(A.id AS TINYINT) * CAST(100 AS TINYINT)", "CAST(id AS TINYINT) * CAST(100 AS TINYINT)"),
]


@pytest.fixture(scope="module")
def spark_engine_answers(events) -> SparkAnswers:
    """The Spark engine's answers for the same measures (the clause run by cep's matcher on Spark)."""
    return paired_answers(events, clause_statement, CLAUSE_INTEGER_ARITHMETIC, CLAUSE_INTEGER_OVERFLOWS, 0)


def paired_answers(spark, statement, cases, overflows, side: int, run=cep.sql) -> SparkAnswers:
    """Spark's answers for one side (0: the measure, 1: the expression outside the clause) of (measure, outside)
    pairs: ``cases`` together, ``overflows`` each alone (they fail)."""
    failing = [pair[side] for pair in overflows]
    return SparkAnswers(spark, statement, [pair[side] for pair in cases], expected_to_fail=failing, run=run)


@pytest.mark.spark
@pytest.mark.parametrize(("measure", "outside"), CLAUSE_INTEGER_ARITHMETIC)
def test_integer_arithmetic_in_the_clause_has_sparks_type(
    clause_answers, spark_engine_answers, measure, outside
) -> None:
    assert_typed_as_on_spark(measured, spark_engine_answers[measure], clause_answers[outside], measure)


def assert_typed_as_on_spark(run, on_spark_engine, on_spark_sql, measure: str) -> None:
    """``run(measure)`` (the python engine) and the Spark engine give Spark SQL's values and type."""
    out = run(measure)
    python = (out.column("v").to_pylist(), spark_name_of_arrow(out.schema.field("v").type))
    assert python == on_spark_sql.typed()
    assert on_spark_engine.typed() == on_spark_sql.typed()


@pytest.mark.spark
@pytest.mark.parametrize(("measure", "outside"), CLAUSE_INTEGER_OVERFLOWS)
def test_integer_arithmetic_in_the_clause_overflows_as_on_spark(
    clause_answers, spark_engine_answers, measure, outside
) -> None:
    assert_overflows_on_every_engine(measured, spark_engine_answers[measure], clause_answers[outside], measure)


def assert_overflows_on_every_engine(run, on_spark_engine, on_spark_sql, measure: str) -> None:
    """``run(measure)`` (the python engine) fails with the overflow at the failing expression, as do the Spark
    engine's answer and Spark SQL's for the same expression outside the clause."""
    with pytest.raises(cep.CepError, match="integer overflow") as caught:
        run(measure)
    text = caught.value.source or ""
    span = caught.value.span
    assert span is not None and text[span.start : span.end] in measure, str(caught.value)  # the failing expression
    with pytest.raises(Exception, match="integer overflow"):  # noqa: B017 - the task's error, raised by Spark
        on_spark_engine.values()
    with pytest.raises(Exception, match="ARITHMETIC_OVERFLOW"):  # noqa: B017 - Spark's error at collect() is its own class
        on_spark_sql.values()


# The clause's integer result types without Spark (its rules, written down: an integral operation has the wider
# operand's type, DIV a BIGINT, / a DOUBLE, SUM of integers a BIGINT, a literal an INT where it fits), for a query's
# output schema (``Query.output_columns``), the one both engines give their output columns.
INTEGER_RESULT_TYPES = [
    ("A.i + 1", "INTEGER"),
    ("A.i * A.i", "INTEGER"),
    ("-A.i", "INTEGER"),
    ("abs(A.i)", "INTEGER"),
    ("A.i % 7", "INTEGER"),
    ("A.i + A.b", "BIGINT"),
    ("A.i + 3000000000", "BIGINT"),
    ("A.i DIV 2", "BIGINT"),
    ("A.i / 2", "DOUBLE"),
    ("SUM(A.i)", "BIGINT"),
    ("CAST(A.b AS SMALLINT)", "SMALLINT"),
    ("CAST(A.b AS TINYINT) * CAST(A.b AS TINYINT)", "TINYINT"),
    ("CAST(A.b AS TINYINT) + CAST(A.b AS SMALLINT)", "SMALLINT"),
    ("CAST(A.b AS SMALLINT) + 1", "INTEGER"),
    ("-2147483648 - A.i", "INTEGER"),  # the minus is part of Spark's literal, an INT
    ("-2147483649 + A.i", "BIGINT"),
]


@pytest.mark.parametrize(("measure", "expected"), INTEGER_RESULT_TYPES)
def test_an_integer_measure_has_sparks_result_type(measure, expected) -> None:
    assert output_type(measure, {"id": "INTEGER", "i": "INTEGER", "b": "BIGINT"}) == expected


def output_type(measure: str, input_types: dict[str, str]) -> str:
    """The output column type of ``measure`` over input columns of ``input_types`` (``Query.output_columns``)."""
    query = cep.compile(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {measure} AS v ONE ROW PER MATCH "
        "PATTERN (A+) DEFINE A AS TRUE) r"
    )
    return dict(query.output_columns(input_types))["v"]


# SMALLINT and TINYINT columns inside the clause (issue #28): a measure over them has the value and the type Spark
# SQL gives the same expression over the same rows (``spark.sql`` on the plain table, the independent answer), on
# the python engine and on the Spark engine, and fails where Spark SQL's overflows. They were INTs in the clause.
SMALL_TABLE = "sqlw_small"
SMALL_ROWS = [(1, 3, 2, 7), (2, None, None, None), (3, -(2**15), -(2**7), 5)]
SMALL_ARROW = pa.schema([("id", pa.int32()), ("sm", pa.int16()), ("t", pa.int8()), ("i", pa.int32())])
SMALL_SPARK_SCHEMA = "id INT, sm SMALLINT, t TINYINT, i INT"
CLAUSE_SMALL_ARITHMETIC = [
    ("A.sm", "sm"),
    ("FIRST(A.t)", "t"),
    ("A.sm - 1", "sm - 1"),  # the literal 1 is an INT: -32768 - 1 is the INT -32769
    ("A.sm * 1", "sm * 1"),
    ("A.sm + A.i", "sm + i"),
    ("A.t * 2", "t * 2"),
    ("A.t % A.t", "t % t"),
    ("A.sm % CAST(7 AS SMALLINT)", "sm % CAST(7 AS SMALLINT)"),
    ("SUM(A.sm)", "sum(sm) OVER (PARTITION BY id)"),  # each row its own match
    ("A.sm / 2", "sm / 2"),
    ("A.sm DIV 2", "sm DIV 2"),
    ("coalesce(A.sm, A.t)", "coalesce(sm, t)"),
    ("CASE WHEN A.id = 1 THEN A.t ELSE A.sm END", "CASE WHEN id = 1 THEN t ELSE sm END"),
    ("A.t + CAST(1 AS TINYINT)", "t + CAST(1 AS TINYINT)"),
]
# Each fails on the row of -32768 and -128.
CLAUSE_SMALL_OVERFLOWS = [
    ("A.sm + A.sm", "sm + sm"),
    ("A.t + A.t", "t + t"),
    ("A.t + A.sm", "t + sm"),  # a SMALLINT: -128 + -32768 is past it
    ("-A.t", "-t"),
    ("abs(A.t)", "abs(t)"),
    ("-A.sm", "-sm"),
    ("abs(A.sm)", "abs(sm)"),
    ("A.sm * A.sm", "sm * sm"),
    ("A.t * A.t", "t * t"),
]


def small_clause_statement(columns: list[tuple[str, str]]) -> str:
    names = ", ".join(name for name, _ in columns)
    return (
        f"SELECT id, {names} FROM {SMALL_TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES {select_list(columns)} "
        "ALL ROWS PER MATCH PATTERN (A) DEFINE A AS TRUE) r ORDER BY id"
    )


@pytest.fixture(scope="module")
def small_events(spark):
    spark.createDataFrame(SMALL_ROWS, SMALL_SPARK_SCHEMA).createOrReplaceTempView(SMALL_TABLE)
    return spark


@pytest.fixture(scope="module")
def small_sql_answers(small_events) -> SparkAnswers:
    """Spark SQL's answers over the table itself (no clause)."""

    def statement(columns: list[tuple[str, str]]) -> str:
        return f"SELECT {select_list(columns)} FROM {SMALL_TABLE} ORDER BY id"

    return paired_answers(small_events, statement, CLAUSE_SMALL_ARITHMETIC, CLAUSE_SMALL_OVERFLOWS, 1, spark_sql)


@pytest.fixture(scope="module")
def small_engine_answers(small_events) -> SparkAnswers:
    """The Spark engine's answers for the measures (cep's matcher on Spark)."""
    return paired_answers(small_events, small_clause_statement, CLAUSE_SMALL_ARITHMETIC, CLAUSE_SMALL_OVERFLOWS, 0)


def small_measured(measure: str) -> pa.Table:
    table = pa.Table.from_pylist([dict(zip(SMALL_ARROW.names, row)) for row in SMALL_ROWS], schema=SMALL_ARROW)
    return cep.compile_sql(small_clause_statement([("v", measure)])).run({SMALL_TABLE: table}, kind="arrow")


@pytest.mark.spark
@pytest.mark.parametrize(("measure", "outside"), CLAUSE_SMALL_ARITHMETIC)
def test_smallint_and_tinyint_arithmetic_in_the_clause_has_sparks_type(
    small_sql_answers, small_engine_answers, measure, outside
) -> None:
    assert_typed_as_on_spark(small_measured, small_engine_answers[measure], small_sql_answers[outside], measure)


@pytest.mark.spark
@pytest.mark.parametrize(("measure", "outside"), CLAUSE_SMALL_OVERFLOWS)
def test_smallint_and_tinyint_arithmetic_in_the_clause_overflows_as_on_spark(
    small_sql_answers, small_engine_answers, measure, outside
) -> None:
    assert_overflows_on_every_engine(small_measured, small_engine_answers[measure], small_sql_answers[outside], measure)


# The same rules for a query's output schema without Spark (``Query.output_columns``), over SMALLINT and TINYINT
# input columns: written down from the Spark runs above.
SMALL_RESULT_TYPES = [
    ("A.sm", "SMALLINT"),
    ("A.sm + A.sm", "SMALLINT"),
    ("A.t + A.t", "TINYINT"),
    ("A.t + A.sm", "SMALLINT"),
    ("A.sm + A.i", "INTEGER"),
    ("A.sm * 1", "INTEGER"),
    ("abs(A.t)", "TINYINT"),
    ("-A.t", "TINYINT"),
    ("A.t % A.t", "TINYINT"),
    ("SUM(A.sm)", "BIGINT"),
    ("A.sm / 2", "DOUBLE"),
    ("A.sm DIV 2", "BIGINT"),
    ("coalesce(A.sm, A.t)", "SMALLINT"),
    ("MAX(A.t)", "TINYINT"),
]


@pytest.mark.parametrize(("measure", "expected"), SMALL_RESULT_TYPES)
def test_a_smallint_or_tinyint_measure_has_sparks_result_type(measure, expected) -> None:
    assert output_type(measure, {"id": "INTEGER", "sm": "SMALLINT", "t": "TINYINT", "i": "INTEGER"}) == expected
