"""Delta tables followed by ``cep stream``: a table another process appends to, its alerts landed in a Delta
table exactly once across two ``kill -9``; a table whose schema changes between commits; a keyed stream killed
between a micro-batch and Spark's empty one. (The batch reads are in test_delta_spark.py: split so that the
suite's workers share the long streaming tests.)

A stream that is killed with ``kill -9`` is a ``cep stream`` child process with its own Spark driver, as its user
runs it. Every other command runs in this process, on the suite's SparkSession (the ``spark`` fixture): the same
command line through ``cep.cli.main``, the same checkpoint, without a Spark driver JVM started for each (each costs
10-20 s on a quiet machine, minutes on a loaded one): ``--once`` (drain what the table holds, then stop; told to run
again; told to skip change commits), and the stream that runs on while a column is added, stopped with SIGTERM
(tests/running_command.py).

The killed runs do not wait for one another: the two runs killed in turn on one checkpoint and the keyed run killed
on another start in background threads when the module's first test starts (``killed_runs``), so their drivers
start and run while the tests before theirs run in this process; each test then waits for its own killed runs and
goes on from their checkpoint in the main thread.

The independent source: the python engine's backtest of the same table (tested against the Parquet reader in
test_delta.py), and the rows these tests appended.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cep.cli import main
from tests.running_command import run_until_watched

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
CEP = [sys.executable, "-m", "cep.cli"]
HIGH = """-- severity: critical
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES X.price AS p
  PATTERN (X) DEFINE X AS price > 100)"""
T0 = dt.datetime(2024, 1, 1)
SENTINEL = "zzz"


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


def stream_args(tmp: Path, *extra: str) -> list[str]:
    """``cep stream``'s arguments over the Delta table ``tmp/events``, alerts into the Delta table ``tmp/alerts``."""
    options = {
        "--rules": str(tmp / "rules"),
        "--input": f"delta:{tmp / 'events'}",
        "--delta-option": "maxFilesPerTrigger=1",
        "--checkpoint": str(tmp / "ck"),
        "--sink": f"delta:{tmp / 'alerts'}",
        "--watermark": "2s",
        "--trigger": "1s",
        "--max-future-skew": "off",
        "--master": "local[2]",
    }
    return ["stream", *(word for option in options.items() for word in option), *extra]


