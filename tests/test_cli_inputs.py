"""The inputs every file-reading command shares (``cep.cli_io.Inputs``: ``-i [NAME=]PATH``, ``--schema
[NAME=]COLUMNS``, whole statements) and the reading rules both engines follow: a column of ISO dates is
DATE, DATE and TIMESTAMP compare and coalesce as Spark does, a header that names a column twice is refused.
Expected values are computed here with the standard library, not with cep."""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest

from cep.cli import main
from cep.cli_io import Inputs, UsageError

# Daily rows of one account: a fall then a rise is a match. ``closed`` is empty where the account is open.
DAILY = [
    ("2020-01-01", 5, "2020-01-04"),
    ("2020-01-02", 3, ""),
    ("2020-01-03", 4, "2020-01-09"),
    ("2020-01-04", 6, ""),
    ("2020-01-05", 2, "2020-01-06"),
    ("2020-01-06", 7, ""),
]
CSV = "d,v,closed\n" + "".join(f"{d},{v},{c}\n" for d, v, c in DAILY)

# A DATE column compared with a DATE literal, and a DATE column coalesced with one, then the greatest.
DATES_QUERY = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY d
  MEASURES FIRST(d) AS first_day, LAST(d) AS last_day, MAX(COALESCE(closed, DATE '9999-12-31')) AS latest_close
  ONE ROW PER MATCH PATTERN (A B+ C+) DEFINE A AS d < DATE '2020-01-05', B AS v < PREV(v), C AS v > PREV(v))
"""

# The same over a TIMESTAMP column: a DATE meets a TIMESTAMP in <, COALESCE and MAX (Spark widens the DATE).
TIMES_QUERY = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
  MEASURES MAX(COALESCE(ts, DATE '9999-12-31')) AS latest, COALESCE(LAST(closed), FIRST(ts)) AS closed_or_start,
           FIRST(ts) < DATE '2020-01-02' AS before_second_day
  ONE ROW PER MATCH PATTERN (A B+ C+) DEFINE A AS ts < DATE '2020-01-05', B AS v < PREV(v), C AS v > PREV(v))
"""


def _expected_date_matches() -> list[tuple[str, str, str]]:
    """The V shapes of DAILY found by hand-written Python: (first day, last day, latest close)."""
    days = [dt.date.fromisoformat(d) for d, _, _ in DAILY]
    values = [v for _, v, _ in DAILY]
    closes = [dt.date.fromisoformat(c) if c else dt.date(9999, 12, 31) for _, _, c in DAILY]
    found, start = [], 0
    while start < len(days) - 2:
        end = start + 1
        while end < len(days) and values[end] < values[end - 1]:
            end += 1
        rises = end
        while rises < len(days) and values[rises] > values[rises - 1]:
            rises += 1
        if days[start] < dt.date(2020, 1, 5) and end > start + 1 and rises > end:
            found.append((days[start].isoformat(), days[rises - 1].isoformat(), max(closes[start:rises]).isoformat()))
            start = rises
        else:
            start += 1
    return found


def _table(out: str) -> list[list[str]]:
    lines = [line for line in out.splitlines() if line and not line.startswith(("events read", "-"))]
    return [line.split() for line in lines[1:]]


@pytest.fixture
def daily(tmp_path):
    (tmp_path / "daily.csv").write_text(CSV, encoding="utf-8")
    (tmp_path / "dates.sql").write_text(DATES_QUERY, encoding="utf-8")
    times = "ts,v,closed\n" + "".join(f"{d} 10:30,{v},{c}\n" for d, v, c in DAILY)  # each day at 10:30
    (tmp_path / "times.csv").write_text(times, encoding="utf-8")
    (tmp_path / "times.sql").write_text(TIMES_QUERY, encoding="utf-8")
    return tmp_path


# ------------------------------------------------------------------------------------------ dates


def test_a_column_of_iso_dates_is_date_and_compares_with_a_date_literal(daily, capsys):
    assert main(["run", str(daily / "dates.sql"), "-i", str(daily / "daily.csv"), "--engine", "python"]) == 0
    rows = _table(capsys.readouterr().out)
    assert [tuple(r) for r in rows] == _expected_date_matches()
    assert rows and all(len(cell) == 10 for row in rows for cell in row)  # dates, no 00:00:00


