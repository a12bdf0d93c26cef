"""The ``cep`` command, run in-process through ``cep.cli.main``."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from cep.cli import format_table, infer_datetimes, main

REPO = Path(__file__).resolve().parent.parent
TICKS = str(REPO / "patterns" / "data" / "ticks.csv")
QUERY = str(REPO / "patterns" / "v_shape.sql")
EXPECTED_MATCHES = 27  # see tests/test_sample_data.py (counted by the independent reference)

SUMMARY = re.compile(
    r"^events read: (\d+), partitions: (\d+), matches: (\d+), output rows: (\d+), seconds: \d+\.\d\d "
    r"\(engine: (spark|python)\)$",
    re.M,
)
BAD_QUERY = """\
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES LAST(B.price) AS bottom
  PATTERN (A B+
  DEFINE B AS B.price < PREV(B.price))
"""


def _table_lines(out: str) -> list[str]:
    """The table part of ``cep run`` output: header, rule and rows (everything before the summary)."""
    lines = out.rstrip("\n").splitlines()
    assert SUMMARY.match(lines[-1]), lines[-1]
    return lines[:-1]


def test_run_python_engine(capsys):
    assert main(["run", QUERY, "--input", TICKS, "--engine", "python"]) == 0
    captured = capsys.readouterr()
    summary = SUMMARY.search(captured.out)
    assert summary is not None, captured.out
    assert summary.groups() == ("240", "4", str(EXPECTED_MATCHES), str(EXPECTED_MATCHES), "python")
    table = _table_lines(captured.out)
    assert table[0].split() == ["symbol", "start_ts", "bottom", "end_ts", "n"]
    assert set(table[1].replace(" ", "")) == {"-"}
    assert len(table) == 2 + EXPECTED_MATCHES
    # The first match of the data, checked by hand (see test_sample_data.py), printed readably.
    assert table[2].split() == ["ACME", "2024-01-02", "09:32:00", "99.71", "2024-01-02", "09:36:00", "5"]
    assert "Traceback" not in captured.err


@pytest.mark.spark
def test_run_spark_engine_prints_the_same_table(spark, capsys):
    assert main(["run", QUERY, "--input", TICKS, "--engine", "python"]) == 0
    python_out = capsys.readouterr().out
    assert main(["run", QUERY, "--input", TICKS, "--engine", "spark"]) == 0
    captured = capsys.readouterr()
    assert SUMMARY.search(captured.out).groups() == ("240", "4", str(EXPECTED_MATCHES), str(EXPECTED_MATCHES), "spark")
    assert _table_lines(captured.out) == _table_lines(python_out)
    assert "Traceback" not in captured.err


@pytest.mark.parametrize("suffix", ["csv", "json", "parquet"])
def test_run_writes_output_file(tmp_path, capsys, suffix):
    target = tmp_path / f"matches.{suffix}"
    assert main(["run", QUERY, "-i", TICKS, "--engine", "python", "--output", str(target)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {EXPECTED_MATCHES} rows to {target}" in out
    if suffix == "csv":
        back = pd.read_csv(target)
    elif suffix == "json":
        back = pd.read_json(target, lines=True)
    else:
        back = pd.read_parquet(target)
    assert len(back) == EXPECTED_MATCHES
    assert list(back.columns) == ["symbol", "start_ts", "bottom", "end_ts", "n"]


def test_run_limit(capsys):
    assert main(["run", QUERY, "-i", TICKS, "--engine", "python", "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert SUMMARY.search(out).group(3, 4) == (str(EXPECTED_MATCHES), "5")  # matches found, rows kept
    assert len(_table_lines(out)) == 2 + 5


def test_run_reads_json_and_parquet_inputs(tmp_path, capsys):
    pdf = pd.read_csv(TICKS, parse_dates=["ts"])
    pdf.to_parquet(tmp_path / "ticks.parquet", index=False)
    pdf.to_json(tmp_path / "ticks.jsonl", orient="records", lines=True, date_format="iso")
    for name in ("ticks.parquet", "ticks.jsonl"):
        assert main(["run", QUERY, "-i", str(tmp_path / name), "--engine", "python"]) == 0
        assert SUMMARY.search(capsys.readouterr().out).group(3) == str(EXPECTED_MATCHES)


def test_run_several_inputs(tmp_path, capsys):
    pdf = pd.read_csv(TICKS)
    pdf.iloc[:100].to_csv(tmp_path / "a.csv", index=False)
    pdf.iloc[100:].to_csv(tmp_path / "b.csv", index=False)
    assert main(["run", QUERY, "-i", str(tmp_path / "a.csv"), "-i", str(tmp_path / "b.csv"), "--engine", "python"]) == 0
    summary = SUMMARY.search(capsys.readouterr().out)
    assert summary.groups()[:3] == ("240", "4", str(EXPECTED_MATCHES))


def test_run_missing_input_is_a_usage_error(tmp_path, capsys):
    missing = tmp_path / "nope.csv"
    assert main(["run", QUERY, "--input", str(missing), "--engine", "python"]) == 2
    captured = capsys.readouterr()
    assert f"input file not found: {missing}" in captured.err
    assert "Traceback" not in captured.err


def test_run_missing_query_file_is_a_usage_error(tmp_path, capsys):
    assert main(["run", str(tmp_path / "none.sql"), "--input", TICKS, "--engine", "python"]) == 2
    assert "query file not found" in capsys.readouterr().err


def test_run_unknown_input_format_is_a_usage_error(tmp_path, capsys):
    odd = tmp_path / "ticks.dat"
    odd.write_text("symbol,ts,price\n")
    assert main(["run", QUERY, "--input", str(odd), "--engine", "python"]) == 2
    assert "--input-format" in capsys.readouterr().err


def test_run_bad_output_extension_is_a_usage_error(tmp_path, capsys):
    assert main(["run", QUERY, "-i", TICKS, "--engine", "python", "-o", str(tmp_path / "x.txt")]) == 2
    assert "x.txt" in capsys.readouterr().err


def test_run_bad_query_is_a_query_error(tmp_path, capsys):
    bad = tmp_path / "bad.sql"
    bad.write_text(BAD_QUERY)
    assert main(["run", str(bad), "--input", TICKS, "--engine", "python"]) == 1
    err = capsys.readouterr().err
    assert re.search(rf"{re.escape(str(bad))}:\d+:\d+: error\[E\d+\]: ", err), err
    assert "^" in err
    assert "Traceback" not in err


def test_run_unknown_partition_column_is_a_query_error(tmp_path, capsys):
    text = Path(QUERY).read_text().replace("PARTITION BY symbol", "PARTITION BY ticker")
    query = tmp_path / "ticker.sql"
    query.write_text(text)
    assert main(["run", str(query), "--input", TICKS, "--engine", "python"]) == 1
    err = capsys.readouterr().err
    assert "ticker" in err and "error[" in err
    assert "Traceback" not in err


def test_check_good_file(capsys):
    assert main(["check", QUERY]) == 0
    assert capsys.readouterr().out.strip() == f"{QUERY}: ok (1 statement)"


def test_check_with_schema(capsys):
    assert main(["check", QUERY, "--schema", "symbol STRING, ts TIMESTAMP, price DOUBLE, volume INT"]) == 0
    assert "ok (1 statement)" in capsys.readouterr().out


def test_check_bad_schema_is_a_usage_error(capsys):
    assert main(["check", QUERY, "--schema", "symbol"]) == 2
    assert "--schema" in capsys.readouterr().err


def test_check_bad_file(tmp_path, capsys):
    bad = tmp_path / "bad.sql"
    bad.write_text(BAD_QUERY)
    assert main(["check", QUERY, str(bad)]) == 1
    captured = capsys.readouterr()
    assert f"{QUERY}: ok" in captured.out
    assert re.search(rf"^{re.escape(str(bad))}:\d+:\d+: error\[E\d+\]: ", captured.err, re.M), captured.err
    assert re.search(r"^\s*\|\s*\^+", captured.err, re.M), captured.err  # the caret line
    assert "Traceback" not in captured.err


CHECKED = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS a > {i})"
STATEMENTS = 60
UNKNOWN_VARIABLE = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) DEFINE A AS a > 1, C AS c > 1)"


def check_blanked(text: str, start: int, end: int, path: str) -> str:
    """What ``cep check`` printed for the statement ``text[start:end]`` when it checked the whole file with
    every character before the statement blanked (newlines kept): the reference for positions and messages."""
    import cep
    from cep.statement import check_sql

    with pytest.raises(cep.CepError) as caught:
        check_sql(re.sub(r"[^\n]", " ", text[:start]) + text[start:end], filename=path)
    return str(caught.value.with_source(text, path))


@pytest.mark.parametrize("separator", [";\n", ";\n\n-- name: late\n", "; "])
def test_check_reads_each_statement_once_and_points_into_the_file(tmp_path, capsys, monkeypatch, separator):
    """``cep check FILE`` checks a statement apart from the file (its work grows with the file, not with the
    square of its statements: the characters it hands the checker are counted) and moves an error's
    positions to the file's, as checking the file with the other statements blanked says. Statements that
    share a line (``"; "``) are each checked from the line's start: that work grows with the line."""
    from cep import cli

    read: list[int] = []
    real = cli.check_sql
    monkeypatch.setattr(cli, "check_sql", lambda sql, **options: (read.append(len(sql)), real(sql, **options))[1])
    # 60 statements: reading more than the file once tells from any count above one, and each statement checked
    # costs tens of milliseconds (those sharing one line: a time that grows with the square of their count).
    good = separator.join(CHECKED.format(i=i) for i in range(STATEMENTS)) + ";\n"
    path = tmp_path / "many.sql"
    path.write_text(good)
    assert main(["check", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"{path}: ok ({STATEMENTS} statements)"
    if "\n" in separator:  # blanking all that precedes each statement read the file STATEMENTS / 2 times
        assert sum(read) <= len(good)

    text = good.rstrip("\n") + separator + UNKNOWN_VARIABLE + ";\n"
    path.write_text(text)
    assert main(["check", str(path)]) == 1
    start = text.rindex(UNKNOWN_VARIABLE)
    assert capsys.readouterr().err.strip() == check_blanked(text, start, len(text), str(path)).strip()


def test_check_missing_file(tmp_path, capsys):
    assert main(["check", str(tmp_path / "gone.sql")]) == 2
    assert "not found" in capsys.readouterr().err


def test_fmt_prints_canonical_text_that_parses_back(tmp_path, capsys):
    import cep

    assert main(["fmt", QUERY]) == 0
    formatted = capsys.readouterr().out
    assert "MATCH_RECOGNIZE" in formatted.upper()
    original = cep.parse_all(Path(QUERY).read_text())
    assert cep.parse_all(formatted) == original
    # Formatting is idempotent.
    path = tmp_path / "formatted.sql"
    path.write_text(formatted)
    assert main(["fmt", str(path)]) == 0
    assert capsys.readouterr().out == formatted


def test_fmt_bad_file(tmp_path, capsys):
    bad = tmp_path / "bad.sql"
    bad.write_text(BAD_QUERY)
    assert main(["fmt", str(bad)]) == 1
    assert "error[" in capsys.readouterr().err


def test_explain(capsys):
    import cep

    assert main(["explain", QUERY]) == 0
    out = capsys.readouterr().out
    assert out.strip()
    assert out.rstrip("\n") == cep.compile(Path(QUERY).read_text()).explain().rstrip("\n")


@pytest.mark.parametrize("command", [[], ["run"], ["check"], ["fmt"], ["explain"]])
def test_help(capsys, command):
    assert main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: cep {' '.join(command)}".rstrip())
    assert "--help" in out


def test_usage_errors_exit_2(capsys):
    assert main([]) == 2
    assert main(["run", QUERY]) == 2  # --input is required
    assert main(["run", QUERY, "-i", TICKS, "--engine", "flink"]) == 2
    assert main(["run", QUERY, "-i", TICKS, "--limit", "-1"]) == 2
    capsys.readouterr()


def test_format_table_alignment_and_nulls():
    pdf = pd.DataFrame(
        {
            "name": ["a", "bbb", None],
            "x": [1.5, None, 10.25],
            "t": pd.to_datetime(["2024-01-02 09:30:00", None, "2024-01-02 09:31:00.5"], format="ISO8601"),
        }
    )
    lines = format_table(pdf).splitlines()
    assert lines[0].split() == ["name", "x", "t"]
    assert lines[2].split() == ["a", "1.50", "2024-01-02", "09:30:00"]  # same decimals down a column
    assert lines[3].split() == ["bbb", "NULL", "NULL"]
    assert lines[4].split() == ["NULL", "10.25", "2024-01-02", "09:31:00.5"]
    # Numbers are right-aligned: the column's right edges line up.
    assert lines[2].index("1.50") + 4 == lines[4].index("10.25") + 5


def test_infer_datetimes_only_for_all_iso_columns():
    pdf = pd.DataFrame(
        {
            "ts": ["2024-01-02 09:30:00", "2024-01-02T09:31:00Z", None],
            "day": ["2024-01-02", "2024-01-03", "2024-01-04"],
            "mixed": ["2024-01-02", "later", None],
            "symbol": ["A", "B", "C"],
        }
    )
    out = infer_datetimes(pdf)
    assert str(out["ts"].dtype).startswith("datetime64")
    assert out["ts"].dt.tz is None
    assert out["ts"][1] == pd.Timestamp("2024-01-02 09:31:00")
    assert str(out["day"].dtype).startswith("datetime64")
    assert out["mixed"].dtype == object
    assert out["symbol"].dtype == object


def test_check_against_a_schema_without_the_column(capsys):
    assert main(["check", QUERY, "--schema", "symbol STRING, ts TIMESTAMP, prize DOUBLE"]) == 1
    err = capsys.readouterr().err
    assert re.search(rf"^{re.escape(QUERY)}:\d+:\d+: error\[E\d+\]: .*price", err, re.M), err


def test_run_runtime_error_is_a_query_error(tmp_path, capsys):
    text = (
        Path(QUERY).read_text().replace("B AS B.price < PREV(B.price)", "B AS CAST(symbol AS INTEGER) < PREV(B.price)")
    )
    query = tmp_path / "cast.sql"
    query.write_text(text)
    assert main(["run", str(query), "--input", TICKS, "--engine", "python"]) == 1
    err = capsys.readouterr().err
    assert re.search(r"error\[E04\d\d\]: cannot cast", err), err
    assert "Traceback" not in err


def test_spark_worker_errors_are_reduced_to_the_cep_error():
    from cep.cli import spark_error

    PythonException = type("PythonException", (Exception,), {})
    worker_text = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "grammar.errors.CepRuntimeError: query: error[E0411]: cannot cast 'ACME' to INTEGER\n"
    )
    assert spark_error(PythonException(worker_text)) == "error[E0411]: cannot cast 'ACME' to INTEGER"
    assert spark_error(PythonException("boom\nmore")) == "error: spark: boom"
    assert spark_error(ValueError("not spark")) is None


# ------------------------------------------------------------------ output that cannot attack its reader


HOSTILE_ROWS = """user,ts,note
=cmd|' /C calc'!A0,2024-01-02 09:00:00,+SUM(1)
@evil,2024-01-02 09:01:00,-2+3
plain,2024-01-02 09:02:00,"\x1b[2J\x1b[31mred\nnext line"
"""
HOSTILE_QUERY = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY user ORDER BY ts
  MEASURES A.note AS note, -1 AS minus_one PATTERN (A) DEFINE A AS TRUE)"""


def test_csv_output_neutralises_formulas_by_default_and_keeps_them_on_request(tmp_path, capsys):
    data, query = tmp_path / "in.csv", tmp_path / "q.sql"
    data.write_text(HOSTILE_ROWS)
    query.write_text(HOSTILE_QUERY)
    out = tmp_path / "out.csv"
    assert main(["run", str(query), "--input", str(data), "--engine", "python", "-o", str(out)]) == 0
    written = pd.read_csv(out, dtype=str, keep_default_na=False)
    cells = set(written["user"]) | set(written["note"])
    assert {"'=cmd|' /C calc'!A0", "'@evil", "'+SUM(1)", "'-2+3", "plain"} <= cells
    assert set(written["minus_one"]) == {"-1"}  # numbers are numbers, not formulas
    assert (
        main(["run", str(query), "--input", str(data), "--engine", "python", "-o", str(out), "--csv-keep-formulas"])
        == 0
    )
    assert {"=cmd|' /C calc'!A0", "@evil", "+SUM(1)"} <= set(pd.read_csv(out, dtype=str)["user"]) | set(
        pd.read_csv(out, dtype=str)["note"]
    )


def test_the_table_shows_control_characters_instead_of_sending_them_to_the_terminal(tmp_path, capsys):
    data, query = tmp_path / "in.csv", tmp_path / "q.sql"
    data.write_text(HOSTILE_ROWS)
    query.write_text(HOSTILE_QUERY)
    assert main(["run", str(query), "--input", str(data), "--engine", "python"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[2J\\x1b[31mred\\nnext line" in out
    assert len(out.splitlines()) == 2 + 3 + 1  # header, rule, three rows, summary: no row broken in two
