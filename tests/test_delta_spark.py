"""Delta tables on Spark, through Delta's own connector: the same matches and match ids as the python engine
(which reads with delta-rs), and ``cep stream`` following a table that another process appends to, landing its
alerts in a Delta table exactly once across two ``kill -9``.

The independent source: the python engine's backtest of the same table (tested against the Parquet reader in
test_delta.py), and the rows this test appended.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cep.cli import main
from cep.spark_bridge.spark.delta import DeltaSnapshot, read_delta

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
CEP = [sys.executable, "-m", "cep.cli"]
V_SHAPE = str(ROOT / "patterns" / "v_shape.sql")
TICKS = ROOT / "patterns" / "data" / "ticks.csv"
HIGH = """-- severity: critical
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES X.price AS p
  PATTERN (X) DEFINE X AS price > 100)"""
T0 = dt.datetime(2024, 1, 1)
SENTINEL = "zzz"


def table_rows(out: str) -> list[str]:
    return sorted(line for line in out.splitlines() if line and not line.startswith(("events read", "wrote")))


@pytest.mark.timeout(2400)  # four Spark jobs: many minutes on a loaded 2-core machine
def test_both_engines_give_the_same_matches_and_match_ids_at_each_version(spark, tmp_path, capsys):
    frame = pd.read_csv(TICKS, parse_dates=["ts"])
    frame["day"] = frame["ts"].dt.strftime("%Y-%m-%d")
    path = tmp_path / "ticks"
    write_deltalake(
        str(path), pa.Table.from_pandas(frame[frame["symbol"] != "DYNA"], preserve_index=False), partition_by=["day"]
    )
    write_deltalake(
        str(path), pa.Table.from_pandas(frame[frame["symbol"] == "DYNA"], preserve_index=False), mode="append"
    )
    for spec in (f"delta:{path}", f"delta:{path}@v0"):
        answers = {}
        for engine in ("python", "spark"):
            assert main(["run", V_SHAPE, "--input", spec, "--engine", engine, "--match-ids"]) == 0
            answers[engine] = table_rows(capsys.readouterr().out)
        assert answers["python"] == answers["spark"]
        assert len(answers["spark"]) == 2 + (27 if spec.endswith(str(path)) else 21)
    for engine in ("python", "spark"):  # before the first commit: no version to read, said plainly on both
        assert (
            main(
                [
                    "run",
                    V_SHAPE,
                    "--input",
                    f"delta:{path}",
                    "--engine",
                    engine,
                    "--delta-timestamp",
                    "2000-01-01T00:00:00",
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert f"cannot read the Delta table {path} as of 2000-01-01T00:00:00" in err and "Traceback" not in err


@pytest.mark.timeout(1800)  # two Spark jobs on a loaded machine
def test_a_filter_on_a_partition_by_column_is_pushed_into_the_read_on_both_engines(spark, tmp_path, capsys):
    """The other symbols' files are deleted after the commit, so a read that opened them would fail; both
    engines give the answer the same statement gives over a Parquet copy of the whole table (match ids hash
    the statement's text, so the statement must be the same)."""
    frame = pd.read_csv(TICKS, parse_dates=["ts"])
    path = tmp_path / "by_symbol"
    write_deltalake(str(path), pa.Table.from_pandas(frame, preserve_index=False), partition_by=["symbol"])
    query = tmp_path / "q.sql"
    query.write_text(Path(V_SHAPE).read_text() + " AS m WHERE m.symbol IN ('BOLT', 'CRUX')")
    parquet = tmp_path / "ticks.parquet"
    frame.to_parquet(parquet, index=False, coerce_timestamps="us")
    assert main(["run", str(query), "--input", str(parquet), "--engine", "python", "--match-ids"]) == 0
    expected = [row for row in table_rows(capsys.readouterr().out) if row.startswith(("BOLT", "CRUX"))]
    table = DeltaTable(str(path))
    for uri in set(table.file_uris()) - set(table.file_uris([("symbol", "in", ["BOLT", "CRUX"])])):
        Path(uri.removeprefix("file://")).unlink()
    for engine in ("python", "spark"):
        assert main(["run", str(query), "--input", f"delta:{path}", "--engine", engine, "--match-ids"]) == 0
        rows = table_rows(capsys.readouterr().out)
        assert [row for row in rows if row.startswith(("BOLT", "CRUX"))] == expected, engine
    assert len(expected) > 10


@pytest.mark.timeout(2400)  # six Spark jobs on a loaded machine
def test_a_changed_schema_and_bad_times_are_told_the_same_on_both_engines(spark, tmp_path, capsys):
    """A column added at version 1 is an unknown column with its caret at version 0; a type widened between
    versions reads as each version has it; a time column of text with a value that is no time, or with a
    NULL, is a counted bad row. The same words on both engines (the python engine's answers are checked
    against files in test_delta.py)."""
    frame = pd.read_csv(TICKS, parse_dates=["ts"])
    grown = tmp_path / "grown"
    write_deltalake(str(grown), pa.Table.from_pandas(frame.drop(columns=["volume"]), preserve_index=False))
    write_deltalake(
        str(grown), pa.Table.from_pandas(frame, preserve_index=False), mode="overwrite", schema_mode="overwrite"
    )  # version 1: volume added
    query = tmp_path / "q.sql"
    query.write_text(Path(V_SHAPE).read_text().replace("COUNT(*) AS n", "SUM(volume) AS v"))
    texts = frame.astype({"ts": str})
    texts.loc[5, "ts"] = "not a time"
    nulls = frame.copy()
    nulls.loc[3, "ts"] = pd.NaT
    for name, rows in (("texts", texts), ("nulls", nulls)):
        write_deltalake(str(tmp_path / name), pa.Table.from_pandas(rows, preserve_index=False))
    answers: dict[str, list[list[str]]] = {}
    for engine in ("python", "spark"):
        assert main(["run", str(query), "--engine", engine, "--input", f"delta:{grown}@v0"]) == 1
        err = capsys.readouterr().err
        assert "volume" in err and "^" in err and "Traceback" not in err, engine
        assert main(["run", str(query), "--engine", engine, "--input", f"delta:{grown}"]) == 0
        assert "matches: 27" in capsys.readouterr().out, engine
        for name, reason in (("texts", "bad_event_time"), ("nulls", "null_event_time")):
            dead = tmp_path / f"{name}-{engine}.jsonl"
            args = [
                "run",
                V_SHAPE,
                "--engine",
                engine,
                "--input",
                f"delta:{tmp_path / name}",
                "--dead-letter",
                str(dead),
            ]
            assert main(args) == 0
            out = capsys.readouterr().out
            assert f"bad rows: 1 ({reason} 1)" in out, (engine, name, out)
            answers.setdefault(name, []).append(table_rows(out.split("events read")[0]))
    assert all(python == spark and len(python) > 20 for python, spark in answers.values())
    widened = tmp_path / "widened"
    write_deltalake(str(widened), pa.table({"k": ["a"], "n": pa.array([1], pa.int32())}))
    write_deltalake(
        str(widened),
        pa.table({"k": ["a"], "n": pa.array([2**40], pa.int64())}),
        mode="overwrite",
        schema_mode="overwrite",
    )
    at = {version: read_delta(spark, DeltaSnapshot(str(widened), version=version)).collect() for version in (0, 1)}
    assert [row["n"] for row in at[0]] == [1] and [row["n"] for row in at[1]] == [2**40]


def events(start: int, count: int) -> pd.DataFrame:
    """Prices for three symbols, one a second; every fifth one above 100 (an alert)."""
    return pd.DataFrame(
        {
            "symbol": ["abc"[i % 3] for i in range(count)],
            "ts": [T0 + dt.timedelta(seconds=start + i) for i in range(count)],
            "price": [150.0 + i if i % 5 == 0 else 50.0 for i in range(count)],
        }
    )


def append(path: Path, rows: pd.DataFrame) -> None:
    """The other job: one Delta commit per call, as an ingestion job appends."""
    write_deltalake(str(path), pa.Table.from_pandas(rows, preserve_index=False), mode="append")


class Stream:
    """``cep stream`` over the Delta table, alerts into a Delta table, in its own process group."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        self.log = tmp / f"stream-{time.monotonic_ns()}.log"
        args = [
            *CEP,
            "stream",
            "--rules",
            str(tmp / "rules"),
            "--input",
            f"delta:{tmp / 'events'}",
            "--delta-option",
            "maxFilesPerTrigger=1",
            "--checkpoint",
            str(tmp / "ck"),
            "--sink",
            f"delta:{tmp / 'alerts'}",
            "--watermark",
            "2s",
            "--trigger",
            "1s",
            "--max-future-skew",
            "off",
            "--master",
            "local[2]",
            *extra,
        ]
        env = dict(
            os.environ,
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=str(ROOT),
            CEP_SPARK_LOG=str(tmp / f"spark-{time.monotonic_ns()}.log"),
        )
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                args, cwd=str(tmp), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill_9(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(60)


def alert_rows(tmp: Path) -> int:
    path = tmp / "alerts"
    if not (path / "_delta_log").is_dir():
        return 0
    return DeltaTable(str(path)).to_pyarrow_table(columns=["match_id"]).num_rows


def replayed(tmp: Path, table: Path) -> pd.DataFrame:
    """The rules' alerts over the Delta table ``table``, replayed by the python engine (with match ids)."""
    out = tmp / f"backtest-{table.name}.json"
    args = ["run", "--rules", str(tmp / "rules"), "--input", f"delta:{table}", "--engine", "python"]
    assert main([*args, "--output", str(out)]) == 0
    return pd.read_json(out, lines=True)


def assert_landed_once(tmp: Path, backtest: pd.DataFrame) -> None:
    """The Delta sink holds each alert of ``backtest`` once, and nothing else."""
    landed = DeltaTable(str(tmp / "alerts")).to_pandas()
    assert len(landed) == landed["match_id"].nunique() == len(backtest)
    assert set(landed["match_id"]) == set(backtest["match_id"])


def until(predicate, seconds: float, what: str, log: Stream) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline or log.process.poll() is not None:
            raise AssertionError(f"timed out waiting for {what}:\n{log.text()[-3000:]}")
        time.sleep(1)  # polling a condition, with a deadline


@pytest.mark.long
@pytest.mark.timeout(3600)  # four Spark drivers, one after the other
def test_a_stream_follows_an_appending_table_and_lands_each_alert_once_across_two_kill_9(tmp_path, capsys):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "high.sql").write_text(HIGH)
    table = tmp_path / "events"
    append(table, events(0, 30))
    streams: list[Stream] = []
    starts = iter(range(40, 400, 40))  # each commit later in event time than the one before, as a feed appends
    try:
        for _kill in range(2):  # running, appended to, killed mid-stream; then again from the checkpoint
            stream = Stream(tmp_path)
            streams.append(stream)
            seen = alert_rows(tmp_path)
            append(table, events(next(starts), 30))
            until(lambda seen=seen: alert_rows(tmp_path) > seen, 600, "alerts in the Delta table", stream)
            append(table, events(next(starts), 30))  # arrives while the stream is killed, or just before
            stream.kill_9()
        append(
            table,
            pd.concat(
                [
                    events(next(starts), 30),
                    pd.DataFrame({"symbol": [SENTINEL], "ts": [T0 + dt.timedelta(days=1)], "price": [1.0]}),
                ]
            ),
        )
        last = Stream(tmp_path, "--once")  # the same command, drained: nothing lost, nothing twice
        streams.append(last)
        assert last.process.wait(900) == 0, last.text()[-3000:]
    finally:
        for stream in streams:
            stream.kill_9()
    backtest = replayed(tmp_path, table)
    assert len(backtest) > 0
    assert_landed_once(tmp_path, backtest)
    assert DeltaTable(str(tmp_path / "alerts")).metadata().partition_columns == ["emit_date"]
    assert "Traceback" not in "".join(s.text() for s in streams)
    assert "| late 0 |" in last.text()  # in order: every row matched, none set aside as late


