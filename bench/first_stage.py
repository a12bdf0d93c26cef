"""The first stage of a ``cep stream`` micro-batch, piece by piece, beside Spark's floor parse.

    .venv/bin/python bench/first_stage.py [--messages 100000] [--repeats 3]

What a micro-batch of the Kafka bench does before its shuffle, on a static frame of Kafka-shaped messages (the
bench's ticks: 1,000 symbols, ``symbol STRING, ts TIMESTAMP, price DOUBLE`` as JSON values over 4 partitions,
cached first so no variant pays for the read), each variant written to Spark's ``noop`` sink with the bucket the
stateful step groups by:

- ``floor``: ``from_json`` of the value, as bench/kafka_floor.py parses;
- ``kafka_events``: cep's Kafka reader (``kafka.kafka_events``: strict numbers, UTF-8, blank and unreadable values);
- ``marked``: that and the bad-row split (``inputs.mark_bad_rows``), the columns ``query.match_rules`` carries;
- ``python_tag``: that and the Python tag (``worker.Explode`` in a ``mapInPandas``), as for a rule set with a
  PARTITION BY column that is not text;
- ``spark_tag``: that and the Spark tag (``key_tags.tag_rows``), as for the bench's rule (PARTITION BY symbol).

Seconds per variant (the best of ``--repeats``, the machine being shared) and the load average; no JSON is
written: docs/latency.md ("The first stage: one parse, no Python before the shuffle") quotes a run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SCHEMA = "symbol STRING, ts TIMESTAMP, price DOUBLE"
SYMBOLS = 1000


def variants(spark, messages: int) -> dict:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from cep.spark_bridge.alerting.key_tags import partitions_of, tag_rows
    from cep.spark_bridge.alerting.rule_set import PKEY, ROW_ID, SPEC
    from cep.spark_bridge.alerting.store import RuleStore
    from cep.spark_bridge.alerting.worker import Explode
    from cep.spark_bridge.spark.buckets import KEY_BUCKETS, bucket_expression
    from cep.spark_bridge.spark.columns import EVENT_US, NULL_TIME, RAW, REJECT, quote
    from cep.spark_bridge.spark.inputs import mark_bad_rows, prepare_input
    from cep.spark_bridge.spark.kafka import kafka_events, kafka_location, value_schema

    rows = [
        (None, json.dumps({"symbol": f"S{i % SYMBOLS}", "ts": "2026-01-01T00:00:00Z", "price": 1.5 + i % 7}).encode())
        for i in range(messages)
    ]
    raw = (
        spark.createDataFrame(rows, "key BINARY, value BINARY")
        .select(
            "key",
            "value",
            F.lit("ticks").alias("topic"),
            (F.monotonically_increasing_id() % 4).cast("int").alias("partition"),
            F.monotonically_increasing_id().alias("offset"),
            F.current_timestamp().alias("timestamp"),
            F.lit(0).alias("timestampType"),
        )
        .repartition(4)
        .cache()
    )
    raw.count()
    events = kafka_events(raw, value_schema(SCHEMA))
    marked = mark_bad_rows(prepare_input(events), "ts", null_time=True)
    columns = [c for c in marked.columns if c not in (REJECT, RAW)]
    carried_frame = marked.select(
        *[F.col(quote(c)) for c in columns],
        F.coalesce(F.unix_micros(F.col("ts")), F.lit(NULL_TIME)).alias(EVENT_US),
        F.col(REJECT),
        F.col(RAW),
        F.when(F.col(REJECT).isNotNull(), kafka_location()).alias("__cep_file"),
    )
    carried = carried_frame.columns
    store = RuleStore(tempfile.mkdtemp(prefix="cep-first-stage-"))
    store.publish({"rules": [{"rule_id": "v_shape", "partition": ["symbol"]}]})
    fields = [T.StructField(f.name, f.dataType, True) for f in carried_frame.schema.fields]
    exploded_schema = T.StructType(
        [T.StructField(SPEC, T.StringType(), False), T.StructField(PKEY, T.StringType(), False)]
        + fields
        + [T.StructField(ROW_ID, T.StringType(), True)]
    )
    python_tag = carried_frame.mapInPandas(Explode(store.directory, carried, REJECT, row_ids=True), exploded_schema)
    spark_tag = tag_rows(carried_frame, partitions_of(store.load(store.current_id())), carried, REJECT, row_ids=True)
    floor = raw.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("t")).select("t.*")
    by_symbol = [("floor", floor, "symbol"), ("kafka_events", events, "symbol"), ("marked", carried_frame, "symbol")]
    tagged = [("python_tag", python_tag, PKEY), ("spark_tag", spark_tag, PKEY)]
    return {
        name: frame.withColumn("__bucket", bucket_expression([key], KEY_BUCKETS))
        for name, frame, key in by_symbol + tagged
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from cep.spark_bridge.spark.session import get_spark

    spark = get_spark("local[2]", app_name="cep-first-stage")
    frames = variants(spark, args.messages)
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, frame in frames.items():
            began = time.perf_counter()
            frame.write.format("noop").mode("overwrite").save()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - began)
    print(f"{args.messages:,} messages, best of {args.repeats}, load average {os.getloadavg()[0]:.1f}")
    for name, seconds in best.items():
        print(f"{name:>13} {seconds:6.2f} s  {seconds / best['floor']:4.1f}x the floor's parse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
