"""The function library: each function against Spark SQL's own answer on the same rows (where Spark has
it), the same compiled expression on the python engine and inside Spark, LIKE and regular expressions
in linear time, and the messages around them."""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal

import pytest

import cep

# cep expression -> the same in Spark SQL (None: the same text). Columns: ts TIMESTAMP, d DATE, price DOUBLE,
# qty BIGINT, note STRING, tag STRING (often NULL).
SPARK_TWINS: dict[str, str | None] = {
    "price / qty": None,
    "qty DIV 3": None,
    "-qty DIV 3": None,
    "MOD(-qty, 3)": None,
    "qty % 3": None,
    "LOG10(price)": None,
    "LOG(2, price)": None,
    "NVL(tag, 'x')": None,
    "GREATEST(tag, 'b')": None,  # Spark's GREATEST and LEAST skip a NULL argument (tag is often NULL)
    "LEAST(tag, 'b', note)": None,
    "GREATEST(CAST(NULL AS DOUBLE), price, qty)": None,
    "GREATEST(ts, d)": None,  # a DATE meeting a TIMESTAMP: its midnight
    "IFNULL(tag, 'x')": None,
    "NVL2(tag, 1, 2)": None,
    "DECODE(tag, NULL, 'none', 'a', 'A', 'other')": None,
    "tag IS DISTINCT FROM 'a'": None,
    "tag IS NOT DISTINCT FROM NULL": None,
    "tag <=> 'a'": None,
    "TRY_CAST(note AS INT)": None,
    "CAST(price AS DECIMAL(10, 2))": None,
    "note::STRING": None,
    "REPLACE(note, 'a', 'xy')": None,
    "SPLIT_PART(note, '-', 2)": None,
    "SPLIT_PART(note, '-', -1)": None,
    "SPLIT_PART(note, '-', 9)": None,
    "POSITION('a' IN note)": None,
    "STARTSWITH(note, 'a')": None,
    "ENDSWITH(note, 'b')": None,
    "CONTAINS(note, 'ab')": None,
    "note ILIKE 'A%'": None,
    "note LIKE '%a_b%'": None,
    "note LIKE 'a!%%' ESCAPE '!'": None,
    "REGEXP_LIKE(note, '^[ab]+-')": None,
    "note RLIKE 'b+a'": None,
    "REGEXP_SUBSTR(note, '[0-9]+')": None,
    "REGEXP_REPLACE(note, '([ab])-', '$1+')": None,
    "EXTRACT(YEAR FROM ts)": None,
    "EXTRACT(QUARTER FROM ts)": None,
    "EXTRACT(MONTH FROM ts)": None,
    "EXTRACT(WEEK FROM ts)": None,
    "EXTRACT(DAY FROM ts)": None,
    "EXTRACT(DAYOFWEEK FROM ts)": None,
    "EXTRACT(DOY FROM ts)": None,
    "EXTRACT(HOUR FROM ts)": None,
    "EXTRACT(MINUTE FROM ts)": None,
    "EXTRACT(SECOND FROM ts)": None,
    "DATE_PART('dow', ts)": None,
    "HOUR(ts)": None,
    "MINUTE(ts)": None,
    "SECOND(ts)": None,
    "DAYOFWEEK(ts)": None,
    "DAYOFYEAR(ts)": None,
    "WEEKOFYEAR(ts)": None,
    "WEEKDAY(ts)": None,
    "YEAR(d)": None,
    "MONTH(d)": None,
    "DAY(d)": None,
    "DATE_TRUNC('year', ts)": None,
    "DATE_TRUNC('quarter', ts)": None,
    "DATE_TRUNC('month', ts)": None,
    "DATE_TRUNC('week', ts)": None,
    "DATE_TRUNC('day', ts)": None,
    "DATE_TRUNC('hour', ts)": None,
    "DATE_TRUNC('minute', ts)": None,
    "TRUNC(d, 'MM')": None,
    "TRUNC(d, 'YEAR')": None,
    "TRUNC(d, 'WEEK')": None,
    "DATEADD(day, qty, ts)": None,
    "DATEADD(month, qty, ts)": None,
    "DATEADD(hour, -qty, ts)": None,
    "TIMESTAMPADD(minute, qty, ts)": None,
    "DATE_ADD(ts, qty)": "DATE_ADD(ts, CAST(qty AS INT))",
    "DATE_SUB(d, qty)": "DATE_SUB(d, CAST(qty AS INT))",
    "DATEDIFF(d, ts)": None,
    "DATE_DIFF(d, ts)": None,
    "TIMESTAMPDIFF(HOUR, ts, TIMESTAMP '2024-06-01 00:00:00')": None,
    "TIMESTAMPDIFF(MONTH, ts, TIMESTAMP '2024-06-15 12:00:00')": None,
    "DATEDIFF(DAY, ts, TIMESTAMP '2024-06-01 00:00:00')": None,
    "DATE(ts)": None,
    "TO_DATE(note2)": None,
    "TO_TIMESTAMP(note2)": None,
    "TO_TIMESTAMP(note3, 'dd/MM/yyyy HH:mm')": None,
    "DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss')": None,
    "DATE_FORMAT(ts, 'EEE, d MMM yy hh:mm a')": None,
    "TO_CHAR(ts, 'yyyy/MM/dd')": None,
    "UNIX_TIMESTAMP(ts)": None,
    "UNIX_TIMESTAMP(note3, 'dd/MM/yyyy HH:mm')": None,
    "ts + INTERVAL '1 hour 30 minutes'": None,
    "ts - INTERVAL 5 MINUTES": None,
}


