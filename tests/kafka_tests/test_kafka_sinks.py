"""The Kafka alert sinks against the real broker, without Spark: what a micro-batch delivered twice looks like.

- ``KafkaSink`` (at least once): a micro-batch delivered again is sent again, each copy byte for byte the first
  (key, value, headers, timestamp), so a consumer keyed on ``match_id`` or a compacted topic sees it once.
- ``KafkaExactlyOnceSink``: a micro-batch id committed before (a replay after a crash) is skipped, also by a
  new sink with the same transactional id (a restarted stream); a sink killed with SIGKILL inside its
  transaction leaves nothing a ``read_committed`` consumer can see, once its successor started.
- Missing topics and unreachable brokers are reported when the sink is made, before any stream starts.
- A broker outage is one warning when it starts and one when it ends; the broker, stopped and started again,
  keeps its address, topics and records (tests/kafka_broker.py, which the outage tests rely on).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from cep.spark_bridge.sinks.base import CepSinkError
from cep.spark_bridge.sinks.kafka import KafkaExactlyOnceSink, KafkaSink
from cep.spark_bridge.spark.kafka import CepKafkaError
from tests.kafka_broker import consume, free_port, produce

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]


def alerts(batch: int, count: int = 3) -> list[dict]:
    return [
        {
            "rule_id": "r",
            "rule_version": "v1",
            "match_id": f"{batch:04d}{i:028d}",
            "match_status": "MATCHED",
            "partition_key": json.dumps({"k": i}),
            "first_event_time": dt.datetime(2024, 1, 1, 0, 0, i),
            "last_event_time": dt.datetime(2024, 1, 1, 0, 1, i),
            "measures": json.dumps({"n": i, "batch": batch}),
            "emit_time": dt.datetime(2026, 1, 1, 0, 0, batch),
            "suppressed": False,
        }
        for i in range(count)
    ]


def test_at_least_once_redelivery_is_byte_identical(kafka_broker, kafka_topic):
    topic = kafka_topic(3)
    sink = KafkaSink(f"kafka://{kafka_broker.bootstrap}/{topic}")
    for _ in range(2):  # the micro-batch, then its replay after a crash
        report = sink.deliver(alerts(0), 0)
        assert sum(report.delivered.values()) == 3
    sink.close()
    records = consume(kafka_broker.bootstrap, topic)
    assert len(records) == 6
    copies: dict[bytes, list[tuple]] = {}
    for r in records:
        copies.setdefault(r["key"], []).append((r["partition"], r["value"], r["headers"], r["timestamp"]))
    assert sorted(copies) == sorted(a["match_id"].encode() for a in alerts(0))
    assert all(len(c) == 2 and c[0] == c[1] for c in copies.values())  # same partition, value, headers, timestamp


def test_exactly_once_skips_a_replayed_batch_also_after_a_restart(kafka_broker, kafka_topic, tmp_path):
    topic, control = kafka_topic(2), kafka_topic(1, suffix="control")
    url = f"kafka-exactly-once://{kafka_broker.bootstrap}/{topic}?control_topic={control}"
    sink = KafkaExactlyOnceSink(url, state_dir=str(tmp_path / "sinks"))
    assert sum(sink.deliver(alerts(0), 0).delivered.values()) == 3
    again = sink.deliver(alerts(0), 0)  # the same batch id again: skipped, and reported as delivered (it was)
    assert sum(again.delivered.values()) == 3 and sink.skipped == [0]
    restarted = KafkaExactlyOnceSink(url, state_dir=str(tmp_path / "sinks"))
    assert restarted.transactional_id == sink.transactional_id
    assert sum(restarted.deliver(alerts(0), 0).delivered.values()) == 3
    assert restarted.skipped == [0]
    assert sum(restarted.deliver(alerts(1), 1).delivered.values()) == 3
    committed = consume(kafka_broker.bootstrap, topic, isolation="read_committed")
    assert Counter(r["key"] for r in committed) == Counter(a["match_id"].encode() for a in alerts(0) + alerts(1))
    control_records = consume(kafka_broker.bootstrap, control)
    assert [json.loads(r["value"])["batch_id"] for r in control_records] == [0, 1]
    assert {r["key"] for r in control_records} == {sink.transactional_id.encode()}


_KILLED_SINK = textwrap.dedent("""
    import datetime as dt, json, os, signal, sys
    from cep.spark_bridge.sinks.kafka import KafkaExactlyOnceSink, alert_message
    url, state_dir = sys.argv[1:3]
    sink = KafkaExactlyOnceSink(url, state_dir=state_dir)
    sink._start()
    producer = sink._producer
    producer.begin_transaction()
    for i in range(4):
        message = alert_message({
            "rule_id": "r", "rule_version": "v1", "match_id": f"doomed{i}", "match_status": "MATCHED",
            "partition_key": "{}", "measures": "{}", "emit_time": dt.datetime(2026, 1, 1),
        })
        producer.produce(sink.topic, key=message["key"], value=message["value"])
    assert producer.flush(30) == 0  # written to the partitions, inside the open transaction
    print("flushed", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_sink_killed_inside_its_transaction_leaves_nothing_visible(kafka_broker, kafka_topic, tmp_path):
    topic, control = kafka_topic(1), kafka_topic(1, suffix="control")
    url = f"kafka-exactly-once://{kafka_broker.bootstrap}/{topic}?control_topic={control}"
    state = str(tmp_path / "sinks")
    first = KafkaExactlyOnceSink(url, state_dir=state)
    first.deliver(alerts(0), 0)
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_SINK, url, state],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "flushed" in done.stdout
    assert len(consume(kafka_broker.bootstrap, topic, isolation="read_uncommitted")) == 3 + 4
    successor = KafkaExactlyOnceSink(url, state_dir=state)  # the restarted stream: fences and aborts
    successor.deliver(alerts(1), 1)
    visible = consume(kafka_broker.bootstrap, topic, isolation="read_committed")
    assert sorted(r["key"] for r in visible) == sorted(a["match_id"].encode() for a in alerts(0) + alerts(1))
    with pytest.raises(CepSinkError, match="fenced|Fenced|epoch"):
        first.deliver(alerts(2), 2)  # the first producer was fenced by the successor


