"""Produce and consume rates of small JSON messages against the test broker on this machine.

    .venv/bin/python bench/kafka_rates.py [--messages 200000] [--spark] [--json bench/results-kafka-rates.json]

Starts its own broker (tests/kafka_broker.py, 1 partition topics) and measures, with confluent-kafka:
- produce: acks=all, linger.ms=5, idempotent (the default of librdkafka 2.x is not idempotent: set here as the
  exactly-once sink will), flush included;
- transactional produce: the same, one transaction per 1,000 messages (a micro-batch of alerts);
- consume: a fresh group reading the topic from the start, read_uncommitted and read_committed;
- with ``--spark``: Spark's Kafka source reading the topic as a static DataFrame and parsing the JSON
  (``from_json`` + count), session start excluded.
Messages look like a tick: {"symbol":"S042","price":101.25,"ts":"2026-01-01T00:00:01.000Z","seq":1}
(about 75 bytes). Nothing here asserts; the numbers go to stdout and, with --json, to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.kafka_broker import KafkaBroker  # noqa: E402


def messages(n: int):
    for i in range(n):
        yield json.dumps(
            {
                "symbol": f"S{i % 100:03d}",
                "price": round(100 + (i % 997) * 0.25, 2),
                "ts": f"2026-01-01T{i // 3600000 % 24:02d}:{i // 60000 % 60:02d}:{i // 1000 % 60:02d}.{i % 1000:03d}Z",
                "seq": i,
            },
            separators=(",", ":"),
        ).encode()


def produce(bootstrap: str, topic: str, n: int, *, txn_every: int = 0) -> float:
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True}
    if txn_every:
        conf["transactional.id"] = f"bench-{topic}"
    producer = Producer(conf)
    started = time.perf_counter()
    if txn_every:
        producer.init_transactions(30)
        producer.begin_transaction()
    for i, value in enumerate(messages(n)):
        key = value[11:15]  # the symbol
        while True:
            try:
                producer.produce(topic, value=value, key=key)
                break
            except BufferError:
                producer.poll(0.05)
        if txn_every and (i + 1) % txn_every == 0:
            producer.commit_transaction(60)
            producer.begin_transaction()
        elif i % 1000 == 0:
            producer.poll(0)
    if txn_every:
        producer.commit_transaction(60)
    assert producer.flush(60) == 0
    return time.perf_counter() - started


def consume(bootstrap: str, topic: str, n: int, isolation: str) -> float:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.subscribe([topic])
    got = 0
    started = None
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        batch = consumer.consume(10_000, 1.0)
        if batch and started is None:
            started = time.perf_counter()  # from the first record: group join and assignment excluded
        got += sum(1 for m in batch if not m.error())
    elapsed = time.perf_counter() - (started or time.perf_counter())
    consumer.close()
    if got < n:
        raise RuntimeError(f"consumed {got} of {n} from {topic}")
    return elapsed


def spark_read(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from cep.spark_bridge.spark.kafka_connector import kafka_spark_conf

    t0 = time.perf_counter()
    builder = SparkSession.builder.master("local[2]").appName("kafka-rates")
    for k, v in {
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
        **kafka_spark_conf(),
    }.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.perf_counter() - t0
    schema = "symbol string, price double, ts timestamp, seq long"
    best = None
    for _ in range(2):  # the first run also warms the JVM
        t1 = time.perf_counter()
        df = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .load()
            .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
            .where("e.seq >= 0")
        )
        count = df.count()
        elapsed = time.perf_counter() - t1
        best = elapsed if best is None else min(best, elapsed)
        assert count == n, count
    spark.stop()
    return session_s, best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--spark", action="store_true", help="also time Spark's Kafka source over the topic")
    parser.add_argument("--json")
    args = parser.parse_args()
    n = args.messages
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    results: dict = {
        "messages": n,
        "bytes_per_message": round(sum(len(m) for m in messages(1000)) / 1000, 1),
        "nproc": os.cpu_count(),
    }
    with KafkaBroker() as broker:
        results["broker_start_s"] = round(broker.timings.get("start_s", 0) + broker.timings.get("format_s", 0), 2)
        broker.create_topics(["plain", "txn"])
        for name, topic, kwargs in (
            ("produce", "plain", {}),
            ("produce_transactional_1000", "txn", {"txn_every": 1000}),
        ):
            s = produce(broker.bootstrap, topic, n, **kwargs)
            results[name] = {"seconds": round(s, 2), "msgs_per_s": round(n / s)}
            print(f"{name:30} {n / s:>10,.0f} msg/s  ({s:.2f} s)", flush=True)
        for name, topic, iso in (
            ("consume", "plain", "read_uncommitted"),
            ("consume_read_committed_txn", "txn", "read_committed"),
        ):
            s = consume(broker.bootstrap, topic, n, iso)
            results[name] = {"seconds": round(s, 2), "msgs_per_s": round(n / s)}
            print(f"{name:30} {n / s:>10,.0f} msg/s  ({s:.2f} s)", flush=True)
        if args.spark:
            session_s, s = spark_read(broker.bootstrap, "plain", n)
            results["spark_static_read_from_json"] = {
                "seconds": round(s, 2),
                "msgs_per_s": round(n / s),
                "session_start_s": round(session_s, 2),
            }
            print(f"{'spark static read + from_json':30} {n / s:>10,.0f} msg/s  ({s:.2f} s; session {session_s:.1f} s)")
        broker.cleanup()
    results["load_avg_at_end"] = round(os.getloadavg()[0], 2)
    print(f"load average at the end: {results['load_avg_at_end']} (2 cores shared: rates vary with it)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
