"""Streaming on Spark: the cost of a micro-batch and rows/s, for docs/streaming.md.

    .venv/bin/python bench/streaming_overhead.py                      # the numbers in docs/streaming.md
    .venv/bin/python bench/streaming_overhead.py --rows 1000000 --symbols 1000 --batches 10

One local[2] session, ``spark.sql.shuffle.partitions`` = --partitions, Parquet file sources with one file
per micro-batch (``maxFilesPerTrigger=1``, ``trigger(availableNow=True)``), a no-op sink, so the time is
the engine's, not a sink's. It measures:

1. overhead: --small-batches micro-batches of ~40 rows over 10 keys, median ``triggerExecution`` and
   ``addBatch`` of the batches after the first, for
   a. a stateful function that only counts (``applyInPandasWithState``, event-time timeout): Spark's floor,
      one call per key; a2. the same grouped by cep's key buckets (one call per bucket, as cep is called);
   b. the same with ``transformWithStateInPandas`` (event time, RocksDB store);
   c. cep (patterns/v_shape.sql) through ``q.on_spark``.
2. throughput: --rows ticks (bench/data.py) over --symbols keys in --batches micro-batches, for (a), (a2) and (c)
   (``--query`` picks one of bench/run.py's queries instead of the V-shape, e.g. ``--query d``):
   rows per second of ``triggerExecution`` over all batches but the first; cep's state bytes per key.
3. the same rows through the streaming engine in-process (``cep.spark_bridge.engine.local.LocalStream``) and
   through ``q.run``: the Python cost without Spark (rows per CPU second);
4. the step function Spark calls per bucket of keys, called directly with the same frames: cep's CPU cost
   per call, outside Spark. ``--skip-per-key`` leaves out (a)'s throughput run (minutes with many keys).

Prints a table (and writes --json if given).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

VSHAPE = (REPO / "patterns" / "v_shape.sql").read_text(encoding="utf-8")


def write_batches(table, directory: Path, batches: int) -> list[int]:
    """Split ``table`` (time-ordered) into ``batches`` Parquet files with increasing modification times."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    table = table.set_column(
        table.schema.get_field_index("ts"), "ts", table.column("ts").cast(pa.timestamp("us", tz="UTC"))
    )
    size = -(-table.num_rows // batches)
    counts = []
    for index in range(batches):
        part = table.slice(index * size, size)
        path = directory / f"part-{index:04d}.parquet"
        pq.write_table(part, path)
        stamp = 1_700_000_000 + 10 * index
        os.utime(path, (stamp, stamp))
        counts.append(part.num_rows)
    return counts


def small_table(batches: int, per_batch: int = 40, keys: int = 10):
    import numpy as np
    import pyarrow as pa

    n = batches * per_batch
    rng = np.random.default_rng(7)
    ts = np.datetime64("2024-01-02T09:30:00", "ms") + (np.arange(n) * 250).astype("timedelta64[ms]")
    return pa.table(
        {
            "symbol": [f"K{i % keys:02d}" for i in range(n)],
            "ts": pa.array(ts, pa.timestamp("ms")),
            "price": (100 + np.cumsum(rng.integers(-3, 4, size=n)) / 10).astype("float64"),
            "volume": np.full(n, 100, dtype="int64"),
        }
    )


def schema():
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("symbol", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("price", T.DoubleType()),
            T.StructField("volume", T.LongType()),
        ]
    )


def counting_apply(df):
    """(a): count rows per key in state, emit one row per call: what Spark costs with no matching."""
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key, frames, state):
        n = sum(len(f) for f in frames)
        total = (state.get[0] if state.exists else 0) + n
        state.update((total,))
        state.setTimeoutTimestamp(max(state.getCurrentWatermarkMs(), 1) + 3_600_000)
        yield pd.DataFrame({"symbol": [key[0]], "n": [total]})

    return (
        df.withWatermark("ts", "5 seconds")
        .groupBy("symbol")
        .applyInPandasWithState(count, "symbol string, n long", "n long", "append", GroupStateTimeout.EventTimeTimeout)
    )


