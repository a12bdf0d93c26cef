"""The real broker of the Kafka tests, and what the future Kafka sinks rely on, checked over TCP.

- Records go out and come back whole: key, JSON value, headers, the producer's timestamp; one key always
  lands on one partition (Kafka's key hashing), in order.
- Transactions (the exactly-once Kafka sink): a transaction that writes alerts to one topic and the
  batch id to a control topic is all-or-nothing for a ``read_committed`` consumer; an aborted one is invisible
  to it (and visible to ``read_uncommitted``); a producer killed by SIGKILL inside a transaction leaves nothing
  visible once a new producer with the same ``transactional.id`` starts, and the old one is fenced.
- The broker stopped and started again keeps its address, topics and records: checked by
  test_kafka_sinks.py's broker outage, which stops and starts the session's broker anyway.
- Kafka's classes from a class-data archive (``build_archive``): built once, mapped by the next broker, which
  works as any other; an archive of other jars (or none) is not used, and the broker starts without it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import kafka_broker as broker_module
from tests.kafka_broker import KafkaBroker, consume, produce

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]


def test_records_round_trip_with_keys_headers_and_timestamps(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=4)
    base_ts = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    sent = [
        {
            "key": f"sensor-{i % 7}",
            "value": {"sensor": f"sensor-{i % 7}", "seq": i, "reading": i * 0.5},
            "headers": {"source": "test", "seq": str(i)},
            "timestamp": base_ts + i * 1000,
        }
        for i in range(140)
    ]
    assert produce(kafka_broker.bootstrap, topic, sent) == 140

    got = consume(kafka_broker.bootstrap, topic)
    assert len(got) == 140
    by_seq = {json.loads(r["value"])["seq"]: r for r in got}
    assert sorted(by_seq) == list(range(140))
    for message in sent:
        record = by_seq[message["value"]["seq"]]
        assert record["key"] == message["key"].encode()
        assert json.loads(record["value"]) == message["value"]
        assert record["headers"] == {"source": b"test", "seq": str(message["value"]["seq"]).encode()}
        assert record["timestamp"] == message["timestamp"]
        assert record["timestamp_type"] == 1  # TIMESTAMP_CREATE_TIME: the producer's timestamp is kept
    # Key hashing: each key on exactly one partition, its records in produced order there; 7 keys use > 1 partition.
    partitions_of_key: dict[bytes, set[int]] = {}
    for record in got:
        partitions_of_key.setdefault(record["key"], set()).add(record["partition"])
    assert all(len(p) == 1 for p in partitions_of_key.values())
    assert len({next(iter(p)) for p in partitions_of_key.values()}) > 1
    for key in partitions_of_key:
        seqs = [json.loads(r["value"])["seq"] for r in sorted(got, key=lambda r: r["offset"]) if r["key"] == key]
        assert seqs == sorted(seqs)


def _transactional_producer(bootstrap: str, txn_id: str):
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "enable.idempotence": True,
            "transaction.timeout.ms": 60_000,
        }
    )
    producer.init_transactions(30)
    return producer


def test_transaction_writes_alerts_and_control_record_all_or_nothing(kafka_broker, kafka_topic):
    alerts, control = kafka_topic(partitions=2, suffix="alerts"), kafka_topic(suffix="control")
    producer = _transactional_producer(kafka_broker.bootstrap, f"cep-test-{alerts}")

    def batch(batch_id: int, n: int, commit: bool) -> None:
        producer.begin_transaction()
        for i in range(n):
            producer.produce(
                alerts, key=f"match-{batch_id}-{i}".encode(), value=json.dumps({"batch": batch_id, "i": i}).encode()
            )
        producer.produce(control, key=b"query-1", value=json.dumps({"batch_id": batch_id}).encode())
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # the records are in the log, then the transaction is aborted
            producer.abort_transaction(30)

    batch(0, 3, commit=True)
    batch(1, 2, commit=False)
    batch(2, 4, commit=True)

    committed = consume(kafka_broker.bootstrap, alerts, isolation="read_committed")
    assert sorted(r["key"] for r in committed) == sorted(
        [f"match-0-{i}".encode() for i in range(3)] + [f"match-2-{i}".encode() for i in range(4)]
    )
    everything = consume(kafka_broker.bootstrap, alerts, isolation="read_uncommitted")
    assert len(everything) == 3 + 2 + 4  # the aborted records are in the log, only hidden
    control_records = consume(kafka_broker.bootstrap, control, isolation="read_committed")
    assert [json.loads(r["value"])["batch_id"] for r in control_records] == [0, 2]
    # Commit and abort markers take offsets too: the offsets are not dense (Spark's Kafka source must cope).
    offsets = sorted(r["offset"] for r in control_records)
    assert offsets[-1] > len(control_records) - 1


_KILLED_PRODUCER = textwrap.dedent("""
    import os, signal, sys
    from confluent_kafka import Producer
    bootstrap, topic, txn_id = sys.argv[1:4]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, key=b"doomed", value=str(i).encode())
    assert p.flush(30) == 0   # the records are written to the partition, inside the open transaction
    print("flushed", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_sigkilled_transaction_is_aborted_by_the_next_producer_with_the_same_id(kafka_broker, kafka_topic):
    topic = kafka_topic()
    txn_id = f"cep-test-{topic}"
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_PRODUCER, kafka_broker.bootstrap, topic, txn_id],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "flushed" in done.stdout
    assert len(consume(kafka_broker.bootstrap, topic, isolation="read_uncommitted")) == 5

    # The restarted job: init_transactions with the same id fences the dead producer and aborts its transaction.
    producer = _transactional_producer(kafka_broker.bootstrap, txn_id)
    producer.begin_transaction()
    producer.produce(topic, key=b"survivor", value=b"ok")
    producer.commit_transaction(30)

    visible = consume(kafka_broker.bootstrap, topic, isolation="read_committed", timeout=30)
    assert [(r["key"], r["value"]) for r in visible] == [(b"survivor", b"ok")]


