"""One streaming query from the input to the sinks: the hand-over to the sinks' outboxes inside the query's
``foreachBatch``, across crashes, and the start of a checkpoint written by the older two-query layout.

* Without Spark (hypothesis): the three steps of the hand-over (``DeliveryLanes.stage``, the alert
  output's commit, ``DeliveryLanes.seal``), a crash after any of them in any micro-batch, and the batch run
  again by a restarted process, as Spark runs a micro-batch it had not committed. Every alert reaches its
  receiver exactly once, with the emit time the output holds, and the journal counts each delivery once.
  The output stands in for Spark's file sink by its one rule that matters here (a batch id it committed is
  skipped); the real file sink's skip is tested in test_alerting.py and test_crash_points.py.
* On Spark: ``tests/streaming_checkpoints/two_query_v1`` is a checkpoint made by the two-query layout
  (a matching query and a delivery query reading its alert files back), stopped with the delivery query a
  micro-batch behind: two alerts delivered to SQLite, four more in the alert output only. It was made with
  the code of that layout (``AlertStream.start(available_now=True)`` after a first ``run_available_now``,
  which ran the matching query alone), under ``/tmp/cep-two-query-fixture``; Spark's logs name files by
  absolute path, so the test rewrites that prefix to where it copies the fixture.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.alerting.stream import AlertStream, read_status
from cep.spark_bridge.sinks.base import AlertSink, Delivery
from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal
from cep.spark_bridge.sinks.sql import SQLiteSink
from cep.spark_bridge.spark.session import LOCAL_CHECKPOINT_CONF
from tests import lane_crash_driver
from tests.test_alerting import (
    HIGH,
    SENTINEL,
    SPAN,
    _schema,
    ev,
    price_batches,
    price_walk,
    replay,
    streamed,
    two_partitions,  # noqa: F401 - a fixture
    write_batch,
    write_rule,
)

FIXTURE = Path(__file__).parent / "streaming_checkpoints" / "two_query_v1"
FIXTURE_ROOT = "/tmp/cep-two-query-fixture"
STEPS = ("staged", "output_committed", "sealed", "spark_committed")


class Receiver(AlertSink):
    """A receiver that keeps every alert it is sent, duplicates included."""

    name = "receiver"

    def __init__(self) -> None:
        self.received: list[dict] = []

    def key(self) -> str:
        return "receiver"

    def describe(self) -> str:
        return "the test's receiver"

    def deliver(self, alerts, batch_id: int) -> Delivery:
        self.received.extend(alerts)
        report = Delivery(self.name)
        for alert in alerts:
            report.delivered[alert["rule_id"]] += 1
        return report


def alerts_of(batch: int, size: int, run: int) -> list[dict]:
    """A micro-batch's alerts as one run computes them: the same match ids every run, the emit time of the run."""
    emitted = dt.datetime(2026, 1, 1) + dt.timedelta(seconds=run)
    return [{**alert, "emit_time": emitted} for alert in lane_crash_driver.alerts(batch)[:size]]