def counting_buckets(df):
    """(a2): (a) grouped as cep groups a stream (``key_buckets``, the default): one call per bucket of keys,
    the count per key kept in the bucket's state. The floor for cep's own grouping."""
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    from cep.spark_bridge.spark.buckets import KEY_BUCKETS, bucket_expression

    def count(key, frames, state):
        counts = json.loads(state.get[0]) if state.exists else {}  # bytes, as cep keeps a bucket's state
        for frame in frames:
            for symbol, n in frame["symbol"].value_counts().items():
                counts[symbol] = counts.get(symbol, 0) + int(n)
        state.update((json.dumps(counts).encode(),))
        state.setTimeoutTimestamp(max(state.getCurrentWatermarkMs(), 1) + 3_600_000)
        yield pd.DataFrame({"bucket": [key[0]], "n": [sum(counts.values())]})

    bucketed = df.withWatermark("ts", "5 seconds").withColumn("bucket", bucket_expression(["symbol"], KEY_BUCKETS))
    return bucketed.groupBy("bucket").applyInPandasWithState(
        count, "bucket int, n long", "counts binary", "append", GroupStateTimeout.EventTimeTimeout
    )


def counting_transform(df):
    """(b): the same with transformWithStateInPandas (a value state, event-time mode)."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    class Count(StatefulProcessor):
        def init(self, handle):
            self.total = handle.getValueState("total", StructType([StructField("n", LongType())]))

        def handleInputRows(self, key, rows, timerValues):
            n = sum(len(f) for f in rows)
            total = (self.total.get()[0] if self.total.exists() else 0) + n
            self.total.update((total,))
            yield pd.DataFrame({"symbol": [key[0]], "n": [total]})

        def close(self):
            pass

    return (
        df.withWatermark("ts", "5 seconds")
        .groupBy("symbol")
        .transformWithStateInPandas(
            Count(), outputStructType="symbol string, n long", outputMode="Append", timeMode="EventTime"
        )
    )


def run(spark, source: Path, work: Path, name: str, build) -> dict:
    df = spark.readStream.schema(schema()).option("maxFilesPerTrigger", 1).parquet(str(source))
    out = build(df)
    started = time.perf_counter()
    query = (
        out.writeStream.format("noop")
        .queryName(name)
        .option("checkpointLocation", str(work / f"ck-{name}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall = time.perf_counter() - started
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    trigger = [p["durationMs"]["triggerExecution"] for p in progress]
    add = [p["durationMs"].get("addBatch", 0) for p in progress]
    rows = [p["numInputRows"] for p in progress]
    observed = [(p.get("observedMetrics") or {}).get("cep") for p in query.recentProgress]
    metrics: dict[str, int] = {}
    for row in observed:
        if row is not None:
            for k, v in row.asDict().items():
                metrics[k] = metrics.get(k, 0) + (v or 0)
    later = slice(1, None) if len(progress) > 1 else slice(None)
    return {
        "batches": len(progress),
        "wall_s": round(wall, 2),
        "first_batch_ms": trigger[0] if trigger else None,
        "median_trigger_ms": statistics.median(trigger[later]) if trigger else None,
        "median_addbatch_ms": statistics.median(add[later]) if add else None,
        "rows_per_s": round(sum(rows[later]) / (sum(trigger[later]) / 1000))
        if trigger and sum(trigger[later])
        else None,
        "metrics": metrics,
    }


class _FakeState:
    """Just enough of pyspark's GroupState for calling the step function outside Spark."""

    def __init__(self) -> None:
        self.blob, self.watermark_ms, self.hasTimedOut = None, 0, False

    @property
    def exists(self) -> bool:
        return self.blob is not None

    @property
    def get(self) -> tuple:
        return (self.blob,)

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark_ms

    def getCurrentProcessingTimeMs(self) -> int:
        return int(time.time() * 1000)

    def update(self, value) -> None:
        self.blob = value[0]

    def remove(self) -> None:
        self.blob = None

    def setTimeoutTimestamp(self, ms) -> None:
        pass


