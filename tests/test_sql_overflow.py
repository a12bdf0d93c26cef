"""Integer overflow inside a comparison with a constant (issue #28): Spark, in ANSI mode, computes ``c + k`` and
fails when it overflows; DuckDB's optimizer would move the constant across (``c + 1 > 0`` as ``c > -1``) and
answer instead (cep/duckdb_optimizer.py turns that rewrite off for statements with arithmetic).

Expected answers are Spark's own: the property test runs every shape on the ``spark`` fixture and on the
python engine; the regression tests below it write down Spark's answer from such a run.
"""

from __future__ import annotations

import datetime as dt
import warnings

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from cep.duckdb_optimizer import computes_arithmetic, disabled_optimizers
from tests.spark_answers import spark_sql

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


def spark_answer(spark, width: str, values: list, text: str, run=cep.sql):
    """``text``'s ids over TABLE holding ``values`` (``run``: ``cep.sql``, or Spark SQL alone for a statement
    with no MATCH_RECOGNIZE), or Spark's error."""
    rows = (width, tuple(values))
    if _VIEW_HOLDS.get(id(spark._jsparkSession)) != rows:
        spark.createDataFrame(list(enumerate(values)), f"id INT, c {width}").createOrReplaceTempView(TABLE)
        _VIEW_HOLDS[id(spark._jsparkSession)] = rows
    try:
        return [row["id"] for row in run(spark, text).collect()]
    except Exception as error:  # noqa: BLE001 - Spark's errors at collect() are its own classes
        return error


# A property over Spark: examples fixed (derandomized), no deadline (a Spark query takes seconds under load).
ON_SPARK = settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.spark
@ON_SPARK
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


# ---------------------------------------------------------------------------------------------------------------
# Inside the clause (issue #28): DEFINE and MEASURES compute integers in Spark's types, an INT + an INT an INT, and
# overflow where Spark SQL does for the same expression outside the clause, on every engine that evaluates them: the
# Pike VM row by row, the column-wise kernels (which leave a batch that could overflow to the VM) and the sequence
# engine's measures. An input TINYINT or SMALLINT column is an INT inside the clause (cep's Spark engine reads it
# so), so the cases below hold INT and BIGINT columns.
CLAUSE_WIDTHS = ["INT", "BIGINT"]


def clause_condition(table: str, condition: str) -> str:
    """``condition`` as the DEFINE of a one-row pattern: every row is tested, as a WHERE tests every row."""
    return (
        f"SELECT * FROM {table} MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS id ONE ROW PER MATCH "
        f"PATTERN (A) DEFINE A AS {condition}) r ORDER BY id"
    )


@st.composite
def clause_shapes(draw):
    width = draw(st.sampled_from(CLAUSE_WIDTHS))
    values = draw(st.lists(st.sampled_from([*edges(width), None]), min_size=1, max_size=3))
    inner = literal(draw(st.sampled_from(edges(width))), width, draw(st.booleans()))
    operation = draw(
        st.sampled_from(["c + k", "k - c", "c * k", "-c", "(c + k) * k", "abs(c)", "c % k", "(c - k) - c"])
    )
    arithmetic = operation.replace("k", inner)
    condition = f"{arithmetic} {draw(st.sampled_from(COMPARISONS))} {draw(st.sampled_from([0, 1, -1]))}"
    return width, values, condition


def clause_answer(width: str, values: list, condition: str, *, column_wise: bool):
    text = clause_condition("t", condition)
    try:
        out = cep.compile(text, column_wise=column_wise).run(arrow_table(width, values))
    except cep.CepError as error:
        return error
    return out.column("id").to_pylist()


@pytest.mark.spark
@settings(ON_SPARK, max_examples=12)  # two Spark queries an example: its WHERE and the clause on Spark
@given(shape=clause_shapes())
def test_a_define_overflows_where_sparks_where_does(spark, shape) -> None:
    """The condition in a DEFINE, on the python engine and on the Spark engine, against Spark SQL's WHERE over the
    same rows (the independent answer: Spark has no MATCH_RECOGNIZE)."""
    assert_a_define_answers_as_sparks_where(spark, *shape)