class Process:
    """One run of the stream's bookkeeping over the checkpoint directory: a crash is a new one.
    ``counted`` stands for status.json: each journal record is added to it once its outbox entry is gone,
    then deleted, as ``AlertStream._fold_journal`` and ``write_status`` do."""

    def __init__(self, checkpoint: Path, receiver: Receiver, counted: Counter) -> None:
        self.journal = Journal(str(checkpoint / "journal"))
        self.lanes = DeliveryLanes([receiver], str(checkpoint / "outbox"), self.journal).start()
        self.counted = counted

    def deliver(self) -> None:
        self.lanes.drain(30)
        for name, record in self.journal.pending():
            if self.lanes.settled(record):
                self.counted.update(record["delivered"])
                self.journal.remove(name)

    def stop(self) -> None:
        self.lanes.stop(10)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 3), min_size=1, max_size=4),
    crashes=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(STEPS[:-1]), st.booleans()), max_size=3),
)
def test_a_micro_batch_run_again_after_a_crash_at_any_step_reaches_each_sink_once(sizes, crashes, tmp_path_factory):
    checkpoint = tmp_path_factory.mktemp("ck")
    receiver = Receiver()
    output: dict[int, list[dict]] = {}  # batch id -> the alerts the output committed (a committed id is skipped)
    plan = Counter((batch, step) for batch, step, _ in crashes)
    lanes_first = {(batch, step): first for batch, step, first in crashes}
    counted: Counter = Counter()
    process, run = Process(checkpoint, receiver, counted), 0
    for batch, size in enumerate(sizes):
        while True:  # Spark runs the micro-batch until it is committed
            run += 1
            alerts = alerts_of(batch, size, run)
            staged = process.lanes.stage(batch, alerts, keep_written=batch in output)
            steps = {"staged": None, "output_committed": None, "sealed": None}
            crashed = None
            for step in steps:
                if step == "output_committed":
                    output.setdefault(batch, alerts)
                elif step == "sealed":
                    process.lanes.seal(staged)
                if plan[(batch, step)]:
                    plan[(batch, step)] -= 1
                    crashed = step
                    break
            if crashed is None:
                break
            if lanes_first[(batch, crashed)]:  # the lane delivered, and the status counted it, before the kill
                process.deliver()
            process.stop()
            process = Process(checkpoint, receiver, counted)
    process.deliver()
    process.stop()

    expected = sorted((a["match_id"], a["emit_time"]) for alerts in output.values() for a in alerts)
    assert sorted((a["match_id"], a["emit_time"]) for a in receiver.received) == expected
    assert sum(counted.values()) == len(expected)


# ------------------------------------------------------------------------------------------- on Spark


def copy_fixture(tmp_path: Path) -> Path:
    """The fixture under ``tmp_path``, its absolute paths rewritten to there."""
    root = tmp_path / "fixture"
    shutil.copytree(FIXTURE, root)
    for path in root.rglob("*"):
        if path.is_file() and path.suffix != ".db":
            text = path.read_bytes()
            if FIXTURE_ROOT.encode() in text:
                path.write_bytes(text.replace(FIXTURE_ROOT.encode(), str(root).encode()))
    return root


def fixture_stream(spark, root: Path, sinks, events: list[str], state: str | None = None) -> AlertStream:
    df = spark.readStream.schema(_schema()).option("maxFilesPerTrigger", 1).json(str(root / "in"))
    return AlertStream(
        spark,
        str(root / "rules"),
        df,
        checkpoint=str(root / "ck"),
        output=str(root / "alerts"),
        output_format="json",
        sinks=sinks,
        watermark="5 seconds",
        on_event=events.append,
        state=state,
    )


@pytest.mark.spark
def test_a_two_query_checkpoint_delivers_what_its_delivery_query_had_left_then_goes_on_in_one_query(
    spark,
    two_partitions,  # noqa: F811 - a fixture
    tmp_path,
):
    root = copy_fixture(tmp_path)
    database = root / "alerts.db"
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT COUNT(*) FROM alerts").fetchone()[0] == 2  # the delivery query's first batch
    batches = price_batches() + [
        [ev("a", 85, 105), ev("a", 125, 106), ev("b", 130, 101), ev("s", 95, 25)]
        + price_walk(["c", "d"], 90, 140, 3, seed=5),
        [ev(SENTINEL, 10_000, 0)],
    ]
    for index in (2, 3):  # what arrives after the upgrade
        write_batch(root / "in", index, batches[index])
    events: list[str] = []
    stream = fixture_stream(spark, root, [SQLiteSink(str(database))], events)
    status = stream.run_available_now()

    out = stream.alerts().toPandas()
    every = [e for b in batches for e in b]
    assert out["match_id"].is_unique
    assert streamed(out, "prices/high") == replay(HIGH, every)
    assert streamed(out, "span") == replay(SPAN, every)
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT match_id, emit_time FROM alerts").fetchall()
    unsuppressed = out[~out["suppressed"]]
    assert sorted(r[0] for r in rows) == sorted(unsuppressed["match_id"])
    emitted = dict(zip(unsuppressed["match_id"], unsuppressed["emit_time"]))
    assert all(pd.Timestamp(when) == emitted[match_id] for match_id, when in rows), (rows, emitted)
    # No alert twice: the two the delivery query had sent (counted under the sink's key of the fixture's
    # place: a SQLite sink's key names its file) and the others, each once.
    before = status["sinks"][SQLiteSink(f"{FIXTURE_ROOT}/alerts.db").key()]["delivered"]
    assert before == 2 and before + status["sinks"][SQLiteSink(str(database)).key()]["delivered"] == len(rows)
    assert not (root / "ck" / "deliver").exists() and list((root / "ck").glob("deliver.retired-*"))
    assert any("delivery query" in e and "retired" in e for e in events)
    assert read_status(str(root / "ck"))["state"] == "stopped"


