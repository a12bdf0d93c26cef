"""Whole statements with random names (issue #28): columns in other cases, quoted, unknown, named like a
function or like the clause's measures; qualified by the CTE, a subquery's alias, a join's tables or a table
that is not there; aliases used where Spark reads them and where it does not; subqueries, joins with ON and
USING. On the python engine each gives rows or a CepError: never a Python traceback, never DuckDB's or
sqlglot's own exception, never DuckDB's text ("Binder Error: ") or its type names (INT8, VARCHAR), and a
name's error is placed at the name (Spark's [UNRESOLVED_COLUMN] sentence).

Spark's sentences in the regression tests below come from Spark itself (``test_spark_gives_the_same_error``
runs them).
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cep
from tests.spark_answers import matched_rows, spark_sql

TABLE = "nm_events"
ROWS = [
    {"id": 1, "price": 10, "sym": "a", "qty": 5},
    {"id": 2, "price": 1200, "sym": "b", "qty": None},
    {"id": 3, "price": 9, "sym": "a", "qty": 7},
]
ARROW = pa.schema([("id", pa.int32()), ("price", pa.int64()), ("sym", pa.string()), ("qty", pa.int16())])
SPARK_SCHEMA = "id INT, price BIGINT, sym STRING, qty SMALLINT"
CLAUSE = (
    f"SELECT * FROM {TABLE} MATCH_RECOGNIZE (PARTITION BY sym ORDER BY id MEASURES A.id AS mid, A.price AS top, "
    "A.qty AS qty ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE) r"
)
HEAD = f"WITH m AS ({CLAUSE})\n"

# Names a statement may write: the CTE's columns (sym, mid, top, qty) in other cases and quoted, the input's
# columns the clause does not pass on (price, id), names of functions and keywords-like words, unknown ones.
NAMES = ["sym", "SYM", "`Sym`", "mid", "top", "qty", "price", "id", "zz", "upper", "count", "date", "`zz`", "m.sym"]
QUALIFIERS = ["m", "x", "y", "r", "nm_events", "q"]

DUCKDBS_OWN_TEXT = re.compile(r"\b(?:[A-Z][a-z]+ )+Error: |Candidate bindings|LINE \d+:")
DUCKDBS_TYPE_NAMES = re.compile(r"\b(?:INT8|INT16|INT32|INT64|INT128|HUGEINT|VARCHAR|INTEGER_LITERAL|STRING_LITERAL)\b")


@st.composite
def references(draw, qualifiers=("",)):
    name = draw(st.sampled_from(NAMES))
    qualifier = draw(st.sampled_from(qualifiers))
    return f"{qualifier}.{name}" if qualifier and "." not in name else name


@st.composite
def expressions(draw, qualifiers=("",)):
    reference = draw(references(qualifiers))
    shape = draw(st.sampled_from(["{}", "{} + 1", "upper({})", "count({})", "coalesce({}, 0)", "{} IS NULL"]))
    return shape.format(reference)


@st.composite
def statements(draw) -> str:
    kind = draw(st.sampled_from(["plain", "subquery", "join", "using", "in"]))
    if kind == "plain":
        source, qualifiers = "m", ("", "", "m", "r")
    elif kind == "subquery":
        inner = draw(
            st.lists(st.sampled_from(["sym", "mid", "top AS t2", "qty AS mid2", "zz", "price"]), min_size=1, max_size=3)
        )
        source, qualifiers = f"(SELECT {', '.join(inner)} FROM m) x", ("", "x", "m")
    elif kind == "join":
        on = draw(st.sampled_from(["x.sym = y.sym", "x.mid = y.mid", "sym = y.sym", "x.zz = y.sym"]))
        source, qualifiers = f"m x JOIN m y ON {on}", ("", "x", "y", "m")
    elif kind == "using":
        using = draw(st.sampled_from(["sym", "mid", "zz", "SYM", "`sym`"]))
        source, qualifiers = f"m x JOIN m y USING ({using})", ("", "x", "y")
    else:
        column = draw(references())
        source, qualifiers = f"m WHERE {column} IN (SELECT {draw(references())} FROM m)", ("",)
    items = draw(st.lists(expressions(qualifiers), min_size=1, max_size=3))
    aliases = [f"{item} AS c{n}" if draw(st.booleans()) else item for n, item in enumerate(items)]
    text = f"SELECT {', '.join(aliases)} FROM {source}"
    if kind != "in" and draw(st.booleans()):  # an alias of the SELECT list too (DuckDB reads it, Spark not)
        text += f" WHERE {draw(references(qualifiers) | st.just('c0'))} IS NOT NULL"
    if draw(st.integers(0, 3)) == 0:
        text += f" GROUP BY {draw(st.sampled_from(['c0', *items]))}"
    if draw(st.booleans()):
        text += f" ORDER BY {draw(st.sampled_from(['c0', *items]))}"
    return HEAD + text


def run_python(text: str):
    table = pa.Table.from_pylist(ROWS, schema=ARROW)
    return cep.compile_sql(text).run({TABLE: table}, kind="rows")


@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=statements())
def test_names_give_rows_or_a_placed_cep_error(text) -> None:
    try:
        run_python(text)
    except cep.CepError as error:
        assert "Traceback" not in str(error)
        assert not DUCKDBS_OWN_TEXT.search(error.message), str(error)
        assert not DUCKDBS_TYPE_NAMES.search(error.message), str(error)
        assert error.span is not None and error.span.start >= len(HEAD), str(error)  # in the SQL around the clause


@pytest.fixture(scope="module")
def events(spark):
    """The rows as the view every statement reads, made once for the file (the statements never change it)."""
    spark.createDataFrame([tuple(row.values()) for row in ROWS], SPARK_SCHEMA).createOrReplaceTempView(TABLE)
    return spark


@pytest.fixture(scope="module")
def matched_head(events) -> str:
    """The clause's rows, matched once by cep on Spark and held as a view (tests/spark_answers.py): Spark
    resolves each statement's names over them, without running the clause again."""
    return matched_rows(events, HEAD, "nm_matched")


