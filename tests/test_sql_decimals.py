"""DECIMAL arithmetic in the SQL around MATCH_RECOGNIZE: the python engine gives Spark's type and value, or
refuses at the operator (cep/duckdb_decimals.py).

Every expected value and type is Spark's own: each case runs on the ``spark`` fixture and on the python
engine over the same rows, and the two must agree on the value and on the DECIMAL's precision and scale.
The rows hold a DECIMAL(10,2) at its largest, quotients that end on a half (``0.01 / 32``, rounded half up),
and NULL. An integer operand is a DECIMAL of its Spark type's width on both engines (an INT's DECIMAL(10,0),
a BIGINT's DECIMAL(20,0)), Spark's INT functions (``length``) included.
"""

from __future__ import annotations

from decimal import Decimal
from functools import partial

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from tests.spark_answers import (
    SparkAnswers,
    assert_refused_at_the_expression,
    assert_sparks_or_refused,
    rows_as_view,
    select_list,
)

TABLE = "sqlc_events"
ROWS = [
    {"id": 1, "dec": Decimal("99999999.99"), "b": 3, "x": 1.5},
    {"id": 2, "dec": Decimal("0.01"), "b": -7, "x": -2.5},
    {"id": 3, "dec": Decimal("-0.01"), "b": 32, "x": 0.0},
    {"id": 4, "dec": Decimal("1.67"), "b": 9223372036854775807, "x": None},
    {"id": 5, "dec": None, "b": None, "x": 2.0},
    {"id": 6, "dec": Decimal("-99999999.99"), "b": 1, "x": 0.5},
]
ARROW = pa.schema([("id", pa.int32()), ("dec", pa.decimal128(10, 2)), ("b", pa.int64()), ("x", pa.float64())])
SPARK_SCHEMA = "id INT, dec DECIMAL(10,2), b BIGINT, x DOUBLE"
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES A.dec AS dec, A.b AS b, A.x AS x "
    "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE) r)\n"
)


def select_statement(columns: list[tuple[str, str]], aggregate: bool = False) -> str:
    """The statement that selects each (name, expression) of ``columns``: over the rows in order, or one row."""
    return HEAD + f"SELECT {select_list(columns)} FROM m" + ("" if aggregate else " ORDER BY dec NULLS FIRST, b")


def aggregate_statement(columns: list[tuple[str, str]]) -> str:
    return select_statement(columns, aggregate=True)


def statement(expression: str, aggregate: bool = False) -> str:
    return select_statement([("v", expression)], aggregate)


def python_typed(expression: str, aggregate: bool = False) -> tuple[list, str]:
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    out = cep.compile_sql(statement(expression, aggregate)).run({TABLE: table}, kind="arrow")
    kind = out.schema.field("v").type
    name = f"decimal({kind.precision},{kind.scale})" if pa.types.is_decimal(kind) else str(kind)
    return out.column("v").to_pylist(), {"float64": "double", "int64": "bigint"}.get(name, name)


@pytest.fixture(scope="module")
def events(spark):
    return rows_as_view(spark, ROWS, SPARK_SCHEMA, TABLE)


@pytest.fixture(scope="module")
def answers(events) -> SparkAnswers:
    """Spark's value and type for every row-wise case of this file, from a few queries (tests/spark_answers.py)."""
    return SparkAnswers(events, select_statement, [*ARITHMETIC, *REFUSED])


@pytest.fixture(scope="module")
def aggregate_answers(events) -> SparkAnswers:
    return SparkAnswers(events, aggregate_statement, AGGREGATES)