@pytest.mark.spark
def test_a_two_query_checkpoint_without_its_sinks_is_refused_saying_what_to_do(spark, tmp_path):
    root = copy_fixture(tmp_path)
    stream = fixture_stream(spark, root, [], [])
    with pytest.raises(CepSemanticError) as raised:
        stream.start(available_now=True)
    message = str(raised.value)
    assert raised.value.code == "E0288" and "--sink" in message and str(root / "ck" / "deliver") in message
    assert (root / "ck" / "deliver" / "commits" / "0").exists()  # nothing moved, nothing reset
    assert stream.match_query is None


@pytest.mark.spark
def test_an_outbox_sealed_past_the_checkpoint_is_refused(spark, tmp_path):
    root = copy_fixture(tmp_path)
    for name in ("deliver", "match"):
        shutil.rmtree(root / "ck" / name)  # a new checkpoint for the query, the old outbox kept
    sink = SQLiteSink(str(root / "alerts.db"))
    stream = fixture_stream(spark, root, [sink], [])
    stream.lanes.outbox.put(sink.key(), 5, [])
    with pytest.raises(CepSemanticError) as raised:
        stream.start(available_now=True)
    assert raised.value.code == "E0288" and "micro-batch 5" in str(raised.value) and "cep deliver" in str(raised.value)
    assert stream.match_query is None


@pytest.mark.spark
def test_a_micro_batch_runs_the_rules_in_one_spark_job_and_writes_each_file_in_one_task(
    spark,
    two_partitions,  # noqa: F811 - a fixture
    tmp_path,
):
    """``foreachBatch`` reads the cached micro-batch once (the rules run once, their alerts, counts and the bad
    rows' reasons come back in one job) and writes each file sink that has rows in one task (one without rows
    records the batch id with no job). Its own costs reach the status
    beside Spark's parts: each step by name, and the jobs, stages and tasks Spark's status tracker saw start."""
    source, output = tmp_path / "in", tmp_path / "alerts"  # as fixture_stream lays out its root
    write_rule(tmp_path / "rules", "prices.sql", HIGH)
    batches = price_batches() + [[ev("a", 85, 105)], [ev(SENTINEL, 10_000, 0)]]
    for index, rows in enumerate(batches):
        write_batch(source, index, rows)
    bad = source / "batch-0001.json"  # one row of the second micro-batch has no event time: a bad row
    stamp = bad.stat().st_mtime
    with bad.open("a", encoding="utf-8") as fh:
        fh.write('{"symbol": "b", "ts": null, "price": 1.0}\n')
    os.utime(bad, (stamp, stamp))
    # The keyed layout's micro-batch: the rules run in Spark's workers, inside the collect's job.
    stream = fixture_stream(spark, tmp_path, [SQLiteSink(str(tmp_path / "alerts.db"))], [], state="spark")
    seen: list[dict] = []
    stream.observers.append(seen.append)
    stream.run_available_now()

    costs = {info["id"]: info["foreach_batch"] for info in seen if info["input_rows"]}
    assert sorted(costs) == [0, 1, 2, 3]

    def alert_files(batch: int) -> int:  # the files the alert output's log records for the micro-batch
        return len((output / "_spark_metadata" / str(batch)).read_text().splitlines()) - 1  # "v1" first

    assert {alert_files(batch) for batch in costs} == {0, 1}  # quiet micro-batches among them: no job, no file
    for batch, cost in costs.items():
        with_bad_rows = batch == 1
        assert cost["jobs"] == 1 + alert_files(batch) + (1 if with_bad_rows else 0), (batch, cost)
        # bad_rows_commit: the bad rows' files, or the batch recorded in their sink's log with none (no Spark job)
        assert set(cost["steps_ms"]) == {
            "collect",
            "outbox_stage",
            "alerts_commit",
            "outbox_seal",
            "journal",
            "bad_rows_commit",
        }
        assert len(cost["stage_run_ms"]) == cost["stages"] and cost["tasks"] >= cost["stages"]
        assert cost["total_ms"] >= sum(cost["steps_ms"].values())
    alerts = stream.alerts().toPandas()
    assert sorted(alerts["last_event_time"]) == sorted(
        e["ts"] for e in batches[0] + batches[1] + batches[2] if e["price"] > 100
    )
    for log in (output / "_spark_metadata").glob("[0-9]*"):  # at most one alert file per micro-batch
        assert len(log.read_text().splitlines()) <= 2, log.read_text()  # "v1" and one file
    (letters,) = [
        json.loads(line)
        for path in (tmp_path / "ck" / "dead-letter" / "bad-rows").glob("part-*")
        for line in path.read_text().splitlines()
    ]
    assert letters["_cep_error_code"] and json.loads(letters["_cep_input"])["symbol"] == "b"