def spark_rows(spark, text: str, head: str | None = None):
    """Spark's rows for ``text``, or its error; with ``head`` (``matched_head``), a statement that starts with
    HEAD reads the clause's rows from the view instead (Spark SQL alone)."""
    run = cep.sql
    if head is not None and text.startswith(HEAD):
        text, run = head + text[len(HEAD) :], spark_sql
    try:
        return sorted(map(str, (tuple(row) for row in run(spark, text).collect())))
    except Exception as error:  # noqa: BLE001 - Spark's analysis errors are its own classes (or cep's)
        return error


def python_rows(text: str):
    try:
        return sorted(map(str, (tuple(row.values()) for row in run_python(text))))
    except cep.CepError as error:
        return error


@pytest.mark.spark
@settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=statements())
def test_spark_and_the_python_engine_accept_the_same_names(events, matched_head, text) -> None:
    """Where Spark resolves every name the python engine gives its rows; where Spark refuses a name, the
    python engine refuses too (it never answers a statement Spark cannot read)."""
    expected, got = spark_rows(events, text, matched_head), python_rows(text)
    if isinstance(expected, Exception):
        assert isinstance(got, cep.CepError), f"Spark fails ({str(expected).splitlines()[0]}), python gives {got}"
    elif isinstance(got, cep.CepError):
        assert got.code == "E0252" or "Spark may run it" in str(got), f"Spark gives {expected}, python:\n{got}"
    else:
        assert got == expected