def assert_a_define_answers_as_sparks_where(spark, width: str, values: list, condition: str) -> None:
    where = f"SELECT id FROM {TABLE} WHERE {condition} ORDER BY id"
    expected = spark_answer(spark, width, values, where, run=spark_sql)
    python = clause_answer(width, values, condition, column_wise=True)
    on_spark = spark_answer(spark, width, values, clause_condition(TABLE, condition))
    if isinstance(expected, Exception):
        assert "ARITHMETIC_OVERFLOW" in str(expected), str(expected)
        assert isinstance(python, cep.CepError) and python.message.startswith("integer overflow"), python
        assert isinstance(on_spark, Exception) and "integer overflow" in str(on_spark), on_spark
    else:
        assert python == expected, condition
        assert on_spark == expected, condition


# Each integer type's range; Spark's result of two integer operands has the wider one's type.
INTEGER_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
}


def reference_value(node, row: dict):
    """A hand evaluation of an integer expression with Spark's rules: an operation on two integers has the wider
    operand's type (an INT op an INT is an INT, a BIGINT beside either a BIGINT, a TINYINT op a SMALLINT a
    SMALLINT), ``neg`` and ``abs`` keep their operand's type, NULL in gives NULL out; a result past its type's
    range raises OverflowError. ``node`` is ('col', name, type) | ('lit', value, type) | (op, left, right) |
    ('neg', operand) | ('abs', operand)."""
    if node[0] == "col":
        return row[node[1]], node[2]
    if node[0] == "lit":
        return node[1], node[2]
    if node[0] in ("neg", "abs"):
        value, kind = reference_value(node[1], row)
        result = None if value is None else -value if node[0] == "neg" else abs(value)
    else:
        (left, left_kind), (right, right_kind) = reference_value(node[1], row), reference_value(node[2], row)
        kind = max(left_kind, right_kind, key=lambda k: INTEGER_RANGES[k][1])
        if left is None or right is None:
            return None, kind
        result = {"+": left + right, "-": left - right, "*": left * right}[node[0]]
    if result is not None and not INTEGER_RANGES[kind][0] <= result <= INTEGER_RANGES[kind][1]:
        raise OverflowError(result)
    return result, kind


def written(node) -> str:
    if node[0] == "col":
        return f"A.{node[1]}"
    if node[0] == "lit":
        return str(node[1]) if node[2] == "INT" else f"CAST({node[1]} AS {node[2]})"
    if node[0] in ("neg", "abs"):
        return f"{'-' if node[0] == 'neg' else 'abs'}({written(node[1])})"
    return f"({written(node[1])} {node[0]} {written(node[2])})"


INT_EDGES = [2**31 - 1, 2**31 - 2, -(2**31), -(2**31) + 1, 0, 1, -1, 2, 46341]
BIGINT_EDGES = [2**63 - 1, -(2**63), 2**62, -(2**62), 3037000500, 0, 1, -1, 2]


def integer_trees(depth: int):
    leaves = st.one_of(
        st.just(("col", "i", "INT")),
        st.just(("col", "b", "BIGINT")),
        st.sampled_from(INT_EDGES).map(lambda v: ("lit", v, "INT")),
        st.sampled_from(BIGINT_EDGES).map(lambda v: ("lit", v, "BIGINT")),
    )
    if depth == 0:
        return leaves
    inner = integer_trees(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(st.sampled_from(["+", "-", "*"]), inner, inner),
        st.tuples(st.just("neg"), inner),
    )


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    tree=integer_trees(2),
    rows=st.lists(
        st.tuples(st.sampled_from([*INT_EDGES, None]), st.sampled_from([*BIGINT_EDGES, None])), min_size=1, max_size=4
    ),
    in_measure=st.booleans(),
)
def test_the_vm_and_the_column_wise_engines_agree_on_integer_edges(tree, rows, in_measure) -> None:
    """The same value or the same error (message and position) on the Pike VM and the column-wise engines, and
    the hand evaluation's value or overflow; never a numpy warning (the kernels leave a possible overflow to the VM)."""
    table = pa.table(
        {
            "id": pa.array(range(len(rows)), pa.int32()),
            "i": pa.array([r[0] for r in rows], pa.int32()),
            "b": pa.array([r[1] for r in rows], pa.int64()),
        }
    )
    assert_engines_agree_with_the_hand_evaluation(table, tree, [{"i": i, "b": b} for i, b in rows], in_measure)


