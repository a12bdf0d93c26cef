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


def spark_interval(text: str) -> str:
    """``500ms`` (cep's spelling) as Spark's processing-time trigger takes it (``500 milliseconds``)."""
    units = {"ms": "milliseconds", "s": "seconds", "min": "minutes"}
    for short in sorted(units, key=len, reverse=True):
        number = text.strip()[: -len(short)]
        if text.strip().endswith(short) and number.replace(".", "", 1).isdigit():
            return f"{number} {units[short]}"
    return text


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

    from cep.spark_bridge.alerting.batch_cost import BatchCost
    from cep.spark_bridge.spark.session import STREAM_JVM_OPTIONS, get_spark

    # the JVM flags cep stream's session gets: generic tuning of a long-running stream, not cep's own work
    spark = get_spark("local[2]", app_name="cep-floor", kafka=True, jvm_options=STREAM_JVM_OPTIONS)
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
        cost = BatchCost.start(df.sparkSession)  # the jobs it starts, counted as cep's foreachBatch counts its own
        with cost.step("collect"):
            newest = [row.newest_ms for row in df.select("newest_ms").collect()]
        end = time.time() * 1000
        latencies = [round(end - ms) for ms in newest if ms]
        line = {"batch": batch_id, "end_ms": round(end), "latency_ms": latencies, "foreach_batch": cost.done()}
        batches.write(json.dumps(line) + "\n")
        batches.flush()

    query = (
        counted.writeStream.outputMode("update")
        .foreachBatch(record)
        .option("checkpointLocation", str(args.out / "ck"))
        .trigger(processingTime=spark_interval(args.trigger))
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


RESULTS = Path(__file__).resolve().parent / "results-kafka-floor.json"
# Spark's parts of a micro-batch's time, in the order they happen (progress JSON ``durationMs``).
PARTS = ("latestOffset", "queryPlanning", "walCommit", "getBatch", "addBatch", "commitOffsets")


def report(found: dict) -> list[str]:
    """docs/performance.md's section on cep beside Spark's floor, from a bench/kafka_e2e.py run's JSON."""
    cell = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    flink = found["flink"]
    lines = [
        "## Spark's floor beside cep, through Kafka (bench/kafka_e2e.py, bench/kafka_floor.py)",
        "",
        f"One run ({found['when']}, {found['nproc']} cores shared by every engine of the run, the broker, the "
        "producer and any other work: load average in the table), the same 4-partition topic, the same producer, "
        "`local[2]` each, watermark "
        f"{found['watermark']}, trigger {found['trigger']}, state store {found.get('state_store', 'default')}. "
        "The floor reads, parses, watermarks, groups by symbol and keeps a count per key "
        "(`applyInPandasWithState`) into `foreachBatch`; its latency is event time to the end of the micro-batch "
        "that saw the tick (no watermark wait), cep's is event time to the alert consumed from Kafka. "
        + ("Flink ran too." if flink["ran"] else f"Flink did not run in this one ({flink['why_not']})."),
        "",
        "| rate | cep p50 / p99 (s) | cep before p50 / p99 (s) | floor p50 / p99 (s) | cep / floor p50 "
        "| cep batch p50 (s) | before (s) | floor (s) | cep / floor CPU s | load |",
        "| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for step in found["steps"]:
        cep, floor, batches = step["engines"].get("cep", {}), step.get("floor") or {}, step["cep_batches"]
        before = step.get("baseline") or {}
        before_cep = (before.get("engines") or {}).get("cep") or {}
        alone = step.get("alone") or {}
        load = " / ".join(f"{alone[g]['load_average'][0]}" for g in ("cep", "floor", "baseline") if g in alone)
        ratio = (
            cep["latency_p50_s"] / floor["latency_p50_s"]
            if cep.get("latency_p50_s") and floor.get("latency_p50_s")
            else None
        )
        lines.append(
            f"| {step['rate_asked']} | {cell(cep.get('latency_p50_s'))} / {cell(cep.get('latency_p99_s'))} | "
            f"{cell(before_cep.get('latency_p50_s'))} / {cell(before_cep.get('latency_p99_s'))} | "
            f"{cell(floor.get('latency_p50_s'))} / {cell(floor.get('latency_p99_s'))} | {cell(ratio)} "
            f"| {cell(batches['batch_p50_s'])} | {cell((before.get('cep_batches') or {}).get('batch_p50_s'))} "
            f"| {cell(floor.get('batch_p50_s'))} | {step['cpu_s'].get('cep')} / {step['cpu_s'].get('floor')} "
            f"| {load or step['load_average'][0]} |"
        )
    if found.get("mode") == "one after another":
        lines += [
            "",
            "Each query ran alone with the broker and the producer, one after another, on a topic of its own fed the "
            "same ticks at the same rates; *cep before* is the `cep stream` of "
            f"`{(found.get('baseline') or {}).get('python', 'another checkout')}` (the code before this run's "
            "change), run the same way in the same run; load: the 1-minute load average at the end of each "
            "query's step (cep / floor / before), from other work on the machine as well.",
        ]
    lines += [
        "",
        "Where a micro-batch's time goes: the median of each part of Spark's `durationMs` (ms) over the step's "
        "micro-batches with rows (`addBatch` is the work: reading Kafka, the stateful step, the sink).",
        "",
        "| rate | query | batches | rows/batch | " + " | ".join(PARTS) + " | total p50 |",
        "| ---: | --- | ---: | ---: |" + " ---: |" * len(PARTS) + " ---: |",
    ]
    rows = [
        (
            step["rate_asked"],
            step["cep_batches"],
            step.get("floor") or {},
            (step.get("baseline") or {}).get("cep_batches"),
        )
        for step in found["steps"]
    ]
    if found.get("all_batches"):
        everything = found["all_batches"]
        baseline = (found.get("baseline") or {}).get("all_batches", {}).get("cep")
        rows.append(("whole run", everything["cep"], everything.get("floor") or {}, baseline))
    for rate, cep_numbers, floor_numbers, baseline_numbers in rows:
        named = [("cep", cep_numbers), ("floor", floor_numbers)] + (
            [("cep before (baseline)", baseline_numbers)] if baseline_numbers else []
        )
        for name, numbers in named:
            parts = numbers.get("parts_p50_ms") or {}
            lines.append(
                f"| {rate} | {name} | {numbers.get('batches', 0)} | {numbers.get('rows_per_batch')} | "
                + " | ".join(str(parts.get(part, "-")) for part in PARTS)
                + f" | {round(numbers['batch_p50_s'] * 1000) if numbers.get('batch_p50_s') else '-'} |"
            )
    return lines + foreach_lines(rows)


def foreach_lines(rows: list) -> list[str]:
    """Inside ``addBatch``: the medians of each ``foreachBatch`` step and the Spark jobs, stages and tasks it
    started (``BatchCost``; the floor's one collect counted the same way)."""
    found = [
        (rate, name, numbers["foreach_batch_p50"])
        for rate, cep_numbers, floor_numbers, baseline_numbers in rows
        for name, numbers in (("cep", cep_numbers), ("floor", floor_numbers), ("cep before", baseline_numbers))
        if numbers and numbers.get("foreach_batch_p50")
    ]
    if not found:
        return []
    steps = sorted({step for _, _, cost in found for step in cost["steps_ms"]})
    lines = [
        "",
        "Inside `addBatch`, `foreachBatch` (medians over the micro-batches with rows; `collect` is the job that runs "
        "the stateful step, in the Python workers; jobs, stages and tasks are those the call started, from Spark's "
        "status tracker; stage run ms: the tasks' run time summed per stage, in the order they ran, the first being "
        "the read of Kafka and the parse up to the shuffle):",
        "",
        "| rate | query | foreachBatch ms | " + " | ".join(steps) + " | jobs | stages | tasks | stage run ms |",
        "| ---: | --- | ---: |" + " ---: |" * len(steps) + " ---: | ---: | ---: | --- |",
    ]
    for rate, name, cost in found:
        lines.append(
            f"| {rate} | {name} | {cost['total_ms']} | "
            + " | ".join(str(cost["steps_ms"].get(step, "-")) for step in steps)
            + f" | {cost.get('jobs')} | {cost.get('stages')} | {cost.get('tasks')} "
            f"| {' + '.join(str(ms) for ms in cost.get('stage_run_ms') or []) or '-'} |"
        )
    return lines
