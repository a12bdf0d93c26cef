"""The driver layout's read of a micro-batch, as many tasks as Kafka partitions against as many as cores.

    .venv/bin/python bench/driver_read.py [--messages 32000] [--rounds 8] [--json bench/results-driver-read.json]

What ``cep stream --state driver`` runs in Spark for a micro-batch of the Kafka bench (the bench's ticks: 1,000
symbols, ``symbol STRING, ts TIMESTAMP, price DOUBLE`` as JSON values; 32,000 of them, a micro-batch at 20,000
ticks/s): ``kafka.kafka_events``, the bad-row split and ``driver_state.driver_input``, brought to the driver as
pandas. The messages are Kafka-shaped rows cached first in 4 partitions (the bench's topic), so no variant pays a
Kafka fetch or a warm-up: what differs is the read itself.

- ``per_partition``: ``toPandas``, one task per partition (the driver layout's read before ``driver_read``);
- ``per_core``: ``driver_read.rows_on_driver`` with ``local[2]``'s 2 tasks, the rows put back in Kafka's order.

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

from procmem import descendants, role  # noqa: E402

SCHEMA = "symbol STRING, ts TIMESTAMP, price DOUBLE"
SYMBOLS = 1000
PARTITIONS = 4  # the Kafka bench's topic
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) of ``pids``, from /proc."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def micro_batch(spark, messages: int):
    """The driver layout's frame over ``messages`` cached Kafka-shaped ticks (``driver_input``'s columns)."""
    from pyspark.sql import functions as F

    from cep.spark_bridge.alerting.driver_state import driver_input
    from cep.spark_bridge.spark.inputs import mark_bad_rows, prepare_input
    from cep.spark_bridge.spark.kafka import kafka_events, kafka_location, value_schema

    base_ms = 1_780_000_000_000
    rows = []
    for i in range(messages):
        moment = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((base_ms + i * 50) // 1000))
        value = {"symbol": f"S{i % SYMBOLS}", "ts": f"{moment}.{(i * 50) % 1000:03d}Z", "price": 100 + (i * 7) % 13}
        rows.append((None, json.dumps(value).encode(), "ticks", i % PARTITIONS, i // PARTITIONS))
    raw = (
        spark.createDataFrame(rows, "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")
        .withColumn("timestamp", F.current_timestamp())
        .withColumn("timestampType", F.lit(0))
        .repartition(PARTITIONS, "partition")
        .sortWithinPartitions("offset")
        .cache()
    )
    raw.count()
    marked = mark_bad_rows(prepare_input(kafka_events(raw, value_schema(SCHEMA))), "ts", null_time=True)
    frame, _, _ = driver_input(marked, "ts", "2 seconds", kafka_location())
    return frame


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=32_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--json", help="write the medians here")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from cep.spark_bridge.alerting.driver_read import read_tasks, rows_on_driver
    from cep.spark_bridge.spark.session import get_spark

    spark = get_spark("local[2]", app_name="cep-driver-read")
    frame = micro_batch(spark, args.messages)
    tasks = read_tasks(spark)
    jvm = [pid for pid in descendants(os.getpid()) if role(pid) == "jvm"]
    variants = {"per_partition": lambda: frame.toPandas(), "per_core": lambda: rows_on_driver(frame, tasks)}
    sizes = {name: len(read()) for name, read in variants.items()}  # the warm-up read of each
    assert len(set(sizes.values())) == 1, sizes
    seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
    for round_number in range(args.rounds):
        names = list(variants) if round_number % 2 == 0 else list(reversed(variants))
        for name in names:
            jvm_before, python_before, began = tree_cpu(jvm), time.process_time(), time.perf_counter()
            variants[name]()
            seen[name].append(
                (tree_cpu(jvm) - jvm_before, time.process_time() - python_before, time.perf_counter() - began)
            )
    load = os.getloadavg()[0]
    found = {
        "messages": args.messages,
        "partitions": PARTITIONS,
        "tasks_per_core": tasks,
        "rounds": args.rounds,
        "load_average": round(load, 1),
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
    print(f"{args.messages:,} messages in {PARTITIONS} partitions, {args.rounds} rounds ABAB, load average {load:.1f}")
    for name, numbers in found["variants"].items():
        print(
            f"{name:>14}: JVM {numbers['jvm_cpu_s']:.3f} CPU s, Python {numbers['python_cpu_s']:.3f} CPU s, "
            f"wall {numbers['wall_s']:.3f} s  (JVM each: {numbers['jvm_cpu_s_each']})"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
