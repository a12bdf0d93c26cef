"""Whole SQL statements (docs/sql-statements.md): the same statement gives the same rows on both engines.

Every shipped pattern (patterns/*.sql) runs wrapped in ordinary SQL: its input through a CTE, its matches
as a CTE read with SELECT DISTINCT, and joined to a GROUP BY over the same matches, on the python engine
(DuckDB around the clause) and on Spark (Spark SQL around it); every row must be the same, and the rows
must be those of the pattern run alone (checked on the python engine's ``Query.run``). Then the pieces:
clauses found wherever a table may stand, subqueries inside a clause, the defined row order, errors
mapped to the user's text, and a stream.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import cep
from cep.cli import main
from cep.cli_io import read_pandas, read_spark
from cep.grammar.statement import SPARK, split
from cep.matcher.rows.tables import arrow_to_pandas

REPO = Path(__file__).resolve().parent.parent
PATTERNS = sorted((REPO / "patterns").glob("*.sql"))


def _data_file(pattern: Path) -> Path:
    found = re.search(r"--input (\S+)", pattern.read_text(encoding="utf-8"))
    return REPO / found.group(1)


def wrapped(pattern: Path) -> tuple[str, str]:
    """(the statement, the column it groups by): the pattern in a CTE over a CTE of its input, then
    SELECT DISTINCT over its matches joined to a GROUP BY over them."""
    text = pattern.read_text(encoding="utf-8")
    whole = split(text)
    clause = whole.clauses[0]
    start, end = clause.relation
    inner = text[:start] + "src" + text[end:]
    inner = re.sub(r"\bORDER BY [^)]*$", "", inner.strip().rstrip(";"), flags=re.S)  # the outer ORDER BY, if any
    key = clause.statement.match.partition_by[0].column.name if clause.statement.match.partition_by else None
    key = key or "n"
    grouped = (
        f"(SELECT {key}, COUNT(*) AS matches FROM m GROUP BY {key})"
        if key != "n"
        else "(SELECT COUNT(*) AS matches FROM m)"
    )
    on = f"g.{key} <=> d.{key}" if key != "n" else "TRUE"
    statement = (
        f"WITH src AS (SELECT * FROM events),\nm AS (\n{inner}\n),\nd AS (SELECT DISTINCT * FROM m)\n"
        f"SELECT d.*, g.matches FROM d JOIN {grouped} g ON {on}"
    )
    return statement, key


def _value(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat(" ")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (float, Decimal)):
        return round(float(value), 9)
    if hasattr(value, "item"):
        return _value(value.item())
    if isinstance(value, (list, tuple)):
        return tuple(_value(v) for v in value)
    return value


def rows_of(frame) -> Counter:
    return Counter(tuple(_value(v) for v in row) for row in frame.itertuples(index=False, name=None))


def python_rows(statement: str, data: Path):
    table = cep.compile_sql(statement).run(default=read_pandas([str(data)], "csv"), kind="arrow")
    return arrow_to_pandas(table)


@pytest.fixture(scope="module")
def spark_inputs(spark) -> dict[Path, object]:
    """Each data file as Spark reads it (``read_spark``), read once for the patterns that share it: reading a
    CSV costs Spark jobs of its own (the header, the kinds of its columns), the same for every statement."""
    return {data: read_spark(spark, [str(data)], "csv") for data in sorted({_data_file(p) for p in PATTERNS})}


@pytest.mark.spark
@pytest.mark.parametrize("pattern", PATTERNS, ids=[p.stem for p in PATTERNS])
def test_shipped_patterns_wrapped_give_the_same_rows_on_both_engines(spark, spark_inputs, pattern):
    statement, _key = wrapped(pattern)
    data = _data_file(pattern)
    here = python_rows(statement, data)
    there = arrow_to_pandas(cep.sql(spark, statement, default=spark_inputs[data]).toArrow())
    assert list(here.columns) == list(there.columns)
    assert rows_of(here) == rows_of(there)
    # And they are the pattern's own matches (distinct), each with its partition's count.
    alone = cep.compile(pattern.read_text(encoding="utf-8")).run(read_pandas([str(data)], "csv"))
    assert len(alone) and sum(Counter(map(tuple, alone.astype(str).values.tolist())).values()) == len(alone)
    assert len(here) == len(alone.drop_duplicates())


def test_wrapped_patterns_on_the_python_engine_count_each_partitions_matches():
    for pattern in PATTERNS:
        statement, key = wrapped(pattern)
        data = _data_file(pattern)
        got = python_rows(statement, data)
        alone = cep.compile(pattern.read_text(encoding="utf-8")).run(read_pandas([str(data)], "csv"))
        want = alone.groupby(key, dropna=False).size() if key in alone.columns else None
        if want is not None:
            assert {k: int(v) for k, v in want.items()} == {
                k: int(v) for k, v in got.groupby(key, dropna=False)["matches"].first().items()
            }, pattern.name


# ------------------------------------------------------------------------------------------ the parts


ROWS = [
    {"k": k, "t": t, "v": v}
    for k, values in (("b", [5, 4, 3, 6, 2, 1, 7]), ("a", [1, 0, 2, 3, 1, 4, 0]))
    for t, v in enumerate(values)
]
DIPS = "PARTITION BY k ORDER BY t MEASURES FIRST(A.t) AS s, LAST(B.v) AS low PATTERN (A B+) DEFINE B AS B.v < PREV(B.v)"


def test_clauses_wherever_a_table_may_stand():
    statement = cep.compile_sql(f"""
        WITH x AS (SELECT * FROM t MATCH_RECOGNIZE ({DIPS}) m1)
        SELECT k, COUNT(*) AS n FROM (
          SELECT k FROM x
          UNION ALL
          SELECT k FROM (SELECT * FROM t WHERE v > 0) MATCH_RECOGNIZE ({DIPS}) AS m2
        ) GROUP BY k ORDER BY k""")
    assert [c.index for c in statement.clauses] == [1, 2]
    assert statement.run({"t": ROWS}) == [{"k": "a", "n": 4}, {"k": "b", "n": 4}]


def test_a_clause_over_the_output_of_another():
    nested = cep.compile_sql(f"""
        SELECT * FROM (SELECT k, s AS t, low AS v FROM t MATCH_RECOGNIZE ({DIPS}) m)
        MATCH_RECOGNIZE (PARTITION BY k ORDER BY t MEASURES COUNT(*) AS n PATTERN (X+) DEFINE X AS true) m2""")
    assert nested.run({"t": ROWS}) == [{"k": "a", "n": 3}, {"k": "b", "n": 2}]  # a dips 3 times, b twice


def test_subqueries_inside_a_clause_are_constants():
    statement = cep.compile_sql("""
        SELECT * FROM t MATCH_RECOGNIZE (
          PARTITION BY k ORDER BY t
          MEASURES A.v AS v, (SELECT MAX(v) FROM t) AS top, A.k IN (SELECT k FROM t WHERE v > 6) AS has_seven,
                   EXISTS (SELECT 1 FROM t WHERE v < 0) AS negatives
          PATTERN (A) DEFINE A AS A.v >= (SELECT AVG(v) FROM t) AND A.v NOT IN (SELECT v FROM t WHERE v > 6))""")
    assert statement.run({"t": ROWS}) == [
        {"k": "a", "v": 3, "top": 7, "has_seven": False, "negatives": False},
        {"k": "a", "v": 4, "top": 7, "has_seven": False, "negatives": False},
        {"k": "b", "v": 5, "top": 7, "has_seven": True, "negatives": False},
        {"k": "b", "v": 4, "top": 7, "has_seven": True, "negatives": False},
        {"k": "b", "v": 3, "top": 7, "has_seven": True, "negatives": False},
        {"k": "b", "v": 6, "top": 7, "has_seven": True, "negatives": False},
    ]  # AVG(v) = 39/14 = 2.79; the 7 is excluded by NOT IN


def test_rows_come_in_the_order_the_query_defines():
    rows = cep.compile_sql(f"SELECT k, s FROM t MATCH_RECOGNIZE ({DIPS}) m").run({"t": ROWS})
    # Partitions in key order (a, though b comes first in the input), matches in order.
    assert rows == [{"k": "a", "s": 0}, {"k": "a", "s": 3}, {"k": "a", "s": 5}, {"k": "b", "s": 0}, {"k": "b", "s": 3}]


def test_double_quotes_name_columns_in_the_whole_statement():
    rows = cep.compile_sql(f'SELECT "k", low AS "Low #" FROM t MATCH_RECOGNIZE ({DIPS}) m ORDER BY "Low #" DESC').run(
        {"t": ROWS}
    )
    assert [(r["k"], r["Low #"]) for r in rows] == [("b", 3), ("a", 1), ("b", 1), ("a", 0), ("a", 0)]


def test_rendering_quotes_generated_names_and_maps_positions_back():
    text = 'SELECT "m".k FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS true) AS "m" JOIN \'x.csv\' f ON TRUE'
    whole = split(text)
    rendered = whole.render(SPARK, {1: "view`1"}, {"x.csv": "file"})
    assert rendered.text == "SELECT `m`.k FROM `view``1` AS `m` JOIN `file` f ON TRUE"
    assert rendered.position(rendered.text.index("JOIN")) == text.index("JOIN")


@pytest.mark.parametrize(
    "text,code,where",
    [
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS true) m GROUP BY k HAVING", "E0130", "HAVING"),
        ("SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B) DEFINE C AS true) m", "E0202", "C AS"),
        ("SELECT 1", "E0133", "SELECT"),
        ("SELECT * FROM MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS true)", "E0132", "MATCH_RECOGNIZE"),
    ],
)
def test_check_points_into_the_users_text(text, code, where):
    with pytest.raises(cep.CepError) as caught:
        cep.check_sql(text)
    error = caught.value
    assert error.code == code
    assert error.errors[0].span.start == text.index(where), str(error)


def test_the_python_engines_errors_point_into_the_users_text():
    text = f"SELECT m.nope FROM t MATCH_RECOGNIZE ({DIPS}) m"
    with pytest.raises(cep.CepError) as caught:
        cep.compile_sql(text).run({"t": ROWS})
    span = caught.value.errors[0].span
    assert caught.value.code == "E0250" and text[span.start : span.end] == "m.nope"  # Spark's caret: the reference
    assert "Traceback" not in str(caught.value)


def test_a_text_after_the_from_of_a_call_is_a_value_not_a_file():
    """``trim(BOTH 'a' FROM 'xy')`` names no file: only a query's own FROM or JOIN reads one."""
    text = f"SELECT trim(BOTH 'a' FROM 'aNaNa') AS c, trim(LEADING 'a' FROM m.k) AS d FROM t MATCH_RECOGNIZE ({DIPS}) m"
    whole = split(text)
    assert whole.paths == ()
    rows = cep.compile_sql(text).run({"t": ROWS})
    assert rows and {row["c"] for row in rows} == {"NaN"} and {row["d"] for row in rows} <= {"", "b"}
    subquery = split(f"SELECT * FROM (SELECT * FROM 'x.csv') MATCH_RECOGNIZE ({DIPS}) m")
    assert [path for _, _, path in subquery.paths] == ["x.csv"]