def step_cost(q, text, table, counts, buckets: int) -> dict:
    """4. cep's own cost per Python call: the step function Spark calls, fed the frames Spark would feed it
    (one per bucket of keys, ``buckets`` > 0, as cep groups a stream by default; else one per key), in
    micro-batches of ``counts`` rows, timers not fired. Keys are placed in buckets by a Python hash (as
    ``LocalStream`` places them), not Spark's: the same number of calls and rows per call."""
    import zlib

    import pandas as pd

    from cep.spark_bridge.spark.columns import EVENT_US, MARKER
    from cep.spark_bridge.spark.streaming import _SparkStep

    columns = tuple(table.column_names)
    types = {"symbol": "VARCHAR", "ts": "TIMESTAMP", "price": "DOUBLE", "volume": "BIGINT"}
    step = _SparkStep(
        q.plan,
        columns,
        ("symbol",),
        query_text=text,
        session_timeout_us=3_600_000_000,
        max_pending_rows=200_000,
        output_columns=q.plan.output_types(types),
        late_rows=True,
        key_buckets=buckets,
    )
    frame = table.to_pandas()
    frame["ts"] = frame["ts"].astype("datetime64[ns]")
    frame[EVENT_US] = frame["ts"].astype("int64") // 1000
    frame[MARKER] = pd.NaT
    by = "symbol"
    if buckets:
        by = "__cep_bucket__"
        frame[by] = [zlib.crc32(symbol.encode()) % buckets for symbol in frame["symbol"]]
    states: dict = {}
    calls, elapsed, position, top = 0, 0.0, 0, None
    for count in counts:
        part = frame.iloc[position : position + count]
        position += count
        watermark = 0 if top is None else top // 1000 - 5_000
        groups = [(key, g.reset_index(drop=True)) for key, g in part.groupby(by, sort=False)]
        started = time.process_time()
        for key, g in groups:
            state = states.setdefault(key, _FakeState())
            state.watermark_ms = watermark
            for _ in step((key,), iter([g]), state):
                pass
            calls += 1
        elapsed += time.process_time() - started
        top = int(part[EVENT_US].max()) if top is None else max(top, int(part[EVENT_US].max()))
    return {
        "calls": calls,
        "cpu_ms_per_call": round(elapsed / calls * 1000, 2),
        "rows_per_cpu_s": round(sum(counts) / elapsed),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--symbols", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--small-batches", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--skip-transform", action="store_true", help="skip transformWithStateInPandas (b)")
    parser.add_argument(
        "--skip-per-key", action="store_true", help="skip (a)'s throughput run (one call per key: slow)"
    )
    parser.add_argument("--query", help="a letter of bench/run.py's queries instead of patterns/v_shape.sql")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    text = VSHAPE
    if args.query:
        from run import QUERIES

        text = QUERIES[args.query][1]

    from data import generate

    import cep
    from cep.spark_bridge.spark.buckets import KEY_BUCKETS
    from cep.spark_bridge.spark.session import get_spark

    work = Path(tempfile.mkdtemp(prefix="cep-stream-bench-"))
    results: dict[str, dict] = {"params": vars(args), "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    try:
        t = time.perf_counter()
        spark = get_spark("local[2]", app_name="cep-stream-bench", shuffle_partitions=args.partitions)
        results["session_start_s"] = round(time.perf_counter() - t, 1)
        q = cep.compile(text)
        results["streaming_path"] = q.explain().splitlines()[-1].strip()
        cep_build = lambda df: q.on_spark(df, watermark="5 seconds", session_timeout="1 hour")  # noqa: E731

        small = work / "small"
        write_batches(small_table(args.small_batches), small, args.small_batches)
        # Warm-up (JVM classes, Python workers) so the first measured query is not charged for it.
        run(spark, small, work, "warmup", counting_apply)
        results["overhead_apply"] = run(spark, small, work, "overhead_apply", counting_apply)
        if not args.skip_transform:
            spark.conf.set(
                "spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
            )
            try:
                results["overhead_transform"] = run(spark, small, work, "overhead_transform", counting_transform)
            except Exception as exc:  # pragma: no cover - depends on the installed extras
                results["overhead_transform"] = {"error": str(exc).splitlines()[0]}
            finally:
                spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
        results["overhead_cep"] = run(spark, small, work, "overhead_cep", cep_build)

        big = work / "big"
        table = generate(args.rows, symbols=args.symbols)
        counts = write_batches(table, big, args.batches)
        if not args.skip_per_key:
            results["throughput_apply"] = run(spark, big, work, "throughput_apply", counting_apply)
        results["throughput_apply_buckets"] = run(spark, big, work, "throughput_apply_buckets", counting_buckets)
        results["throughput_cep"] = run(spark, big, work, "throughput_cep", cep_build)
        m = results["throughput_cep"]["metrics"]
        if m.get("key_calls"):
            results["throughput_cep"]["state_bytes_per_key_call"] = round(m["state_bytes"] / m["key_calls"])

        # 3. The same rows without Spark.
        from cep.spark_bridge.engine.keyed import KeyedStream
        from cep.spark_bridge.engine.local import LocalStream

        rows = table.to_pylist()
        engine = KeyedStream(q.plan, tuple(table.column_names), query_text=text, session_timeout_us=3_600_000_000)
        stream = LocalStream(engine, delay_ms=5_000)
        t = time.process_time()  # CPU seconds: the machine may be shared
        position = 0
        for count in counts:
            stream.run_batch(rows[position : position + count])
            position += count
        stream.run_batch([])
        results["engine_in_process_rows_per_s"] = round(len(rows) / (time.process_time() - t))
        t = time.process_time()
        q.run(rows)
        results["q_run_rows_per_s"] = round(len(rows) / (time.process_time() - t))
        results["step_per_call"] = step_cost(q, text, table, counts, KEY_BUCKETS)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"session start: {results['session_start_s']} s; load average after: {results['load_average_after']} "
        f"on {os.cpu_count()} cores"
    )
    print(results["streaming_path"])
    print(f"{'run':<24} {'batches':>7} {'first ms':>9} {'median ms':>10} {'addBatch ms':>12} {'rows/s':>9}")
    for name in (
        "overhead_apply",
        "overhead_transform",
        "overhead_cep",
        "throughput_apply",
        "throughput_apply_buckets",
        "throughput_cep",
    ):
        r = results.get(name)
        if not r:
            continue
        if "error" in r:
            print(f"{name:<24} error: {r['error']}")
            continue
        print(
            f"{name:<24} {r['batches']:>7} {r['first_batch_ms']:>9} {r['median_trigger_ms']:>10} "
            f"{r['median_addbatch_ms']:>12} {r['rows_per_s'] or '':>9}"
        )
    if results.get("throughput_cep", {}).get("state_bytes_per_key_call"):  # the column-wise path keeps no per-key count
        print(f"cep state per key (mean over calls): {results['throughput_cep']['state_bytes_per_key_call']} bytes")
    print(
        f"in-process engine (LocalStream): {results['engine_in_process_rows_per_s']} rows per CPU second; "
        f"q.run: {results['q_run_rows_per_s']}"
    )
    step = results["step_per_call"]
    print(
        f"cep step function called directly ({KEY_BUCKETS} buckets): {step['calls']} calls, {step['cpu_ms_per_call']} "
        f"CPU ms per call, {step['rows_per_cpu_s']:,} rows per CPU second"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
