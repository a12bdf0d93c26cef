"""``cep run --dead-letter FILE``: bad rows set aside with their reasons and counted in the summary."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

import cep
from cep import cli

REPO = Path(__file__).resolve().parent.parent
VSHAPE = REPO / "patterns" / "v_shape.sql"

LINES = [
    {"symbol": "A", "ts": "2024-01-01T00:00:01", "price": 5.0},
    {"symbol": "A", "ts": "2024-01-01T00:00:02", "price": 3.0},
    {"symbol": "A", "ts": None, "price": 3.0},  # null_event_time
    {"symbol": "A", "ts": "2024-01-01T00:00:03", "price": "abc"},  # wrong_type
    {"symbol": "A", "ts": "2024-01-01T00:00:04", "price": 4.0},
    {"symbol": "B", "ts": "2024-01-01T00:00:01", "price": 2.0, "extra": "ignored"},
]


def test_cli_run_dead_letter_counts_bad_rows_in_the_summary(tmp_path, capsys):
    source = tmp_path / "events.json"
    source.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    dead = tmp_path / "bad.jsonl"
    code = cli.main(["run", str(VSHAPE), "--input", str(source), "--engine", "python", "--dead-letter", str(dead)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[-1] == f"bad rows: 2 (null_event_time 1, wrong_type 1) -> {dead}"
    records = [json.loads(line) for line in dead.read_text(encoding="utf-8").splitlines()]
    assert [(r["_cep_row"], r["_cep_error"], r["_cep_error_code"]) for r in records] == [
        (2, "null_event_time", "E0440"),
        (3, "wrong_type", "E0442"),
    ]
    # The matches are those of the good rows alone (the batch API on the same rows).
    good = cep.compile(VSHAPE.read_text(encoding="utf-8")).run(
        cli.read_pandas([str(source)], "json").drop(index=[2, 3])
    )
    assert f"matches: {len(good)}," in out and len(good) == 1


def test_cli_run_without_dead_letter_is_unchanged(tmp_path, capsys):
    source = tmp_path / "events.json"
    source.write_text("".join(json.dumps(line) + "\n" for line in LINES if line["ts"]), encoding="utf-8")
    assert cli.main(["run", str(VSHAPE), "--input", str(source), "--engine", "python"]) == cli.EXIT_QUERY_ERROR
    assert "E0410" in capsys.readouterr().err  # 'abc' < 3.0: the query fails


# The dead letter of ``--engine spark`` against the python engine's (the same records, the NULL event time's
# detail, the same summary) is in tests/test_json_kinds.py, over LINES:
# test_a_string_among_numbers_is_set_aside_on_both_engines.


UNHELD = ["1600-01-01T00:00:00Z", "2300-06-01T00:00:00", "1677-09-21T00:12:43.145224"]  # the last: 1 µs too early


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_an_event_time_pandas_cannot_hold_is_a_bad_row_not_a_traceback(tmp_path, capsys, fmt):
    lines = [dict(line, ts=ts) for line, ts in zip(LINES[:3], UNHELD)] + [
        {"symbol": "A", "ts": f"2024-01-01T00:00:0{i}", "price": p} for i, p in enumerate([5.0, 3.0, 4.0, 6.0], 1)
    ]
    source = tmp_path / f"events.{fmt}"
    if fmt == "json":
        source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    else:
        source.write_text(
            "symbol,ts,price\n" + "".join(f"{row['symbol']},{row['ts']},{row['price']}\n" for row in lines),
            encoding="utf-8",
        )
    dead = tmp_path / "bad.jsonl"
    assert cli.main(["run", str(VSHAPE), "--input", str(source), "--engine", "python", "--dead-letter", str(dead)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"bad rows: 3 (bad_event_time 3) -> {dead}"
    records = [json.loads(line) for line in dead.read_text(encoding="utf-8").splitlines()]
    assert [(r["_cep_row"], r["_cep_error_code"]) for r in records] == [(0, "E0441"), (1, "E0441"), (2, "E0441")]
    held = "outside the times the engines hold (1677-09-21 to 2262-04-11)"
    assert all(held in r["_cep_error_detail"] for r in records)
    good = cep.compile(VSHAPE.read_text(encoding="utf-8")).run(lines[3:])  # the batch API on the good rows alone
    assert f"matches: {len(good)}," in out and len(good) == 1
    # Without a dead letter: the run is refused with the row and the reason, never a pandas traceback.
    assert cli.main(["run", str(VSHAPE), "--input", str(source), "--engine", "python"]) == cli.EXIT_QUERY_ERROR
    err = capsys.readouterr().err
    assert "E0410" in err and "'ts'" in err and "Traceback" not in err
    if fmt == "json":  # a JSON input's kinds are checked row by row (validate.refuse_odd_kinds): the row is named
        assert "bad_event_time" in err and "row 0" in err


def _yesterday_input(tmp_path: Path, odd: str = "yesterday") -> tuple[Path, list[dict]]:
    """The issue's input: one unparseable time on another key; as text, 'yesterday' sorted after every time
    and the column ordered as strings."""
    good = [{"symbol": "A", "ts": f"2024-01-01T00:00:{s:02d}", "price": p} for s, p in ((1, 5.0), (2, 3.0), (3, 4.0))]
    good += [{"symbol": "B", "ts": f"2024-01-01T00:00:{s:02d}", "price": p} for s, p in ((1, 9.0), (12, 7.0), (3, 8.0))]
    lines = good[:4] + [{"symbol": "C", "ts": odd, "price": 1.0}] + good[4:]
    source = tmp_path / "events.json"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return source, good


def test_one_unparseable_time_is_a_bad_row_and_never_turns_the_time_column_into_text(tmp_path, capsys):
    source, good = _yesterday_input(tmp_path)
    dead = tmp_path / "bad.jsonl"
    assert cli.main(["run", str(VSHAPE), "--input", str(source), "--engine", "python", "--dead-letter", str(dead)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"bad rows: 1 (bad_event_time 1) -> {dead}"
    (record,) = [json.loads(line) for line in dead.read_text(encoding="utf-8").splitlines()]
    assert (record["_cep_row"], record["ts"], record["_cep_error_code"]) == (4, "yesterday", "E0441")
    expected = cep.compile(VSHAPE.read_text(encoding="utf-8")).run(
        [dict(row, ts=dt.datetime.fromisoformat(row["ts"])) for row in good]
    )  # the good rows, as times
    assert f"matches: {len(expected)}," in out
    assert cli.main(["run", str(VSHAPE), "--input", str(source), "--engine", "python"]) == cli.EXIT_QUERY_ERROR
    err = capsys.readouterr().err
    assert "E0410" in err and "'yesterday'" in err and "row 4" in err


@pytest.mark.spark
@pytest.mark.parametrize("odd", ["yesterday", "NA"])  # NA: a CSV's NULL marker, a JSON string like any other
def test_one_unparseable_time_is_the_same_bad_row_on_spark(tmp_path, capsys, odd):
    source, _ = _yesterday_input(tmp_path, odd)
    printed = {}
    for engine in ("python", "spark"):
        dead = tmp_path / f"bad-{engine}.jsonl"
        argv = ["run", str(VSHAPE), "--input", str(source), "--engine", engine, "--dead-letter", str(dead)]
        assert cli.main(argv) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[-1] == f"bad rows: 1 (bad_event_time 1) -> {dead}"
        printed[engine] = lines[:-2]
    assert printed["spark"] == printed["python"]