MEASURES_ONLY = (
    f"SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id MEASURES A.id AS mid ONE ROW PER MATCH PATTERN (A) "
    "DEFINE A AS TRUE) r WHERE price > 1"
)
# (statement, the python engine's sentence, what its caret covers, Spark's words for the same error, as
# cep.sql reports them: test_spark_fails_alike below runs each on Spark).
NAME_ERRORS = [
    (
        HEAD + "SELECT zz FROM m",
        "A column, variable, or function parameter with name `zz` cannot be resolved.",
        "zz",
        "A column, variable, or function parameter with name `zz` cannot be resolved.",
    ),
    (
        HEAD + "SELECT r.sym FROM m",
        "A column, variable, or function parameter with name `r`.`sym` cannot be resolved.",
        "r.sym",
        "A column, variable, or function parameter with name `r`.`sym` cannot be resolved.",
    ),
    (
        HEAD + "SELECT x.top FROM (SELECT top AS t2 FROM m) x",
        "A column, variable, or function parameter with name `x`.`top` cannot be resolved.",
        "x.top",
        "A column, variable, or function parameter with name `x`.`top` cannot be resolved.",
    ),
    (
        HEAD + "SELECT mid FROM m WHERE EXISTS (SELECT 1 FROM m y WHERE y.zz = m.mid)",
        "A column, variable, or function parameter with name `y`.`zz` cannot be resolved.",
        "y.zz",
        "A column, variable, or function parameter with name `y`.`zz` cannot be resolved.",
    ),
    (
        HEAD + "SELECT x.sym FROM m x JOIN m y USING (zz)",
        "USING column `zz` cannot be resolved on the left side of the join.",
        "zz",
        "USING column `zz` cannot be resolved on the left side of the join.",
    ),
    (
        MEASURES_ONLY,
        "A column, variable, or function parameter with name `price` cannot be resolved.",
        "price",
        "A column, variable, or function parameter with name `price` cannot be resolved.",
    ),
    (
        HEAD + "SELECT top AS t2 FROM m WHERE t2 > 10",
        "A column, variable, or function parameter with name `t2` cannot be resolved",
        "t2",
        "A column, variable, or function parameter with name `t2` cannot be resolved.",
    ),
    (
        HEAD + "SELECT CAST(top AS TINYINT) AS v FROM m",
        "the value 1200 of type BIGINT cannot be cast to TINYINT: it is out of that type's range",
        "CAST(top AS TINYINT)",
        'The value 1200L of the type "BIGINT" cannot be cast to "TINYINT" due to an overflow.',
    ),
    (  # Oracle's date arithmetic: DuckDB listed its candidate functions; the types are Spark's, at the expression
        HEAD + "SELECT mid, to_date(sym) - 1.5 AS d FROM m WHERE mid + 1 > 0",
        "cannot apply - to DATE and DECIMAL(2,1)",
        "to_date(sym) - 1.5",
        'Cannot resolve "date_sub(to_date(sym), 1.5)" due to data type mismatch',
    ),
    (
        HEAD + "SELECT to_date('2020-01-01') + 1.5 AS d FROM m",
        "cannot apply + to DATE and DECIMAL(2,1)",
        "to_date('2020-01-01') + 1.5",
        'Cannot resolve "date_add(to_date(2020-01-01), 1.5)" due to data type mismatch',
    ),
    (  # sqlglot read the list without the comma, and the python engine answered
        HEAD + "SELECT mid, FROM m",
        "a SELECT list ends in a comma before FROM, which Spark refuses",
        ",",
        "Trailing comma detected in SELECT clause.",
    ),
    (  # the caret started after DATE: sqlglot's tree holds the typed literal as a cast of its text
        HEAD + "SELECT DATE '2020-01-01' + 1.5 AS d FROM m",
        "cannot apply + to DATE and DECIMAL(2,1)",
        "DATE '2020-01-01' + 1.5",
        "Cannot resolve \"date_add(DATE '2020-01-01', 1.5)\" due to data type mismatch",
    ),
    (  # 0.5 is Spark's DECIMAL(1,1); the sentence said DuckDB's DECIMAL(2,1)
        HEAD + "SELECT to_date(sym) + 0.5 AS d FROM m",
        "cannot apply + to DATE and DECIMAL(1,1)",
        "to_date(sym) + 0.5",
        '"0.5" has the type "DECIMAL(1,1)"',
    ),
]