def test_cep_run_and_check_on_a_whole_statement(tmp_path, capsys):
    events = tmp_path / "events.csv"
    events.write_text("k,t,v\n" + "".join(f"{r['k']},{r['t']},{r['v']}\n" for r in ROWS))
    limits = tmp_path / "limits.csv"
    limits.write_text("k,floor\na,1\nb,2\n")
    query = tmp_path / "q.sql"
    query.write_text(
        f"SELECT m.k, m.low, l.floor FROM '{events.name}' MATCH_RECOGNIZE ({DIPS}) m\n"
        "JOIN limits l ON l.k = m.k WHERE m.low < l.floor"
    )
    assert main(["check", str(query)]) == 0
    here = Path.cwd()
    try:
        import os

        os.chdir(tmp_path)
        assert main(["run", str(query), "-i", f"limits={limits}"]) == 0
    finally:
        os.chdir(here)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{query}: ok (1 statement)"
    # A join defines no order: the rows are printed sorted, the same on both engines.
    assert [line.split() for line in out[1:]][2:-1] == [["a", "0", "1"], ["a", "0", "1"], ["b", "1", "2"]]
    assert out[-1].startswith("events read: 14, partitions: 2, matches: 5, output rows: 3, ")


@pytest.mark.spark
def test_spark_errors_point_into_the_users_text(spark):
    spark.createDataFrame(pa.Table.from_pylist(ROWS).to_pandas()).createOrReplaceTempView("t")
    text = f"SELECT m.nope FROM t MATCH_RECOGNIZE ({DIPS}) m"
    with pytest.raises(cep.CepError) as caught:
        cep.sql(spark, text)
    assert caught.value.code == "E0250" and caught.value.errors[0].span.start == text.index("m.nope")
    text = f"SELECT * FROM t MATCH_RECOGNIZE ({DIPS}) m ORDR BY k"
    with pytest.raises(cep.CepError) as caught:
        cep.sql(spark, text)
    assert caught.value.code == "E0130" and caught.value.errors[0].span.start == text.index("ORDR")


