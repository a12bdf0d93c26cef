"""The analyst's commands: ``cep trace`` (why did or didn't a partition match?) and ``cep explain``'s
text listing on the shipped patterns; ``cep report`` is in test_report.py, the DOT picture in test_dot.py."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import cep
from cep.cli import main

REPO = Path(__file__).resolve().parent.parent
TICKS = str(REPO / "patterns" / "data" / "ticks.csv")
V_SHAPE = str(REPO / "patterns" / "v_shape.sql")
TOLLS_QUERY = str(REPO / "patterns" / "toll_speeding.sql")

# The trace of ACME from 09:32 to 09:37, golden. Checked by hand against ticks.csv: ACME's prices are
# 100.46 (09:32), 100.11, 99.71, 100.26, 100.33 (09:36), 99.99 (09:37), so the partial match that began
# at row 2 takes two falls (B B) and two rises (C C), the fall at 09:37 breaks C, and the match is
# rows 2..6, the first V-shape of tests/test_sample_data.py (09:32..09:36, n=5).
GOLDEN_ACME = """\
partition: symbol=ACME
row  ts                    price  event    match_start  detail
---  -------------------  ------  -------  -----------  ----------------------------------------------------------------------------------
  2  2024-01-02 09:32:00  100.46  dropped            1  B: B.price < PREV(B.price) was false
  2  2024-01-02 09:32:00  100.46  alive              2  waiting for B (pc 1)
  3  2024-01-02 09:33:00  100.11  tested             2  B: B.price < PREV(B.price) held
  3  2024-01-02 09:33:00  100.11  dropped            3  waiting for B (pc 1): merged into an equivalent partial match that started earlier
  3  2024-01-02 09:33:00  100.11  alive              2  waiting for B (pc 1)
  3  2024-01-02 09:33:00  100.11  alive              2  waiting for C (pc 3)
  4  2024-01-02 09:34:00   99.71  tested             2  B: B.price < PREV(B.price) held
  4  2024-01-02 09:34:00   99.71  dropped            2  C: C.price > PREV(C.price) was false
  4  2024-01-02 09:34:00   99.71  dropped            4  waiting for B (pc 1): merged into an equivalent partial match that started earlier
  4  2024-01-02 09:34:00   99.71  alive              2  waiting for B (pc 1)
  4  2024-01-02 09:34:00   99.71  alive              2  waiting for C (pc 3)
  5  2024-01-02 09:35:00  100.26  dropped            2  B: B.price < PREV(B.price) was false
  5  2024-01-02 09:35:00  100.26  tested             2  C: C.price > PREV(C.price) held
  5  2024-01-02 09:35:00  100.26  alive              2  waiting for C (pc 3)
  5  2024-01-02 09:35:00  100.26  alive              2  complete
  5  2024-01-02 09:35:00  100.26  alive              5  waiting for B (pc 1)
  5  2024-01-02 09:35:00  100.26  dropped            5  waiting for B (pc 1): a preferred partial match has finished
  6  2024-01-02 09:36:00  100.33  tested             2  C: C.price > PREV(C.price) held
  6  2024-01-02 09:36:00  100.33  alive              2  waiting for C (pc 3)
  6  2024-01-02 09:36:00  100.33  alive              2  complete
  6  2024-01-02 09:36:00  100.33  match              2  match 1: rows 2..6 as A B B C C
  7  2024-01-02 09:37:00   99.99  dropped            2  C: C.price > PREV(C.price) was false
  7  2024-01-02 09:37:00   99.99  alive              7  waiting for B (pc 1)
