"""An output column written without ``AS`` has the same name on both engines: Spark's own text of the expression
(``(i + 1)``, ``upper(s)``, ``x`` for ``CAST(x AS INT)``, ``count(1)``), or the python engine refuses before
running and asks for a name (cep/duckdb_column_names.py). The expected names are Spark's, asked of Spark itself
(its analyser names the columns: no job runs); a few are also written down here from Spark 4.2, so that the
python engine's part runs without Spark too."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pyarrow as pa
import pytest

import cep

TABLE = "ocn_events"
ROWS = [
    (1, 3, 10, 1.5, Decimal("2.25"), "ab", dt.date(2021, 3, 28), True),
    (2, -1, None, None, None, None, None, False),
]
SPARK_SCHEMA = "id INT, i INT, b BIGINT, x DOUBLE, dec DECIMAL(10,2), s STRING, d DATE, flag BOOLEAN"
COLUMNS = ("id", "i", "b", "x", "dec", "s", "d", "flag")  # SPARK_SCHEMA's, read the same on the python engine
KINDS = (pa.int32(), pa.int32(), pa.int64(), pa.float64(), pa.decimal128(10, 2), pa.string(), pa.date32(), pa.bool_())
ARROW = pa.schema(list(zip(COLUMNS, KINDS, strict=True)))
HEAD = (
    f"WITH m AS (SELECT * FROM {TABLE} MATCH_RECOGNIZE (ORDER BY id ALL ROWS PER MATCH PATTERN (A) "
    "DEFINE A AS TRUE) r)\n"
)


def arrow_table() -> pa.Table:
    return pa.Table.from_pylist([dict(zip(ARROW.names, row)) for row in ROWS], schema=ARROW)


def python_names(select: str) -> list[str]:
    out = cep.compile_sql(HEAD + f"SELECT {select} FROM m").run({TABLE: arrow_table()}, kind="arrow")
    return out.column_names


# Expressions the python engine names as Spark does: one of each form the naming knows (operators, literals,
# casts written and typed, functions with the arguments Spark fills in, aggregates, FILTER, windows and their
# default frames, CASE, IN, LIKE, a name written in another case than the table's, which Spark keeps).
NAMED = [
    "i + 1",
    "upper(s)",
    "UPPER(S)",
    "CAST(x AS INT)",
    "TRY_CAST(s AS INT)",
    "x::int + 1",
    "CAST(i + 1 AS STRING)",
    "-i",
    "-3 + i",
    "i <> 1",
    "NOT flag",
    "s IS NOT NULL",
    "i IN (1, 2)",
    "s LIKE 'a%'",
    "s NOT LIKE 'a%'",
    "concat(s, 'x')",
    "coalesce(i, 0)",
    "nvl(i, 0)",
    "IF(flag, 1, 2)",
    "CASE WHEN i > 1 THEN 'big' ELSE 'small' END",
    "CASE i WHEN 3 THEN 'three' END",
    "round(x, 1)",
    "signum(x)",
    "floor(x)",
    "100L",
    "1.5D",
    "1.50",
    "DATE '2021-03-28'",
    "date_format(d, 'yyyy')",
    "year(d)",
    "m.i * 2",
    "i % 2",
    "i div 2",
    "dec * 2",
    "row_number() OVER (ORDER BY id)",
    "rank() OVER (PARTITION BY flag ORDER BY id DESC)",
    "lag(i) OVER (ORDER BY id)",
    "lead(i, 2, 0) OVER (ORDER BY id)",
    "sum(i) OVER (PARTITION BY flag)",
    "sum(i) OVER (ORDER BY id)",
    "avg(x) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
]
AGGREGATES = ["count(*)", "count(i)", "count(DISTINCT s)", "sum(x)", "max(DISTINCT s)", "sum(i) FILTER (WHERE i > 0)"]
# The forms Spark's parser or analyser rewrites, or fills in arguments of (named since issue #28's second round).
NAMED += [
    "s || 'x'",
    "s || s || s",
    "d + 1",
    "1 + d",
    "d - 2",
    "d + INTERVAL 1 DAY",
    "d - INTERVAL 1 DAY",
    "d + INTERVAL 2 HOUR",
    "d + INTERVAL '1-2' YEAR TO MONTH",
    "d - d",
    "INTERVAL '1' DAY",
    "INTERVAL 90 MINUTE",
    "INTERVAL -2 HOUR",
    "INTERVAL '1.5' SECOND",
    "INTERVAL 0 SECOND",
    "INTERVAL '3 04:05:06.5' DAY TO SECOND",
    "INTERVAL '5:06.25' MINUTE TO SECOND",
    # Spark's one interval of several fields (sqlglot's sum of intervals): from its largest field to its smallest
    "INTERVAL 1 DAY 2 HOURS",
    "INTERVAL 2 HOURS 1 DAY",
    "INTERVAL -1 DAY 2 HOURS",
    "INTERVAL 1 DAY 25 HOURS",
    "INTERVAL '1' DAY 30 MINUTES",
    "INTERVAL 1 HOUR 1.5 SECONDS",
    "s || 'x' || (DATE '2021-03-28' + INTERVAL 1 DAY 2 HOURS)",
    "round(x)",
    "substr(s, 2)",
    "substring(s, 2)",
    "split(s, ',')",
    "split(s, ',')[0]",
    "unix_timestamp(d)",
    "from_unixtime(i)",
    "locate('a', s)",
    "position('a' IN s)",
    "ltrim(s)",
    "trim(BOTH 'a' FROM s)",
    "ltrim('a', s)",
    "lpad(s, 5)",
    "sort_array(array(i))",
    "extract(month FROM d)",
    "datediff(d, d)",
    "map('a', i, 'b', i)['b']",
    "array(i, b)[0]",
    "element_at(array(i, b), 1)",
    "i BETWEEN -10 AND 10",
    "i NOT BETWEEN 1 AND 2",
    "~i",
    "flag IS NOT TRUE",
    "i IS DISTINCT FROM b",
    "s RLIKE '[0-9]'",
    "s NOT ILIKE 'A%'",
    "s NOT LIKE 'a!%' ESCAPE '!'",
    "SIGN(b)",
    "sqrt(x)",
    "log10(x)",
    "ln(x)",
    "DATE '2021-3'",
    "TIMESTAMP '2021-3-8 1:2:3.1234567'",
    "first_value(i) IGNORE NULLS OVER (ORDER BY id)",
    "last_value(i) IGNORE NULLS OVER (PARTITION BY flag)",
    "nth_value(i, 2) IGNORE NULLS OVER (ORDER BY id)",
    "sum(i) OVER (ORDER BY i RANGE BETWEEN 2 PRECEDING AND 2 FOLLOWING)",
    "sum(x) OVER (ORDER BY x RANGE BETWEEN 1.5 PRECEDING AND CURRENT ROW)",
    "count(*) OVER (ORDER BY d RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND CURRENT ROW)",
    # Spark's round of an integer is of the integer's type (sqlglot's a DOUBLE): the frame is named as over an INT
    "count(*) OVER (ORDER BY round(i, -1) RANGE BETWEEN 1 PRECEDING AND CURRENT ROW)",
    "count(*) OVER (ORDER BY round(b) RANGE BETWEEN 1 PRECEDING AND CURRENT ROW)",
    # Spark writes a negative literal's value: an integer's or a DECIMAL's -0 is 0, a DOUBLE's -0.0 (seed 62)
    "-0::string",
    "-0L",
    "-00",
    "-0.0",
    "-0.0D",
    "-0.5",
    "decode(s, 'ab', 1, 2)",  # sqlglot's DecodeCase, placed at its first argument only
    "decode(i, 3, 'three', -1, 'less', 'other')",
    "collect_list(i) OVER (ORDER BY id)",
    "array_agg(i) OVER (ORDER BY id)",  # Spark's collect_list
]
AGGREGATES += [
    "percentile(i, 0.5)",
    "first(i, true)",
    "array_agg(s)",
    "array_agg(DISTINCT i)",
    "array_agg(i) FILTER (WHERE i > 0)",
]
# Spark 4.2's names of a few, as its analyser gives them (spark.sql(...).columns), for the runs without Spark.
WRITTEN_DOWN = {
    "i + 1": "(i + 1)",
    "upper(s)": "upper(s)",
    "CAST(x AS INT)": "x",
    "i <> 1": "(NOT (i = 1))",
    "100L": "100",
    "lag(i) OVER (ORDER BY id)": "lag(i, 1, NULL) OVER (ORDER BY id ASC NULLS FIRST ROWS BETWEEN -1 FOLLOWING AND -1 "
    "FOLLOWING)",
    "count(*)": "count(1)",
    "d + 1": "date_add(d, 1)",
    "s || 'x'": "concat(s, x)",
    "d - INTERVAL 1 DAY": "date_add(d, (- extractansiintervaldays(INTERVAL '1' DAY)))",
    "INTERVAL -2 HOUR": "INTERVAL '-02' HOUR",
    "INTERVAL 1 DAY 2 HOURS": "INTERVAL '1 02' DAY TO HOUR",
    "INTERVAL -1 DAY 2 HOURS": "INTERVAL '-0 22' DAY TO HOUR",
    "round(x)": "round(x, 0)",
    "substring(s, 2)": "substring(s, 2, 2147483647)",
    "split(s, ',')": "split(s, ,, -1)",
    "position('a' IN s)": "locate(a, s, 1)",
    "DATE '2021-3'": "DATE '2021-03-01'",
    "first_value(i) IGNORE NULLS OVER (ORDER BY id)": "first(i) OVER (ORDER BY id ASC NULLS FIRST RANGE BETWEEN "
    "UNBOUNDED PRECEDING AND CURRENT ROW)",
    "sum(x) OVER (ORDER BY x RANGE BETWEEN 1.5 PRECEDING AND CURRENT ROW)": "sum(x) OVER (ORDER BY x ASC NULLS FIRST "
    "RANGE BETWEEN (- 1.5) FOLLOWING AND CURRENT ROW)",
}
# Expressions whose Spark name the python engine does not know: refused before running, pointing at them.
REFUSED = [
    "sum(x) OVER (ORDER BY x DESC RANGE BETWEEN 1 PRECEDING AND CURRENT ROW)",  # a descending key not checked
    "d + make_interval(0, 0, 0, 1)",  # Spark fills in the other fields, the seconds as a DECIMAL(18,6)
    "listagg(s, ',') WITHIN GROUP (ORDER BY id) OVER ()",  # WITHIN GROUP: not checked against Spark
    "regexp_extract(s, '(a)')",  # sqlglot adds the group, without a place
    "INTERVAL 1 DAY 2 HOURS + INTERVAL 1 HOUR",  # a sum of intervals: sqlglot kept no place of either (1:1)
]


@pytest.mark.parametrize(("expression", "name"), sorted(WRITTEN_DOWN.items()))
def test_the_python_engine_names_a_column_as_spark_does(expression, name) -> None:
    assert python_names(expression) == [name]


@pytest.mark.parametrize("expression", REFUSED)
def test_a_column_whose_spark_name_is_not_known_is_refused_and_placed(expression) -> None:
    with pytest.raises(cep.CepError) as caught:
        python_names(f"i, {expression}")
    error = caught.value
    assert error.code == "E0252", str(error)
    assert "written without AS" in str(error) and "AS name" in str(error)
    assert error.span is not None and error.span.start == len(HEAD) + len("SELECT i, "), str(error)


@pytest.mark.parametrize("interval", ["INTERVAL 1 YEAR 2 DAYS", "INTERVAL 1 MONTH 2 HOURS"])
def test_a_refused_interval_is_placed_at_its_words(interval) -> None:
    """sqlglot keeps no place for an interval: its refusal pointed at the statement's first character."""
    with pytest.raises(cep.CepError) as caught:
        python_names(f"i, {interval} AS v, s")
    error = caught.value
    assert error.code == "E0252", str(error)
    assert (error.span.start, error.span.end) == (
        len(HEAD) + len("SELECT i, "),
        len(HEAD) + len(f"SELECT i, {interval}"),
    )