@pytest.mark.spark
def test_a_spark_sql_error_after_cep_sql_keeps_its_own_message(spark):
    # cep.sql quiets PySpark's SQL error logger while it runs; made as a plain Logger, that logger broke
    # PySpark's next SQL error in the process ("Logger._log() got an unexpected keyword argument 'errorClass'").
    spark.createDataFrame(pa.Table.from_pylist(ROWS).to_pandas()).createOrReplaceTempView("t")
    cep.sql(spark, f"SELECT * FROM t MATCH_RECOGNIZE ({DIPS}) m")
    with pytest.raises(Exception) as caught:
        spark.sql("SELECT nope FROM t").collect()
    assert "UNRESOLVED_COLUMN" in str(caught.value), str(caught.value)[:300]


@pytest.mark.spark
def test_spark_orders_rows_as_the_query_defines_and_reads_subqueries(spark):
    spark.createDataFrame(pa.Table.from_pylist(ROWS).to_pandas()).createOrReplaceTempView("t")
    frame = cep.sql(spark, f"SELECT k, s FROM t MATCH_RECOGNIZE ({DIPS}) m", ordered=True)
    assert [tuple(r) for r in frame.collect()] == [("a", 0), ("a", 3), ("a", 5), ("b", 0), ("b", 3)]
    frame = cep.sql(
        spark,
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY t MEASURES A.v AS v "
        "PATTERN (A) DEFINE A AS A.v > (SELECT AVG(v) + 2 FROM t) AND A.k IN (SELECT 'b'))",
    )
    assert sorted(tuple(r) for r in frame.collect()) == [("b", 5), ("b", 6), ("b", 7)]