class Stream:
    """``cep stream`` over the Delta table, alerts into a Delta table, in its own process group."""

    def __init__(self, tmp: Path, *extra: str, spark_conf: dict[str, str] | None = None) -> None:
        self.log = tmp / f"stream-{time.monotonic_ns()}.log"
        env = dict(
            os.environ,
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=str(ROOT),
            CEP_SPARK_LOG=str(tmp / f"spark-{time.monotonic_ns()}.log"),
        )
        if spark_conf:  # Spark settings the CLI has no flag for, given as a user gives them (docs/operations.md)
            settings = " ".join(f"--conf {key}={value}" for key, value in spark_conf.items())
            env["PYSPARK_SUBMIT_ARGS"] = f"{settings} pyspark-shell"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [*CEP, *stream_args(tmp, *extra)],
                cwd=str(tmp),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill_9(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(60)


def drained(tmp: Path, capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, str]:
    """``cep stream ... --once`` run to its end in this process, on the ``spark`` fixture's session (``main``
    reuses a running session): its exit code and what it printed."""
    code = main(stream_args(tmp, "--once", *extra))
    printed = capsys.readouterr()
    return code, printed.out + printed.err


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
@pytest.mark.timeout(3600)  # the suite's session only
@pytest.mark.parametrize("state", ["driver", "spark"])
def test_a_followed_table_whose_schema_changes_is_told_what_to_do(spark, tmp_path, capsys, state):
    """A column added while the stream runs, then read on by the same command from its checkpoint; an
    overwrite that changes a column's type stops the stream with Delta's words and cep's sentence saying
    what to do, no trace; doing it (skipChangeCommits) reads on. Both layouts: the rules on the driver (no
    stateful operator in Spark's query) and in Spark's keyed state."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "high.sql").write_text(HIGH)
    table = tmp_path / "events"
    append(table, events(0, 30))
    seen: list[int] = []

    def add_a_column(command_done: threading.Event) -> None:
        deadline = time.monotonic() + 900
        while alert_rows(tmp_path) == 0:
            assert not command_done.is_set(), "cep stream ended before the first alerts"
            assert time.monotonic() < deadline, "no alerts in 900 s"
            time.sleep(1)  # polling the alerts table, with a deadline
        seen.append(alert_rows(tmp_path))
        grown = events(40, 30).assign(venue="X")
        write_deltalake(
            str(table), pa.Table.from_pandas(grown, preserve_index=False), mode="append", schema_mode="merge"
        )
        deadline = time.monotonic() + 600
        while not command_done.is_set() and alert_rows(tmp_path) == seen[0] and time.monotonic() < deadline:
            time.sleep(1)  # polling: the running stream either reads on or stops at the new schema

    running = run_until_watched(stream_args(tmp_path, "--state", state), add_a_column)
    printed = capsys.readouterr()
    after_add = printed.out + printed.err
    assert running in (0, 1), after_add[-3000:]  # stopped by SIGTERM after reading on, or at the new schema
    code, resumed = drained(tmp_path, capsys)
    assert code == 0, resumed[-3000:]
    assert alert_rows(tmp_path) > seen[0]  # the rows after the new column are read, by one command or the next
    retyped = events(80, 30).assign(price=lambda f: f["price"].astype("int64"))
    write_deltalake(
        str(table), pa.Table.from_pandas(retyped, preserve_index=False), mode="overwrite", schema_mode="overwrite"
    )
    code, text = drained(tmp_path, capsys)
    assert code == 1, text[-3000:]
    texts = [resumed, text]
    if "Run the same command again" in text:  # Delta saw the new schema first: the user does as told
        assert "its schema changed since the stream started" in text, text[-3000:]
        code, text = drained(tmp_path, capsys)
        assert code == 1, text[-3000:]
        texts.append(text)
    assert f"the Delta table {table} cannot be followed further" in text and "skipChangeCommits=true" in text
    before_skip = alert_rows(tmp_path)
    append(table, events(120, 30).assign(price=lambda f: f["price"].astype("int64")))
    code, skipping = drained(tmp_path, capsys, "--delta-option", "skipChangeCommits=true")  # the user does as told
    assert code == 0, skipping[-3000:]
    assert alert_rows(tmp_path) == before_skip + 6  # the rows appended after the overwrite, each fifth one
    if "Detected schema change" in after_add or "DELTA_SCHEMA_CHANGED" in after_add:
        assert "Run the same command again" in after_add
    assert "Traceback" not in after_add + "".join(texts) + skipping


KILLED_RUN_SECONDS = 1800  # what a test waits for its killed runs: two Spark drivers in turn, minutes under load


class InBackground:
    """The killed runs of the module's tests, each a function run in a thread of its own; ``result`` waits for
    one and returns what it returned, or raises what it raised (the test that needs it fails with it)."""

    def __init__(self) -> None:
        self._threads: dict[str, threading.Thread] = {}
        self._outcomes: dict[str, tuple[bool, object]] = {}

    def start(self, name: str, work: Callable[[], object]) -> None:
        def run() -> None:
            try:
                self._outcomes[name] = (True, work())
            except BaseException as failure:  # noqa: BLE001 - raised again in the test that waits for it
                self._outcomes[name] = (False, failure)

        self._threads[name] = threading.Thread(target=run, name=f"killed-run-{name}", daemon=True)
        self._threads[name].start()

    def result(self, name: str) -> object:
        self._threads[name].join(KILLED_RUN_SECONDS)
        assert name in self._outcomes, f"the killed runs of {name} still run after {KILLED_RUN_SECONDS} s"
        done, value = self._outcomes[name]
        if not done:
            raise value
        return value

    def join(self) -> None:
        for thread in self._threads.values():
            thread.join(KILLED_RUN_SECONDS)


@pytest.fixture(scope="module", autouse=True)
def killed_runs(spark, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ARG001
    """The killed runs of the tests below that are selected, started at the module's first test: each is a
    ``cep stream`` child with its own Spark driver, a JVM start of tens of seconds that would otherwise wait
    for the tests before it. Each run has its own folder (its table, its checkpoint, its sink)."""
    selected = {item.originalname for item in request.session.items if item.module is request.module}
    runs = InBackground()
    for test, work in (
        (test_a_stream_follows_an_appending_table_and_lands_each_alert_once_across_two_kill_9, killed_twice),
        (test_a_keyed_stream_killed_before_sparks_empty_micro_batch_reads_on_after_an_overwrite, keyed_killed),
    ):
        if test.__name__ in selected:
            folder = tmp_path_factory.mktemp(test.__name__[:40])
            runs.start(test.__name__, lambda work=work, folder=folder: (folder, work(folder)))
    yield runs
    runs.join()  # each run kills its children itself, also when it fails


def killed_twice(tmp: Path) -> tuple[list[Stream], Iterator[int]]:
    """``cep stream`` over a table another job appends to, killed mid-stream, then again from the checkpoint:
    the two killed runs and where the appends' event times go on."""
    (tmp / "rules").mkdir()
    (tmp / "rules" / "high.sql").write_text(HIGH)
    table = tmp / "events"
    append(table, events(0, 30))
    streams: list[Stream] = []
    starts = iter(range(40, 400, 40))  # each commit later in event time than the one before, as a feed appends
    try:
        for _kill in range(2):  # running, appended to, killed mid-stream; then again from the checkpoint
            stream = Stream(tmp)
            streams.append(stream)
            seen = alert_rows(tmp)
            append(table, events(next(starts), 30))
            until(lambda seen=seen: alert_rows(tmp) > seen, 600, "alerts in the Delta table", stream)
            append(table, events(next(starts), 30))  # arrives while the stream is killed, or just before
            stream.kill_9()
    finally:
        for stream in streams:
            stream.kill_9()
    return streams, starts


@pytest.mark.long
@pytest.mark.timeout(3600)  # two Spark drivers one after the other (killed_runs), then the suite's session
def test_a_stream_follows_an_appending_table_and_lands_each_alert_once_across_two_kill_9(spark, killed_runs, capsys):
    tmp_path, (streams, starts) = killed_runs.result(
        "test_a_stream_follows_an_appending_table_and_lands_each_alert_once_across_two_kill_9"
    )
    table = tmp_path / "events"
    append(
        table,
        pd.concat(
            [
                events(next(starts), 30),
                pd.DataFrame({"symbol": [SENTINEL], "ts": [T0 + dt.timedelta(days=1)], "price": [1.0]}),
            ]
        ),
    )
    code, last = drained(tmp_path, capsys)  # the same command, drained: nothing lost, nothing twice
    assert code == 0, last[-3000:]
    backtest = replayed(tmp_path, table)
    assert len(backtest) > 0
    assert_landed_once(tmp_path, backtest)
    assert DeltaTable(str(tmp_path / "alerts")).metadata().partition_columns == ["emit_date"]
    assert "Traceback" not in "".join(s.text() for s in streams) + last
    assert "| late 0 |" in last  # in order: every row matched, none set aside as late


# Off in the killed run of the keyed test below: Spark then logs no micro-batch until new rows come.
NO_DATA_MICRO_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


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


def keyed_killed(tmp: Path) -> tuple[list[pd.DataFrame], Stream, int | None]:
    """The keyed test's killed run (below): the rows it was given, the stream, and the micro-batch it was killed
    after (None if the kill missed the wait)."""
    (tmp / "rules").mkdir()
    (tmp / "rules" / "high.sql").write_text(HIGH)
    table, query_checkpoint = tmp / "events", tmp / "ck" / "match"
    read = [events(0, 30), events(40, 30)]  # the rows the stream reads before the overwrite
    append(table, read[0])
    killed = Stream(tmp, "--state", "spark", spark_conf={NO_DATA_MICRO_BATCHES: "false"})
    try:
        until(lambda: (query_checkpoint / "commits" / "0").exists(), 900, "the first micro-batch", killed)
        append(table, read[1])
        deadline = time.monotonic() + 900
        while _committed_data_batch(query_checkpoint) is None and time.monotonic() < deadline:
            assert killed.process.poll() is None, killed.text()[-3000:]
            time.sleep(0.5)  # polling the checkpoint for the data micro-batch's commit
    finally:
        killed.kill_9()
    return read, killed, _committed_data_batch(query_checkpoint)


@pytest.mark.long
@pytest.mark.timeout(3600)  # a Spark driver (killed_runs), then the suite's session
def test_a_keyed_stream_killed_before_sparks_empty_micro_batch_reads_on_after_an_overwrite(spark, killed_runs, capsys):
    """Spark's keyed state over a Delta table, ``kill -9`` after a micro-batch that read rows was committed and
    before Spark logged the empty micro-batch it runs after it (its stateful operator's timers); then an
    overwrite changes a column's type. On a restart Spark hands Delta's source that micro-batch again, and
    Delta checks its first table version against the retyped newest: without the empty micro-batch every run
    stopped there with "run the same command again". Now the same command stops at the overwrite with its own
    sentence, skipChangeCommits reads on, and the alerts, with their match ids, are the python engine's replay
    of the rows the stream read, each once. The killed run has Spark's empty micro-batches turned off
    (``spark.sql.streaming.noDataMicroBatches.enabled``, a session setting, not one its checkpoint keeps): it
    then waits after the micro-batch's commit for rows that never come, and the test kills it there, with no
    race against a trigger. Its checkpoint is the one a kill between the commit and the empty micro-batch
    leaves (the commit holds the next watermark either way); the restarts run with Spark's defaults, in the
    suite's session. The test checks that the kill fell there. (The killed run starts at the module's first
    test: ``keyed_killed``.)"""
    tmp_path, (read, killed, last) = killed_runs.result(
        "test_a_keyed_stream_killed_before_sparks_empty_micro_batch_reads_on_after_an_overwrite"
    )
    table, query_checkpoint = tmp_path / "events", tmp_path / "ck" / "match"
    assert last is not None, "the kill missed the wait between a micro-batch's commit and the next offsets"
    assert not (query_checkpoint / "offsets" / str(last + 1)).exists()
    assert NO_DATA_MICRO_BATCHES not in (query_checkpoint / "offsets" / str(last)).read_text()  # not kept

    retyped = events(80, 30).assign(price=lambda f: f["price"].astype("int64"))
    write_deltalake(
        str(table), pa.Table.from_pandas(retyped, preserve_index=False), mode="overwrite", schema_mode="overwrite"
    )
    texts = [killed.text()]
    for _run in range(2):  # Delta may first say the schema changed (run again): the user does as told, once
        code, text = drained(tmp_path, capsys)
        assert code == 1, text[-3000:]
        texts.append(text)
        if "Run the same command again" not in text:
            break
    assert f"the Delta table {table} cannot be followed further" in texts[-1], texts[-1][-3000:]
    assert "skipChangeCommits=true" in texts[-1]
    read.append(events(120, 30).assign(price=lambda f: f["price"].astype("int64")))
    append(table, read[-1])
    code, skipping = drained(tmp_path, capsys, "--delta-option", "skipChangeCommits=true")
    assert code == 0, skipping[-3000:]
    replay = tmp_path / "read"  # the rows the stream read, one schema (the retyped prices as the first ones)
    for rows in read:
        append(replay, rows.assign(price=lambda f: f["price"].astype("float64")))
    backtest = replayed(tmp_path, replay)
    assert len(backtest) == 18  # every fifth row of the three appends
    assert_landed_once(tmp_path, backtest)
    assert "Traceback" not in "".join(texts) + skipping