@pytest.mark.parametrize(("text", "sentence", "fragment", "sparks_words"), NAME_ERRORS)
def test_duckdbs_binder_and_cast_errors_are_sparks_sentences(text, sentence, fragment, sparks_words) -> None:
    got = python_rows(text)
    assert isinstance(got, cep.CepError), got
    assert got.message.startswith(sentence), str(got)
    assert text[got.span.start : got.span.end] == fragment, str(got)
    assert not DUCKDBS_OWN_TEXT.search(got.message) and not DUCKDBS_TYPE_NAMES.search(got.message), str(got)


@pytest.mark.spark
def test_spark_fails_alike(events, matched_head) -> None:
    for text, _, _, sparks_words in NAME_ERRORS:
        answer = spark_rows(events, text, matched_head)
        assert isinstance(answer, Exception) and sparks_words in str(answer), (text, answer)


# A name no engine resolves, and the columns the python engine lists for it: those of the FROM clause where
# the name stands (a qualified name: its table's). Spark lists them too, in its [UNRESOLVED_COLUMN]
# suggestion (test_spark_suggests_the_columns_listed runs each on Spark).
UNKNOWN_NAMES = [
    (HEAD + "SELECT zz FROM m", ["sym", "mid", "top", "qty"]),
    (HEAD + "SELECT x.top FROM (SELECT top AS t2 FROM m) x", ["t2"]),
    (HEAD + "SELECT mid FROM m WHERE EXISTS (SELECT 1 FROM m y WHERE y.zz = m.mid)", ["sym", "mid", "top", "qty"]),
    (MEASURES_ONLY, ["mid"]),
]


@pytest.mark.parametrize(("text", "columns"), UNKNOWN_NAMES)
def test_an_unknown_name_lists_the_columns_and_sends_nobody_to_spark(text, columns) -> None:
    """Spark cannot resolve the name either, so the python engine's error must not hint at ``--engine spark``
    (it used to): it says the name is unknown and lists the columns there, as the clause's own errors do."""
    got = python_rows(text)
    assert isinstance(got, cep.CepError) and "cannot be resolved" in got.message, got
    assert "--engine spark" not in str(got), str(got)
    assert got.hint == "the columns there are " + ", ".join(columns), str(got)


@pytest.mark.spark
def test_spark_suggests_the_columns_listed(events) -> None:
    for text, columns in UNKNOWN_NAMES:
        answer = spark_rows(events, text)
        assert isinstance(answer, Exception) and "cannot be resolved" in str(answer), (text, answer)
        suggested = re.search(r"Did you mean one of the following\? \[(.*?)\]", str(answer)).group(1)
        named = {name.split("`.`")[-1].strip("`") for name in suggested.split(", ")}
        assert set(columns) <= named, (text, suggested)


# A column neither grouped nor aggregated: Spark refuses it too ("does not include a GROUP BY clause"), so the
# python engine's error says what to do and does not send the user to --engine spark (it did).
UNGROUPED = HEAD + "SELECT top * count(*) AS v FROM m"


def test_an_ungrouped_column_sends_nobody_to_spark() -> None:
    got = python_rows(UNGROUPED)
    assert isinstance(got, cep.CepError) and "GROUP BY" in got.message, got
    assert "--engine spark" not in str(got) and "group by it" in (got.hint or ""), str(got)
    assert UNGROUPED[got.span.start :].startswith("top"), str(got)


@pytest.mark.spark
def test_spark_refuses_an_ungrouped_column(events) -> None:
    answer = spark_rows(events, UNGROUPED)
    assert isinstance(answer, Exception) and "does not include a GROUP BY clause" in str(answer), answer


def test_a_translation_functions_refusal_reaches_the_user_in_its_own_words() -> None:
    # typeof() of an interval column (an Arrow duration; a TIME is Spark's time(6), as its TIME literal's) is
    # refused by the python engine's typeof function, which DuckDB runs: its sentence, at the call, without
    # DuckDB's "Python exception occurred while executing the UDF: UnspelledType:" in front, and no second
    # pointer to Spark in the hint.
    import datetime

    durations = pa.array([datetime.timedelta(days=1)] * 2, pa.duration("us"))
    times = pa.table({"id": pa.array([1, 2], pa.int32()), "tm": durations})
    text = (
        "WITH m AS (SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id ALL ROWS PER MATCH PATTERN (A) DEFINE A AS true))\n"
        "SELECT typeof(tm) AS ty FROM m"
    )
    with pytest.raises(cep.CepError) as caught:
        cep.compile_sql(text).run({"t": times})
    got = caught.value
    assert got.message.startswith("the python engine cannot write the type INTERVAL as Spark's typeof() does"), str(got)
    assert "UDF" not in got.message and "UnspelledType" not in got.message, str(got)
    assert text[got.span.start : got.span.end] == "typeof(tm)" and got.hint is None, str(got)


