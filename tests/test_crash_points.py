"""Crashes at every step of a micro-batch, and sinks that fail: nothing lost, nothing twice.

* SIGKILL of the whole driver (Python and its JVM) at three points of a micro-batch, for two kinds of stream,
  each point on its own checkpoint (tests/crash_points_driver.py runs the six streams in one driver, each
  stopped at its own point until every other is at its own, then one SIGKILL): the V-shape
  query's ``foreachBatch`` stream (tests/crash_driver.py) right after the stateful operator committed its
  state, right after the sink wrote, right after Spark committed the batch; the alert stream with its rules
  on the driver (``state="driver"``, tests/driver_state_crash_driver.py) right after the rules' state was
  saved, right after everything of the micro-batch was written (alerts, bad rows, outbox, SQLite, journal),
  right after Spark committed it. The tests check that each checkpoint shows that very point, then finish
  each stream from its checkpoint in this process: the V-shape sink's files equal the batch replay
  (``Query.run``) with no duplicate match id; the alerts equal each rule's replay with no duplicate match id,
  the SQLite table holds each unsuppressed alert once, each bad row is in the dead letter once, and the
  state directory holds two manifests. Between two of these points nothing durable happens, so a kill at
  any other moment leaves one of these checkpoints; kills at arbitrary moments, with input arriving while the
  stream is down, are kafka_tests/test_kafka_stream.py's (a pattern of four rows, twice) and
  test_delta_streams.py's (twice).
* A locked database under an alert stream: the delivery stops with an error naming the sink, the
  matching does not; after the restart every alert is in the table once.
* A full disk under Spark's file sink (a small tmpfs, filled up; needs root to mount it,
  skipped otherwise): the query stops with Spark's write error naming the directory; once space is back the restart
  writes everything once; what a reader sees goes through ``_spark_metadata``.

The SIGKILL tests share one Spark driver (one JVM start: the module's ``killed_streams``); a kill point's
restart is its test's run to the end in this process.
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

import cep
from cep.spark_bridge.alerting.stream import AlertStream, read_status
from cep.spark_bridge.sinks.base import RetryPolicy
from cep.spark_bridge.sinks.sql import SQLiteSink
from tests import crash_driver, driver_state_crash_driver
from tests.test_alerting import (
    HIGH,
    SPAN,
    ev,
    price_batches,
    price_batches_to_the_end,
    price_walk,
    replay,
    streamed,
    two_partitions,  # noqa: F401 - a fixture
    write_batch,
    write_rule,
)
from tests.test_alerting import (
    SENTINEL as ALERT_SENTINEL,
)
from tests.test_alerting import _schema as alert_schema
from tests.test_streaming import (
    QUERIES,
    REPO,
    _spark_schema,
    expected_output,
    make_batches,
    make_events,
    matches_of,
    normalize,
    sentinel,
    without_sentinel,
    write_batches,
)

# A JVM start plus two or three micro-batches of each of six streams, on two cores: generous for a load of 40.
DRIVER_DEADLINE_S = 600
# The kill points, (the V-shape stream's, the driver-state stream's), each pair on its own two checkpoints, all six
# streams in one driver, killed in micro-batch 1 (batch 0 leaves state behind it). One driver for every point: a
# JVM start is the main cost of a kill, and each point's restart is this process's run to the end.
KILLS = (("after_state", "after_state"), ("after_sink", "after_write"), ("after_commit", "after_commit"))
KILLED_BATCH = 1


def _exists(directory: Path, pattern: str) -> bool:
    return any(directory.glob(pattern)) if directory.exists() else False


def _where_it_stopped(checkpoint: Path, output: Path, batch: int) -> dict[str, bool]:
    """What the V-shape stream's checkpoint and sink hold for ``batch`` after the kill."""
    return {
        "offsets": (checkpoint / "offsets" / str(batch)).exists(),
        "state": _exists(checkpoint / "state", f"0/*/{batch + 1}.delta"),  # version = batch id + 1
        "sink": Path(crash_driver.batch_path(str(output), batch)).exists(),
        "commit": (checkpoint / "commits" / str(batch)).exists(),
        "next_offsets": (checkpoint / "offsets" / str(batch + 1)).exists(),
        "next_sink": Path(crash_driver.batch_path(str(output), batch + 1)).exists(),
    }


