"""A CSV backtest with a bad value: ``cep run --schema`` declares a CSV's column types, as ``cep stream
--schema`` does, so a value that is not of its column's type is a bad row (counted, set aside with
--dead-letter) on both engines instead of turning its whole column into text; and a type error over a
column that was read as text says so and names the way out."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal

import pytest

import cep
from cep import cli
from cep.matcher.rows.text_types import DECLARED_PATTERNS, declared_value

EVENTS = (
    "sym,ts,price,qty\n"
    "A,2024-01-01 00:00:01,10,1\n"
    "A,2024-01-01 00:00:02,9.5,2\n"
    "A,,9,3\n"  # no event time
    "A,notatime,8,4\n"  # an event time that is no time
    "A,2024-01-01 00:00:05,x,5\n"  # a price that is no number
    "A,2024-01-01 00:00:06,+7,007\n"
    "B,2024-01-01 00:00:01,5,NA\n"
    "B,2024-01-01 00:00:09,1e1,1.5\n"  # a qty that is no integer
    "B,2024-01-01 00:00:10,NA,2\n"
)
SCHEMA = "ts TIMESTAMP, price DOUBLE, qty BIGINT"
QUERY = """SELECT * FROM t MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES FIRST(A.ts) AS first_ts, COUNT(*) AS n, SUM(A.qty) AS qty, LAST(A.price) AS last_price
  ONE ROW PER MATCH
  PATTERN (A+) WITHIN INTERVAL '1' MINUTE
  DEFINE A AS A.price > 6 OR A.price IS NULL)
