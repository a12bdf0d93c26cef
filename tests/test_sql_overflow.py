"""Integer overflow inside a comparison with a constant (issue #28): Spark, in ANSI mode, computes ``c + k`` and
fails when it overflows; DuckDB's optimizer would move the constant across (``c + 1 > 0`` as ``c > -1``) and
answer instead (cep/duckdb_optimizer.py turns that rewrite off for statements with arithmetic).

Expected answers are Spark's own: the property test runs every shape on the ``spark`` fixture and on the
python engine; the regression tests below it write down Spark's answer from such a run.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.duckdb_optimizer import computes_arithmetic, disabled_optimizers

TABLE = "ovf_numbers"
# Spark's integer types, their Arrow type and their range.
WIDTHS = {
    "TINYINT": (pa.int8(), 8),
    "SMALLINT": (pa.int16(), 16),
    "INT": (pa.int32(), 32),
    "BIGINT": (pa.int64(), 64),
}
COMPARISONS = ["=", "<>", "!=", "<", "<=", ">", ">=", "<=>"]


def edges(width: str) -> list[int]:
    bits = WIDTHS[width][1]
    top = 2 ** (bits - 1) - 1
    return [top, top - 1, -top - 1, -top, 0, 1, -1, 2, 3]


def clause_over(table: str) -> str:
    return (
        f"SELECT * FROM {table} MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS TRUE) r ORDER BY id"
    )


def statement(condition: str, placement: str) -> str:
    """``condition`` where the statement computes it: in a WHERE, as a selected value filtered on, or on a
    subquery's column that stands for the arithmetic (DuckDB inlines it, so the rewrite could reach it)."""
    if placement == "where":
        source = f"SELECT id FROM {TABLE} WHERE {condition}"
    elif placement == "select":
        source = f"SELECT id FROM (SELECT id, {condition} AS kept FROM {TABLE}) s WHERE kept"
    else:
        source = f"SELECT id FROM (SELECT id, c AS c FROM {TABLE}) s WHERE {condition}"
    return f"WITH f AS ({source})\n" + clause_over("f")


def literal(value: int, width: str, typed: bool) -> str:
    """``value`` written as a constant of ``width`` (typed) or as a plain number (Spark's INT, or BIGINT past
    INT's range), which widens the arithmetic as Spark's rules say."""
    return f"CAST({value} AS {width})" if typed else str(value)


@st.composite
def shapes(draw):
    width = draw(st.sampled_from(list(WIDTHS)))
    values = draw(st.lists(st.sampled_from([*edges(width), None]), min_size=1, max_size=3))
    typed = draw(st.booleans())
    inner = literal(draw(st.sampled_from(edges(width))), width, typed)
    operation = draw(st.sampled_from(["c + k", "k + c", "c - k", "k - c", "c * k", "k * c", "-c", "(c + k) * k"]))
    arithmetic = operation.replace("k", inner)
    outer = literal(draw(st.sampled_from([0, 1, -1, 10, *edges(width)[:3]])), width, draw(st.booleans()))
    comparison = draw(st.sampled_from(COMPARISONS))
    condition = f"{arithmetic} {comparison} {outer}" if draw(st.booleans()) else f"{outer} {comparison} {arithmetic}"
    placement = draw(st.sampled_from(["where", "select", "subquery"]))
    return width, values, statement(condition, placement)


def arrow_table(width: str, values: list) -> pa.Table:
    kind = WIDTHS[width][0]
    return pa.table({"id": pa.array(range(len(values)), pa.int32()), "c": pa.array(values, kind)})


def python_answer(width: str, values: list, text: str):
    try:
        return [row["id"] for row in cep.compile_sql(text).run({TABLE: arrow_table(width, values)}, kind="rows")]
    except cep.CepError as error:
        return error


# The rows the view TABLE holds, per session: a run of statements over the same rows makes it once.
_VIEW_HOLDS: dict[int, tuple] = {}


def spark_answer(spark, width: str, values: list, text: str):
    rows = (width, tuple(values))
    if _VIEW_HOLDS.get(id(spark._jsparkSession)) != rows:
        spark.createDataFrame(list(enumerate(values)), f"id INT, c {width}").createOrReplaceTempView(TABLE)
        _VIEW_HOLDS[id(spark._jsparkSession)] = rows
    try:
        return [row["id"] for row in cep.sql(spark, text).collect()]
    except Exception as error:  # noqa: BLE001 - Spark's errors at collect() are its own classes
        return error


@pytest.mark.spark
@settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(shape=shapes())
def test_an_overflow_inside_a_comparison_fails_as_on_spark(spark, shape) -> None:
    width, values, text = shape
    expected = spark_answer(spark, width, values, text)
    got = python_answer(width, values, text)
    if isinstance(expected, Exception):
        assert "ARITHMETIC_OVERFLOW" in str(expected) or "overflow" in str(expected).lower(), str(expected)
        assert isinstance(got, cep.CepError), f"Spark fails ({str(expected).splitlines()[0]}), python gives {got}"
        assert "overflow" in got.message, str(got)
    else:
        assert not isinstance(got, cep.CepError), f"Spark gives {expected}, python fails:\n{got}"
        assert got == expected


