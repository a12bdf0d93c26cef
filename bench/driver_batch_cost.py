"""Where a driver-layout micro-batch's CPU goes, step by step, without a broker: ``AlertStream._write_batch``
called in this process on micro-batches of ticks as ``cep stream --state driver`` gets them at a high rate.

    .venv/bin/python bench/driver_batch_cost.py [--rows 47000] [--batches 12] [--keys 1000] [--json OUT]

The ticks are bench/kafka_e2e.py's (query (a), the V shape, ``keys`` symbols, a random walk, the event time
advancing 50 µs a tick: 20k ticks/s), written as JSON lines, one file per micro-batch, and read by Spark's JSON
reader with the stream's schema (the Kafka source parses the value with ``from_json`` instead). Each
micro-batch goes through what ``AlertStream.build`` puts before the driver layout's ``foreachBatch``
(``prepare_input``, ``mark_bad_rows``, ``driver_input``), then ``_write_batch`` with two webhook sinks whose
lanes are not started (the outboxes are written, nothing is sent). Per step (``BatchCost``'s): wall ms, the
CPU ms of the calling Python thread, and the CPU ms of the JVM and its Python workers over the step. The
first ``--warmup`` micro-batches are left out of the medians (they plan the query and start the workers).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from procmem import cpu_seconds, descendants  # noqa: E402

SCHEMA = "symbol STRING, ts TIMESTAMP, price DOUBLE"
TICK_US = 50  # 20k ticks/s of event time


def _cpu_ms(pids: list[int]) -> float:
    """User + system CPU of ``pids`` (clock ticks of /proc/<pid>/stat), in ms."""
    return cpu_seconds(pids) * 1000


def write_ticks(directory: Path, rows: int, batches: int, keys: int) -> list[Path]:
    rng = random.Random(7)
    prices = [100.0] * keys
    start_us = 1_700_000_000_000_000
    files = []
    tick = 0
    for batch in range(batches):
        path = directory / f"ticks-{batch:04d}.json"
        with path.open("w") as fh:
            for _ in range(rows):
                key = rng.randrange(keys)
                prices[key] = round(prices[key] + rng.choice((-1, 1)) * rng.random(), 2)
                moment = start_us + tick * TICK_US
                tick += 1
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment // 1_000_000))
                fh.write(
                    json.dumps(
                        {"symbol": f"S{key:04d}", "ts": f"{stamp}.{moment % 1_000_000:06d}Z", "price": prices[key]}
                    )
                    + "\n"
                )
        files.append(path)
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=47_000, help="ticks per micro-batch")
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--json", help="write the per-step medians here")
    parser.add_argument("--driver-buckets", type=int, help="buckets of keys on the driver (default: DriverState's)")
    parser.add_argument("--profile", help="cProfile the last micro-batch's foreachBatch into this file")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from kafka_e2e import QUERY_TEXT, WATERMARK_MS

    import cep.spark_bridge.alerting.stream as stream_mod
    from cep.cli_io import start_spark
    from cep.spark_bridge.alerting.batch_cost import BatchCost
    from cep.spark_bridge.alerting.driver_state import driver_input
    from cep.spark_bridge.sinks.webhook import WebhookSink
    from cep.spark_bridge.spark.inputs import mark_bad_rows, prepare_input

    work = Path(tempfile.mkdtemp(prefix="cep-driver-cost-"))
    files = write_ticks(work, args.rows, args.batches, args.keys)
    (work / "rules.sql").write_text(QUERY_TEXT)
    spark = start_spark("local[2]")
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())

    def spark_cpu_ms() -> float:
        return _cpu_ms([jvm_pid, *descendants(jvm_pid)])

    class TimedCost(BatchCost):
        """``BatchCost`` with the JVM's (and its Python workers') CPU over each step too."""

        @contextmanager
        def step(self, name: str):
            began = spark_cpu_ms()
            with super().step(name):
                yield
            self.spark_cpu_ms = getattr(self, "spark_cpu_ms", {})
            self.spark_cpu_ms[name] = round(spark_cpu_ms() - began, 1)

        def done(self) -> dict:
            return {**super().done(), "spark_cpu_ms": dict(getattr(self, "spark_cpu_ms", {}))}

    stream_mod.BatchCost = TimedCost
    sinks = [WebhookSink(f"http://127.0.0.1:9/{n}", dead_letter_dir=str(work / "dl")) for n in ("a", "b")]
    (work / "none").mkdir()
    source = spark.readStream.schema(SCHEMA).json(str(work / "none"))
    stream = stream_mod.AlertStream(
        spark,
        str(work / "rules.sql"),
        source,
        checkpoint=str(work / "ck"),
        sinks=sinks,
        watermark=f"{WATERMARK_MS}ms",
        time_column="ts",
        state="driver",
    )
    stream.refresh_rules(force=True)
    stream.build()
    if args.driver_buckets:
        stream.driver.buckets = stream.driver.step.key_buckets = args.driver_buckets
    per_batch = []
    for batch_id, path in enumerate(files):
        df = prepare_input(spark.read.schema(SCHEMA).json(str(path)))
        df = mark_bad_rows(df, "ts", max_future_skew_us=stream.max_future_skew_us, null_time=True)
        df, _, _ = driver_input(df, "ts", stream.watermark)
        cpu0, spark0, wall0 = time.thread_time(), spark_cpu_ms(), time.perf_counter()
        if args.profile and batch_id == len(files) - 1:
            import cProfile

            cProfile.runctx("stream._write_batch(df, batch_id)", globals(), locals(), args.profile)
        else:
            stream._write_batch(df, batch_id)
        cost = stream.progress.cost_of(batch_id)
        cost.update(
            thread_cpu_ms_total=round((time.thread_time() - cpu0) * 1000, 1),
            spark_cpu_ms_total=round(spark_cpu_ms() - spark0, 1),
            wall_ms=round((time.perf_counter() - wall0) * 1000, 1),
        )
        per_batch.append(cost)
        print(
            batch_id,
            json.dumps({k: cost[k] for k in ("wall_ms", "thread_cpu_ms_total", "spark_cpu_ms_total")}),
            json.dumps(cost["steps_ms"]),
            json.dumps(cost.get("steps_cpu_ms")),
            json.dumps(cost["spark_cpu_ms"]),
            flush=True,
        )
    kept = per_batch[args.warmup :]
    steps = sorted({s for c in kept for s in c["steps_ms"]})

    def median(values) -> float:
        return round(statistics.median(values), 1)

    summary = {
        "rows_per_batch": args.rows,
        "batches": len(kept),
        "load_average": os.getloadavg(),
        "wall_ms": median(c["wall_ms"] for c in kept),
        "thread_cpu_ms": median(c["thread_cpu_ms_total"] for c in kept),
        "spark_cpu_ms": median(c["spark_cpu_ms_total"] for c in kept),
        "steps": {
            s: {
                "wall_ms": median(c["steps_ms"].get(s, 0) for c in kept),
                "thread_cpu_ms": median((c.get("steps_cpu_ms") or {}).get(s, 0) for c in kept),
                "spark_cpu_ms": median(c["spark_cpu_ms"].get(s, 0) for c in kept),
            }
            for s in steps
        },
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
