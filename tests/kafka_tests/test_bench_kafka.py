"""bench/kafka_e2e.py's own parts on the real broker, in seconds: what it produces and how it reads alerts.

The bench's numbers are only as good as these: the ticks on the topic are the ticks it replays with ``q.run``
(keyed by symbol, a symbol's event times strictly increasing, so no engine meets a tie), and the alert reader
counts an alert once per key, after the exactly-once sink's transaction commits and never from an aborted one.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path

import pytest

from cep.spark_bridge.sinks.kafka import alert_message
from tests.kafka_broker import consume

pytestmark = pytest.mark.kafka

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import kafka_e2e  # noqa: E402


def alert(match_id: str, last: dt.datetime) -> dict:
    return {
        "rule_id": "v_shape",
        "rule_version": "v1",
        "match_id": match_id,
        "match_status": "MATCHED",
        "partition_key": json.dumps({"symbol": "K0001"}),
        "first_event_time": last - dt.timedelta(seconds=2),
        "last_event_time": last,
        "measures": json.dumps({"n": 3}),
        "emit_time": last + dt.timedelta(seconds=3),
        "suppressed": False,
    }


def test_the_ticks_on_the_topic_are_the_ticks_replayed(kafka_broker, kafka_topic):
    topic = kafka_topic(4)
    producer = kafka_e2e.Producer(kafka_broker.bootstrap, topic, keys=7)
    sent, _, _ = producer.run(None, 10.0, max_events=300)  # as fast as it goes: many ticks per millisecond
    assert sent == 300
    records = consume(kafka_broker.bootstrap, topic)
    on_topic = sorted(
        (json.loads(r["value"])["symbol"], json.loads(r["value"])["ts"], json.loads(r["value"])["price"])
        for r in records
    )
    ticks = producer.ticks
    kept = sorted(zip(ticks.symbol, map(kafka_e2e.iso_ms, ticks.ts_ms), ticks.price))
    assert on_topic == kept
    assert all(r["key"].decode() == json.loads(r["value"])["symbol"] for r in records)
    for symbol in set(ticks.symbol):
        times = [t for s, t in zip(ticks.symbol, ticks.ts_ms) if s == symbol]
        assert all(a < b for a, b in zip(times, times[1:])), symbol  # no tie on ORDER BY ts


def test_the_reader_sees_committed_alerts_once_and_never_aborted_ones(kafka_broker, kafka_topic):
    from confluent_kafka import Producer

    topic = kafka_topic(1)
    last = dt.datetime(2026, 1, 1, 12, 0, 0, 250_000)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "transactional.id": f"bench-test-{topic}"})
    producer.init_transactions(30)
    for batch, commit in ((["a", "b"], True), (["c"], False), (["b", "d"], True)):  # b again: a redelivery
        producer.begin_transaction()
        for match_id in batch:
            message = alert_message(alert(match_id, last))
            producer.produce(topic, key=message["key"], value=message["value"])
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    reader = kafka_e2e.AlertReader(kafka_broker.bootstrap, topic, "cep-exactly-once")
    reader.start()
    deadline = time.monotonic() + 20
    while reader.copies < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # an aborted message read by mistake would come with the others
    reader.stop.set()
    reader.join(10)
    assert sorted(reader.seen) == ["a", "b", "d"]
    assert reader.copies == 4  # b twice: counted as a duplicate message, kept once
    assert reader.newest_event_ms == round(last.replace(tzinfo=dt.UTC).timestamp() * 1000)