def _rows(count: int = 40, seed: int = 7) -> list[dict]:
    generator = random.Random(seed)
    start = dt.datetime(2023, 12, 25)
    rows = []
    for index in range(count):
        ts = start + dt.timedelta(
            minutes=generator.randrange(0, 60 * 24 * 120),
            seconds=generator.randrange(60),
            microseconds=generator.choice([0, 500_000]),
        )
        letters = "".join(generator.choice("ab-9") for _ in range(generator.randrange(0, 7)))
        rows.append(
            dict(
                id=index,
                ts=ts,
                d=ts.date() - dt.timedelta(days=generator.randrange(40)),
                price=round(generator.uniform(0.5, 300), 3),
                qty=generator.randrange(1, 40),
                note=letters,
                tag=generator.choice([None, None, "a", "b"]),
                note2=ts.strftime("%Y-%m-%d %H:%M:%S"),
                note3=ts.strftime("%d/%m/%Y %H:%M"),
            )
        )
    return rows


def _query(expressions: list[str]) -> str:
    measures = ", ".join(f"{expression} AS v{index}" for index, expression in enumerate(expressions))
    return f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES {measures} ALL ROWS PER MATCH PATTERN (A))"


def _same(got, want) -> bool:
    if got is None or want is None:
        return got is None and want is None
    if isinstance(want, float) or isinstance(got, float):
        return math.isclose(float(got), float(want), rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(want, Decimal) or isinstance(got, Decimal):
        return Decimal(str(got)) == Decimal(str(want))
    if isinstance(want, dt.datetime) and isinstance(got, dt.datetime):
        return want.replace(tzinfo=None) == got.replace(tzinfo=None)
    return got == want


@pytest.mark.spark
def test_each_function_gives_spark_sqls_answer_on_the_same_rows(spark) -> None:
    rows = _rows()
    names = list(SPARK_TWINS)
    ours = cep.compile(_query(names)).run(rows)
    schema = (
        "id BIGINT, ts TIMESTAMP, d DATE, price DOUBLE, qty BIGINT, note STRING, tag STRING, note2 STRING, note3 STRING"
    )
    spark.createDataFrame([tuple(r.values()) for r in rows], schema).createOrReplaceTempView("function_rows")
    selected = ", ".join(f"{twin or name} AS v{index}" for index, (name, twin) in enumerate(SPARK_TWINS.items()))
    theirs = spark.sql(f"SELECT {selected} FROM function_rows ORDER BY id").collect()
    problems = []
    for index, name in enumerate(names):
        for row, (mine, spark_row) in enumerate(zip(ours, theirs)):
            if not _same(mine[f"v{index}"], spark_row[index]):
                problems.append(f"{name} on row {row}: cep {mine[f'v{index}']!r}, Spark {spark_row[index]!r}")
                break
    assert not problems, "\n".join(problems)


@pytest.mark.spark
def test_the_same_expressions_inside_spark_batch_and_a_stream_equal_the_python_engine(spark, tmp_path) -> None:
    """The compiled expression runs in Spark's Python workers: batch and streaming give the python engine's rows."""
    rows = _rows(12, seed=3)
    names = [n for n in SPARK_TWINS if "ts" in n or "note" in n][:30]
    text = _query(names).replace("ORDER BY id", "PARTITION BY k ORDER BY ts")
    for row in rows:
        row["k"] = "x"
    query = cep.compile(text)
    python = sorted((tuple(r[f"v{i}"] for i in range(len(names))) for r in query.run(rows)), key=repr)
    schema = (
        "id BIGINT, ts TIMESTAMP, d DATE, price DOUBLE, qty BIGINT, note STRING, tag STRING, note2 STRING, "
        "note3 STRING, k STRING"
    )
    df = spark.createDataFrame([tuple(r.values()) for r in rows], schema)
    batch = sorted((tuple(r[f"v{i}"] for i in range(len(names))) for r in query.on_spark(df).collect()), key=repr)
    assert len(batch) == len(python)
    assert all(_same(a, b) for x, y in zip(batch, python) for a, b in zip(x, y))
    df.write.parquet(str(tmp_path / "in"))
    stream = spark.readStream.schema(df.schema).parquet(str(tmp_path / "in"))
    out = query.on_spark(stream, watermark="0 seconds")
    sink = out.writeStream.format("memory").queryName("function_stream").outputMode("append").start()
    try:
        sink.processAllAvailable()
    finally:
        sink.stop()
    streamed = spark.sql("SELECT * FROM function_stream").collect()
    got = sorted((tuple(r[f"v{i}"] for i in range(len(names))) for r in streamed), key=repr)
    # A stream emits a row once the watermark passes it: the last rows may still wait; those out must agree.
    assert got and all(any(all(_same(a, b) for a, b in zip(x, y)) for y in python) for x in got)


def test_current_timestamp_is_one_instant_for_a_run() -> None:
    query = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES CURRENT_TIMESTAMP AS now, "
        "CURRENT_DATE AS today, NOW() AS also ALL ROWS PER MATCH PATTERN (A+))"
    )
    before = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    out = query.run([{"id": i} for i in range(50)])
    after = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    assert len({r["now"] for r in out}) == 1 and before <= out[0]["now"] <= after
    assert out[0]["also"] == out[0]["now"] and out[0]["today"] == out[0]["now"].date()


