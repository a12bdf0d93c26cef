"""Spark's floor on the Kafka bench's topic: a stateful streaming query that does nothing, beside ``cep stream``.

    .venv/bin/python bench/kafka_floor.py BOOTSTRAP TOPIC OUT_DIR [--watermark-ms 2000] [--trigger 500ms]
        [--hold-until-watermark]

bench/kafka_e2e.py starts it as a child process, like ``cep stream`` (``local[2]``, the same topic, watermark
and trigger, the session from ``get_spark`` so the same state store). The query is the least a keyed,
stateful stream on Spark costs: read Kafka, parse the JSON value, watermark, ``groupBy(symbol)``,
``applyInPandasWithState`` that keeps a count and the newest event time per key and emits them, into
``foreachBatch`` that collects the output.

With ``--hold-until-watermark``, the floor of a query whose output the watermark releases, as an alert's is
(a match is sure only once the watermark passes its last tick; Flink's alerts wait the same): the same query,
but each tick is held in the key's state until Spark's event-time watermark passes it
(``GroupStateTimeout.EventTimeTimeout``, the timer at the oldest tick held), then emitted, one row per tick.
No Spark query that waits for its watermark can emit earlier: Spark moves the watermark at the end of a
micro-batch, so a tick leaves in a later micro-batch (the empty one Spark runs for the timers, or the next).
Written to OUT_DIR:

- ``floor.jsonl``: per micro-batch, the batch id, the wall ms at the end of ``foreachBatch`` and, per key
  that had ticks, that end minus the key's newest event time: the floor's "latency" (event time to the end
  of the micro-batch that saw it); held until the watermark, that end minus each emitted tick's event time;
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


def hold_until_watermark(key, frames, state):
    """Each tick's event time (ms) kept until Spark's watermark passes it, then emitted: one row per tick. The
    timer is the oldest tick held, so Spark calls again (in the empty micro-batch it runs for timers) once the
    watermark is past it; a tick below the watermark is late to Spark and leaves at once."""
    import numpy as np
    import pandas as pd

    # the event times as int64 bytes: pyspark 4.2's Python worker cannot read back an array state column
    held = [np.frombuffer(state.get[0], dtype=np.int64)] if state.exists else []
    if not state.hasTimedOut:
        held += [frame["ts"].to_numpy(dtype="datetime64[ms]").astype(np.int64) for frame in frames]
    times = np.concatenate(held) if held else np.empty(0, dtype=np.int64)
    watermark = state.getCurrentWatermarkMs()
    kept = times[times >= watermark]
    if len(kept):
        state.update((kept.tobytes(),))
        state.setTimeoutTimestamp(int(kept.min()))  # Spark times out once the watermark is above it
    else:
        state.remove()
    released = times[times < watermark]
    yield pd.DataFrame({"symbol": [key[0]] * len(released), "event_ms": released})


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
    parser.add_argument(
        "--hold-until-watermark",
        action="store_true",
        help="hold each tick until the event-time watermark passes it, then emit it (output the watermark releases)",
    )
    args = parser.parse_args()

    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from cep.spark_bridge.alerting.batch_cost import BatchCost
    from cep.spark_bridge.spark.session import STREAM_JVM_OPTIONS, get_spark

    hold = args.hold_until_watermark
    app_name = "cep-floor-watermark" if hold else "cep-floor"
    # the JVM flags cep stream's session gets: generic tuning of a long-running stream, not cep's own work
    spark = get_spark("local[2]", app_name=app_name, kafka=True, jvm_options=STREAM_JVM_OPTIONS)
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "latest")
        .load()
    )
    ticks = raw.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("t")).select("t.*")
    grouped = ticks.withWatermark("ts", f"{args.watermark_ms} milliseconds").groupBy("symbol")
    if hold:
        event_ms = "event_ms"  # the output column of event times
        counted = grouped.applyInPandasWithState(
            hold_until_watermark,
            "symbol string, event_ms long",
            "held binary",
            "update",
            GroupStateTimeout.EventTimeTimeout,
        )
    else:
        event_ms = "newest_ms"
        counted = grouped.applyInPandasWithState(
            count_per_key,
            "symbol string, n long, newest_ms long",
            "n long, newest_ms long",
            "update",
            GroupStateTimeout.NoTimeout,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    batches = (args.out / "floor.jsonl").open("a")

    def record(df, batch_id: int) -> None:
        cost = BatchCost.start(df.sparkSession)  # the jobs it starts, counted as cep's foreachBatch counts its own
        with cost.step("collect"):
            times = [row[0] for row in df.select(event_ms).collect()]
        end = time.time() * 1000
        latencies = [round(end - ms) for ms in times if ms]
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
    print(f"running; floor query started ({app_name})", flush=True)
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


def p50_ratio(engine: dict, floor: dict) -> float | None:
    """An engine's p50 latency over a floor's (None when either is missing)."""
    if engine.get("latency_p50_s") and floor.get("latency_p50_s"):
        return engine["latency_p50_s"] / floor["latency_p50_s"]
    return None


def floor_table_rows(step: dict, state: str) -> list[tuple[str, str, dict, dict, float | None]]:
    """The queries of one rate that ran, as (label, group, latency numbers, micro-batch numbers, CPU s): cep in
    its layouts (and another checkout's, ``baseline``), then Spark's two floors."""
    rows = [
        (
            f"cep `--state {state}`",
            "cep",
            step["engines"].get("cep") or {},
            step["cep_batches"],
            step["cpu_s"].get("cep"),
        )
    ]
    for side, label in (("driver", "cep `--state driver`"), ("baseline", "cep before")):
        if theirs := step.get(side):
            rows.append(
                (label, side, theirs["engines"].get("cep") or {}, theirs.get("cep_batches") or {}, theirs.get("cpu_s"))
            )
    for name, label in (("floor", "Spark's floor"), ("floor_watermark", "Spark's floor, watermark")):
        if numbers := step.get(name):
            rows.append((label, name, numbers, numbers, step["cpu_s"].get(name)))
    return rows


def report(found: dict) -> list[str]:
    """docs/performance.md's section on cep beside Spark's floor, from a bench/kafka_e2e.py run's JSON."""
    cell = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    flink = found["flink"]
    lines = [
        "## Spark's floor beside cep, through Kafka (bench/kafka_e2e.py, bench/kafka_floor.py)",
        "",
        f"One run ({found['when']}, {found['nproc']} cores shared by every engine of the run, the broker, the "
        "producer and any other work: load average in the table), the same ticks on a 4-partition topic, the same "
        "producer, "
        "`local[2]` each, watermark "
        f"{found['watermark']}, trigger {found['trigger']}, state store {found.get('state_store', 'default')}. "
        "The floor reads, parses, watermarks, groups by symbol and keeps a count per key "
        "(`applyInPandasWithState`) into `foreachBatch`; its latency is event time to the end of the micro-batch "
        "that saw the tick (no watermark wait), cep's is event time to the alert consumed from Kafka. "
        "*Floor, watermark* is the same query holding each tick in its key's state until Spark's watermark passes "
        "it (`EventTimeTimeout`), then emitting it: its latency is event time to the end of the micro-batch that "
        "emitted the tick, the least any Spark query whose output waits the watermark (as an alert must: a match "
        "is sure once later ticks came) can take. The two ratio columns divide each query's p50 by each floor's. "
        + ("Flink ran too." if flink["ran"] else f"Flink did not run in this one ({flink['why_not']})."),
        "",
        "| rate | query | p50 / p99 latency (s) | p50 / floor's | p50 / floor's, watermark | micro-batch p50 (s) "
        "| CPU s | load |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for step in found["steps"]:
        floor, held = step.get("floor") or {}, step.get("floor_watermark") or {}
        alone = step.get("alone") or {}
        for label, group, latency, batches, cpu in floor_table_rows(step, found.get("state", "spark")):
            load = alone[group]["load_average"][0] if group in alone else step["load_average"][0]
            lines.append(
                f"| {step['rate_asked']} | {label} | {cell(latency.get('latency_p50_s'))} / "
                f"{cell(latency.get('latency_p99_s'))} | {cell(p50_ratio(latency, floor))} "
                f"| {cell(p50_ratio(latency, held))} | {cell(batches.get('batch_p50_s'))} | {cpu} | {load} |"
            )
    if found.get("mode") == "one after another":
        before = (found.get("baseline") or {}).get("python")
        lines += [
            "",
            "Each query ran alone with the broker and the producer, one after another, on a topic of its own fed the "
            "same ticks at the same rates"
            + (
                f"; *cep before* is the `cep stream` of `{before}` (the code before this run's change), run the same "
                "way in the same run"
                if before
                else ""
            )
            + "; load: the 1-minute load average at the end of each query's step, from other work on the machine "
            "as well.",
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
            step.get("floor_watermark") or {},
        )
        for step in found["steps"]
    ]
    if found.get("all_batches"):
        everything = found["all_batches"]
        baseline = (found.get("baseline") or {}).get("all_batches", {}).get("cep")
        held = everything.get("floor_watermark") or {}
        rows.append(("whole run", everything["cep"], everything.get("floor") or {}, baseline, held))
    for rate, cep_numbers, floor_numbers, baseline_numbers, held_numbers in rows:
        named = [("cep", cep_numbers), ("floor", floor_numbers)]
        named += [("floor, watermark", held_numbers)] if held_numbers else []
        named += [("cep before (baseline)", baseline_numbers)] if baseline_numbers else []
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
        for rate, cep_numbers, floor_numbers, baseline_numbers, held_numbers in rows
        for name, numbers in (
            ("cep", cep_numbers),
            ("floor", floor_numbers),
            ("floor, watermark", held_numbers),
            ("cep before", baseline_numbers),
        )
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