@pytest.mark.spark
def test_a_stream_through_a_whole_statement(spark, tmp_path):
    """A stream joined to a static table after matching, a scalar subquery in DEFINE: as Spark allows."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "1.json").write_text(
        "".join(f'{{"k": "{r["k"]}", "t": "2024-01-01 00:00:{r["t"]:02d}", "v": {r["v"]}}}\n' for r in ROWS)
    )
    spark.readStream.schema("k STRING, t TIMESTAMP, v INT").json(str(folder)).createOrReplaceTempView("s")
    spark.createDataFrame([("a", "alpha"), ("b", "beta")], "k string, name string").createOrReplaceTempView("names")
    frame = cep.sql(
        spark,
        """
        SELECT n.name, m.low FROM s MATCH_RECOGNIZE (
          PARTITION BY k ORDER BY t MEASURES LAST(B.v) AS low
          PATTERN (A B+) DEFINE B AS B.v < PREV(B.v) AND B.v < (SELECT 100)) m
        JOIN names n ON n.k = m.k""",
        watermark="0 seconds",
    )
    assert frame.isStreaming
    query = (
        frame.writeStream.format("memory")
        .queryName("wholestream")
        .option("checkpointLocation", str(tmp_path / "chk"))
        .start()
    )
    try:
        (folder / "2.json").write_text(
            '{"k": "a", "t": "2024-01-01 00:01:00", "v": 9}\n{"k": "b", "t": "2024-01-01 00:01:00", "v": 9}\n'
        )
        query.processAllAvailable()
        got = sorted(tuple(r) for r in spark.table("wholestream").collect())
    finally:
        query.stop()
    assert got == [("alpha", 0), ("alpha", 0), ("alpha", 1), ("beta", 1), ("beta", 3)]


def test_a_window_function_inside_a_clause_runs_over_its_partition():
    """Snowflake's DEFINE price > AVG(price) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING):
    the average of the clause's partition (a: 11/7 = 1.57, b: 28/7 = 4)."""
    statement = cep.compile_sql("""
        SELECT k, t FROM t MATCH_RECOGNIZE (
          PARTITION BY k ORDER BY t MEASURES A.t AS t ALL ROWS PER MATCH PATTERN (A)
          DEFINE A AS v > AVG(v) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)) m""")
    window = statement.clauses[0].subqueries[0]
    assert (window.kind, window.partition, window.order) == ("window", ("k",), (("t", False),))
    assert statement.run({"t": ROWS}) == [{"k": "a", "t": t} for t in (2, 3, 5)] + [
        {"k": "b", "t": t} for t in (0, 3, 6)
    ]


@pytest.mark.spark
def test_both_engines_print_the_same_table(spark, tmp_path, capsys):
    """Dates, timestamps and NULL in an integer column print alike; rows in the order the query defines."""
    events = tmp_path / "events.csv"
    events.write_text(
        "k,ts,v\n" + "".join(f"{r['k']},2024-01-0{1 + r['t'] % 3} 10:00:0{r['t']},{r['v']}\n" for r in ROWS)
    )
    query = tmp_path / "q.sql"
    query.write_text(
        "SELECT k, low, CAST(ts AS DATE) AS day, ts FROM events MATCH_RECOGNIZE (\n"
        "  PARTITION BY k ORDER BY ts MEASURES LAST(B.v) AS low ALL ROWS PER MATCH\n"
        "  PATTERN (A B+) DEFINE B AS B.v < PREV(B.v)) m"
    )
    tables = {}
    for engine in ("python", "spark"):
        assert main(["run", str(query), "-i", str(events), "--engine", engine]) == 0
        lines = capsys.readouterr().out.splitlines()
        tables[engine] = lines[:-1]
    assert tables["python"] == tables["spark"]
    assert tables["python"][2].split() == ["a", "NULL", "2024-01-01", "2024-01-01", "10:00:03"]
    assert tables["python"][3].split() == ["a", "0", "2024-01-01", "2024-01-01", "10:00:06"]