rows: 60, trace records: 23, matches: 1, dropped: 7
"""  # noqa: E501 (the trace is printed as is)


def test_trace_golden(capsys):
    args = [
        "trace",
        V_SHAPE,
        "-i",
        TICKS,
        "--partition",
        "symbol=ACME",
        "--from",
        "2024-01-02 09:32",
        "--to",
        "2024-01-02 09:37",
    ]
    assert main(args) == 0
    assert capsys.readouterr().out == GOLDEN_ACME


def test_trace_of_a_non_matching_partition_names_the_row_and_condition(tmp_path, capsys):
    # Car X passes booths 1, 2, 3 but takes 13 minutes (WITHIN 12); car Y skips booth 2.
    data = tmp_path / "passages.csv"
    data.write_text(
        "plate,ts,booth\nX,2024-03-04 06:00:00,1\nX,2024-03-04 06:05:00,2\nX,2024-03-04 06:13:00,3\n"
        "Y,2024-03-04 06:00:00,1\nY,2024-03-04 06:03:00,3\n"
    )
    assert main(["run", TOLLS_QUERY, "-i", str(data), "--engine", "python"]) == 0
    assert "matches: 0" in capsys.readouterr().out
    assert main(["trace", TOLLS_QUERY, "-i", str(data), "-p", "plate=X", "--events", "dropped"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "partition: plate=X"
    expired = [line.split() for line in out if "WITHIN expired" in line]
    assert len(expired) == 1 and expired[0][:5] == ["2", "2024-03-04", "06:13:00", "3", "dropped"]
    assert main(["trace", TOLLS_QUERY, "-i", str(data), "-p", "plate=Y", "--events", "dropped"]) == 0
    out = capsys.readouterr().out
    assert "B2: booth = 2 was false" in out  # row 1 (booth 3) breaks the candidate that began at row 0
    assert out.splitlines()[-1] == "rows: 2, trace records: 2, matches: 0, dropped: 2"


def test_trace_to_a_file_and_chosen_columns(tmp_path, capsys):
    target = tmp_path / "trace.csv"
    assert (
        main(["trace", V_SHAPE, "-i", TICKS, "-p", "symbol=DYNA", "--columns", "volume,price", "-o", str(target)]) == 0
    )
    assert "trace records to" in capsys.readouterr().out
    trace = pd.read_csv(target)
    assert list(trace.columns) == ["row", "ts", "volume", "price", "event", "match_start", "detail"]
    # The file holds what Query.trace says, for the same partition.
    rows = pd.read_csv(TICKS, parse_dates=["ts"])
    expected = cep.compile(Path(V_SHAPE).read_text()).trace(rows[rows.symbol == "DYNA"])
    assert len(trace) == len(expected)
    assert (trace.event == "match").sum() == 6  # DYNA's six V-shapes (tests/test_sample_data.py)


def test_trace_without_partition_by(tmp_path, capsys):
    query = tmp_path / "q.sql"
    query.write_text(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n PATTERN (A B) DEFINE B AS v > PREV(v))"
    )
    data = tmp_path / "t.csv"
    data.write_text("id,v\n1,5\n2,3\n3,4\n")
    assert main(["trace", str(query), "-i", str(data)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("partition: (the whole input: no PARTITION BY)")
    assert "match 1: rows 1..2 as A B" in out


@pytest.mark.parametrize(
    "extra,message",
    [
        ([], "the input holds 4 partitions; pick one, e.g. --partition 'symbol=ACME'"),
        (["-p", "symbol=ACMEE"], "no rows with symbol=ACMEE (values of symbol: ACME, BOLT, CRUX, DYNA)"),
        (["-p", "ticker=ACME"], "--partition ticker: the query partitions by symbol"),
        (["-p", "ACME"], "--partition expects COLUMN=VALUE"),
        (["-p", "symbol=ACME", "--events", "tested,oops"], "--events: unknown kind oops"),
        (["-p", "symbol=ACME", "--from", "yesterday-ish"], "--from 'yesterday-ish' is not"),
        (["-p", "symbol=ACME", "--columns", "prize"], "--columns: no column prize"),
    ],
)
def test_trace_usage_errors(capsys, extra, message):
    assert main(["trace", V_SHAPE, "-i", TICKS, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_trace_bad_query_is_a_query_error(tmp_path, capsys):
    bad = tmp_path / "bad.sql"
    bad.write_text("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts PATTERN (A B+ DEFINE B AS x)")
    assert main(["trace", str(bad), "-i", TICKS, "-p", "symbol=ACME"]) == 1
    assert "error[" in capsys.readouterr().err


@pytest.mark.parametrize("path", sorted((REPO / "patterns").glob("*.sql")), ids=lambda p: p.stem)
def test_explain_text_on_every_shipped_pattern(path, capsys):
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip("\n") == cep.compile(path.read_text()).explain().rstrip("\n")
    assert out.startswith("program:\n") and "\nconditions:\n" in out and "\nexecution:\n" in out


def test_explain_to_a_file(tmp_path, capsys):
    target = tmp_path / "plan.txt"
    assert main(["explain", V_SHAPE, "-o", str(target)]) == 0
    assert target.read_text().startswith("program:\n  0: LABEL A")


def test_run_prints_durations_readably(capsys):
    assert (
        main(
            [
                "run",
                str(REPO / "patterns" / "sensor_gap.sql"),
                "-i",
                str(REPO / "patterns" / "data" / "sensor_readings.csv"),
                "--engine",
                "python",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "T02     2024-03-04 01:00:50  2024-03-04 01:14:50  00:14:00" in out


@pytest.mark.parametrize("command", ["trace", "report"])
def test_help(capsys, command):
    assert main([command, "--help"]) == 0
    assert "usage: cep " + command in capsys.readouterr().out


@pytest.mark.spark
def test_spark_engine_keeps_text_that_looks_like_a_time(spark, capsys):
    """Spark's CSV inference reads sensor ids such as 'T02' as times of today; cep run keeps them text."""
    query = str(REPO / "patterns" / "temperature_rising.sql")
    data = str(REPO / "patterns" / "data" / "sensor_readings.csv")
    assert main(["run", query, "-i", data, "--engine", "python"]) == 0
    python_out = capsys.readouterr().out
    assert main(["run", query, "-i", data]) == 0
    spark_out = capsys.readouterr().out
    assert "\nT01 " in spark_out
    assert spark_out.splitlines()[:-1] == python_out.splitlines()[:-1]