"""


def at(second: int) -> dt.datetime:
    return dt.datetime(2024, 1, 1, 0, 0, second)


# The good rows, typed by hand: what every engine must match when the bad ones are set aside.
GOOD_ROWS = [
    {"sym": "A", "ts": at(1), "price": 10.0, "qty": 1},
    {"sym": "A", "ts": at(2), "price": 9.5, "qty": 2},
    {"sym": "A", "ts": at(6), "price": 7.0, "qty": 7},
    {"sym": "B", "ts": at(1), "price": 5.0, "qty": None},
    {"sym": "B", "ts": at(10), "price": None, "qty": 2},
]
BAD = {"null_event_time": 1, "bad_event_time": 1, "wrong_type": 2}


@pytest.fixture
def files(tmp_path):
    (tmp_path / "events.csv").write_text(EVENTS, encoding="utf-8")
    (tmp_path / "q.sql").write_text(QUERY, encoding="utf-8")
    return tmp_path


def run(files, capsys, *extra: str) -> tuple[int, str, str]:
    code = cli.main(["run", str(files / "q.sql"), "--input", str(files / "events.csv"), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def expected_rows() -> list[dict]:
    return cep.compile(QUERY).run(GOOD_ROWS)


def test_the_good_rows_match_and_the_bad_ones_are_counted_and_set_aside(files, capsys):
    dead = files / "bad.jsonl"
    code, out, err = run(
        files,
        capsys,
        "--engine",
        "python",
        "--schema",
        SCHEMA,
        "--dead-letter",
        str(dead),
        "-o",
        str(files / "out.json"),
    )
    assert code == 0, err
    got = [json.loads(line) for line in (files / "out.json").read_text().splitlines()]
    want = expected_rows()
    assert len(got) == len(want) == 2
    assert [(r["sym"], r["n"], r["qty"], r["last_price"]) for r in got] == [
        (r["sym"], r["n"], r["qty"], r["last_price"]) for r in want
    ]
    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    assert sorted(letter["_cep_error"] for letter in letters) == sorted(r for r, n in BAD.items() for _ in range(n))
    assert "bad rows: 4" in out


def test_a_number_too_large_for_its_declared_type_is_named_as_such(files, capsys):
    # INTEGER ends at 2**31 - 1 = 2147483647; DECIMAL(6,2) holds 4 digits before the point: 9999.99
    (files / "events.csv").write_text(
        "sym,ts,price,qty\nA,2024-01-01 00:00:01,12345.5,2147483648\nA,2024-01-01 00:00:02,x,1\n", encoding="utf-8"
    )
    dead = files / "bad.jsonl"
    code, out, err = run(
        files,
        capsys,
        "--engine",
        "python",
        "--schema",
        "ts TIMESTAMP, price DECIMAL(6,2), qty INT",
        "--dead-letter",
        str(dead),
    )
    assert code == 0, err
    details = [json.loads(line)["_cep_error_detail"] for line in dead.read_text().splitlines()]
    assert details[0] in (
        "column 'price' holds '12345.5', a number too large for its declared DECIMAL(6,2)",
        "column 'qty' holds '2147483648', a number too large for its declared INTEGER",
    )
    assert details[1] == "column 'price' holds string 'x' where number is expected (declared DECIMAL(6,2))"


def test_without_a_dead_letter_the_first_bad_row_stops_the_run_with_its_code(files, capsys):
    code, out, err = run(files, capsys, "--engine", "python", "--schema", SCHEMA)
    assert code == cli.EXIT_QUERY_ERROR
    assert "error[E0440]" in err and "--dead-letter FILE" in err and "Traceback" not in err


def test_without_a_schema_a_type_error_over_a_text_column_names_the_way_out(files, capsys):
    code, out, err = run(files, capsys, "--engine", "python")
    assert code == cli.EXIT_QUERY_ERROR
    # price holds 'x', so the file's rule reads the column as text; ts holds 'notatime'
    assert "--schema 'price DOUBLE' --dead-letter FILE" in err or "--schema 'ts TIMESTAMP' --dead-letter FILE" in err, (
        err
    )


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--schema", "ts TIMESTAMP, nope DOUBLE"], "column 'nope': the input has no column of that name"),
        (["--schema", "tags ARRAY<INT>"], "a CSV value cannot be read as ARRAY<INT>"),
        (["--schema", "ts TIMESTAMP", "--format", "json"], "JSON and Parquet files carry their own types"),
        (["--schema", "ts"], "invalid --schema"),
    ],
)
def test_schema_mistakes_are_usage_errors(files, capsys, argv, says):
    code, out, err = run(files, capsys, "--engine", "python", *argv)
    assert code == cli.EXIT_USAGE, err
    assert says in err and "Traceback" not in err


def test_a_declared_name_matches_its_column_ignoring_case(files, capsys):
    code, out, err = run(
        files,
        capsys,
        "--engine",
        "python",
        "--schema",
        "TS timestamp, Price double, QTY bigint",
        "--dead-letter",
        str(files / "bad.jsonl"),
    )
    assert code == 0, err
    assert "bad rows: 4" in out


def test_within_over_text_event_times_is_an_error_with_a_position_not_a_traceback():
    query = cep.compile(QUERY)
    rows = [
        {"sym": "A", "ts": "2024-01-01 00:00:01", "price": 9.0, "qty": 1},
        {"sym": "A", "ts": "2024-01-01 00:00:02", "price": 9.0, "qty": 1},
    ]
    with pytest.raises(cep.CepError) as raised:
        query.run(rows)
    assert raised.value.code == "E0410" and "WITHIN" in raised.value.message
    with pytest.raises(cep.CepError) as raised:
        cep.check_sql(QUERY, schema={"sym": "VARCHAR", "ts": "VARCHAR", "price": "DOUBLE", "qty": "BIGINT"})
    assert raised.value.errors[0].code == "E0240" and raised.value.errors[0].span.line == 2


def test_a_time_string_spark_cannot_read_is_a_bad_event_time_on_the_python_engine_too():
    # Python's fromisoformat takes week dates and the basic format; Spark's cast does not: one rule.
    query = cep.compile(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A+) DEFINE A AS TRUE)"
    )
    dead: list = []
    rows = [{"ts": "2024-01-01T00:00:01"}, {"ts": "2024-W01-1"}, {"ts": "20240101T000003"}]
    assert query.run(rows, schema={"ts": "TIMESTAMP"}, dead_letter=dead) == [{"n": 1}]
    assert [d["_cep_error"] for d in dead] == ["bad_event_time", "bad_event_time"]


# Texts for every declared type: each either read as a value or left as its text (a bad row).
TEXTS = [
    "0",
    "7",
    "007",
    "+7",
    "-7",
    "1.5",
    "+1.50",
    "-.5",
    "1.",
    "1e3",
    "1E-3",
    "NaN",
    "nan",
    "-NaN",
    "inf",
    "-Inf",
    "+Infinity",
    "x",
    "1_000",
    "0x10",
    "1d",
    " 7",
    "9223372036854775807",
    "9223372036854775808",
    "2147483648",
    "-2147483648",
    "true",
    "FALSE",
    "yes",
    "1",
    "2024-01-31",
    "2024-02-30",
    "2024-01-31 10:00:00",
    "2024-01-31T10:00:00.123456789",
    "2024-01-31T10:00:00+02:00",
    "2024-01-31T10:00Z",
    "2024-W05-3",
    "123456789012345678901",
    "0.123456789012345678",
    "0.1234567890123456789",
    "1.235",
    "-1.235",
    "-0.001",
    "0.9995",
    "123456789.5",
    "99999999.995",
    "99999999.994",
    "00000000000000000000000000000000000000001.5",
    "99999999999999999999999999999999999999",
    "999999999999999999999999999999999999999",
    "32767",  # SMALLINT's and TINYINT's edges, and one past each
    "32768",
    "-32768",
    "-32769",
    "127",
    "128",
    "-128",
    "-00129",
    "",
]


def _same(ours, sparks) -> bool:
    if isinstance(ours, float) and isinstance(sparks, float) and math.isnan(ours):
        return math.isnan(sparks)
    if isinstance(ours, dt.datetime) and isinstance(sparks, dt.datetime):
        return ours == sparks.replace(tzinfo=None)
    if isinstance(ours, Decimal) and isinstance(sparks, Decimal):
        return ours == sparks and ours.as_tuple().exponent == sparks.as_tuple().exponent
    return type(ours) is type(sparks) and ours == sparks


@pytest.mark.spark
def test_both_engines_read_a_declared_column_alike(spark, tmp_path):
    """Spark's own casts (under the shared patterns) are the independent source for the values."""
    from cep.cli_io import read_pandas, read_spark

    # DECIMAL alone is DECIMAL(38,18), the widest; sized ones round half up to their scale as Spark's cast does
    types = [t for t in DECLARED_PATTERNS if t != "VARCHAR"] + ["DECIMAL(10,2)", "DECIMAL(3,3)", "DECIMAL(38,0)"]
    path = tmp_path / "texts.csv"
    header = ",".join(f"c_{index}" for index in range(len(types)))
    path.write_text(
        header + "\n" + "".join(",".join([json.dumps(text)] * len(types)) + "\n" for text in TEXTS if text),
        encoding="utf-8",
    )
    declared = {f"c_{index}": t for index, t in enumerate(types)}
    sparks = read_spark(spark, [str(path)], "csv", declared).collect()
    python = read_pandas([str(path)], "csv", declared)
    for index, text in enumerate(t for t in TEXTS if t):
        for name, type_name in declared.items():
            ours = declared_value(text, type_name)
            theirs = sparks[index][name]
            read = python[name].iloc[index]
            if isinstance(ours, str):  # refused: Spark marks the row, Python keeps the text for the row checks
                assert theirs is None and sparks[index]["_corrupt_record"] is not None, (text, type_name, theirs)
                assert read == text, (text, type_name)
            else:
                assert _same(ours, theirs), (text, type_name, ours, theirs)