EXPECTED_STOP = {  # what must (True) and must not (False) exist after the kill, per point
    "after_state": {"offsets": True, "state": True, "sink": False, "commit": False},
    "after_sink": {"offsets": True, "state": True, "sink": True, "commit": False},
    "after_commit": {"commit": True, "next_offsets": True, "next_sink": False},
}


def _where_the_alerts_stopped(checkpoint: Path, output: Path, batch: int) -> dict[str, bool]:
    """What the driver-state alert stream's checkpoint and outputs hold for ``batch`` after the kill."""
    return {
        "state": (checkpoint / "driver-state" / f"m-{batch:012d}.json").exists(),
        "written": (output / "_spark_metadata" / str(batch)).exists(),
        "commit": (checkpoint / "match" / "commits" / str(batch)).exists(),
        "next_written": (output / "_spark_metadata" / str(batch + 1)).exists(),
    }


EXPECTED_ALERTS_STOP = {
    "after_state": {"state": True, "written": False, "commit": False},
    "after_write": {"state": True, "written": True, "commit": False},
    "after_commit": {"commit": True, "next_written": False},
}


def read_sink(output: Path) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted(output.glob("batch-*.parquet"))]
    return pd.concat(frames, ignore_index=True)


def run_driver_until_killed(folder: Path, streams: list[dict]) -> None:
    """Run tests/crash_points_driver.py over ``streams`` (each with its ``kill``: ``POINT:BATCH``) until it kills
    itself, every stream at its own point."""
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        CEP_SPARK_LOG=str(folder / "driver-spark.log"),
        **{crash_driver.KILL_PARTIES_ENV: str(len(streams))},
    )
    log_path = folder / "driver.log"
    with log_path.open("w") as log:
        driver = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "crash_points_driver.py"), json.dumps(streams)],
            env=env,
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            driver.wait(timeout=DRIVER_DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
            pytest.fail(f"the driver did not reach every kill point of {streams}:\n" + log_path.read_text()[-3000:])
    assert driver.returncode == -signal.SIGKILL, log_path.read_text()[-3000:]


def vshape_stream(source: Path, seed: int, n_batches: int):
    """The V-shape query and random events, written to ``source`` as one file per micro-batch, the sentinel in
    the last (availableNow's last, empty micro-batch takes its watermark)."""
    query = cep.compile(QUERIES["vshape"])
    rnd = random.Random(seed)
    events = make_events(rnd, symbols=3, per_symbol=30)
    batches = make_batches(events, rnd, 20, n_batches)
    batches[-1].append(sentinel(events, 60, 20))
    write_batches(source, batches)
    return query, events


def assert_equals_the_replay(result: pd.DataFrame, query, events: list[dict]) -> None:
    assert result[result["cep_late_reason"].isna()]["match_id"].is_unique
    assert without_sentinel(matches_of(result, query)) == normalize(expected_output(query, events, 60))


ALERT_BAD_LINE = '{"symbol": "a", "ts": "2024-01-01T00:00:31", "price": "abc"}'


def alert_stream_input(rules: Path, source: Path) -> list[list[dict]]:
    """The two rules and the alert stream's input, one file per micro-batch, a bad line in batch 1's."""
    write_rule(rules, "prices.sql", HIGH)
    write_rule(rules, "span.sql", SPAN)
    batches = price_batches_to_the_end()
    for index, rows in enumerate(batches):
        write_batch(source, index, rows)
    path = source / "batch-0001.json"
    stamp = path.stat().st_mtime
    with path.open("a", encoding="utf-8") as fh:
        fh.write(ALERT_BAD_LINE + "\n")
    os.utime(path, (stamp, stamp))
    return batches


@dataclass(frozen=True)
class KilledStreams:
    """The streams' inputs and checkpoints after the driver, per kill point, and where the kill left each."""

    vshape_args: dict[str, list[str]]  # per V-shape kill point
    query: cep.Query
    events: list[dict]
    stopped: dict[str, dict[str, bool]]  # per V-shape kill point
    alert_args: dict[str, list[str]]  # per driver-state kill point
    alert_batches: list[list[dict]]
    alerts_stopped: dict[str, dict[str, bool]]  # per driver-state kill point


@pytest.fixture(scope="module")
def killed_streams(tmp_path_factory) -> KilledStreams:
    """One driver running a V-shape stream and an alert stream for each pair of ``KILLS``, each stream on its own
    input and checkpoint, killed once every stream is at its point: the SIGKILL tests below each check their own
    streams and finish them."""
    root = tmp_path_factory.mktemp("killed")
    vshape_args, alert_args, streams = {}, {}, []
    for point, alert_point in KILLS:
        folder = root / point
        source, output, checkpoint = folder / "in", folder / "out", folder / "ck"
        query, events = vshape_stream(source, seed=41, n_batches=3)
        vshape_args[point] = [str(source), str(output), str(checkpoint), query.text]
        rules, alert_in, alert_out = folder / "rules", folder / "alerts-in", folder / "alerts-out"
        alert_batches = alert_stream_input(rules, alert_in)
        alert_args[alert_point] = [
            str(rules),
            str(alert_in),
            str(alert_out),
            str(folder / "alerts-ck"),
            str(folder / "alerts.db"),
        ]
        streams += [
            {"kind": "vshape", "args": vshape_args[point], "kill": f"{point}:{KILLED_BATCH}"},
            {"kind": "alerts", "args": alert_args[alert_point], "kill": f"{alert_point}:{KILLED_BATCH}"},
        ]
    run_driver_until_killed(root, streams)
    stopped = {
        point: _where_it_stopped(Path(args[2]), Path(args[1]), KILLED_BATCH) for point, args in vshape_args.items()
    }
    alerts_stopped = {
        point: _where_the_alerts_stopped(Path(args[3]), Path(args[2]), KILLED_BATCH)
        for point, args in alert_args.items()
    }
    return KilledStreams(vshape_args, query, events, stopped, alert_args, alert_batches, alerts_stopped)


def assert_stopped_where_expected(stopped: dict[str, dict[str, bool]], expected: dict[str, dict[str, bool]]) -> None:
    """Each kill point left what ``expected`` says must (True) and must not (False) exist."""
    for point, want in expected.items():
        assert {k: stopped[point][k] for k in want} == want, (point, stopped[point])


@pytest.mark.long
@pytest.mark.spark
@pytest.mark.parametrize("point", [vshape for vshape, _ in KILLS])
def test_sigkill_after_the_state_commit_the_sink_write_and_the_batch_commit_then_restart(spark, killed_streams, point):
    assert_stopped_where_expected(killed_streams.stopped, {point: EXPECTED_STOP[point]})

    args = killed_streams.vshape_args[point]
    stream = crash_driver.start_query(spark, *args, available_now=True)
    stream.awaitTermination()
    assert_equals_the_replay(read_sink(Path(args[1])), killed_streams.query, killed_streams.events)


@pytest.mark.long
@pytest.mark.spark
@pytest.mark.parametrize("point", [alerts for _, alerts in KILLS])
def test_sigkill_after_the_state_save_the_writes_and_the_commit_then_restart(spark, killed_streams, point):
    """The driver layout (``--state driver``) killed at every point of a micro-batch, then restarted."""
    assert_stopped_where_expected(killed_streams.alerts_stopped, {point: EXPECTED_ALERTS_STOP[point]})

    args = killed_streams.alert_args[point]
    stream = driver_state_crash_driver.make_stream(spark, *args)
    stream.run_available_now()
    out = stream.alerts().toPandas()
    events = [e for b in killed_streams.alert_batches for e in b]
    assert out["match_id"].is_unique
    assert streamed(out, "prices/high") == replay(HIGH, events) and streamed(out, "span") == replay(SPAN, events)
    with sqlite3.connect(args[4]) as db:
        delivered = sorted(r[0] for r in db.execute("SELECT match_id FROM alerts"))
    assert delivered == sorted(out[~out["suppressed"]]["match_id"])
    checkpoint = Path(args[3])
    letters = spark.read.json(str(checkpoint / "dead-letter" / "bad-rows")).toPandas()
    assert list(letters["_cep_input"]) == [ALERT_BAD_LINE]
    assert len(list((checkpoint / "driver-state").glob("m-*.json"))) == 2


# --------------------------------------------------------------------------------- a locked database


@pytest.mark.spark
def test_locked_database_stops_the_delivery_naming_the_sink_then_the_restart_delivers_once(
    spark, two_partitions, tmp_path
):
    rules, source, checkpoint, output = tmp_path / "rules", tmp_path / "in", tmp_path / "ck", tmp_path / "out"
    write_rule(rules, "prices.sql", HIGH)
    write_rule(rules, "span.sql", SPAN)
    batches = [
        [ev("a", 0, 101), ev("a", 10, 102), ev("b", 11, 150)] + price_walk(["c", "d"], 0, 30, 3, seed=3),
        [ev("a", 61, 104), ev("s", 50, 5), ev("s", 51, 15), ev("s", 95, 25)]
        + price_walk(["c", "d"], 40, 80, 3, seed=4),
        [ev(ALERT_SENTINEL, 10_000, 0)],
    ]
    for index, rows in enumerate(batches):
        write_batch(source, index, rows)
    database = tmp_path / "alerts.db"
    SQLiteSink(str(database)).deliver([], batch_id=-1)  # the table exists, empty
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program holds the database for as long as this test likes

    def stream() -> AlertStream:
        df = spark.readStream.schema(alert_schema()).option("maxFilesPerTrigger", 1).json(str(source))
        sink = SQLiteSink(str(database), timeout=0.05, retry=RetryPolicy(max_attempts=3, backoff=0.05, budget=1.0))
        return AlertStream(
            spark,
            str(rules),
            df,
            checkpoint=str(checkpoint),
            output=str(output),
            output_format="json",
            sinks=[sink],
            watermark="5 seconds",
        )

    first = stream()
    with pytest.raises(Exception) as raised:
        first.run_available_now()
    assert f"sqlite {database}: error[E0470]: OperationalError: database is locked" in str(raised.value)
    lane = first.status["sinks"][SQLiteSink(str(database)).key()]  # what `cep status` shows once written
    assert "database is locked" in lane["last_error"] and lane["failing_since"] and lane["queue_alerts"] > 0
    written = read_status(str(checkpoint))  # --once writes status.json even when a sink stops it
    assert written["state"] == "failed" and "database is locked" in written["query_errors"][-1]["error"]
    matched = first.alerts().toPandas()  # the matching went on: every alert is in the file sink
    events = [e for b in batches for e in b]
    assert streamed(matched, "span") == replay(SPAN, events) and len(matched) > 3
    assert holder.execute("SELECT COUNT(*) FROM alerts").fetchone()[0] == 0  # only the lock's holder can read

    holder.rollback()  # the lock is gone; the same command started again
    stream().run_available_now()
    with sqlite3.connect(database) as db:
        rows = [r[0] for r in db.execute("SELECT match_id FROM alerts")]
    assert sorted(rows) == sorted(matched[~matched["suppressed"]]["match_id"])  # each unsuppressed alert once


# ------------------------------------------------------------------------------------------ a full disk


def _mount_tmpfs(path: Path, size: str) -> str | None:
    """Mount a tmpfs of ``size`` at ``path``; None when done, else why it could not be."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a small tmpfs needs root"
    path.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    return None if done.returncode == 0 else f"mount -t tmpfs failed: {done.stderr.strip()}"


def _fill(disk: Path) -> Path:
    """Write zeros until the file system is full; returns the ballast file."""
    ballast = disk / "ballast"
    with ballast.open("wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return ballast


@pytest.mark.spark
def test_full_disk_stops_the_file_sink_then_the_restart_writes_everything_once(spark, tmp_path):
    disk = tmp_path / "disk"
    reason = _mount_tmpfs(disk, "4m")
    if reason:
        pytest.skip(reason)
    try:
        source, output, checkpoint = tmp_path / "in", disk / "out", tmp_path / "ck"
        query, events = vshape_stream(source, seed=43, n_batches=3)
        ballast = _fill(disk)

        def run():
            df = spark.readStream.schema(_spark_schema()).option("maxFilesPerTrigger", 1).json(str(source))
            out = query.on_spark(df, watermark="20 seconds", session_timeout="60 seconds")
            return (
                out.writeStream.format("parquet")
                .option("path", str(output))
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )

        stream = run()
        with pytest.raises(Exception) as raised:  # Spark's StreamingQueryException
            stream.awaitTermination()
        assert f"Task failed while writing rows to file:{output}" in str(raised.value), str(raised.value)[:2000]
        assert not (checkpoint / "commits" / "0").exists()  # nothing counted as written
        ballast.unlink()  # space is back
        run().awaitTermination()
        # Read through _spark_metadata: committed files only.
        assert_equals_the_replay(spark.read.parquet(str(output)).toPandas(), query, events)
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


# ----------------------------------------------------- one read of the input, two outputs, one checkpoint


# Bad lines in the alert stream's input, one per micro-batch file, with the reason each must come out with.
ALERT_BAD_LINES = [
    ("this is not json", "not_json"),
    ('{"symbol": "a", "ts": "2024-01-01T00:00:31", "price": "abc"}', "wrong_type"),
    ('{"symbol": "b", "ts": null, "price": 1.0}', "null_event_time"),
]


@pytest.mark.spark
@pytest.mark.parametrize("layout", ["driver", "spark"])
def test_alert_stream_reads_its_input_once_and_a_crash_between_its_two_outputs_writes_each_once(
    spark, two_partitions, tmp_path, capsys, layout
):
    """One streaming query parses the input once and writes both the alerts and the bad rows (its
    foreachBatch, each through Spark's file sink). Killed after micro-batch 1's alerts were committed
    and before its bad rows were: the restart from the checkpoint writes the bad rows of batch 1, and
    nothing twice."""
    from pyspark.sql import types as T

    rules, source, checkpoint, output = tmp_path / "rules", tmp_path / "in", tmp_path / "ck", tmp_path / "out"
    write_rule(rules, "prices.sql", HIGH)
    write_rule(rules, "span.sql", SPAN)
    batches = price_batches() + [[ev("s", 95, 25), ev(ALERT_SENTINEL, 10_000, 0)]]
    for index, rows in enumerate(batches):
        write_batch(source, index, rows)
        path = source / f"batch-{index:04d}.json"
        stamp = path.stat().st_mtime  # the files' order
        with path.open("a", encoding="utf-8") as fh:
            fh.write(ALERT_BAD_LINES[index][0] + "\n")
        os.utime(path, (stamp, stamp))
    schema = T.StructType(alert_schema().fields + [T.StructField("_corrupt_record", T.StringType())])
    dead = checkpoint / "dead-letter" / "bad-rows"

    def stream() -> AlertStream:
        df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
        return AlertStream(
            spark, str(rules), df, checkpoint=str(checkpoint), output=str(output), watermark="5 seconds", state=layout
        )

    first = stream()
    commit_bad_rows = first.bad_rows_sink.commit

    def killed_at_batch_1(batch_id, df):
        if batch_id == 1:
            raise RuntimeError("killed between the two writes")
        commit_bad_rows(batch_id, df)

    first.bad_rows_sink.commit = killed_at_batch_1
    with pytest.raises(Exception, match="killed between the two writes"):
        first.run_available_now()
    assert (output / "_spark_metadata" / "1").exists() and not (dead / "_spark_metadata" / "1").exists()
    assert (checkpoint / "match" / "offsets" / "1").exists() and not (checkpoint / "match" / "commits" / "1").exists()
    assert not (checkpoint / "bad-rows").exists()  # no second query, no second checkpoint

    second = stream()
    second.run_available_now()
    capsys.readouterr()
    second.match_query.explain()
    plan = capsys.readouterr().out
    # One scan of the input (the last micro-batch had no data: an empty LocalTableScan stands for the files)
    # feeds the rules and the dead letter; in the keyed layout Spark tags the rows (key_tags), no Python before
    # the shuffle, and the rules run in its stateful operator; in the driver layout no Python runs in Spark.
    assert sum("Scan" in line for line in plan.splitlines()) == 1 and "MapInPandas" not in plan, plan
    assert ("FlatMapGroupsInPandasWithState" in plan) == (layout == "spark"), plan
    out = second.alerts().toPandas()
    events = [e for b in batches for e in b]
    assert out["match_id"].is_unique
    assert streamed(out, "prices/high") == replay(HIGH, events) and streamed(out, "span") == replay(SPAN, events)
    letters = spark.read.json(str(dead)).toPandas()
    inputs = dict(zip(letters["_cep_error"], letters["_cep_input"]))
    assert len(letters) == len(inputs) == len(ALERT_BAD_LINES)  # each bad row once
    assert (
        inputs["not_json"] == ALERT_BAD_LINES[0][0] and inputs["wrong_type"] == ALERT_BAD_LINES[1][0]
    )  # the lines as they were
    assert json.loads(inputs["null_event_time"]) == {"symbol": "b", "price": 1.0}  # the row as read
    assert all(str(f).endswith(".json") for f in letters["_cep_file"])
    status = read_status(str(checkpoint))
    assert status["bad_rows"] == {
        **dict.fromkeys(status["bad_rows"], 0),
        **{reason: 1 for _, reason in ALERT_BAD_LINES},
    }
