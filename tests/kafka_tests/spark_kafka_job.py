"""A PySpark job that reads and writes Kafka through Spark's own connector; run by test_spark_kafka.py.

    python tests/kafka_tests/spark_kafka_job.py BOOTSTRAP IN_TOPIC BATCH_OUT STREAM_OUT WORKDIR

Run as a script it starts its own session with the connector from ``kafka_spark_conf()``, exactly as a user's
session would get it; the test calls ``run`` in the tests' shared session, which tests/conftest.py starts
with the connector too (``get_spark(kafka=True)``: the same ``kafka_spark_conf()``).

It writes WORKDIR/result.json (what Spark read, the schemas, the streaming progress) for the test to check;
what it wrote to Kafka the test reads back with its own client.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from cep.spark_bridge.spark.kafka_connector import kafka_spark_conf  # noqa: E402 (after the sys.path line above)


def session():
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        **kafka_spark_conf(),
    }
    builder = SparkSession.builder.master("local[2]").appName("cep-kafka-test")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def rows_of(df) -> list[dict]:
    out = []
    for row in df.collect():
        d = row.asDict(recursive=True)
        for k in ("key", "value"):
            if isinstance(d.get(k), (bytes, bytearray)):
                d[k] = bytes(d[k]).decode()
        if d.get("timestamp") is not None:
            d["timestamp_ms"] = round(
                d.pop("timestamp").replace(tzinfo=__import__("datetime").timezone.utc).timestamp() * 1000
            )
        if d.get("headers") is not None:
            d["headers"] = [
                [h["key"], bytes(h["value"]).decode() if h["value"] is not None else None] for h in d["headers"]
            ]
        out.append(d)
    return out


def main(bootstrap: str, in_topic: str, batch_out: str, stream_out: str, workdir: str) -> None:
    spark = session()
    result = run(spark, bootstrap, in_topic, batch_out, stream_out, workdir)
    Path(workdir, "result.json").write_text(json.dumps(result, indent=1))
    spark.stop()


def run(spark, bootstrap: str, in_topic: str, batch_out: str, stream_out: str, workdir: str) -> dict:
    """The reads and writes, in a session that has the connector; returns what Spark read."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    result: dict = {"spark_jars": spark.conf.get("spark.jars")}
    kafka = {"kafka.bootstrap.servers": bootstrap}

    # 1. a static read of the whole topic, headers included
    everything = (
        spark.read.format("kafka")
        .options(**kafka)
        .option("subscribe", in_topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )
    result["schema"] = [[f.name, f.dataType.simpleString()] for f in everything.schema.fields]
    result["all"] = rows_of(everything)

    # 2. a static read of an offset range of partition 0 alone: [2, 5). With "subscribe", the offsets JSON must
    # name every partition of the topic (else KafkaIllegalStateException: "Partitions specified for Kafka start
    # offsets don't match what are assigned"); "assign" picks the partitions.
    ranged = (
        spark.read.format("kafka")
        .options(**kafka)
        .option("assign", json.dumps({in_topic: [0]}))
        .option("startingOffsets", json.dumps({in_topic: {"0": 2}}))
        .option("endingOffsets", json.dumps({in_topic: {"0": 5}}))
        .load()
    )
    result["range_p0"] = sorted((r["partition"], r["offset"]) for r in ranged.select("partition", "offset").collect())

    # 3. a batch write: key, value and headers columns; the topic given as an option
    out = spark.createDataFrame(
        [(f"k{i}", json.dumps({"n": i}), [("origin", b"spark-batch")]) for i in range(5)],
        "key string, value string, headers array<struct<key: string, value: binary>>",
    )
    out.write.format("kafka").options(**kafka).option("topic", batch_out).save()

    # 4. a stream: JSON values parsed, a derived JSON message written to another topic, 4 offsets per trigger
    schema = StructType(
        [StructField("sensor", StringType()), StructField("seq", LongType()), StructField("reading", DoubleType())]
    )
    stream = (
        spark.readStream.format("kafka")
        .options(**kafka)
        .option("subscribe", in_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 4)
        .option("includeHeaders", "true")
        .load()
    )
    result["stream_schema"] = [[f.name, f.dataType.simpleString()] for f in stream.schema.fields]
    parsed = stream.select(
        F.col("key"),
        F.from_json(F.col("value").cast("string"), schema).alias("e"),
        F.col("partition"),
        F.col("offset"),
        F.col("headers"),
    )
    derived = parsed.select(
        F.col("key"),
        F.to_json(
            F.struct(
                F.col("e.sensor").alias("sensor"),
                F.col("e.seq").alias("seq"),
                (F.col("e.reading") * 2).alias("doubled"),
                F.col("partition"),
                F.col("offset"),
            )
        ).alias("value"),
        F.concat(
            F.col("headers"), F.array(F.struct(F.lit("stage").alias("key"), F.lit(b"stream").alias("value")))
        ).alias("headers"),
    )
    query = (
        derived.writeStream.format("kafka")
        .options(**kafka)
        .option("topic", stream_out)
        .option("checkpointLocation", os.path.join(workdir, "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(600)
    result["stream_batches"] = [p["numInputRows"] for p in query.recentProgress]
    result["stream_exception"] = str(query.exception()) if query.exception() else None
    return result


if __name__ == "__main__":
    main(*sys.argv[1:6])