@pytest.mark.spark
def test_the_matched_rows_give_the_whole_statements_answers(events, matched_head) -> None:
    """Spark over the view of the clause's rows answers as the whole statement (``cep.sql``: the clause run
    on Spark) does: the same rows, and the same words for a name it cannot resolve and a failed cast."""
    rows = HEAD + "SELECT x.sym, upper(y.sym), x.mid + 1, x.top, x.qty FROM m x JOIN m y ON x.mid = y.mid"
    assert spark_rows(events, rows) == spark_rows(events, rows, matched_head) != []
    for text, _, _, sparks_words in (NAME_ERRORS[0], NAME_ERRORS[-1]):
        errors = [spark_rows(events, text), spark_rows(events, text, matched_head)]
        assert all(isinstance(error, Exception) and sparks_words in str(error) for error in errors), errors


# Spark 4.2 reads a TIME literal (TIME '01:02:03') but refuses a cast to TIME (CAST, TRY_CAST, ::) when it
# analyses the statement; the python engine's error came from inside its typeof(), placed at 1:1. Now both
# refuse the cast, the python engine at the cast's operand (the literal: tests/test_sql_spark_library.py).
TIME_CASTS = [
    HEAD + "SELECT typeof(CAST('01:02:03' AS TIME)) AS t FROM m",
    HEAD + "SELECT '01:02:03'::time AS t FROM m",
    HEAD + "SELECT try_cast(sym AS TIME) AS t FROM m",
]


@pytest.mark.parametrize("text", TIME_CASTS)
def test_a_cast_to_time_is_refused_at_the_cast(text) -> None:
    got = python_rows(text)
    assert isinstance(got, cep.CepError) and got.message.startswith("the data type TIME is not supported"), got
    assert "--engine spark" not in str(got), str(got)  # Spark refuses it too
    select = text.index("\nSELECT ") + len("\nSELECT ")
    assert got.span.line == 2 and select <= got.span.start < text.index(" AS t FROM m"), str(got)
    with pytest.raises(cep.CepError) as checked:  # cep check says it too: the statement fixes the type
        cep.check_sql(text)
    assert checked.value.message == got.message and checked.value.span.start == got.span.start


@pytest.mark.spark
def test_spark_refuses_a_cast_to_time(events, matched_head) -> None:
    for text in TIME_CASTS:
        answer = spark_rows(events, text, matched_head)
        assert isinstance(answer, Exception) and "The data type TIME is not supported" in str(answer), answer


# A DATE plus a DECIMAL or DOUBLE: Spark refuses it too (date_add takes an INT of days; test_spark_fails_alike runs
# the DATE '2020-01-01' + 1.5 of NAME_ERRORS on Spark), so the error says so and gives no hint to run it there (it
# said "Spark may run it").
DATE_PLUS_A_FRACTION = [
    HEAD + "SELECT DATE '2020-01-01' + 1.5 AS d FROM m",
    HEAD + "SELECT to_date(sym) - 1.5 AS d FROM m",
    HEAD + "SELECT DATE '2020-01-01' + 2.5D AS d FROM m",
]


@pytest.mark.parametrize("text", DATE_PLUS_A_FRACTION)
def test_a_date_plus_a_fraction_says_spark_refuses_it_too(text) -> None:
    got = python_rows(text)
    assert isinstance(got, cep.CepError) and "Spark refuses it too" in got.message, got
    assert got.hint is None and "--engine spark" not in str(got), str(got)