def test_missing_topics_and_unreachable_brokers_are_reported_when_the_sink_is_made(kafka_broker, tmp_path):
    with pytest.raises(CepKafkaError) as caught:
        KafkaSink(f"kafka://{kafka_broker.bootstrap}/no-such-alerts")
    assert caught.value.code == "E0490"
    assert str(caught.value).startswith(
        f"kafka://{kafka_broker.bootstrap}/no-such-alerts: error[E0490]: topic "
        f"'no-such-alerts' does not exist on {kafka_broker.bootstrap}"
    )
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(CepKafkaError, match=f"cannot reach the Kafka brokers at {address}") as caught:
        KafkaExactlyOnceSink(f"kafka-exactly-once://{address}/alerts", state_dir=str(tmp_path), check_timeout=2)
    assert caught.value.code == "E0491"


def test_a_broker_outage_is_one_line_when_it_starts_and_one_when_it_ends_and_counted_as_failures(
    kafka_broker, kafka_topic, caplog
):
    """librdkafka logs a refused connection every second or so; the console gets the outage, not each retry,
    and every error line counts as a failed attempt (cep_sink_failures_total).

    The same outage checks what every outage test relies on in tests/kafka_broker.py (one stop and start of
    the session's broker, which costs a controlled shutdown and a JVM start, serves both): the broker stopped
    listens nowhere, and started again it keeps its address, its topics and their records."""
    import logging

    topic, kept = kafka_topic(1), kafka_topic(1, suffix="kept")
    produce(kafka_broker.bootstrap, kept, [{"key": "k", "value": {"n": n}} for n in range(10)])
    address = kafka_broker.bootstrap
    sink = KafkaSink(f"kafka://{address}/{topic}", timeout=4.0)
    assert sum(sink.deliver(alerts(0), 0).delivered.values()) == 3
    before = sink.transient_failures()
    caplog.set_level(logging.DEBUG, logger="cep")
    kafka_broker.stop()
    try:
        assert not kafka_broker.running
        host, port = address.split(":")
        with socket.socket() as sock:  # nothing listens on the port while it is down
            assert sock.connect_ex((host, int(port))) != 0
        for batch in (1, 2):  # two micro-batches fail while the broker is down
            with pytest.raises(CepSinkError):
                sink.deliver(alerts(batch), batch)
    finally:
        kafka_broker.start()
    assert kafka_broker.bootstrap == address
    assert {topic, kept} <= kafka_broker.topics()
    assert [json.loads(r["value"])["n"] for r in consume(address, kept)] == list(range(10))
    assert os.path.exists(kafka_broker.logs / "server.log")
    assert sum(sink.deliver(alerts(3), 3).delivered.values()) == 3
    shown = [
        r.getMessage()
        for r in caplog.records
        if r.name == "cep.kafka"
        and r.levelno >= logging.WARNING
        and ("refused" in r.getMessage() or "kafka sink" in r.getMessage())
    ]
    assert len(shown) == 2, shown  # a notice of a coordinator still loading may come before; no error line
    assert "do not answer" in shown[0] and "Connection refused" in shown[0] and "answer again after" in shown[1]
    quiet = [
        r
        for r in caplog.records
        if r.name == "cep.kafka" and r.levelno == logging.DEBUG and "refused" in r.getMessage()
    ]
    assert len(quiet) >= 1 and sink.transient_failures() - before >= 1 + len(quiet)
    sink.close()