@pytest.mark.spark
def test_a_micro_batch_without_alerts_writes_no_file_and_its_id_is_recorded(spark, tmp_path):
    """A quiet micro-batch records its id in the alert output's log with no file and no Spark job: a stream
    that runs all day without alerts leaves no empty file per micro-batch, and the log still holds every id."""
    rules, source, checkpoint, output = tmp_path / "rules", tmp_path / "in", tmp_path / "ck", tmp_path / "out"
    write_rule(rules, "prices.sql", HIGH)
    write_batch(source, 0, [ev("a", 0, 50), ev("b", 1, 60)])  # nothing above 100: no alert
    write_batch(source, 1, [ev("a", 10, 150)])
    write_batch(source, 2, [ev("b", 20, 70)])
    df = spark.readStream.schema(_schema()).option("maxFilesPerTrigger", 1).json(str(source))
    stream = AlertStream(
        spark, str(rules), df, checkpoint=str(checkpoint), output=str(output), output_format="json", watermark="0s"
    )
    stream.refresh_rules(force=True)
    stream.run_available_now()
    alerts = stream.alerts().toPandas()
    assert list(alerts["partition_key"]) == [json.dumps({"symbol": "a"})]
    files = list(output.glob("part-*"))
    assert len(files) == 1 and files[0].stat().st_size > 0
    committed = sorted(int(p.name) for p in (checkpoint / "match" / "commits").glob("[0-9]*"))
    assert len(committed) >= 3 and all(stream.file_sink.has_batch(batch) for batch in committed)
    # a local checkpoint's logs are written without Hadoop's checksum files (session.LOCAL_CHECKPOINT_CONF), the
    # caller's session keeps Hadoop's default, and the stream goes on from them on a restart
    logs = [checkpoint / "match" / "offsets", checkpoint / "match" / "commits", output / "_spark_metadata"]
    assert not [p for log in logs for p in log.glob(".*.crc")]
    assert all(spark.conf.get(key, None) is None for key in LOCAL_CHECKPOINT_CONF)
    write_batch(source, 3, [ev("a", 30, 170)])
    again = AlertStream(
        spark, str(rules), df, checkpoint=str(checkpoint), output=str(output), output_format="json", watermark="0s"
    )
    again.refresh_rules(force=True)
    again.run_available_now()
    after = again.alerts().toPandas()
    assert len(after) == 2 and set(alerts["match_id"]) < set(after["match_id"])
