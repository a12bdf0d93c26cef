"""Functions of DECIMALs in the SQL around MATCH_RECOGNIZE: the python engine gives Spark's result type and value
(cep/duckdb_decimals.py, ``DECIMAL_RESULTS``), or refuses at the function.

Every expected value and type is Spark's own: each case runs on the ``spark`` fixture and on the python engine
over the same rows, and the two must agree on the values and on the DECIMAL's precision and scale exactly
(``decimal(22,2)`` is not ``decimal(21,2)``). The types, by Spark's rules, written down for the cases below:
an INT meets a DECIMAL as DECIMAL(10,0), a BIGINT (or an integer literal past INT's range) as DECIMAL(20,0);
the common type of DECIMAL(p1,s1) and DECIMAL(p2,s2) has max(s1,s2) decimals and max(p1-s1, p2-s2) integer
digits, and past 38 digits Spark 4 keeps the integer digits and gives up decimals: DECIMAL(38,30) beside a
BIGINT is DECIMAL(38,18) (20 integer digits), beside an INT DECIMAL(38,28). DuckDB's own common type of a
DECIMAL(5,2) and a BIGINT is DECIMAL(21,2) (a BIGINT as 19 digits), and of DECIMAL(38,30) and DECIMAL(10,0)
DECIMAL(38,30), which 9999999999 does not fit.
"""

from __future__ import annotations

from decimal import Decimal

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

TABLE = "sqldf_events"
# d38 holds 38 significant digits: Spark negates it with Scala's BigDecimal, which keeps 34 of them.
BIG = Decimal("1234567890123456789012345678.0123456789")
ROWS = [
    {"id": 1, "d5": Decimal("123.45"), "d10": Decimal("9999999999"), "d38": BIG, "i": 3, "b": 7, "x": 1.5},
    {"id": 2, "d5": Decimal("-0.05"), "d10": Decimal("-3"), "d38": Decimal("-1.5"), "i": -2, "b": -(2**62), "x": -2.5},
    {"id": 3, "d5": Decimal("999.99"), "d10": Decimal("0"), "d38": Decimal("-1E-10"), "i": 0, "b": 0, "x": 0.0},
    {"id": 4, "d5": None, "d10": None, "d38": None, "i": None, "b": None, "x": None},
]
ARROW = pa.schema(
    [
        ("id", pa.int32()),
        ("d5", pa.decimal128(5, 2)),
        ("d10", pa.decimal128(10, 0)),
        ("d38", pa.decimal128(38, 10)),
        ("i", pa.int32()),
        ("b", pa.int64()),
        ("x", pa.float64()),
    ]
)
SPARK_SCHEMA = "id INT, d5 DECIMAL(5,2), d10 DECIMAL(10,0), d38 DECIMAL(38,10), i INT, b BIGINT, x DOUBLE"
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id, A.d5 AS d5, A.d10 AS d10, "
    "A.d38 AS d38, A.i AS i, A.b AS b, A.x AS x ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE) r)\n"
)


def select_statement(columns: list[tuple[str, str]], aggregate: bool = False) -> str:
    return HEAD + f"SELECT {select_list(columns)} FROM m" + ("" if aggregate else " ORDER BY id")


def aggregate_statement(columns: list[tuple[str, str]]) -> str:
    return select_statement(columns, aggregate=True)


def python_typed(expression: str, aggregate: bool = False) -> tuple[list, str]:
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    text = select_statement([("v", expression)], aggregate)
    out = cep.compile_sql(text).run({TABLE: table}, kind="arrow")
    return out.column("v").to_pylist(), spark_name(out.schema.field("v").type)


def spark_name(kind: pa.DataType) -> str:
    """Spark's ``simpleString`` of the Arrow type the python engine gave."""
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if pa.types.is_list(kind):
        return f"array<{spark_name(kind.value_type)}>"
    return {"float64": "double", "int64": "bigint", "int32": "int"}.get(str(kind), str(kind))


@pytest.fixture(scope="module")
def events(spark):
    return rows_as_view(spark, ROWS, SPARK_SCHEMA, TABLE)


@pytest.fixture(scope="module")
def answers(events) -> SparkAnswers:
    return SparkAnswers(events, select_statement, [*FUNCTIONS, *REFUSED, *SPARK_ROUNDS])


@pytest.fixture(scope="module")
def aggregate_answers(events) -> SparkAnswers:
    return SparkAnswers(events, aggregate_statement, AGGREGATES)