def assert_engines_agree_with_the_hand_evaluation(table: pa.Table, tree, rows: list[dict], in_measure: bool) -> None:
    """``tree`` (``written``) as a measure or in a DEFINE over ``table``, whose rows are ``rows`` (``id`` aside):
    both engines give the same answer, the hand evaluation's (``reference_value``)."""
    expression = written(tree)
    if in_measure:  # every row a match of its own: the measure is the expression on that row
        text = (
            f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {expression} AS v ONE ROW PER MATCH "
            "PATTERN (A) DEFINE A AS TRUE) r"
        )
    else:
        text = (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS v ONE ROW PER MATCH "
            f"PATTERN (A) DEFINE A AS {expression} > 0) r"
        )
    answers = []
    for column_wise in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a numpy RuntimeWarning (an int64 overflow) fails the test
            try:
                answers.append(cep.compile(text, column_wise=column_wise).run(table).column("v").to_pylist())
            except cep.CepError as error:
                answers.append((error.code, error.message, error.span))
    assert answers[0] == answers[1], text
    try:
        values = [reference_value(tree, row)[0] for row in rows]
    except OverflowError:
        assert isinstance(answers[1], tuple) and answers[1][1].startswith("integer overflow"), (text, answers[1])
        return
    expected = values if in_measure else [n for n, value in enumerate(values) if value is not None and value > 0]
    assert answers[1] == expected, text


def test_a_sum_past_bigints_range_is_an_overflow_error_on_every_engine() -> None:
    """SUM of BIGINTs is a BIGINT (Spark's ANSI SUM fails past its range): 2**62 + 2**62 is 2**63, one past
    BIGINT's largest (by hand). It was Python's OverflowError, a traceback, when the result met its Arrow column."""
    table = pa.table({"id": pa.array([1, 2], pa.int32()), "b": pa.array([2**62, 2**62], pa.int64())})
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES SUM(A.b) AS s ONE ROW PER MATCH "
        "PATTERN (A+) DEFINE A AS TRUE) r"
    )
    for column_wise in (True, False):
        with pytest.raises(cep.CepError, match="integer overflow: 'sum' gives 9223372036854775808") as caught:
            cep.compile(text, column_wise=column_wise).run(table)
        assert text[caught.value.span.start : caught.value.span.end] == "SUM(A.b)"


def test_a_define_overflows_alike_in_batch_and_on_the_streams_engine() -> None:
    """A declared INT column: ``A.i + 1`` at 2147483647 overflows in a batch run and in the stream's own engine
    (the replay ``session_timeout`` runs: the per-key engine a live stream runs), with the same error."""
    rows = [{"id": n, "ts": dt.datetime(2024, 1, 1, 0, n), "i": i} for n, i in enumerate([5, 2**31 - 1, 7])]
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS id ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS A.i + 1 > 6) r"
    )
    query = cep.compile(text)
    schema = {"id": "INT", "ts": "TIMESTAMP", "i": "INT"}
    errors = []
    for options in ({}, {"session_timeout": "1 hour"}):
        with pytest.raises(cep.CepError, match="integer overflow: '\\+' gives 2147483648") as caught:
            query.run(rows, schema=schema, **options)
        errors.append((caught.value.code, caught.value.span))
    assert errors[0] == errors[1]
    assert text[errors[0][1].start : errors[0][1].end] == "A.i + 1"
    # The same rows with no declared type hold Python ints: BIGINTs, whose A.i + 1 fits.
    assert [row["id"] for row in query.run(rows)] == [1, 2]