@pytest.mark.long
@pytest.mark.timeout(3600)  # up to six Spark drivers, one after the other
@pytest.mark.parametrize("state", ["driver", "spark"])
def test_a_followed_table_whose_schema_changes_is_told_what_to_do(tmp_path, state):
    """A column added while the stream runs, then read on by the same command from its checkpoint; an
    overwrite that changes a column's type stops the stream with Delta's words and cep's sentence saying
    what to do, no trace; doing it (skipChangeCommits) reads on. Both layouts: the rules on the driver (no
    stateful operator in Spark's query) and in Spark's keyed state."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "high.sql").write_text(HIGH)
    table = tmp_path / "events"
    append(table, events(0, 30))
    running = Stream(tmp_path, "--state", state)
    streams = [running]
    try:
        until(lambda: alert_rows(tmp_path) > 0, 900, "the first alerts", running)
        seen = alert_rows(tmp_path)
        grown = events(40, 30).assign(venue="X")
        write_deltalake(
            str(table), pa.Table.from_pandas(grown, preserve_index=False), mode="append", schema_mode="merge"
        )
        deadline = time.monotonic() + 600
        while running.process.poll() is None and alert_rows(tmp_path) == seen and time.monotonic() < deadline:
            time.sleep(1)  # polling: the running stream either reads on or stops at the new schema
        running.kill_9()
        after_add = running.text()
        resumed = Stream(tmp_path, "--once")
        streams.append(resumed)
        assert resumed.process.wait(900) == 0, resumed.text()[-3000:]
        assert alert_rows(tmp_path) > seen  # the rows after the new column are read, by one command or the next
        retyped = events(80, 30).assign(price=lambda f: f["price"].astype("int64"))
        write_deltalake(
            str(table), pa.Table.from_pandas(retyped, preserve_index=False), mode="overwrite", schema_mode="overwrite"
        )
        stopped = Stream(tmp_path, "--once")
        streams.append(stopped)
        assert stopped.process.wait(900) == 1, stopped.text()[-3000:]
        text = stopped.text()
        if "Run the same command again" in text:  # Delta saw the new schema first: the user does as told
            assert "its schema changed since the stream started" in text, text[-3000:]
            stopped = Stream(tmp_path, "--once")
            streams.append(stopped)
            assert stopped.process.wait(900) == 1, stopped.text()[-3000:]
            text = stopped.text()
        assert f"the Delta table {table} cannot be followed further" in text and "skipChangeCommits=true" in text
        before_skip = alert_rows(tmp_path)
        append(table, events(120, 30).assign(price=lambda f: f["price"].astype("int64")))
        skipping = Stream(tmp_path, "--once", "--delta-option", "skipChangeCommits=true")  # the user does as told
        streams.append(skipping)
        assert skipping.process.wait(900) == 0, skipping.text()[-3000:]
    finally:
        for stream in streams:
            stream.kill_9()
    assert alert_rows(tmp_path) == before_skip + 6  # the rows appended after the overwrite, each fifth one
    if "Detected schema change" in after_add or "DELTA_SCHEMA_CHANGED" in after_add:
        assert "Run the same command again" in after_add
    assert "Traceback" not in after_add + resumed.text() + "".join(stream.text() for stream in streams[2:])


def _offset_sources(query_checkpoint: Path, batch: int) -> list[str]:
    """The source offsets Spark logged for ``batch`` (its offset log entry without the version and metadata)."""
    return (query_checkpoint / "offsets" / str(batch)).read_text().splitlines()[2:]


def _committed_data_batch(query_checkpoint: Path) -> int | None:
    """The last micro-batch when it is committed and read rows (its offsets are not the ones before it), and
    Spark has not yet logged the one after it; else None."""
    logged = sorted(int(p.name) for p in (query_checkpoint / "offsets").glob("[0-9]*"))
    if not logged or logged[-1] < 1 or not (query_checkpoint / "commits" / str(logged[-1])).exists():
        return None
    last = logged[-1]
    return last if _offset_sources(query_checkpoint, last) != _offset_sources(query_checkpoint, last - 1) else None


@pytest.mark.long
@pytest.mark.timeout(3600)  # up to five Spark drivers, one after the other
def test_a_keyed_stream_killed_before_sparks_empty_micro_batch_reads_on_after_an_overwrite(tmp_path):
    """Spark's keyed state over a Delta table, ``kill -9`` after a micro-batch that read rows was committed and
    before Spark logged the empty micro-batch it runs after it (its stateful operator's timers); then an
    overwrite changes a column's type. On a restart Spark hands Delta's source that micro-batch again, and
    Delta checks its first table version against the retyped newest: without the empty micro-batch every run
    stopped there with "run the same command again". Now the same command stops at the overwrite with its own
    sentence, skipChangeCommits reads on, and the alerts, with their match ids, are the python engine's replay
    of the rows the stream read, each once. A long trigger holds Spark between the micro-batch's commit and the
    next one's offsets, where the test kills it; the test checks that it did."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "high.sql").write_text(HIGH)
    table, query_checkpoint = tmp_path / "events", tmp_path / "ck" / "match"
    read = [events(0, 30), events(40, 30)]  # the rows the stream reads before the overwrite
    append(table, read[0])
    killed = Stream(tmp_path, "--state", "spark", "--trigger", "40s")
    streams = [killed]
    try:
        until(lambda: (query_checkpoint / "commits" / "0").exists(), 900, "the first micro-batch", killed)
        append(table, read[1])
        deadline = time.monotonic() + 900
        while _committed_data_batch(query_checkpoint) is None and time.monotonic() < deadline:
            assert killed.process.poll() is None, killed.text()[-3000:]
            time.sleep(0.1)  # polling the checkpoint: the kill must fall before the next trigger
        killed.kill_9()
        last = _committed_data_batch(query_checkpoint)
        assert last is not None, "the kill missed the wait between a micro-batch's commit and the next offsets"
        assert not (query_checkpoint / "offsets" / str(last + 1)).exists()

        retyped = events(80, 30).assign(price=lambda f: f["price"].astype("int64"))
        write_deltalake(
            str(table), pa.Table.from_pandas(retyped, preserve_index=False), mode="overwrite", schema_mode="overwrite"
        )
        texts = []
        for _run in range(2):  # Delta may first say the schema changed (run again): the user does as told, once
            stopped = Stream(tmp_path, "--once")
            streams.append(stopped)
            assert stopped.process.wait(900) == 1, stopped.text()[-3000:]
            texts.append(stopped.text())
            if "Run the same command again" not in texts[-1]:
                break
        assert f"the Delta table {table} cannot be followed further" in texts[-1], texts[-1][-3000:]
        assert "skipChangeCommits=true" in texts[-1]
        read.append(events(120, 30).assign(price=lambda f: f["price"].astype("int64")))
        append(table, read[-1])
        skipping = Stream(tmp_path, "--once", "--delta-option", "skipChangeCommits=true")
        streams.append(skipping)
        assert skipping.process.wait(900) == 0, skipping.text()[-3000:]
    finally:
        for stream in streams:
            stream.kill_9()
    replay = tmp_path / "read"  # the rows the stream read, one schema (the retyped prices as the first ones)
    for rows in read:
        append(replay, rows.assign(price=lambda f: f["price"].astype("float64")))
    backtest = replayed(tmp_path, replay)
    assert len(backtest) == 18  # every fifth row of the three appends
    assert_landed_once(tmp_path, backtest)
    assert "Traceback" not in "".join(stream.text() for stream in streams)