def _maps(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` mapped (a JVM maps its class-data archive into memory)."""
    return str(path) in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.long
@pytest.mark.timeout(900)  # a broker run that writes the archive, then one that maps it
def test_a_class_data_archive_of_kafka_is_built_once_then_mapped_and_one_of_other_jars_is_not(tmp_path, monkeypatch):
    if not Path("/proc/self/maps").exists():
        pytest.skip("needs /proc to see what a JVM maps")
    jars = broker_module.fetch_jars()  # the real jars, before the cache moves
    monkeypatch.setenv("CEP_KAFKA_JARS", str(jars))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    java = KafkaBroker(tmp_path / "probe").java
    archive = broker_module.archive_path(jars, java)
    assert archive is not None and archive.is_relative_to(tmp_path / "cache")
    assert broker_module.archive_options(jars, java) == []  # missing: not used

    assert broker_module.build_archive().startswith("Kafka class-data archive built")
    assert archive.is_file() and not list(archive.parent.glob(".*partial"))
    assert broker_module.build_archive() == f"Kafka class-data archive: {archive}"  # built once

    with KafkaBroker(tmp_path / "mapped") as broker:
        assert f"-XX:SharedArchiveFile={archive}" in broker.process.args
        assert _maps(broker.process.pid, archive)
        broker.create_topics({"t": 2})
        produce(broker.bootstrap, "t", [{"key": "a", "value": {"n": 1}}])
        assert [json.loads(r["value"]) for r in consume(broker.bootstrap, "t")] == [{"n": 1}]

    # The same jars in another folder: another classpath, so another key; this archive is not used.
    other = tmp_path / "other-jars"
    other.mkdir()
    for jar in jars.iterdir():
        (other / jar.name).symlink_to(jar)
    monkeypatch.setenv("CEP_KAFKA_JARS", str(other))
    assert broker_module.archive_path(other, java) != archive
    with KafkaBroker(tmp_path / "unmapped") as broker:
        assert not any("SharedArchiveFile" in arg for arg in broker.process.args)
        assert not _maps(broker.process.pid, archive)
        broker.create_topics({"t": 1})
