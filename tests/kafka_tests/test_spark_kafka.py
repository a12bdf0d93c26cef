"""PySpark reads and writes the real broker through Spark's own Kafka connector, put on the classpath by
``kafka_spark_conf()`` (spark.jars from the Maven copy in ~/.cache/cep), as a user's session would.

One Spark job (tests/kafka_tests/spark_kafka_job.py, in the tests' shared session, which tests/conftest.py
starts with the connector) does: a static ``spark.read.format("kafka")`` of the whole topic and of an offset
range, a batch ``df.write.format("kafka")``, and a ``readStream`` -> ``writeStream.format("kafka")`` query
(availableNow, 4 offsets per trigger). This test produces the input and reads the outputs with confluent-kafka.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kafka_broker import consume, produce
from tests.kafka_tests.spark_kafka_job import run

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BASE_TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.fixture(scope="module")
def spark_kafka_run(kafka_broker, spark, tmp_path_factory):
    in_topic = "spark-in"
    batch_out, stream_out = "spark-batch-out", "spark-stream-out"
    kafka_broker.create_topics({in_topic: 2, batch_out: 1, stream_out: 1}, exist_ok=True)
    sent = [
        {
            "key": f"s{i % 3}",
            "partition": i % 2,
            "timestamp": BASE_TS + i * 1000,
            "value": {"sensor": f"s{i % 3}", "seq": i, "reading": float(i)},
            "headers": {"seq": str(i)},
        }
        for i in range(10)
    ]
    produce(kafka_broker.bootstrap, in_topic, sent)
    workdir = tmp_path_factory.mktemp("spark-kafka")
    result = run(spark, kafka_broker.bootstrap, in_topic, batch_out, stream_out, str(workdir))
    return {
        "result": json.loads(json.dumps(result)),
        "sent": sent,
        "in": in_topic,
        "batch_out": batch_out,
        "stream_out": stream_out,
        "bootstrap": kafka_broker.bootstrap,
    }


def test_connector_comes_from_the_maven_copy(spark_kafka_run):
    jars = spark_kafka_run["result"]["spark_jars"].split(",")
    # the suite's session also carries Delta's connector (tests/conftest.py): Kafka's jars are the rest
    names = sorted(n for n in (Path(j).name.rsplit("-", 1)[0] for j in jars) if "kafka" in n or n == "commons-pool2")
    assert names == [
        "commons-pool2",
        "kafka-clients",
        "spark-sql-kafka-0-10_2.13",
        "spark-token-provider-kafka-0-10_2.13",
    ]


def test_static_read_has_the_kafka_columns_and_every_record(spark_kafka_run):
    result, sent = spark_kafka_run["result"], spark_kafka_run["sent"]
    assert result["schema"] == [
        ["key", "binary"],
        ["value", "binary"],
        ["topic", "string"],
        ["partition", "int"],
        ["offset", "bigint"],
        ["timestamp", "timestamp"],
        ["timestampType", "int"],
        ["headers", "array<struct<key:string,value:binary>>"],
    ]
    rows = {json.loads(r["value"])["seq"]: r for r in result["all"]}
    assert sorted(rows) == list(range(10))
    for message in sent:
        row = rows[message["value"]["seq"]]
        assert row["key"] == message["key"]
        assert row["topic"] == spark_kafka_run["in"]
        assert row["partition"] == message["partition"]
        assert row["offset"] == message["value"]["seq"] // 2  # five records per partition, in order
        assert row["timestamp_ms"] == message["timestamp"]
        assert row["timestampType"] == 0  # CreateTime
        assert row["headers"] == [["seq", str(message["value"]["seq"])]]


def test_static_read_of_an_offset_range(spark_kafka_run):
    # assign = partition 0 only; endingOffsets is exclusive
    assert spark_kafka_run["result"]["range_p0"] == [[0, 2], [0, 3], [0, 4]]


def test_batch_write_to_kafka(spark_kafka_run):
    got = consume(spark_kafka_run["bootstrap"], spark_kafka_run["batch_out"])
    assert sorted((r["key"], json.loads(r["value"])["n"], r["headers"]["origin"]) for r in got) == [
        (f"k{i}".encode(), i, b"spark-batch") for i in range(5)
    ]


def test_stream_from_kafka_to_kafka(spark_kafka_run):
    result = spark_kafka_run["result"]
    assert result["stream_exception"] is None
    # maxOffsetsPerTrigger=4 over 10 records: no micro-batch read more than 4, all 10 were read
    assert sum(result["stream_batches"]) == 10 and max(result["stream_batches"]) <= 4
    got = consume(spark_kafka_run["bootstrap"], spark_kafka_run["stream_out"])
    values = sorted((json.loads(r["value"]) for r in got), key=lambda v: v["seq"])
    assert [v["seq"] for v in values] == list(range(10))
    assert all(v["doubled"] == 2.0 * v["seq"] and v["sensor"] == f"s{v['seq'] % 3}" for v in values)
    assert all(v["partition"] == v["seq"] % 2 and v["offset"] == v["seq"] // 2 for v in values)
    assert all(r["headers"] == {"seq": str(json.loads(r["value"])["seq"]).encode(), "stage": b"stream"} for r in got)
    assert all(r["key"] == f"s{json.loads(r['value'])['seq'] % 3}".encode() for r in got)
