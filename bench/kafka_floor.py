"""Spark's floor on the Kafka bench's topic: a stateful streaming query that does nothing, beside ``cep stream``.

    .venv/bin/python bench/kafka_floor.py BOOTSTRAP TOPIC OUT_DIR [--watermark-ms 2000] [--trigger 500ms]

bench/kafka_e2e.py starts it as a child process, like ``cep stream`` (``local[2]``, the same topic, watermark
and trigger, the session from ``get_spark`` so the same state store). The query is the least a keyed,
stateful stream on Spark costs: read Kafka, parse the JSON value, watermark, ``groupBy(symbol)``,
``applyInPandasWithState`` that keeps a count and the newest event time per key and emits them, into
``foreachBatch`` that collects the output. Written to OUT_DIR:

- ``floor.jsonl``: per micro-batch, the batch id, the wall ms at the end of ``foreachBatch`` and, per key
  that had ticks, that end minus the key's newest event time: the floor's "latency" (event time to the end
  of the micro-batch that saw it). A matcher waits for the watermark as well, so an alert's latency cannot
  go below this plus the watermark;
- ``progress.jsonl``: Spark's progress of each micro-batch (rows, ``durationMs``), polled every 0.2 s;
- ``running`` once the query has started.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SCHEMA = "symbol STRING, ts TIMESTAMP, price DOUBLE"


def count_per_key(key, frames, state):
    """The whole stateful work: a count and the newest event time per key, one output row per call."""
    import pandas as pd

    n, newest = state.get if state.exists else (0, 0)
    for frame in frames:
        n += len(frame)
        newest = max(newest, int(frame["ts"].max().value // 1_000_000))
    state.update((n, newest))
    yield pd.DataFrame({"symbol": [key[0]], "n": [n], "newest_ms": [newest]})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("out", type=Path)
    parser.add_argument("--watermark-ms", type=int, default=2000)
    parser.add_argument("--trigger", default="500ms")
    args = parser.parse_args()

    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from cep.spark_bridge.spark.session import get_spark

    spark = get_spark("local[2]", app_name="cep-floor", kafka=True)
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "latest")
        .load()
    )
    ticks = raw.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("t")).select("t.*")
    counted = (
        ticks.withWatermark("ts", f"{args.watermark_ms} milliseconds")
        .groupBy("symbol")
        .applyInPandasWithState(
            count_per_key,
            "symbol string, n long, newest_ms long",
            "n long, newest_ms long",
            "update",
            GroupStateTimeout.NoTimeout,
        )
    )
    args.out.mkdir(parents=True, exist_ok=True)
    batches = (args.out / "floor.jsonl").open("a")

    def record(df, batch_id: int) -> None:
        newest = [row.newest_ms for row in df.select("newest_ms").collect()]
        end = time.time() * 1000
        latencies = [round(end - ms) for ms in newest if ms]
        batches.write(json.dumps({"batch": batch_id, "end_ms": round(end), "latency_ms": latencies}) + "\n")
        batches.flush()

    query = (
        counted.writeStream.outputMode("update")
        .foreachBatch(record)
        .option("checkpointLocation", str(args.out / "ck"))
        .trigger(processingTime=args.trigger)
        .start()
    )
    (args.out / "running").write_text("running\n")
    print("running; floor query started", flush=True)
    seen: set[int] = set()
    with (args.out / "progress.jsonl").open("a") as progress_file:
        while query.isActive:
            for p in query.recentProgress:
                if p["batchId"] not in seen and p["numInputRows"]:
                    seen.add(p["batchId"])
                    entry = {"batch": p["batchId"], "rows": p["numInputRows"], "duration_ms": p["durationMs"]}
                    progress_file.write(json.dumps(entry) + "\n")
                    progress_file.flush()
            try:
                query.awaitTermination(0.2)
            except KeyboardInterrupt:
                break
    query.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