# Spark's answers from runs of the test above (Spark 4, ANSI mode): each fails with [ARITHMETIC_OVERFLOW].
SPARKS_OVERFLOWS = [
    ("BIGINT", [9223372036854775807], "c + 1 > 0", "where"),
    ("BIGINT", [9223372036854775807], "0 < 1 + c", "select"),
    ("BIGINT", [-9223372036854775808], "-c > 0", "where"),
    ("BIGINT", [4611686018427387904], "c * 2 = 10", "subquery"),
    ("BIGINT", [9223372036854775807], "(c + 1) * 2 >= 0", "where"),
    ("TINYINT", [127], "c + CAST(1 AS TINYINT) <> 0", "where"),
    ("SMALLINT", [-32768], "CAST(0 AS SMALLINT) <= CAST(1 AS SMALLINT) - c", "where"),
]


@pytest.mark.parametrize(("width", "values", "condition", "placement"), SPARKS_OVERFLOWS)
def test_the_python_engine_fails_where_spark_overflows(width, values, condition, placement) -> None:
    text = statement(condition, placement)
    got = python_answer(width, values, text)
    assert isinstance(got, cep.CepError), f"python gives {got}, Spark fails with ARITHMETIC_OVERFLOW"
    assert got.message.startswith("integer overflow"), str(got)
    assert "Error:" not in str(got)  # none of DuckDB's own text
    assert text.index(condition) <= got.span.start < text.index(condition) + len(condition), str(got)


def test_statements_without_arithmetic_keep_every_optimizer() -> None:
    """The rewriter stays on where it cannot hide an overflow: its other rules (a LIKE prefix, folded
    constants) are DuckDB's speed."""
    assert disabled_optimizers("SELECT id FROM t WHERE s LIKE 'k1%' AND c > -1 AND d = DATE '2020-01-01'") == ""
    assert disabled_optimizers("SELECT count(*), t.* FROM t") == ""
    assert disabled_optimizers("SELECT id FROM t WHERE c + 1 > 0") == "expression_rewriter"
    assert computes_arithmetic("SELECT -c AS v FROM t")
    assert computes_arithmetic("SELECT id FROM t WHERE 2 * c = 4")


@pytest.mark.spark
def test_spark_overflows_on_each_written_down_case(spark) -> None:
    """The written-down cases above, run on Spark: each fails with its ARITHMETIC_OVERFLOW."""
    for width, values, condition, placement in SPARKS_OVERFLOWS:
        answer = spark_answer(spark, width, values, statement(condition, placement))
        assert isinstance(answer, Exception) and "ARITHMETIC_OVERFLOW" in str(answer), (condition, answer)


# An overflow under IS [NOT] NULL, COALESCE, CASE WHEN, IN and <=> (issue #28): Spark computes the arithmetic and
# fails ([ARITHMETIC_OVERFLOW], from a run of the test below); DuckDB's optimizer could fold a test for NULL of an
# expression it deems never NULL, so the python engine must fail as well, never answer.
NULL_TESTS = [
    "c + 1 IS NOT NULL",
    "c + 1 IS NULL",
    "isnull(c + 1)",
    "isnotnull(c * 2)",
    "nvl(c + 1, 0) = 0",
    "CASE WHEN c + 1 IS NULL THEN false ELSE true END",
    "c + 1 IN (1, 2)",
    "NOT (c + 1 <=> NULL)",
]


@pytest.mark.parametrize("condition", NULL_TESTS)
@pytest.mark.parametrize("placement", ["where", "select"])
def test_an_overflow_tested_for_null_fails_as_on_spark(condition, placement) -> None:
    text = statement(condition, placement)
    got = python_answer("BIGINT", [9223372036854775807, 1], text)
    assert isinstance(got, cep.CepError) and got.message.startswith("integer overflow"), got
    assert text.index(condition) <= got.span.start < text.index(condition) + len(condition), str(got)


@pytest.mark.spark
def test_spark_overflows_under_each_test_for_null(spark) -> None:
    for condition in NULL_TESTS:
        for placement in ("where", "select"):
            answer = spark_answer(spark, "BIGINT", [9223372036854775807, 1], statement(condition, placement))
            assert isinstance(answer, Exception) and "ARITHMETIC_OVERFLOW" in str(answer), (condition, answer)


def test_a_test_for_null_spark_folds_away_answers_on_both() -> None:
    """``coalesce(c + 1, 0) IS NOT NULL`` is never NULL: Spark's optimizer folds it to TRUE without computing
    ``c + 1`` and answers [0, 1] (from a run of the Spark test below); so does the python engine."""
    text = statement("coalesce(c + 1, 0) IS NOT NULL", "where")
    assert python_answer("BIGINT", [9223372036854775807, 1], text) == [0, 1]


@pytest.mark.spark
def test_spark_folds_a_test_for_null_that_is_never_null(spark) -> None:
    text = statement("coalesce(c + 1, 0) IS NOT NULL", "where")
    assert spark_answer(spark, "BIGINT", [9223372036854775807, 1], text) == [0, 1]