def test_a_date_meets_a_timestamp_as_in_spark(daily, capsys):
    assert main(["run", str(daily / "times.sql"), "-i", str(daily / "times.csv"), "--engine", "python"]) == 0
    closes = {d: c for d, _, c in DAILY}
    expected = []
    for first, last, _ in _expected_date_matches():
        # MAX over TIMESTAMPs and a DATE: the latest time; COALESCE(DATE column, TIMESTAMP) is a TIMESTAMP
        close = f"{closes[last]} 00:00:00" if closes[last] else f"{first} 10:30:00"
        expected.append([last, "10:30:00", *close.split(), str(first < "2020-01-02").lower()])
    assert _table(capsys.readouterr().out) == expected


# A TIMESTAMP column that is NULL in some rows meets a DATE: COALESCE gives the DATE's midnight where the
# column is NULL, GREATEST and LEAST skip the NULL (Spark's functions: NULL only when every argument is).
NULL_TIMES_QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY id ORDER BY d
  MEASURES MAX(COALESCE(closed, DATE '9999-12-31')) AS latest_close, GREATEST(closed, DATE '2020-02-15') AS g,
           LEAST(LAST(closed), FIRST(d)) AS l, COALESCE(closed, DATE '9999-12-31') AS c
  ONE ROW PER MATCH PATTERN (A+) DEFINE A AS d < DATE '2020-01-04')