@pytest.mark.spark
def test_the_spark_engine_sets_the_same_rows_aside_and_matches_the_same(files, capsys):
    outputs = {}
    for engine in ("python", "spark"):
        dead = files / f"bad-{engine}.jsonl"
        code, out, err = run(
            files,
            capsys,
            "--engine",
            engine,
            "--schema",
            SCHEMA,
            "--dead-letter",
            str(dead),
            "-o",
            str(files / f"out-{engine}.json"),
        )
        assert code == 0, err
        outputs[engine] = (files / f"out-{engine}.json").read_text()
        letters = [json.loads(line) for line in dead.read_text().splitlines()]
        counts = {reason: sum(1 for letter in letters if letter["_cep_error"] == reason) for reason in BAD}
        assert counts == BAD, engine
    assert outputs["python"] == outputs["spark"]


# A CSV's declared SMALLINT and TINYINT (issue #28): read as Spark's reader reads them (16 and 8 bits), so the
# clause's SMALLINT and TINYINT arithmetic is theirs on both engines: t + t of 100 and 100 is 200, past TINYINT's
# 127 (by hand; Spark SQL: "100S + 100S caused overflow"), sm + sm of -32768 is -65536, past SMALLINT's -32768,
# while sm - 1 of -32768 is the INT -32769 (the literal is an INT) and t * 2 of 100 the INT 200.
SMALL_CSV = "ts,sm,t\n2024-01-01 00:00:01,-32768,100\n"
SMALL_SCHEMA = "ts TIMESTAMP, sm SMALLINT, t TINYINT"


def small_run(files, capsys, engine: str, measures: str, define: str) -> tuple[int, str, str]:
    (files / "small.csv").write_text(SMALL_CSV, encoding="utf-8")
    (files / "small.sql").write_text(
        f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measures} ONE ROW PER MATCH "
        f"PATTERN (A) DEFINE A AS {define})",
        encoding="utf-8",
    )
    code = cli.main(
        ["run", str(files / "small.sql"), "--input", str(files / "small.csv"), "--engine", engine]
        + ["--schema", SMALL_SCHEMA, "-o", str(files / f"small-{engine}.json")]
    )
    out, err = capsys.readouterr()
    return code, out, err


def small_engines_agree(files, capsys, engines: tuple[str, ...]) -> None:
    for engine in engines:
        code, out, err = small_run(files, capsys, engine, "A.sm - 1 AS below, A.t * 2 AS twice", "TRUE")
        assert code == 0, err
        assert [json.loads(line) for line in (files / f"small-{engine}.json").read_text().splitlines()] == [
            {"below": -32769, "twice": 200}
        ], engine
        for define, sentence in [
            ("A.t + A.t > 0", "integer overflow: '+' gives 200, outside the range of TINYINT"),
            ("A.sm + A.sm < 0", "integer overflow: '+' gives -65536, outside the range of SMALLINT"),
        ]:
            code, out, err = small_run(files, capsys, engine, "A.sm AS sm", define)
            assert code == cli.EXIT_QUERY_ERROR, (engine, err)
            assert "error[E0410]" in err and sentence in err and "Traceback" not in err, (engine, err)


def test_a_declared_smallint_and_tinyint_are_theirs_in_the_clause(files, capsys):
    small_engines_agree(files, capsys, ("python",))


@pytest.mark.spark
def test_a_declared_smallint_and_tinyint_are_theirs_in_the_clause_on_spark(files, capsys):
    small_engines_agree(files, capsys, ("spark",))
