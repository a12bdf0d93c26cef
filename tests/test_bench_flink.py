"""The PyFlink peer of ``make bench`` (bench/peers/flink.py): rewrites, comparison, the not-run path.

Flink itself is not run here (an 850 MB virtual environment and a JVM); ``make bench`` runs it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

import cep
from bench import data as bench_data
from bench.peers import flink, flink_runner
from bench.run import QUERIES


def test_flink_text_rewrites_only_what_flink_rejects():
    text_a, rewrites_a = flink.flink_text(QUERIES["a"][1])
    assert "PATTERN (A B+ C+?)" in text_a
    assert "DEFINE B AS B.price < PREV(price), C AS C.price > PREV(price))" in text_a
    assert len(rewrites_a) == 2
    for name in "bdef":  # no qualified PREV, no greedy last element: Flink gets our text unchanged
        assert flink.flink_text(QUERIES[name][1]) == (QUERIES[name][1], ())


def test_unqualified_prev_rewrite_keeps_our_output():
    """PREV(X.col) in X's DEFINE is the same row as PREV(col): cep gives the same matches for both texts."""
    table = bench_data.generate(3_000)
    original = QUERIES["c"][1]
    rewritten, rewrites = flink.flink_text(original)
    assert rewrites == ("PREV(X.col) in X's DEFINE written PREV(col) (same row)",)
    assert "PREV(B." not in rewritten and "PREV(C." not in rewritten
    ours = cep.compile(original).run(table).to_pylist()
    assert ours and cep.compile(rewritten).run(table).to_pylist() == ours


def test_compare_parses_flink_csv_into_our_types():
    ours = [
        ("S001", datetime(2024, 1, 2, 9, 30, 3), 0.1 + 0.2, 3, None),
        ("S000", datetime(2024, 1, 2, 9, 30), 366.3, 4, "x"),
    ]
    # Flink's CSV sink: no order, timestamps with a space, Java's spelling of doubles, NULL as empty text.
    theirs = [
        ["S000", "2024-01-02 09:30:00", "366.3", "4", "x"],
        ["S001", "2024-01-02 09:30:03.000", "0.30000000000000004", "3", ""],
    ]
    assert flink.compare(ours, flink.typed_like(ours, theirs)) == {
        "same_output": True,
        "our_matches": 2,
        "flink_matches": 2,
    }
    theirs[0][3] = "5"
    different = flink.compare(ours, flink.typed_like(ours, theirs))
    assert not different["same_output"]
    assert (different["only_ours"], different["only_flink"]) == (1, 1)
    assert different["examples"]["only_flink"] == [["S000", "2024-01-02 09:30:00", "366.3", "5", "x"]]


def test_without_java_the_bench_reports_why_and_goes_on(monkeypatch, tmp_path):
    monkeypatch.setattr(flink, "STAMP", tmp_path / "missing-stamp")
    monkeypatch.setattr(flink, "java_major", lambda: None)
    result = flink.bench(QUERIES, tmp_path / "unused.parquet", 1_000, 1)
    assert result == {"not_run": "Flink here needs Java 17+ on PATH; `java -version` gives nothing"}
    reason = "PyFlink: not run: Flink here needs Java 17+ on PATH; `java -version` gives nothing."
    assert reason in flink.report_lines(result, None)


