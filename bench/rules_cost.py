"""What a rule costs on a stream: one streaming query per rule, or one stateful operator for all rules.

    .venv/bin/python bench/rules_cost.py                         # 1, 10, 50 rules; both mappings
    .venv/bin/python bench/rules_cost.py --rules 1,10 --modes operator --files 4 --rows 2000

The same input (``--files`` JSON files of ``--rows`` ticks over ``--keys`` symbols, times increasing, one
file per micro-batch) goes through N rules (V-shape variants: the same pattern with a different threshold
each, so every rule is a different text and does work):

* ``queries``: N streaming queries, each ``cep.compile(rule).on_spark(stream)`` (``cep.spark_bridge.spark.streaming``)
  with its own checkpoint, all started together, each reading the input itself;
* ``operator``: one query, ``alerting.match_rules`` (rows copied per rule, one
  ``applyInPandasWithState`` keyed by (rule, partition key)).

Each run uses ``trigger(availableNow=True)`` and Spark's ``noop`` sink. Reported per (mode, N): the wall
time from start to the end of the last query, the median micro-batch time after the first (the steady
state; for ``queries``, summed over the N queries: the machine time a round of micro-batches takes), and
the cost per added rule: (wall(N) - wall(1)) / (N - 1). A warm-up run (discarded) comes first, so that
the session start, the first Python worker and the first pandas UDF are not billed to any mode.
Results go to ``bench/results-rules.json`` (``--out``); ``docs/alerting.md`` quotes them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RULE = """-- name: vshape_{i}
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, LAST(C.ts) AS end_ts, MIN(B.price) AS bottom
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+)
  DEFINE B AS price < PREV(price) - {step},
         C AS price > PREV(price) + {step})