"""
NULL_TIMES = [(1, "2020-01-01", "2020-03-01 08:00:00"), (1, "2020-01-02", ""), (2, "2020-01-03", "")]


def _expected_null_times() -> list[list[str]]:
    """Each partition's one match (every row before 2020-01-04), its measures by Spark's documented rules."""
    expected = []
    for key in sorted({k for k, _, _ in NULL_TIMES}):
        rows = [
            (dt.date.fromisoformat(d), dt.datetime.fromisoformat(c) if c else None)
            for k, d, c in NULL_TIMES
            if k == key
        ]

        def widen(day: dt.date) -> dt.datetime:  # a DATE meeting a TIMESTAMP: its midnight
            return dt.datetime.combine(day, dt.time())

        last_close = rows[-1][1]
        values = [
            max(c if c else widen(dt.date(9999, 12, 31)) for _, c in rows),
            max(x for x in (last_close, widen(dt.date(2020, 2, 15))) if x is not None),
            min(x for x in (last_close, widen(rows[0][0])) if x is not None),
            last_close or widen(dt.date(9999, 12, 31)),
        ]
        expected.append([str(key), *(part for v in values for part in str(v).split())])
    return expected


@pytest.mark.parametrize("engine", ["python", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_date_meets_a_timestamp_column_with_nulls(tmp_path, capsys, engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")  # the suite's one session (with its connectors), started before cep's
    (tmp_path / "t.csv").write_text("id,d,closed\n" + "".join(f"{k},{d},{c}\n" for k, d, c in NULL_TIMES))
    (tmp_path / "q.sql").write_text(NULL_TIMES_QUERY, encoding="utf-8")
    for schema in ([], ["--schema", "closed TIMESTAMP"]):  # the column is a TIMESTAMP by its values, or declared
        argv = ["run", str(tmp_path / "q.sql"), "-i", str(tmp_path / "t.csv"), "--engine", engine, *schema]
        assert main(argv) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert _table(out) == _expected_null_times(), out


@pytest.mark.spark
def test_dates_on_spark_equal_the_python_engine(daily, capsys, spark):
    for query, data in (("dates.sql", "daily.csv"), ("times.sql", "times.csv")):
        printed = []
        for engine in ("python", "spark"):
            assert main(["run", str(daily / query), "-i", str(daily / data), "--engine", engine]) == 0
            printed.append(capsys.readouterr().out.splitlines()[:-1])
        assert printed[0] == printed[1], query


# --------------------------------------------------------------------------------- repeated names


@pytest.mark.parametrize("engine", ["python", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_header_naming_a_column_twice_is_refused_on_both_engines(tmp_path, capsys, engine, request):
    if engine == "spark":
        request.getfixturevalue("spark")  # the suite's one session (with its connectors), started before cep's
    (tmp_path / "twice.csv").write_text("id,v,x,V\n1,2,3,4\n2,3,4,5\n", encoding="utf-8")
    (tmp_path / "q.sql").write_text(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES LAST(v) AS v PATTERN (A) DEFINE A AS v > 0)\n",
        encoding="utf-8",
    )
    assert main(["run", str(tmp_path / "q.sql"), "-i", str(tmp_path / "twice.csv"), "--engine", engine]) == 2
    err = capsys.readouterr().err
    assert "the header names the column 'V' twice (columns 2 and 4" in err and "Traceback" not in err


# ------------------------------------------------------------------------------------- --schema


def test_schema_forms_and_their_errors(tmp_path):
    for name in ("a.csv", "b.csv", "c.json"):
        (tmp_path / name).write_text("d,v\n2020-01-01,1\n" if name.endswith("csv") else '{"d": 1}\n', encoding="utf-8")
    a, b, c = (str(tmp_path / n) for n in ("a.csv", "b.csv", "c.json"))
    assert Inputs.parse([a], ["d DATE"]).schemas == {None: {"d": "DATE"}}
    assert Inputs.parse([f"t={a}"], ["d DATE"]).schemas == {"t": {"d": "DATE"}}  # the one named input
    assert Inputs.parse([a, f"u={b}"], ["u=v DOUBLE", "d DATE"]).schemas == {"u": {"v": "DOUBLE"}, None: {"d": "DATE"}}
    errors = [
        (
            [f"t={a}", f"u={b}"],
            ["d DATE"],
            "types the unnamed --input, and there is none; for a named input "
            "write --schema NAME='d DATE' (named inputs: t, u)",
        ),
        ([f"t={a}"], ["x=d DATE"], "no --input is named x (named inputs: t)"),
        ([f"t={a}"], ["t=d DATE", "t=v DOUBLE"], "two --schema for input t"),
        ([f"j={c}"], ["d DATE"], "j is not CSV"),
    ]
    for options, schemas, message in errors:
        with pytest.raises(UsageError) as raised:
            Inputs.parse(options, schemas)
        assert message in str(raised.value)


def test_schema_of_a_named_input_types_its_columns(daily, capsys):
    query = daily / "named.sql"
    query.write_text(DATES_QUERY.replace("FROM t ", "FROM accounts "), encoding="utf-8")
    args = ["run", str(query), "-i", f"accounts={daily / 'daily.csv'}", "--engine", "python"]
    assert main([*args, "--schema", "accounts=v DOUBLE"]) == 0
    assert [tuple(r) for r in _table(capsys.readouterr().out)] == _expected_date_matches()
    assert main([*args, "--schema", "ledger=v DOUBLE"]) == 2
    assert "no --input is named ledger (named inputs: accounts)" in capsys.readouterr().err


# ----------------------------------------------------------------- trace, report, explain as run

# A window function in a FROM subquery: SQL around the clause, which cep run accepts.
WINDOWED = """SELECT * FROM (SELECT d, v, AVG(v) OVER (ORDER BY d ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS avg2
                FROM accounts)
MATCH_RECOGNIZE (ORDER BY d MEASURES FIRST(d) AS first_day, COUNT(*) AS n ONE ROW PER MATCH
  PATTERN (A B+) DEFINE B AS v > avg2)
"""


def test_trace_report_and_explain_take_the_inputs_of_run(daily, capsys):
    query = daily / "windowed.sql"
    query.write_text(WINDOWED, encoding="utf-8")
    named = ["-i", f"accounts={daily / 'daily.csv'}", "--schema", "accounts=v BIGINT"]
    assert main(["run", str(query), *named, "--engine", "python"]) == 0
    run_rows = _table(capsys.readouterr().out)
    # v > the mean of itself and the day before: the rises of DAILY (3 -> 4, 4 -> 6, 2 -> 7)
    assert run_rows == [["2020-01-02", "3"], ["2020-01-05", "2"]]

    assert main(["trace", str(query), *named]) == 0
    traced = capsys.readouterr().out
    assert "avg2" in traced and "matches: 2" in traced

    out = daily / "report.html"
    assert main(["report", str(query), *named, "-o", str(out)]) == 0
    assert "2 matches" in capsys.readouterr().out and "E0244" not in out.read_text(encoding="utf-8")

    assert main(["explain", str(query), *named]) == 0
    assert "program:" in capsys.readouterr().out
    assert main(["explain", str(query), "-i", f"accounts={daily / 'times.csv'}"]) == 1  # no column d there
    assert "error[" in capsys.readouterr().err


def test_clause_picks_one_of_several(daily, capsys):
    query = daily / "two.sql"
    query.write_text(
        "SELECT a.n, b.n FROM (SELECT * FROM t MATCH_RECOGNIZE (ORDER BY d MEASURES COUNT(*) AS n "
        "PATTERN (A+) DEFINE A AS v > 2)) a CROSS JOIN (SELECT * FROM t MATCH_RECOGNIZE (ORDER BY d "
        "MEASURES COUNT(*) AS n PATTERN (B+) DEFINE B AS v < 4)) b\n",
        encoding="utf-8",
    )
    data = ["-i", f"t={daily / 'daily.csv'}"]
    assert main(["trace", str(query), *data, "--clause", "2", "--events", "match"]) == 0
    assert "B" in capsys.readouterr().out
    assert main(["trace", str(query), *data, "--clause", "3"]) == 2
    assert "--clause 3: the statement has 2 MATCH_RECOGNIZE clauses" in capsys.readouterr().err


def test_a_window_function_in_one_clause_says_to_run_the_whole_statement():
    import cep

    with pytest.raises(cep.CepError) as raised:
        cep.compile(WINDOWED)
    assert raised.value.code == "E0244" and "compile_sql" in raised.value.hint


# -------------------------------------------------------------------------------------- make run

REPO = Path(__file__).resolve().parent.parent


def _make_run_arguments() -> list[str]:
    """The arguments of the ``cep run`` that the Makefile's ``run`` target runs."""
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(encoding="utf-8"), re.M).group(1)
    command = next(line for line in recipe.splitlines() if "/bin/cep run " in line)
    return shlex.split(command.split("/bin/cep ", 1)[1])