# Each function of DECIMALs, with Spark's type as its rules give it (checked against Spark by the test).
FUNCTIONS = [
    "abs(d5)",  # decimal(5,2): the argument's type
    "-d5",  # decimal(5,2)
    "-CAST(d5 AS DECIMAL(34,2))",  # decimal(34,2): 34 digits, negated exactly
    "coalesce(d5, d10)",  # decimal(12,2)
    "nvl(d5, b)",  # decimal(22,2): the BIGINT as DECIMAL(20,0) (DuckDB's: decimal(21,2))
    "ifnull(d5, i)",  # decimal(12,2)
    "coalesce(NULL, d5, b)",  # decimal(22,2): a NULL takes any type
    "coalesce(CAST(d5 AS DECIMAL(38,30)), b)",  # decimal(38,18): 20 integer digits kept, 12 decimals given up
    "coalesce(CAST(d5 AS DECIMAL(38,30)), 1)",  # decimal(38,28): an INT literal as DECIMAL(10,0)
    "nvl2(d5, b, d5)",  # decimal(22,2)
    "nvl2(x, d5, 1)",  # decimal(12,2)
    "if(i > 0, d5, b)",  # decimal(22,2) (DuckDB's: decimal(21,2))
    "if(i > 0, d5, 10000000000)",  # decimal(22,2): a literal past INT's range is a BIGINT
    "if(i > 0, d5, 2.5)",  # decimal(5,2): 2.5 is a DECIMAL(2,1)
    "if(i > 0, CAST(d5 AS DECIMAL(38,30)), d10)",  # decimal(38,28)
    "CASE WHEN i > 0 THEN d5 ELSE b END",  # decimal(22,2)
    "CASE WHEN i > 0 THEN d5 WHEN i < 0 THEN 2.555 ELSE b END",  # decimal(23,3)
    "CASE WHEN i > 0 THEN CAST(d5 AS DECIMAL(38,30)) ELSE b END",  # decimal(38,18)
    "CASE i WHEN 3 THEN d5 ELSE d10 END",  # decimal(12,2)
    "greatest(d5, d10)",  # decimal(12,2)
    "least(d5, d10, i)",  # decimal(12,2)
    "greatest(CAST(d5 AS DECIMAL(38,30)), d10)",  # decimal(38,28) (DuckDB cast 9999999999 to its (38,30): failed)
    "array(d5, b)",  # array<decimal(22,2)>
    "array(d5, NULL, b)",  # array<decimal(22,2)>
    "array(CAST(d5 AS DECIMAL(38,30)), b)",  # array<decimal(38,18)>
    "element_at(array(d5, b), 1)",  # decimal(22,2): the array's element
    "array_max(array(d5, b))",  # decimal(22,2)
    "array_min(array(d5, 1))",  # decimal(12,2)
    "max(d5) OVER () * 2",  # decimal(7,2): max keeps decimal(5,2), times DECIMAL(1,0) (refused before: untyped)
    "min(d38) OVER ()",  # decimal(38,10)
    "lag(d5) OVER (ORDER BY id) + 1",  # decimal(6,2)
    "CASE WHEN i > 0 THEN d5 ELSE b END * 2",  # decimal(24,2): DECIMAL(22,2) times DECIMAL(1,0)
    "coalesce(d5, b) + 1",  # decimal(23,2)
    "floor(d5)",  # decimal(4,0): p - s + 1 integer digits
    "ceil(CAST(d5 AS DECIMAL(38,2)))",  # decimal(37,0)
    "round(CAST(d5 AS DECIMAL(38,2)), 1)",  # decimal(38,1): 37 integer digits and 1 decimal
    "round(CAST(d10 AS DECIMAL(38,0)), -1)",  # decimal(38,0): 39 integer digits capped at 38
    "sum(CAST(d5 AS DECIMAL(30,2))) OVER ()",  # decimal(38,2): p + 10 capped at 38
    "d38 % d5",  # decimal(13,10)
]
AGGREGATES = [
    "max(d5)",  # decimal(5,2)
    "min(CAST(d5 AS DECIMAL(38,30)))",  # decimal(38,30)
    "max(coalesce(d5, b))",  # decimal(22,2)
    "sum(if(i > 0, d5, b))",  # decimal(32,2): SUM's p + 10 of if's decimal(22,2)
    "min(d5) * max(d10)",  # decimal(16,2)
]


@pytest.mark.spark
@pytest.mark.parametrize("expression", FUNCTIONS)
def test_decimal_functions_are_sparks_value_and_type(answers, expression) -> None:
    assert python_typed(expression) == answers[expression].typed()