def test_runner_counts_the_processes_it_starts():
    """The runner's CPU and RSS figures cover the JVM because it is found among this process's descendants."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert child.pid in flink_runner.descendants(flink_runner.os.getpid())
        assert flink_runner.peak_rss_bytes() > 0
    finally:
        child.communicate(b"")
    assert child.pid not in flink_runner.descendants(flink_runner.os.getpid())


@pytest.mark.parametrize(
    "text, quantifier",
    [("PATTERN (A B*)", "*"), ("PATTERN (A B{2,5})", "{2,5}"), ("PATTERN (A B+) WITHIN INTERVAL '1' MINUTE", "+")],
)
def test_greedy_last_element_of_any_kind_becomes_reluctant(text, quantifier):
    query = f"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n {text} DEFINE B AS x > 0)"
    rewritten, rewrites = flink.flink_text(query)
    assert f"B{quantifier}?)" in rewritten and len(rewrites) == 1


def test_referee_says_which_engine_the_reference_agrees_with():
    table = bench_data.generate(2_000)
    text = QUERIES["c"][1]
    right = [tuple(r.values()) for r in cep.compile(text).run(table).to_pylist()]
    wrong = right[1:]
    verdict = flink.referee(text, table, ours=right, flink_rows=wrong)
    assert verdict == {
        "reference_matches": len(right),
        "reference_equals_ours": True,
        "reference_equals_flink": False,
        "reference_only_vs_ours": 0,
        "reference_only_vs_flink": 1,
    }
    lines = flink.difference_lines({"query": "d", "only_ours": 1, "only_flink": 0, "examples": {}, **verdict})
    assert lines[2] == "  " + flink.KNOWN_CAUSES["d"]["flink"] and len(lines) == 3
    agreeing = flink.difference_lines(
        {"query": "d", "only_ours": 1, "only_flink": 0, "examples": {}, **verdict, "reference_equals_flink": True}
    )
    assert len(agreeing) == 2  # no cause printed for an engine that agrees with the reference


def test_a_greedy_element_inside_a_group_is_not_the_last_element():
    query = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN ((A B+) C) DEFINE B AS x > 0)"
    assert flink.flink_text(query) == (query, ())


def test_first_rows_gives_both_engines_the_same_rows(tmp_path):
    import pyarrow.parquet as pq

    table = bench_data.generate(300)
    source = tmp_path / "ticks.parquet"
    pq.write_table(table, source)
    files = flink.first_rows(source, 120)
    assert pq.read_table(files.parquet).equals(table.slice(0, 120))
    lines = files.csv.read_text().splitlines()
    first = table.slice(0, 1).to_pylist()[0]
    assert len(lines) == 120
    assert lines[0] == f"{first['symbol']},{first['ts']:%Y-%m-%d %H:%M:%S}.000,{first['price']},{first['volume']}"


def test_first_rows_are_cut_again_from_a_newer_data_file(tmp_path):
    import os

    import pyarrow.parquet as pq

    source = tmp_path / "ticks.parquet"
    pq.write_table(bench_data.generate(300), source)
    old = flink.first_rows(source, 50)
    os.utime(old.parquet, (1, 1))  # as if cut long before the data file was written
    pq.write_table(bench_data.generate(300, seed=7), source)
    assert pq.read_table(flink.first_rows(source, 50).parquet).equals(pq.read_table(source).slice(0, 50))


def test_a_runner_that_runs_too_long_is_killed_with_its_children(monkeypatch, tmp_path):
    """The JVM is the runner's child: on a timeout the whole process group goes, not just the runner."""
    marker = tmp_path / "grandchild.pid"
    script = tmp_path / "runner.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)\n"
    )
    monkeypatch.setattr(flink, "FLINK_PYTHON", Path(sys.executable))
    monkeypatch.setattr(flink, "HERE", tmp_path)
    monkeypatch.setattr(flink, "RUNNER_TIMEOUT_S", 3)
    (tmp_path / "flink_runner.py").write_text(script.read_text())
    assert flink.run_runner(tmp_path / "spec.json", tmp_path / "out.json") == "the Flink runner took over 3 s"
    grandchild = int(marker.read_text())

    def alive() -> bool:  # a killed process may linger as a zombie until its new parent reaps it
        fields = flink_runner.stat_fields(grandchild)
        return fields is not None and fields[0] != "Z"

    deadline = time.monotonic() + 10  # SIGKILL is delivered at once; the bound only stops a failing test
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive()


def test_a_runner_that_fails_says_why(monkeypatch, tmp_path):
    (tmp_path / "flink_runner.py").write_text("import sys\nsys.exit('no JVM today')\n")
    monkeypatch.setattr(flink, "FLINK_PYTHON", Path(sys.executable))
    monkeypatch.setattr(flink, "HERE", tmp_path)
    assert (
        flink.run_runner(tmp_path / "spec.json", tmp_path / "out.json")
        == "the Flink runner failed (exit 1): no JVM today"
    )