def test_make_run_is_said_to_run_on_spark_and_does():
    arguments = _make_run_arguments()
    assert arguments[arguments.index("--engine") + 1] == "spark"
    makefile = (REPO / "Makefile").read_text(encoding="utf-8").splitlines()
    help_line = next(line for line in makefile if "make run " in line)
    assert "Spark" in help_line
    for doc in ("README.md", "docs/getting-started.md"):
        text = (REPO / doc).read_text(encoding="utf-8")
        line = next(line for line in text.splitlines() if line.startswith("make run"))
        assert "Spark" in line, doc


@pytest.mark.spark
def test_make_run_prints_the_python_engines_rows(spark, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    arguments = _make_run_arguments()
    printed = {}
    for engine in ("spark", "python"):
        chosen = [*arguments[: arguments.index("--engine")], "--engine", engine]
        assert main(chosen) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[-1].endswith(f"(engine: {engine})")
        printed[engine] = lines[:-1]
    assert printed["spark"] == printed["python"] and len(printed["spark"]) == 2 + 27  # header, rule, 27 V shapes


def test_a_date_event_time_for_a_replay_says_how_to_read_it_as_a_time(daily, capsys):
    args = [
        "run",
        str(daily / "dates.sql"),
        "-i",
        str(daily / "daily.csv"),
        "--engine",
        "python",
        "--session-timeout",
        "2 days",
    ]
    assert main(args) == 1
    assert "hint: read it as a time: --schema 'd TIMESTAMP'" in capsys.readouterr().err
    assert main([*args, "--schema", "d TIMESTAMP"]) == 0
    assert len(_table(capsys.readouterr().out)) == len(_expected_date_matches())


# A JSON or Parquet file whose columns are v and V: Spark refuses it ([COLUMN_ALREADY_EXISTS] The column `v`
# already exists), and DuckDB read the second as V_1, so the python engine answered from the first, silently.
@pytest.mark.parametrize("engine", ["python", pytest.param("spark", marks=pytest.mark.spark)])
@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_a_json_or_parquet_file_naming_a_column_twice_is_refused_on_both_engines(
    tmp_path, capsys, engine, fmt, request
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    if engine == "spark":
        request.getfixturevalue("spark")  # the suite's one session (with its connectors), started before cep's
    source = tmp_path / f"twice.{fmt}"
    if fmt == "json":
        source.write_text('{"id": 1, "v": 2, "V": 3}\n{"id": 2, "v": 4, "V": 5}\n', encoding="utf-8")
    else:
        pq.write_table(pa.table({"id": [1, 2], "v": [2, 4], "V": [3, 5]}), source)
    (tmp_path / "q.sql").write_text(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES LAST(v) AS v PATTERN (A) DEFINE A AS v > 0)\n",
        encoding="utf-8",
    )
    assert main(["run", str(tmp_path / "q.sql"), "-i", str(source), "--engine", engine]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if engine == "python":
        assert "the file names the column 'v' twice (SQL names ignore case)" in err.replace("'V'", "'v'"), err
    else:
        assert "COLUMN_ALREADY_EXISTS" in err, err


def test_a_named_input_under_another_name_than_the_query_reads_is_named_in_the_hint(tmp_path, capsys):
    # -i Tickr=... for a query reading Ticker: the hint was the generic "give its rows: --input PATH ...".
    (tmp_path / "t.csv").write_text("id,v\n1,2\n", encoding="utf-8")
    (tmp_path / "q.sql").write_text(
        "SELECT * FROM Ticker MATCH_RECOGNIZE (ORDER BY id MEASURES LAST(v) AS v PATTERN (A) DEFINE A AS v > 0)\n",
        encoding="utf-8",
    )
    assert main(["run", str(tmp_path / "q.sql"), "-i", f"Tickr={tmp_path / 't.csv'}", "--engine", "python"]) == 2
    err = capsys.readouterr().err
    assert "error[E0291]: there is no table Ticker" in err
    assert "hint: the named inputs are Tickr; give this one as --input Ticker=PATH" in err, err


def test_two_inputs_under_one_name_are_refused(tmp_path, capsys):
    """`-i Ticker=a.csv -i ticker=b.csv`: SQL reads both names as one table, so the second must not silently
    replace the first (it did); `cep run` says so and exits 2."""
    for name in ("a.csv", "b.csv"):
        (tmp_path / name).write_text("d,v\n2020-01-01,1\n", encoding="utf-8")
    a, b = str(tmp_path / "a.csv"), str(tmp_path / "b.csv")
    with pytest.raises(UsageError) as raised:
        Inputs.parse([f"Ticker={a}", f"ticker={b}"])
    assert str(raised.value) == (
        f"two --input are named ticker: Ticker={a} and ticker={b}; "
        "a name takes one path, so give each table its own name"
    )
    assert Inputs.parse([f"t={a}", f"u={b}"]).named == {"t": a, "u": b}
    query = tmp_path / "q.sql"
    query.write_text("SELECT * FROM Ticker", encoding="utf-8")
    assert main(["run", str(query), "-i", f"Ticker={a}", "-i", f"Ticker={b}"]) == 2
    assert "two --input are named Ticker" in capsys.readouterr().err


def test_check_takes_named_inputs_as_run_does(tmp_path, capsys):
    """`cep check -i NAME=PATH` reads the table NAME as `cep run -i NAME=PATH` does (it said "input file not
    found: NAME=PATH"), and each clause is checked against the columns of the table it reads: in u.csv, v
    holds a word, so the CSV reader makes it text, and text compared with a number is E0234 (as `--schema
    'v STRING'` says); in t.csv, v is a number and the same query is fine."""
    (tmp_path / "t.csv").write_text("id,v\n1,2\n", encoding="utf-8")
    (tmp_path / "u.csv").write_text("id,v\n1,abc\n", encoding="utf-8")
    query = tmp_path / "q.sql"
    query.write_text(
        "SELECT * FROM u MATCH_RECOGNIZE (ORDER BY id MEASURES LAST(v) AS v PATTERN (A) DEFINE A AS v > 0)\n",
        encoding="utf-8",
    )
    t, u = f"t={tmp_path / 't.csv'}", f"u={tmp_path / 'u.csv'}"
    assert main(["check", str(query), "-i", t, "-i", u]) == 1
    assert f"{query}:1:92: error[E0234]: cannot compare text with a number" in capsys.readouterr().err
    assert main(["check", str(query), "--schema", "id INT, v STRING"]) == 1  # the same verdict, declared
    assert f"{query}:1:92: error[E0234]: cannot compare text with a number" in capsys.readouterr().err
    assert main(["check", str(query), "--input", f"u={tmp_path / 't.csv'}"]) == 0
    assert capsys.readouterr().out == f"{query}: ok (1 statement)\n"
    assert main(["check", str(query), "-i", f"u={tmp_path / 'gone.csv'}"]) == 2
    assert "input file not found" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ input format


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "dates.sql", "-i", "events.data"],
        ["check", "dates.sql", "--input", "events.data"],
        ["trace", "dates.sql", "-i", "events.data"],
        ["explain", "dates.sql", "-i", "events.data"],
    ],
)
def test_every_command_spells_the_input_format_input_format(daily, capsys, argv):
    """One spelling on every command that reads inputs: ``--input-format`` (a file whose name tells no
    format); ``--format`` stays an alias where it was documented, except on explain (its picture's format)."""
    (daily / "events.data").write_text(CSV, encoding="utf-8")
    argv = [str(daily / a) if a.endswith((".sql", ".data")) else a for a in argv]
    assert main([*argv, "--input-format", "csv"]) == 0, capsys.readouterr().err
    if argv[0] != "explain":
        assert main([*argv, "--format", "csv"]) == 0, capsys.readouterr().err


def test_an_input_whose_name_tells_no_format_names_the_option(daily, capsys):
    (daily / "events.data").write_text(CSV, encoding="utf-8")
    assert main(["run", str(daily / "dates.sql"), "-i", str(daily / "events.data")]) == 2
    assert "use --input-format {csv,parquet,json" in capsys.readouterr().err
