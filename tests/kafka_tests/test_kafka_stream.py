"""``cep stream`` from a Kafka topic to Kafka topics, against the real broker, through crashes and an outage.

* SIGKILLed twice: ``cep stream --rules`` (two rules) reads a 2-partition topic and writes alerts to a Kafka topic
  (at least once), another one through the exactly-once sink, SQLite and the alert files. It runs as a child
  process (the Python driver and its JVM, one process group), is killed with SIGKILL twice while it works,
  each time started again with the same command while more events arrive; the last events are drained by the
  same command with ``--once``, run in the test's process on the suite's session (a kill needs a child
  process, a drain does not: no third Spark driver to start). Then: the exactly-once topic, read
  ``read_committed``, holds every alert of the batch replay (``q.run`` of each rule over the same events)
  exactly once; the at-least-once topic holds each at least once, copies byte-identical; the file sink and
  SQLite hold each once.
* The broker stopped mid-stream (``OUTAGE_S``) and started again: the stream (an ``AlertStream`` in the tests'
  own session) waits, resumes by itself, and loses nothing; the exactly-once topic ends with every alert once;
  the two bad messages among the events are in the dead letter once, each with its topic, partition and offset.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.parse
from collections import Counter
from pathlib import Path

import pytest

import cep
from cep.cli import main
from cep.spark_bridge.alerting.stream import AlertStream
from cep.spark_bridge.sinks.alerts import jsonable
from cep.spark_bridge.sinks.kafka import KafkaExactlyOnceSink
from cep.spark_bridge.spark.kafka import kafka_location, read_kafka
from tests.kafka_broker import consume, produce

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2024, 1, 1)
SCHEMA = "symbol STRING, ts TIMESTAMP, price DOUBLE"
SESSION = "2 minutes"
RULES = {
    "v_shape": (REPO / "patterns" / "v_shape.sql").read_text(encoding="utf-8"),
    "rise": """SELECT * FROM ticks MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
        MEASURES FIRST(A.ts) AS start_ts, LAST(B.price) AS top, COUNT(*) AS n
        ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B{3}) DEFINE B AS B.price > PREV(B.price))""",
}


def ticks(seed: int, symbols: int, per_symbol: int) -> list[dict]:
    rnd = random.Random(seed)
    rows = []
    for s in range(symbols):
        price = 50.0
        for i in range(per_symbol):
            price = max(40.0, min(60.0, price + rnd.choice([-1.5, -0.5, 0.5, 1.0, 2.0])))
            rows.append({"symbol": f"S{s}", "ts": T0 + dt.timedelta(seconds=10 * i + s), "price": price})
    return sorted(rows, key=lambda r: r["ts"])


def messages(rows: list[dict]) -> list[dict]:
    return [{"key": r["symbol"], "value": {**r, "ts": r["ts"].isoformat()}} for r in rows]


SENTINEL = {"symbol": "ZZZ", "ts": T0 + dt.timedelta(days=1), "price": 1.0}
# The broker's outage: six of the stream's 1 s triggers ask the stopped broker for offsets, each request retried
# by Spark's Kafka client. Any outage shorter than the client's default.api.timeout.ms (60 s) takes that same path
# (docs/kafka.md, "Broker outage"); the broker's controlled shutdown and its JVM start come on top.
OUTAGE_S = 6


def write_rules(folder: Path) -> Path:
    folder.mkdir()
    for name, text in RULES.items():
        (folder / f"{name}.sql").write_text(text, encoding="utf-8")
    return folder


def expected_alerts(events: list[dict]) -> set[tuple[str, str]]:
    """(rule id, measures as JSON) of every match the batch replay finds, rule by rule (an independent engine run)."""
    found = set()
    for rule_id, text in RULES.items():
        for row in cep.compile(text).run(events, session_timeout=SESSION):
            found.add((rule_id, json.dumps({k: jsonable(v) for k, v in row.items()}, sort_keys=True)))
    return found


def as_expected(value: bytes) -> tuple[str, str]:
    alert = json.loads(value)
    return alert["rule_id"], json.dumps(alert["measures"], sort_keys=True)


def committed_records(folder: Path) -> list[dict]:
    """The JSON records in the files Spark's file sink committed under ``folder`` (its ``_spark_metadata`` log
    lists them; a killed micro-batch can leave files it does not list). Read without Spark."""
    records = []
    logs = [p for p in (folder / "_spark_metadata").iterdir() if p.name.split(".")[0].isdigit()]  # not the .crc files
    for log in sorted(logs, key=lambda p: int(p.name.split(".")[0])):
        for line in log.read_text().splitlines()[1:]:  # the first line is the log's version
            entry = json.loads(line)
            if entry.get("action") == "add":
                path = Path(urllib.parse.urlparse(entry["path"]).path)
                records += [json.loads(row) for row in path.read_text().splitlines() if row.strip()]
    return records


class ChildStream:
    """``cep stream`` as a child process group (the Python driver and its JVM), with its output in a log."""

    def __init__(self, argv: list[str], tmp: Path, run: int) -> None:
        env = dict(
            os.environ,
            PYTHONPATH=str(REPO),
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            SPARK_LOCAL_IP="127.0.0.1",
            CEP_SPARK_LOG=str(tmp / f"spark-{run}.log"),
        )
        self.log_path = tmp / f"stream-{run}.log"
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from cep.cli import main; sys.exit(main())", *argv],
            env=env,
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def wait_for(self, condition, what: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.process.poll() is None, f"cep stream ended before {what}:\n{self.tail()}"
            assert time.monotonic() < deadline, f"no {what} in {timeout:.0f} s:\n{self.tail()}"
            time.sleep(0.3)  # polling the checkpoint or the topic for progress, not waiting a fixed time

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)  # the driver and its JVM: the group started above
        assert self.process.wait(30) == -signal.SIGKILL
        self.log.close()


@pytest.mark.long
@pytest.mark.timeout(1500)  # two Spark drivers one after the other: minutes on a busy 2-core machine
def test_cep_stream_sigkilled_twice_loses_nothing_and_the_exactly_once_topic_has_each_alert_once(
    kafka_broker, kafka_topic, spark, tmp_path, capsys
):
    boot = kafka_broker.bootstrap
    source, alerts, exactly = kafka_topic(2), kafka_topic(2, suffix="alerts"), kafka_topic(2, suffix="eo")
    events = ticks(seed=10, symbols=3, per_symbol=30)
    parts = [events[:30], events[30:60], events[60:] + [SENTINEL]]
    expected = expected_alerts(events + [SENTINEL])
    assert len(expected) > 15
    checkpoint, db = tmp_path / "ck", tmp_path / "alerts.db"
    argv = [
        "stream",
        "--rules",
        str(write_rules(tmp_path / "rules")),
        "--input",
        f"kafka://{boot}/{source}",
        "--schema",
        SCHEMA,
        "--checkpoint",
        str(checkpoint),
        "--watermark",
        "1m",
        "--session-timeout",
        SESSION,
        "--kafka-option",
        "maxOffsetsPerTrigger=25",
        "--trigger",
        "1s",
        "--master",
        "local[2]",
        "--sink",
        f"kafka://{boot}/{alerts}",
        "--sink",
        f"kafka-exactly-once://{boot}/{exactly}",
        "--sink",
        "sqlite",
        str(db),
    ]
    rnd = random.Random(4)
    for run, part in enumerate(parts[:2]):
        produce(boot, source, messages(part))
        stream = ChildStream(argv, tmp_path, run)
        before = len(consume(boot, exactly))
        # Killed once this run has delivered alerts (so its restart has deliveries to replay or skip), somewhere
        # inside the micro-batches that follow.
        stream.wait_for(lambda before=before: len(consume(boot, exactly)) > before, "alert delivered")
        time.sleep(rnd.uniform(0, 1.5))
        stream.kill()
    produce(boot, source, messages(parts[2]))
    drained = main([*argv, "--once"])  # on the suite's session: main reuses the running one
    printed = capsys.readouterr()
    assert drained == 0, (printed.out + printed.err)[-3000:]

    once = consume(boot, exactly, isolation="read_committed")
    assert Counter(r["key"] for r in once).most_common(1)[0][1] == 1  # no alert twice
    assert {as_expected(r["value"]) for r in once} == expected
    ids = {r["key"] for r in once}

    at_least_once = consume(boot, alerts)
    assert {r["key"] for r in at_least_once} == ids
    copies: dict[bytes, set] = {}
    for r in at_least_once:
        copies.setdefault(r["key"], set()).add((r["value"], tuple(sorted(r["headers"].items())), r["timestamp"]))
    assert all(len(versions) == 1 for versions in copies.values())  # duplicates, if any, are byte-identical

    files = [r["match_id"] for r in committed_records(checkpoint / "matches")]
    assert len(files) == len(set(files)) and {m.encode() for m in files} == ids
    with sqlite3.connect(db) as connection:
        rows = [r[0] for r in connection.execute("SELECT match_id FROM alerts")]
    assert len(rows) == len(ids) and {m.encode() for m in rows} == ids


@pytest.mark.timeout(1200)
def test_broker_stopped_mid_stream_the_stream_waits_and_loses_nothing(kafka_broker, kafka_topic, spark, tmp_path):
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    boot = kafka_broker.bootstrap
    source, exactly = kafka_topic(1), kafka_topic(1, suffix="eo")
    events = ticks(seed=3, symbols=3, per_symbol=40)
    expected = expected_alerts(events + [SENTINEL])
    rules = write_rules(tmp_path / "rules")
    sink = KafkaExactlyOnceSink(f"kafka-exactly-once://{boot}/{exactly}", state_dir=str(tmp_path / "sinks"))
    stream = AlertStream(
        spark,
        str(rules),
        read_kafka(spark, f"kafka://{boot}/{source}", schema=SCHEMA),
        checkpoint=str(tmp_path / "ck"),
        sinks=[sink],
        watermark="1 minute",
        session_timeout=SESSION,
        trigger="1 second",
        source_location=kafka_location(),
    )
    bad = [
        {"key": "S0", "value": "not json"},
        {"key": "S1", "value": '{"symbol": "S1", "ts": "2024-01-01T00:00:30", "price": "x"}'},
    ]
    produce(boot, source, messages(events[:30]) + bad + messages(events[30:60]))  # the bad ones at offsets 30, 31
    stream.start()
    try:
        deadline = time.monotonic() + 300
        while not consume(boot, exactly):
            stream.check()
            assert time.monotonic() < deadline, "no alert before the outage"
            time.sleep(0.5)
        kafka_broker.stop()
        stopped = time.monotonic()
        while time.monotonic() - stopped < OUTAGE_S:
            stream.check()  # raises if the matching query failed
            time.sleep(1)
        assert stream.match_query.isActive
        kafka_broker.start()
        produce(boot, source, messages(events[60:] + [SENTINEL]))
        deadline = time.monotonic() + 300
        while len({r["key"] for r in consume(boot, exactly)}) < len(expected):
            stream.check()
            assert time.monotonic() < deadline, "the stream did not resume after the outage"
            time.sleep(0.5)
        assert stream.match_query.isActive  # it rode the outage out: no restart was needed
    finally:
        stream.stop()
    once = consume(boot, exactly, isolation="read_committed")
    assert len(once) == len(expected) and {as_expected(r["value"]) for r in once} == expected
    dead = committed_records(tmp_path / "ck" / "dead-letter" / "bad-rows")
    assert sorted((r["_cep_error"], r["_cep_file"], r["_cep_input"]) for r in dead) == [
        ("not_json", f"{source}-0@30", "not json"),
        ("wrong_type", f"{source}-0@31", bad[1]["value"]),
    ]
