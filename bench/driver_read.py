"""The driver layout's read of a micro-batch: its parts, and as many tasks as Kafka partitions against as many as cores.

    .venv/bin/python bench/driver_read.py [--messages 32000[,8000,...]] [--rounds 8] [--variants a,b,...]
        [--json bench/results-driver-read.json]

What ``cep stream --state driver`` runs in Spark for a micro-batch of the Kafka bench (the bench's ticks: 1,000
symbols, ``symbol STRING, ts TIMESTAMP, price DOUBLE`` as JSON values; 32,000 of them, a micro-batch at 20,000
ticks/s): ``kafka.kafka_events``, the bad-row split and ``driver_state.driver_input``, brought to the driver as
pandas. The messages are Kafka-shaped rows cached first in 4 partitions (the bench's topic), so no variant pays a
Kafka fetch or a warm-up: what differs is the read itself.

- ``per_partition``: ``toPandas``, one task per partition (the driver layout's read, ``DriverState.run``);
- ``per_core``: ``coalesce`` to ``local[2]``'s 2 tasks, the rows put back in Kafka's order (``coalesced``);
- ``kafka_columns``: the Kafka message's own columns alone (key, value, topic, partition, offset, timestamp), no
  parse: what a Spark job over the micro-batch and the Arrow hand-over cost without the parse and the bad-row split;
- ``offsets``: the offsets alone: the job's own cost, about nothing handed over;
- ``parsed_on_driver``: ``kafka_columns``, then the values parsed on the driver by pyarrow's JSON reader (its C++
  threads) with the schema's types: what moving the parse to the driver would cost there. Not an exact read (no
  bad-row split, no strict numbers): a measure of the option, not a reader.

``--messages`` takes several sizes (``1000,5000,32000``: a micro-batch at 1k, 5k, 20k ticks/s at the bench's
micro-batch times), one frame each, to tell a read's fixed cost from its cost per message.

The variants alternate (ABAB..., the first of each round alternating too) for ``--rounds``, after one warm-up
read of each; per read, the CPU seconds of the JVM (user + system, from /proc: the executor tasks and everything
else the JVM does meanwhile) and of this Python process (the Arrow hand-over and the sort), and the wall time;
the medians, and the load average. ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from procmem import cpu_seconds, descendants, role  # noqa: E402

SCHEMA = "symbol STRING, ts TIMESTAMP, price DOUBLE"
SYMBOLS = 1000
PARTITIONS = 4  # the Kafka bench's topic


def micro_batch(spark, messages: int):
    """The driver layout's frame over ``messages`` cached Kafka-shaped ticks (``driver_input``'s columns), and the
    cached Kafka-shaped rows it reads."""
    from pyspark.sql import functions as F

    from cep.spark_bridge.alerting.driver_state import driver_input
    from cep.spark_bridge.spark.inputs import mark_bad_rows, prepare_input
    from cep.spark_bridge.spark.kafka import kafka_events, kafka_location, value_schema

    per_partition = messages // PARTITIONS
    # ``range`` cuts its ids into equal consecutive slices: one Spark partition per Kafka partition, each in offset
    # order, as the Kafka source plans a micro-batch
    ids = spark.range(0, per_partition * PARTITIONS, 1, PARTITIONS)
    moment = F.timestamp_millis(F.lit(1_780_000_000_000) + F.col("id") * 50)
    value = F.to_json(
        F.struct(
            F.concat(F.lit("S"), (F.col("id") % SYMBOLS).cast("string")).alias("symbol"),
            F.date_format(moment, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("ts"),
            (F.lit(100) + (F.col("id") * 7) % 13).alias("price"),
        )
    )
    raw = ids.select(
        F.lit(None).cast("binary").alias("key"),
        value.cast("binary").alias("value"),
        F.lit("ticks").alias("topic"),
        F.floor(F.col("id") / per_partition).cast("int").alias("partition"),
        (F.col("id") % per_partition).alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.lit(0).alias("timestampType"),
    ).cache()
    raw.count()
    marked = mark_bad_rows(prepare_input(kafka_events(raw, value_schema(SCHEMA))), "ts", null_time=True)
    frame, _, _ = driver_input(marked, "ts", "2 seconds", kafka_location())
    sizes = frame.rdd.glom().map(len).collect()
    assert sizes == [per_partition] * PARTITIONS, sizes
    return frame, raw


def coalesced(frame, tasks: int):
    """The read in ``tasks`` tasks (``coalesce``, no shuffle), its rows put back in Kafka's order (topic, partition,
    offset): the order the read in one task per partition gives, which a ``dedup_key`` needs
    (tests/test_driver_row_order.py)."""
    return (
        frame.coalesce(tasks)
        .toPandas()
        .sort_values(["kafka_topic", "kafka_partition", "kafka_offset"], kind="stable", ignore_index=True)
    )


KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")


def parsed_on_driver(raw):
    """The Kafka columns brought to the driver, the values parsed there by pyarrow's JSON reader."""
    import io

    import pyarrow as pa
    import pyarrow.json as pj

    table = raw.select(*KAFKA_COLUMNS).toArrow()
    lines = b"\n".join(value.as_py() for value in table.column("value").combine_chunks())
    schema = pa.schema([("symbol", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("price", pa.float64())])
    parsed = pj.read_json(io.BytesIO(lines), parse_options=pj.ParseOptions(explicit_schema=schema))
    assert len(parsed) == len(table)
    return parsed


VARIANTS = ("per_partition", "per_core", "kafka_columns", "offsets", "parsed_on_driver")


def measure(spark, messages: int, names: list[str], rounds: int, jvm: list[int]) -> dict:
    """The medians of each variant's reads of one frame of ``messages``, alternated (ABAB...)."""
    frame, raw = micro_batch(spark, messages)
    tasks = spark.sparkContext.defaultParallelism
    reads = {
        "per_partition": lambda: frame.toPandas(),
        "per_core": lambda: coalesced(frame, tasks),
        "kafka_columns": lambda: raw.select(*KAFKA_COLUMNS).toPandas(),
        "offsets": lambda: raw.select("offset").toPandas(),
        "parsed_on_driver": lambda: parsed_on_driver(raw),
    }
    variants = {name: reads[name] for name in names}
    for read in variants.values():  # the warm-up read of each
        assert len(read()) == messages
    seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
    for round_number in range(rounds):
        order = list(variants) if round_number % 2 == 0 else list(reversed(variants))
        for name in order:
            jvm_before, python_before, began = cpu_seconds(jvm), time.process_time(), time.perf_counter()
            variants[name]()
            seen[name].append(
                (cpu_seconds(jvm) - jvm_before, time.process_time() - python_before, time.perf_counter() - began)
            )
    raw.unpersist()
    return {
        "messages": messages,
        "load_average": round(os.getloadavg()[0], 1),
        "variants": {
            name: {
                "jvm_cpu_s": round(statistics.median(r[0] for r in runs), 3),
                "python_cpu_s": round(statistics.median(r[1] for r in runs), 3),
                "wall_s": round(statistics.median(r[2] for r in runs), 3),
                "jvm_cpu_s_each": [round(r[0], 2) for r in runs],
            }
            for name, runs in seen.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", default="32000", help="messages per micro-batch; several: 1000,5000,32000")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--variants", default="per_partition,per_core", help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--json", help="write the medians here")
    args = parser.parse_args()
    names = [name.strip() for name in args.variants.split(",") if name.strip()]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}: choose among {', '.join(VARIANTS)}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from cep.spark_bridge.spark.session import get_spark

    spark = get_spark("local[2]", app_name="cep-driver-read")
    jvm = [pid for pid in descendants(os.getpid()) if role(pid) == "jvm"]
    sizes = [measure(spark, int(count), names, args.rounds, jvm) for count in args.messages.split(",")]
    found = {
        "partitions": PARTITIONS,
        "tasks_per_core": spark.sparkContext.defaultParallelism,
        "rounds": args.rounds,
        "sizes": sizes,
    }
    for size in sizes:
        print(
            f"{size['messages']:,} messages in {PARTITIONS} partitions, {args.rounds} rounds ABAB, "
            f"load average {size['load_average']:.1f}"
        )
        for name, numbers in size["variants"].items():
            print(
                f"{name:>17}: JVM {numbers['jvm_cpu_s']:.3f} CPU s, Python {numbers['python_cpu_s']:.3f} CPU s, "
                f"wall {numbers['wall_s']:.3f} s  (JVM each: {numbers['jvm_cpu_s_each']})"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