def test_a_named_column_is_never_refused() -> None:
    assert python_names(", ".join(f"{e} AS c{n}" for n, e in enumerate(REFUSED))) == [
        f"c{n}" for n in range(len(REFUSED))
    ]


def test_a_column_refused_in_a_subquery_is_refused_only_where_it_reaches_the_result() -> None:
    table = {TABLE: arrow_table()}
    inner = "(SELECT i, regexp_extract(s, '(a)') FROM m) q"
    assert cep.compile_sql(HEAD + f"SELECT i FROM {inner}").run(table, kind="arrow").column_names == ["i"]
    with pytest.raises(cep.CepError, match="written without AS"):
        cep.compile_sql(HEAD + f"SELECT * FROM {inner}").run(table, kind="arrow")


@pytest.fixture(scope="module")
def events(spark):
    spark.createDataFrame(ROWS, SPARK_SCHEMA).createOrReplaceTempView(TABLE)
    return spark


def spark_names(spark, expressions: list[str]) -> list[str]:
    """Spark's names of ``expressions``, each a column of one query over the input (analysed, not run)."""
    return spark.sql(f"SELECT {', '.join(expressions)} FROM {TABLE} m").columns


@pytest.mark.spark
def test_the_names_are_sparks_own(events) -> None:
    assert python_names(", ".join(NAMED)) == spark_names(events, NAMED)
    assert python_names(", ".join(AGGREGATES)) == spark_names(events, AGGREGATES)
    written = [e for e in WRITTEN_DOWN if e not in AGGREGATES]
    assert spark_names(events, written) == [WRITTEN_DOWN[e] for e in written]
    assert spark_names(events, ["count(*)"]) == [WRITTEN_DOWN["count(*)"]]