# ------------------------------------------------------------------------------------- linear time


def test_like_does_not_backtrack_on_a_hostile_pattern() -> None:
    # 70 s with a backtracking translation ; a linear matcher answers at once (bench/like_regex.py
    # measures it). The pattern also comes from a column: data alone chooses it.
    rows = [{"id": i, "note": "a" * 40, "p": "%a%a%a%a%a%a%a%a%a%a%b"} for i in range(3)]
    literal = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n PATTERN (A+) "
        "DEFINE A AS note LIKE '%a%a%a%a%a%a%a%a%a%a%b')"
    )
    from_column = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n PATTERN (A+) DEFINE A AS NOT note LIKE p)"
    )
    assert literal.run(rows) == []
    assert from_column.run(rows) == [{"n": 3}]


def test_regular_expressions_run_on_re2() -> None:
    rows = [{"id": 1, "note": "a" * 40 + "c", "p": "(a+)+b"}]
    query = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES REGEXP_LIKE(note, p) AS m, "
        "note RLIKE '(a|aa)*c' AS n PATTERN (A))"
    )
    assert query.run(rows) == [{"m": False, "n": True}]


@pytest.mark.parametrize(
    "pattern, text, expected",
    [
        ("abc", "abc", True),
        ("abc", "abcd", False),
        ("a%", "abc", True),
        ("%c", "abc", True),
        ("%b%", "abc", True),
        ("a_c", "abc", True),
        ("a_c", "ac", False),
        ("%", "", True),
        ("", "", True),
        ("", "a", False),
        ("a%b%c", "aXbYc", True),
        ("a%b%c", "acb", False),
        ("%ab%ab%", "abab", True),
        ("%ab%ab%", "aba", False),
        ("_%_", "a", False),
        ("_%_", "ab", True),
        ("%a%a%b", "aab", True),
        ("%a%a%b", "ab", False),
        ("a%%a", "a", False),
        ("a%a", "aa", True),
        ("%\u00e9_", "x\u00e9y", True),
    ],
)
def test_like_semantics(pattern: str, text: str, expected: bool) -> None:
    from cep.matcher.sql.text_patterns import like

    assert like(text, pattern) is expected