def test_spark_worker_python_errors_name_the_exception():
    from cep.cli import spark_error

    PythonException = type("PythonException", (Exception,), {})
    worker_text = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "batch.py", line 102, in conform\n'
        "TypeError: <class 'Timedelta'> is not convertible to datetime, at position 0\n"
    )
    assert spark_error(PythonException(worker_text)) == (
        "error: spark: An exception was thrown from the Python worker: "
        "TypeError: <class 'Timedelta'> is not convertible to datetime, at position 0"
    )


def test_run_progress_reports_every_row(capsys):
    """`--progress` draws a bar fed by the matcher's per-partition callback; the table is unchanged."""
    import cep as cep_api
    from cep.cli import main

    assert (
        main(["run", "patterns/v_shape.sql", "--input", "patterns/data/ticks.csv", "--engine", "python", "--progress"])
        == 0
    )
    with_bar = capsys.readouterr().out
    assert (
        main(
            ["run", "patterns/v_shape.sql", "--input", "patterns/data/ticks.csv", "--engine", "python", "--no-progress"]
        )
        == 0
    )
    without = capsys.readouterr().out
    assert with_bar.splitlines()[:-1] == without.splitlines()[:-1]  # same table (the summary's seconds differ)
    calls = []
    query = cep_api.compile(open("patterns/v_shape.sql").read())
    query.run(
        [dict(symbol=s, ts=i, price=float(p)) for s in "XY" for i, p in enumerate([3, 2, 1, 2, 3])],
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls[-1] == (10, 10) and all(d <= t for d, t in calls)