@pytest.mark.spark
def test_the_whole_statement_has_the_same_header_on_both_engines(events) -> None:
    text = HEAD + "SELECT id, i + 1, upper(s), CAST(x AS INT), lag(i) OVER (ORDER BY id) FROM m ORDER BY id"
    spark_header = cep.sql(events, text).columns
    assert cep.compile_sql(text).run({TABLE: arrow_table()}, kind="arrow").column_names == spark_header


# `cep check` gives the run's refusal of a column whose Spark name is not known, at the same place, without the
# tables: a form refused whatever the columns' types. A form whose name depends on them (`i + 1` is `(i + 1)`
# over numbers, `date_add(i, 1)` over a DATE) is left to the run.
CHECKED_REFUSALS = [
    "SELECT i, {refused} FROM m",
    "SELECT * FROM (SELECT i, {refused} FROM m) q",
    "SELECT q.* FROM (SELECT i, {refused} FROM m) q",
    "SELECT * FROM m2 UNION ALL SELECT 1, 2",
]


# Of REFUSED, the forms refused whatever the columns' types (a RANGE frame's name depends on its key's type).
REFUSED_UNTYPED = ["regexp_extract(s, '(a)')", "listagg(s, ',') WITHIN GROUP (ORDER BY id) OVER ()"]