# + - * / % and minus of DECIMALs, with integers (literals: their digits; casts: INT and BIGINT) and DOUBLEs;
# the DECIMALs of floor, round, abs and coalesce as operands.
ARITHMETIC = [
    "dec * dec",  # Spark's DECIMAL(21,4); DuckDB's DECIMAL(18,4) overflowed at 99999999.99 squared
    "dec + dec",
    "dec - CAST(b AS BIGINT)",
    "dec * 2",
    "dec * -2",
    "dec % 0.4",
    "-dec",
    "dec - 0.05",
    "dec * 2.5",
    "dec / dec",
    "dec / 3",
    "dec / 32",  # 0.01 / 32 = 0.0003125: rounded half up to 0.000313 (half even would give 0.000312)
    "2 / dec",
    "1.5 / 2",
    "dec / CAST(b % 1000 AS INT)",
    "CAST(b % 1000 AS INT) / dec",
    "dec % CAST(b % 1000 AS INT)",
    "dec / b",  # a BIGINT measure: DECIMAL(20,0), so Spark's quotient is a DECIMAL(31,23)
    "dec * length(CAST(b AS STRING))",  # Spark's length() is an INT: DECIMAL(10,0) (DuckDB's a BIGINT)
    "dec / (year(DATE '2021-03-28') - 2000)",  # year() an INT, its arithmetic too: the quotient's scale is 13
    "CAST('2.26' AS DECIMAL(7,2)) % CAST('-2.050E-17' AS DECIMAL(28,20))",  # DuckDB's % of two scales: a DOUBLE
    "dec * x",
    "floor(dec) * 2",
    "ceil(dec) / 7",
    "round(dec, 1) - dec",
    "round(dec, -2) + 1",
    "abs(dec) * dec",
    "coalesce(dec, 0) + 1",  # the 0 an INT, DECIMAL(10,0), beside the DECIMAL(10,2): DECIMAL(12,2)
    "greatest(dec, 2.5, CAST(b AS BIGINT)) * 2",
    "(dec * dec) * dec",
    "(dec / 3) * 2",
    "sum(dec) OVER (ORDER BY b)",
    # Text with an exponent read into a DECIMAL without integer digits (DuckDB's cast alone gives NULL)
    "CAST('-7E-18' AS DECIMAL(18,18)) + dec",
    "CAST('6.23E-13' AS DECIMAL(15,15))",
    # Spark rounds a quotient once, to its type's 37 decimals: ...2842706|49... stays 706 (rounding to 39
    # decimals first would make it 707)
    "CAST('0.6673235789184073620' AS DECIMAL(20,19)) / CAST('20037023499592105' AS DECIMAL(17,0))",
    # if() of integer literals is an INT, DECIMAL(10,0) beside a DECIMAL (the translation read it as a BIGINT,
    # DECIMAL(20,0): found by the differential, seed 32); a decimal branch widens it as coalesce does
    "dec * if(b > 0, 1, -2)",
    "greatest(-1, dec) * if(x > 0, 1, -2)",
    "dec + if(b > 0, 2.5, 1)",
]
AGGREGATES = [
    "sum(dec)",
    "avg(dec)",
    "avg(DISTINCT dec)",
    "sum(dec) / 4",
    "avg(dec * 3)",
    "avg(dec) + 1",
    "sum(dec) FILTER (WHERE b > 0)",
    "sum(CAST(b % 1000 AS INT)) FILTER (WHERE b > 0)",  # DuckDB's parser refused the BIGINT cast inside FILTER
    "avg(DISTINCT dec) + sum(DISTINCT dec)",
    "sum(dec) / CAST(count(*) AS INT)",
    "sum(greatest(-1, dec) * if(x > 0, 1, -2))",
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", ARITHMETIC)
def test_decimal_arithmetic_is_sparks_value_and_type(answers, expression) -> None:
    assert python_typed(expression) == answers[expression].typed()


@pytest.mark.spark
@pytest.mark.parametrize("expression", AGGREGATES)
def test_decimal_aggregates_are_sparks_value_and_type(aggregate_answers, expression) -> None:
    assert python_typed(expression, aggregate=True) == aggregate_answers[expression].typed()


# Where Spark rounds a result past 38 digits, where a quotient would pass 38 digits, and AVG over a window:
# refused at the operator, with what Spark does.
REFUSED = {
    "(dec * dec) * (dec * dec)": "past 38 digits Spark rounds the result to DECIMAL(38,6)",
    "CAST(dec AS DECIMAL(38,10)) + 1": "DECIMAL(38,9)",
    "CAST(dec AS DECIMAL(30,2)) / dec": "the quotient passes 38 digits",
    "sum(dec) OVER () / count(*) OVER ()": "the quotient passes 38 digits",
    "avg(dec) OVER ()": "AVG of a DECIMAL",
}


@pytest.mark.parametrize("expression", sorted(REFUSED))
def test_what_the_python_engine_cannot_compute_as_spark_does_is_refused_at_the_operator(expression) -> None:
    assert_refused_at_the_expression(python_typed, expression, REFUSED[expression])


@pytest.mark.spark
@pytest.mark.parametrize("expression", sorted(REFUSED))
def test_spark_runs_what_the_python_engine_refuses(answers, expression) -> None:
    assert len(answers[expression].values()) == len(ROWS)


def test_cep_check_refuses_where_the_statement_fixes_the_types() -> None:
    with pytest.raises(cep.CepError) as caught:
        cep.check_sql(statement("CAST(dec AS DECIMAL(38,10)) * CAST(x AS DECIMAL(10,2))"))
    assert caught.value.code == "E0252" and "DECIMAL(38,6)" in str(caught.value)


def test_a_decimal_overflow_past_38_digits_is_an_error() -> None:
    """DECIMAL(38,0) + DECIMAL(38,0): Spark's type is DECIMAL(38,0) (no decimals to give up), and a sum
    past 38 digits is its overflow error (ANSI mode); the python engine fails, never a wrong value."""
    big = "CAST('99999999999999999999999999999999999999' AS DECIMAL(38,0))"
    with pytest.raises(cep.CepError):
        python_typed(f"{big} + {big}")


OPERATORS = ("+", "-", "*", "/", "%")
# Narrow types mostly (the results Spark keeps exact), wide ones too (its 38-digit limit, quotients of 30 or
# more decimals, which Spark rounds twice).
PRECISIONS = st.integers(1, 18) | st.integers(19, 38)
SIZES = PRECISIONS.flatmap(lambda precision: st.tuples(st.just(precision), st.integers(0, precision)))


@st.composite
def decimal_operations(draw) -> str:
    """``CAST(v1 AS DECIMAL(p1,s1)) op CAST(v2 AS DECIMAL(p2,s2))`` of random values that fit their types."""
    sides = []
    for _ in range(2):
        precision, scale = draw(SIZES)
        digits = draw(st.integers(0, 10**precision - 1))
        sign = draw(st.sampled_from(("", "-")))
        value = Decimal(digits).scaleb(-scale)
        sides.append(f"CAST('{sign}{value}' AS DECIMAL({precision},{scale}))")
    return f"{sides[0]} {draw(st.sampled_from(OPERATORS))} {sides[1]}"


@pytest.mark.spark
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=st.lists(decimal_operations(), min_size=12, max_size=12))
def test_random_decimal_arithmetic_is_sparks(events, operations) -> None:
    """Random DECIMAL types and values, the operations side by side in one Spark query (each alone where Spark
    fails): the python engine gives Spark's value and type, or refuses; a division by zero fails on both."""
    one_row = partial(python_typed, aggregate=True)
    assert_sparks_or_refused(events, aggregate_statement, one_row, operations)


# An operand beside a DECIMAL whose type the translation cannot tell (array_max's element): refused at the
# operator (found by the differential, seed 28: DuckDB made dec * array_max(array(id, i)) of INTs its DECIMAL(18,2)
# and the SUM of it DECIMAL(38,3), where Spark's are DECIMAL(21,2) and DECIMAL(31,2)); Spark gives a value.
UNTYPED_BESIDE_A_DECIMAL = ["dec * array_max(array(size(array(b)), 2))", "(dec + 1.005) * array_min(array(b, 5))"]


@pytest.mark.spark
@pytest.mark.parametrize("expression", UNTYPED_BESIDE_A_DECIMAL)
def test_an_operand_of_untold_type_beside_a_decimal_is_refused(answers, expression) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_typed(expression)
    error = caught.value
    assert error.code == "E0252" and "cannot tell the type of an operand" in str(error), str(error)
    # no cast offered: a cast of a value of untold type is refused as well (it was offered, a dead end)
    assert "CAST(" not in error.message and "--engine spark" in str(error), str(error)
    assert error.span.line == 2 and error.span.column > len("SELECT "), str(error)
    assert len(answers[expression].values()) == len(ROWS)  # Spark gives a value: a refusal, not an error