# SMALLINT and TINYINT inside the clause (issue #28): an input SMALLINT or TINYINT column keeps its type, as Spark
# SQL keeps it (it was an INT inside the clause). Spark's rules, checked on Spark 4 over the same rows
# (SELECT <expression> FROM a view of id INT, sm SMALLINT, t TINYINT, i INT): sm + sm is a SMALLINT and fails
# past 32767 ("32767S + 32767S caused overflow"), t + t a TINYINT (100 + 100 fails), t + sm a SMALLINT, sm + i an
# INT, sm - 1 and sm * 1 INTs (the literal 1 is an INT: -32768 - 1 is -32769, no error), -t and abs(t) of -128
# fail, t % t a TINYINT, sum(sm) a BIGINT, sm / 2 a DOUBLE, sm DIV 2 a BIGINT.
SMALL_WIDTHS = ["SMALLINT", "TINYINT"]


@st.composite
def small_clause_shapes(draw):
    """``clause_shapes`` over a SMALLINT or TINYINT column, with literals of its own type or plain INTs."""
    width = draw(st.sampled_from(SMALL_WIDTHS))
    values = draw(st.lists(st.sampled_from([*edges(width), None]), min_size=1, max_size=3))
    inner = literal(draw(st.sampled_from(edges(width))), width, draw(st.booleans()))
    operation = draw(st.sampled_from(["c + c", "c + k", "k - c", "c * k", "-c", "abs(c)", "c % k", "(c + c) - c"]))
    arithmetic = operation.replace("k", inner)
    condition = f"{arithmetic} {draw(st.sampled_from(COMPARISONS))} {draw(st.sampled_from([0, 1, -1]))}"
    return width, values, condition


@pytest.mark.spark
@settings(ON_SPARK, max_examples=12)  # two Spark queries an example, as test_a_define_overflows_where_sparks_where_does
@given(shape=small_clause_shapes())
def test_a_define_over_a_smallint_or_tinyint_overflows_where_sparks_where_does(spark, shape) -> None:
    """The condition over a SMALLINT or TINYINT column in a DEFINE, on the python engine and on the Spark engine,
    against Spark SQL's WHERE over the same rows."""
    assert_a_define_answers_as_sparks_where(spark, *shape)


SMALLINT_EDGES = [2**15 - 1, 2**15 - 2, -(2**15), -(2**15) + 1, 0, 1, -1, 2, 182, 16384]
TINYINT_EDGES = [2**7 - 1, 2**7 - 2, -(2**7), -(2**7) + 1, 0, 1, -1, 2, 12, 64]


def small_integer_trees(depth: int):
    unary = st.sampled_from(["neg", "abs"])
    leaves = st.one_of(
        st.just(("col", "sm", "SMALLINT")),
        st.just(("col", "t", "TINYINT")),
        st.sampled_from(SMALLINT_EDGES).map(lambda v: ("lit", v, "SMALLINT")),
        st.sampled_from(TINYINT_EDGES).map(lambda v: ("lit", v, "TINYINT")),
        st.sampled_from([1, -1, 2, 32768, 2**31 - 1]).map(lambda v: ("lit", v, "INT")),
    )
    if depth == 0:
        return leaves
    inner = small_integer_trees(depth - 1)
    return st.one_of(leaves, st.tuples(st.sampled_from(["+", "-", "*"]), inner, inner), st.tuples(unary, inner))


@settings(max_examples=80, derandomize=True, deadline=None)
@given(
    tree=small_integer_trees(2),
    rows=st.lists(
        st.tuples(st.sampled_from([*SMALLINT_EDGES, None]), st.sampled_from([*TINYINT_EDGES, None])),
        min_size=1,
        max_size=4,
    ),
    in_measure=st.booleans(),
)
def test_the_engines_agree_with_a_hand_evaluation_near_smallint_and_tinyint_edges(tree, rows, in_measure) -> None:
    """An Arrow int16 column is a SMALLINT and an int8 one a TINYINT inside the clause: the Pike VM and the
    column-wise engines give the same value or the same error, and the hand evaluation's value or overflow."""
    table = pa.table(
        {
            "id": pa.array(range(len(rows)), pa.int32()),
            "sm": pa.array([r[0] for r in rows], pa.int16()),
            "t": pa.array([r[1] for r in rows], pa.int8()),
        }
    )
    rows_by_name = [{"sm": sm, "t": t} for sm, t in rows]
    assert_engines_agree_with_the_hand_evaluation(table, tree, rows_by_name, in_measure)