@pytest.mark.parametrize("outer", CHECKED_REFUSALS)
@pytest.mark.parametrize("refused", REFUSED_UNTYPED)
def test_cep_check_predicts_the_refusal_with_the_runs_code_and_place(outer, refused) -> None:
    from cep.statement import check_sql

    head = HEAD.replace(")\n", f"), m2 AS (SELECT i, {refused} FROM m)\n", 1)
    text = head + outer.format(refused=refused)
    with pytest.raises(cep.CepError) as ran:
        cep.compile_sql(text).run({TABLE: arrow_table()}, kind="arrow")
    with pytest.raises(cep.CepError) as checked:
        check_sql(text)
    assert "written without AS" in str(ran.value), str(ran.value)
    assert (checked.value.code, checked.value.span) == (ran.value.code, ran.value.span), str(checked.value)
    check_sql(text, engine="spark")  # Spark names it: nothing to refuse


@pytest.mark.parametrize(
    "outer",
    [
        "SELECT i + 1, d + 1, upper(s) FROM m",  # named over the run's types, so not refused without them
        "SELECT i FROM (SELECT i, regexp_extract(s, '(a)') FROM m) q",  # the column does not reach the result
        "SELECT i, regexp_extract(s, '(a)') AS r FROM m",
        "SELECT * FROM (SELECT regexp_extract(s, '(a)') FROM m) q(r)",
    ],
)
def test_cep_check_refuses_no_column_the_run_names(outer) -> None:
    from cep.statement import check_sql

    text = HEAD + outer
    cep.compile_sql(text).run({TABLE: arrow_table()}, kind="arrow")
    check_sql(text)


def test_the_cep_check_command_reports_the_refusal(tmp_path, capsys) -> None:
    from cep.cli import main

    query = tmp_path / "unnamed.sql"
    query.write_text(HEAD + "SELECT i, regexp_extract(s, '(a)') FROM m\n")
    assert main(["check", str(query)]) == 1
    err = capsys.readouterr().err
    assert re.search(rf"^{re.escape(str(query))}:2:11: error\[E0252\]: .*written without AS", err, re.M), err
    assert main(["check", "--engine", "spark", str(query)]) == 0