# ------------------------------------------------------------------------------------------- messages


def _error(text: str, rows=None) -> cep.CepError:
    with pytest.raises(cep.CepError) as raised:
        query = cep.compile(text)
        query.run(rows or [{"id": 1, "note": "x", "p": "x!"}])
    return raised.value


@pytest.mark.parametrize("escape, problem", [("'!!'", "one character"), ("''", "one character")])
def test_an_escape_of_other_than_one_character_is_an_error_with_a_position(escape: str, problem: str) -> None:
    text = f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS note LIKE 'a%' ESCAPE {escape})"
    error = _error(text)
    assert error.code == "E0245" and problem in error.message and error.column == text.index(escape) + 1


def test_a_trailing_escape_is_an_error_with_a_position_in_the_query_or_at_run_time() -> None:
    text = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS note LIKE 'a!' ESCAPE '!')"
    error = _error(text)
    assert error.code == "E0245" and "ends with its escape character" in error.message
    assert error.column == text.index("'a!'") + 1
    text = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS note LIKE p ESCAPE '!')"
    error = _error(text)  # the pattern comes from a column: a run-time error, at the LIKE, with the row
    assert error.code == "E0413" and error.column == text.index("note LIKE") + 1 and "row 1" in error.message


def test_a_backreference_is_refused_and_said_why() -> None:
    error = _error(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id PATTERN (A) DEFINE A AS REGEXP_LIKE(note, '(a)\\\\1'))"
    )
    assert error.code == "E0246" and "backreferences" in error.message


@pytest.mark.parametrize(
    "name, synonym",
    [
        ("FIRST_VALUE", "FIRST"),
        ("ISNULL", "COALESCE"),
        ("INSTR", "STRPOS"),
        ("GETDATE", "CURRENT_TIMESTAMP"),
        ("ROW_NUMBER", "MATCH_SEQUENCE_NUMBER"),
    ],
)
def test_did_you_mean_knows_other_dialects_names(name: str, synonym: str) -> None:
    error = _error(f"SELECT * FROM t MATCH_RECOGNIZE (MEASURES {name}(x) AS v PATTERN (A))")
    assert error.code == "E0230" and f"did you mean {synonym}()?" in error.hint


def test_other_dialects_names_that_cep_accepts() -> None:
    # LAG, LEAD, NVL and IFNULL are functions now, not unknown names hinted at AVG or LEAST.
    query = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES NVL(LAG(x), 0) AS a, "
        "IFNULL(LEAD(x), 0) AS b ALL ROWS PER MATCH PATTERN (A B) DEFINE B AS LAG(x) < x)"
    )
    assert query.run([{"id": 1, "x": 1}, {"id": 2, "x": 2}]) == [
        {"id": 1, "a": 0, "b": 2, "x": 1},
        {"id": 2, "a": 1, "b": 0, "x": 2},
    ]


def test_a_window_function_in_define_says_what_to_write_instead() -> None:
    error = _error(
        "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A)\n DEFINE A AS price > avg(price) over "
        "(rows between unbounded preceding and unbounded following))"
    )
    assert error.code == "E0244" and (error.line, error.column) == (2, 33)
    assert "in DEFINE" in error.message and "AVG(price) OVER (PARTITION BY" in error.hint


def test_within_group_is_not_mistaken_for_within() -> None:
    query = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES PERCENTILE_CONT(0.5) WITHIN GROUP "
        "(ORDER BY x) AS p PATTERN (A+) WITHIN INTERVAL '1' HOUR)"
    )
    assert query.statement.match.within is not None
    assert query.run([{"id": i, "x": x} for i, x in enumerate([1, 2, 3, 10])]) == [{"p": 2.5}]