@pytest.mark.spark
@pytest.mark.parametrize("expression", AGGREGATES)
def test_aggregates_of_decimal_functions_are_sparks_value_and_type(aggregate_answers, expression) -> None:
    assert python_typed(expression, aggregate=True) == aggregate_answers[expression].typed()


# Refused at the function, with what Spark does: -x and abs of a DECIMAL of more than 34 digits (Spark rounds the
# value to 34 significant digits), floor and ceil with digits (Spark's is a DECIMAL, DuckDB's a DOUBLE), and an
# argument beside a DECIMAL whose type the python engine cannot tell (array_max's element: an INT or a BIGINT
# makes another common type).
REFUSED = {
    "-d38": "of more than 34 digits",
    "abs(d38)": "of more than 34 digits",
    "abs(CAST(d5 AS DECIMAL(35,2)))": "of more than 34 digits",
    "floor(d5, 1)": "floor(x, digits)",
    "ceil(x, 1)": "ceil(x, digits)",
    "coalesce(d5, array_max(array(i, 2)))": "cannot tell the type of an argument of COALESCE",
}


@pytest.mark.parametrize("expression", sorted(REFUSED))
def test_what_the_python_engine_cannot_compute_as_spark_does_is_refused_at_the_function(expression) -> None:
    assert_refused_at_the_expression(python_typed, expression, REFUSED[expression])


@pytest.mark.spark
@pytest.mark.parametrize("expression", sorted(REFUSED))
def test_spark_runs_what_the_python_engine_refuses(answers, expression) -> None:
    assert len(answers[expression].values()) == len(ROWS)


# Why -x past 34 digits is refused: Spark's negation rounds the value to 34 significant digits, half even
# (1234567890123456789012345678.0123456789 has 38: ...0123456|789 becomes ...012346), where the exact
# negation keeps them all.
SPARK_ROUNDS = {"-d38": Decimal("-1234567890123456789012345678.0123460000")}


@pytest.mark.spark
def test_spark_rounds_the_negation_of_a_decimal_past_34_digits(answers) -> None:
    values, kind = answers["-d38"].typed()
    assert kind == "decimal(38,10)" and values[0] == SPARK_ROUNDS["-d38"] != -BIG
    assert values[1] == Decimal("1.5")  # a value of 34 digits or fewer is negated exactly


def test_cep_check_refuses_floor_with_digits() -> None:
    with pytest.raises(cep.CepError) as caught:
        cep.check_sql(select_statement([("v", "floor(CAST(1.25 AS DECIMAL(5,2)), 1)")]))
    assert caught.value.code == "E0252" and "floor(x, digits)" in str(caught.value)


# Random DECIMAL types (narrow and at the 38-digit edge) and values, beside each other and beside integers, in
# each function that brings its arguments to one type.
PRECISIONS = st.integers(1, 18) | st.integers(19, 38)
SIZES = PRECISIONS.flatmap(lambda precision: st.tuples(st.just(precision), st.integers(0, precision)))
SHAPES = (
    "coalesce({0}, {1})",
    "greatest({0}, {1})",
    "least({1}, {0})",
    "if(id > 2, {0}, {1})",
    "nvl2({1}, {0}, {1})",
    "CASE WHEN id = 1 THEN {0} WHEN id = 2 THEN {1} END",
    "array({0}, {1})",
)


@st.composite
def decimal_argument(draw) -> str:
    precision, scale = draw(SIZES)
    digits = draw(st.integers(0, 10**precision - 1))
    value = Decimal(digits).scaleb(-scale)
    return f"CAST('{draw(st.sampled_from(('', '-')))}{value}' AS DECIMAL({precision},{scale}))"


ARGUMENTS = decimal_argument() | st.sampled_from(("i", "b", "d5", "7", "10000000000", "2.5"))


@st.composite
def common_type_calls(draw) -> str:
    first = draw(decimal_argument())
    return draw(st.sampled_from(SHAPES)).format(*draw(st.permutations([first, draw(ARGUMENTS)])))


@pytest.mark.spark
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(common_type_calls(), min_size=12, max_size=12))
def test_random_decimal_common_types_are_sparks(events, calls) -> None:
    """The calls side by side in one Spark query (each alone where Spark fails): the python engine gives Spark's
    value and type, or refuses; a value that does not fit the common type fails on both."""
    assert_sparks_or_refused(events, select_statement, python_typed, calls)