# Each way an input says a column is a SMALLINT or a TINYINT: SMALLINT + SMALLINT at 32767 (by hand 65534, past
# 32767) and TINYINT + TINYINT at 100 (200, past 127) overflow; the same values as BIGINTs (no type said) do not.
SMALL_INPUTS = {
    "arrow int16/int8": lambda rows: pa.table(
        {
            "id": pa.array([r["id"] for r in rows], pa.int32()),
            "ts": pa.array([r["ts"] for r in rows], pa.timestamp("us")),
            "sm": pa.array([r["sm"] for r in rows], pa.int16()),
            "t": pa.array([r["t"] for r in rows], pa.int8()),
        }
    ),
    "pandas int16/int8": lambda rows: pa.Table.from_pylist(rows).to_pandas().astype({"sm": "int16", "t": "int8"}),
    "pandas Int16/Int8": lambda rows: pa.Table.from_pylist(rows).to_pandas().astype({"sm": "Int16", "t": "Int8"}),
}
SMALL_SCHEMAS = [
    {"id": "INT", "ts": "TIMESTAMP", "sm": "SMALLINT", "t": "TINYINT"},
    "id INT, ts TIMESTAMP, sm SMALLINT, t TINYINT",
    "id INT, ts TIMESTAMP, sm SHORT, t BYTE",
]


def small_rows(sm: int, t: int) -> list[dict]:
    return [{"id": n, "ts": dt.datetime(2024, 1, 1, 0, n), "sm": sm, "t": t} for n in range(2)]


def small_query(condition: str):
    return cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS id ONE ROW PER MATCH "
        f"PATTERN (A) DEFINE A AS {condition}) r"
    )


@pytest.mark.parametrize("source", list(SMALL_INPUTS))
@pytest.mark.parametrize(
    ("condition", "row", "overflow"),
    [("A.sm + A.sm > 0", (2**15 - 1, 1), "65534"), ("A.t + A.t > 0", (1, 100), "200")],
)
def test_a_frames_int16_and_int8_columns_are_smallint_and_tinyint(source, condition, row, overflow) -> None:
    data = SMALL_INPUTS[source](small_rows(*row))
    for column_wise in (True, False):
        with pytest.raises(cep.CepError, match=f"integer overflow: '\\+' gives {overflow}"):
            cep.compile(small_query(condition).text, column_wise=column_wise).run(data)


@pytest.mark.parametrize("schema", SMALL_SCHEMAS, ids=["dict", "text", "Spark's other spellings"])
@pytest.mark.parametrize("options", [{}, {"session_timeout": "1 hour"}], ids=["batch", "stream engine"])
def test_a_declared_smallint_or_tinyint_overflows_in_batch_and_on_the_streams_engine(schema, options) -> None:
    """A schema's SMALLINT and TINYINT (Spark's spellings SHORT and BYTE too), in a batch run and in the stream's
    own engine (the replay): the same error at the same expression."""
    for condition, row, overflow, kind in [
        ("A.sm + A.sm > 0", (2**15 - 1, 1), "65534", "SMALLINT"),
        ("A.t + A.t > 0", (1, 100), "200", "TINYINT"),
        ("-A.t > 0", (1, -128), "128", "TINYINT"),
    ]:
        query = small_query(condition)
        with pytest.raises(cep.CepError, match=f"gives {overflow}, outside the range of {kind}") as caught:
            query.run(small_rows(*row), schema=schema, **options)
        assert query.text[caught.value.span.start : caught.value.span.end] == condition[: -len(" > 0")]
        assert [r["id"] for r in query.run(small_rows(*row))] == [0, 1]  # no type said: BIGINTs, which fit