"""


def make_input(directory: Path, files: int, rows: int, keys: int, seed: int = 7) -> None:
    import random

    rnd = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    t0 = dt.datetime(2024, 1, 1)
    prices = {k: 100.0 for k in range(keys)}
    second = 0
    for index in range(files):
        path = directory / f"part-{index:04d}.json"
        with path.open("w", encoding="utf-8") as fh:
            for _ in range(rows):
                key = rnd.randrange(keys)
                prices[key] = max(1.0, prices[key] + rnd.choice([-3, -2, -1, 1, 2, 3]) * rnd.random())
                second += 1
                fh.write(
                    json.dumps(
                        {
                            "symbol": f"S{key:03d}",
                            "ts": (t0 + dt.timedelta(seconds=second)).isoformat(),
                            "price": round(prices[key], 2),
                        }
                    )
                    + "\n"
                )
        stamp = 1_700_000_000 + 10 * index
        os.utime(path, (stamp, stamp))


def rule_texts(n: int) -> list[str]:
    return [RULE.format(i=i, step=round(0.05 * (i % 20), 2)) for i in range(n)]


def _durations(progress: list) -> list[float]:
    out = []
    for p in progress:
        duration = (p.get("durationMs") if isinstance(p, dict) else p.durationMs) or {}
        rows = p.get("numInputRows") if isinstance(p, dict) else p.numInputRows
        if "triggerExecution" in duration and rows:
            out.append(duration["triggerExecution"] / 1000.0)
    return out


def run_queries(spark, schema, source: Path, work: Path, n: int) -> dict:
    import cep

    queries = []
    started = time.perf_counter()
    for i, text in enumerate(rule_texts(n)):
        df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
        out = cep.compile(text).on_spark(df, watermark="30 seconds", late="count", metrics_name=None)
        queries.append(
            out.writeStream.format("noop")
            .option("checkpointLocation", str(work / f"ck-{i}"))
            .trigger(availableNow=True)
            .start()
        )
    for q in queries:
        q.awaitTermination()
    wall = time.perf_counter() - started
    per_query = [_durations(q.recentProgress) for q in queries]
    steady = [statistics.median(d[1:]) for d in per_query if len(d) > 1]
    return {
        "wall_s": wall,
        "batches": max(len(d) for d in per_query),
        "steady_batch_s_median_per_query": statistics.median(steady) if steady else None,
        "steady_round_s": sum(steady) if steady else None,
    }


def run_operator(spark, schema, source: Path, work: Path, n: int) -> dict:
    from cep.spark_bridge.alerting.query import input_types_of, match_rules
    from cep.spark_bridge.alerting.rule_set import build_rule_set
    from cep.spark_bridge.alerting.store import RuleStore

    rules_dir = work / "rules"
    rules_dir.mkdir(parents=True, exist_ok=True)
    (rules_dir / "bench.sql").write_text(";\n".join(rule_texts(n)), encoding="utf-8")
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    payload, ruleset = build_rule_set(str(rules_dir), input_types=input_types_of(df))
    assert len(ruleset) == n and not ruleset.errors, ruleset.errors
    store = RuleStore(str(work / "store"))
    store.publish(payload)
    started = time.perf_counter()
    alerts = match_rules(df, store, time_column="ts", watermark="30 seconds")
    q = (
        alerts.writeStream.format("noop")
        .option("checkpointLocation", str(work / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    wall = time.perf_counter() - started
    durations = _durations(q.recentProgress)
    steady = statistics.median(durations[1:]) if len(durations) > 1 else None
    return {
        "wall_s": wall,
        "batches": len(durations),
        "steady_batch_s_median_per_query": steady,
        "steady_round_s": steady,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", default="1,10,50")
    parser.add_argument("--modes", default="operator,queries")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--out", default=str(REPO / "bench" / "results-rules.json"))
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import types as T

    from cep.spark_bridge.spark.session import get_spark

    spark = get_spark("local[2]", app_name="cep-bench-rules", shuffle_partitions=args.partitions)
    schema = T.StructType(
        [
            T.StructField("symbol", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("price", T.DoubleType()),
        ]
    )
    base = Path(tempfile.mkdtemp(prefix="cep-rules-bench-"))
    results = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg": os.getloadavg()},
        "input": {
            "files": args.files,
            "rows_per_file": args.rows,
            "keys": args.keys,
            "shuffle_partitions": args.partitions,
        },
        "runs": [],
    }
    try:
        source = base / "in"
        make_input(source, args.files, args.rows, args.keys)
        run_operator(spark, schema, source, base / "warmup", 1)  # session, worker and UDF start-up: not billed
        counts = [int(x) for x in args.rules.split(",")]
        for mode in args.modes.split(","):
            for n in counts:
                work = base / f"{mode}-{n}"
                run = (run_operator if mode == "operator" else run_queries)(spark, schema, source, work, n)
                run.update({"mode": mode, "rules": n, "load_avg": os.getloadavg()[0]})
                results["runs"].append(run)
                print(json.dumps(run), flush=True)
                shutil.rmtree(work, ignore_errors=True)
        for mode in args.modes.split(","):
            runs = {r["rules"]: r for r in results["runs"] if r["mode"] == mode}
            if 1 in runs:
                for n, r in runs.items():
                    if n > 1:
                        r["per_added_rule_s"] = (r["wall_s"] - runs[1]["wall_s"]) / (n - 1)
                        if r.get("steady_round_s") and runs[1].get("steady_round_s"):
                            r["per_added_rule_steady_s"] = (r["steady_round_s"] - runs[1]["steady_round_s"]) / (n - 1)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1)
    print(f"{'mode':9} {'rules':>5} {'wall s':>8} {'batch s':>8} {'+rule s':>8} {'+rule steady s':>15}")
    for r in results["runs"]:
        print(
            f"{r['mode']:9} {r['rules']:5d} {r['wall_s']:8.1f} {r['steady_round_s'] or 0:8.2f} "
            f"{r.get('per_added_rule_s', 0):8.2f} {r.get('per_added_rule_steady_s', 0):15.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
