"""A query file named ``-`` is standard input, for every ``cep`` command that reads one query file."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from cep.cli import main

REPO = Path(__file__).resolve().parent.parent
TICKS = str(REPO / "patterns" / "data" / "ticks.csv")
QUERY_PATH = REPO / "patterns" / "v_shape.sql"
QUERY = QUERY_PATH.read_text(encoding="utf-8")
BAD_QUERY = "SELECT * FROM ticks MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B\n  DEFINE A AS price > 1)\n"


def _from_stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8"))


@pytest.mark.parametrize(
    "command",
    [
        ["check"],
        ["fmt"],
        ["explain"],
        ["run", "-i", TICKS, "--engine", "python"],
        ["trace", "-i", TICKS, "--partition", "symbol=ACME"],
    ],
    ids=lambda command: command[0],
)
def test_dash_reads_the_same_query_as_its_file(monkeypatch, capsys, command):
    """The output for ``-`` with the file's text on standard input is the output for the file."""
    name, *options = command
    assert main([name, str(QUERY_PATH), *options]) == 0
    from_file = capsys.readouterr().out
    _from_stdin(monkeypatch, QUERY)
    assert main([name, "-", *options]) == 0
    from_stdin = capsys.readouterr().out
    if name == "run":  # the summary line holds the seconds the run took
        from_file, from_stdin = (out.rsplit("seconds:", 1)[0] for out in (from_file, from_stdin))
    assert from_stdin == from_file.replace(str(QUERY_PATH), "-")
    assert from_stdin.strip()


def test_an_error_on_stdin_is_placed_in_it(monkeypatch, capsys):
    _from_stdin(monkeypatch, BAD_QUERY)
    assert main(["check", "-"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("-:4:"), err
    assert "DEFINE A AS price > 1)" in err


def test_stdin_that_is_not_utf8_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"SELECT \xff"), encoding="latin-1"))
    assert main(["check", "-"]) == 2
    assert "standard input" in capsys.readouterr().err


def test_a_pipe_into_cep_run(tmp_path):
    """What a user types: ``echo QUERY | cep run - -i FILE``."""
    data = tmp_path / "t.csv"
    data.write_text("k,ts,v\na,2024-01-01 00:00:00,1\na,2024-01-01 00:01:00,3\na,2024-01-01 00:02:00,2\n")
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES LAST(UP.v) AS top "
        "PATTERN (S UP+) DEFINE UP AS v > PREV(v))"
    )
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cep")), "run", "-", "-i", f"t={data}", "--engine", "python"],
        input=query,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["k", "top"]
    assert lines[2].split() == ["a", "3"]  # S = 1, UP = 3; 2 < 3 ends it
    assert "matches: 1," in lines[-1]
