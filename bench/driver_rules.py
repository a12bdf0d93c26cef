"""The driver layout's rules alone (``DriverState.run_frame``, no Spark): CPU per micro-batch at 20,000 ticks/s.

    .venv/bin/python bench/driver_rules.py                                   # this checkout, with the split
    .venv/bin/python bench/driver_rules.py --python /work/main/.venv/bin/python,.venv/bin/python --rounds 4

The Kafka bench's V shape (bench/kafka_e2e.py's rule, published as ``cep stream`` publishes a rule set) over
micro-batches of ``--rows`` ticks (32,000: a micro-batch of the live stream at 20,000 ticks/s) of ``--keys``
symbols, each a random walk, 20 ticks a millisecond, as ``driver_input`` brings them to the driver. Each
micro-batch runs through ``DriverState.run_frame``, the rules of ``foreachBatch`` (the tag of each row with its
key, the buckets, the matcher, the alerts' rows, the state's files), timed by the thread's own CPU clock: the
machine is shared, and CPU seconds are what a load average does not make bigger.

With several ``--python`` interpreters (each with its own checkout of cep installed), each round runs one child
per interpreter, alternated (ABAB); the report has each one's median CPU per micro-batch over every round.
``--split`` (one interpreter) charges the thread's CPU to the steps of a micro-batch by wrapping them:
the key tags (``Explode``), the matcher (``ColumnarStep.step``), the alerts' rows (``_append_alerts`` or what
replaced it), the state encoded (``BucketState.encode``), the output frame (``AlertStep._frame``), the state
files (``StateFiles.save``); the rest is the call's bookkeeping. --json (default bench/results-driver-rules.json).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results-driver-rules.json"
TYPES = {"symbol": "VARCHAR", "ts": "TIMESTAMP", "price": "DOUBLE"}
TICKS_PER_MS = 20  # 20,000 ticks/s
START_MS = 1_767_225_600_000  # 2026-01-01
# The steps --split charges CPU to: (module, attribute path). A missing one is skipped (another checkout).
SPLIT = {
    "key_tags": ("cep.spark_bridge.alerting.worker", "Explode.__call__"),
    "matcher": ("cep.spark_bridge.engine.columnar.step", "ColumnarStep.step"),
    "alert_rows": ("cep.spark_bridge.alerting.worker", "_append_alerts"),  # per alert (before)
    "alert_rows_columns": ("cep.spark_bridge.alerting.worker", "append_alerts"),  # column by column
    "state_encode": ("cep.spark_bridge.alerting.bucket_state", "BucketState.encode"),
    "state_decode": ("cep.spark_bridge.alerting.bucket_state", "BucketState.decode"),
    "groups_with_key_tags": ("cep.spark_bridge.alerting.driver_state", "DriverState._groups"),
    "bucket_inputs": ("cep.spark_bridge.alerting.bucket_state", "BucketInputs.__post_init__"),
    "output_frame": ("cep.spark_bridge.alerting.worker", "AlertStep._frame"),
    "outputs_joined": ("cep.spark_bridge.alerting.driver_state", "concat_frames"),
    "state_files": ("cep.spark_bridge.alerting.driver_state", "StateFiles.save"),
}


def frames(rows: int, keys: int, count: int, seed: int = 27):
    """``count`` micro-batches of ``rows`` ticks, as ``driver_input`` brings them (input columns, EVENT_US, the
    bad rows' columns)."""
    import pandas as pd

    from cep.spark_bridge.alerting.rule_set import FILE
    from cep.spark_bridge.spark.columns import EVENT_US, RAW, REJECT

    rng = random.Random(seed)
    prices = [100.0] * keys
    steps = (-1.0, -0.5, 0.5, 1.0)
    tick = 0
    for _ in range(count):
        symbols, times_ms, values = [], [], []
        for _ in range(rows):
            key = tick % keys
            prices[key] = max(1.0, prices[key] + rng.choice(steps))
            symbols.append(f"K{key:04d}")
            times_ms.append(START_MS + tick // TICKS_PER_MS)
            values.append(prices[key])
            tick += 1
        out = pd.DataFrame({"symbol": symbols, "ts": pd.to_datetime(times_ms, unit="ms"), "price": values})
        out[EVENT_US] = [ms * 1000 for ms in times_ms]
        out[REJECT] = out[RAW] = out[FILE] = None
        yield out


def wrap_steps(spent: dict[str, float]) -> None:
    """Charge each ``SPLIT`` step's thread CPU to ``spent`` (outermost call only, for recursion)."""
    import importlib
    import inspect

    for name, (module_name, path) in SPLIT.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner, _, attribute = path.rpartition(".")
        holder = getattr(module, owner) if owner else module
        original = getattr(holder, attribute, None)
        if original is None:
            continue
        static = isinstance(inspect.getattr_static(holder, attribute), staticmethod)

        def timed(*args, __original=original, __name=name, **kwargs):
            began = time.thread_time()
            try:
                result = __original(*args, **kwargs)
                if __name == "key_tags":  # a generator: its work happens as it is read
                    result = list(result)
                return result
            finally:
                spent[__name] = spent.get(__name, 0.0) + time.thread_time() - began

        setattr(holder, attribute, staticmethod(timed) if static else timed)


def one(args) -> dict:
    """This interpreter's run: warm-up micro-batches, then ``--batches`` timed ones."""
    import gc

    from cep.spark_bridge.alerting.driver_state import DriverState
    from cep.spark_bridge.alerting.rule_set import build_rule_set
    from cep.spark_bridge.alerting.store import RuleStore

    spent: dict[str, float] = {}
    if args.split:
        wrap_steps(spent)
    work = Path(tempfile.mkdtemp(prefix="cep-driver-rules-"))
    (work / "rules").mkdir()
    (work / "rules" / "v_shape.sql").write_text(Path(args.rule).read_text())
    payload, ruleset = build_rule_set(str(work / "rules"), input_types=TYPES, time_column="ts")
    assert not ruleset.errors, [str(e) for e in ruleset.errors]
    store = RuleStore(str(work / "store"))
    store.publish(payload)
    driver = DriverState(
        str(work / "ck"), store.directory, columns=list(TYPES), delay_ms=args.watermark_ms,
        housekeeping_us=3_600_000_000,
    )  # fmt: skip
    batches = list(frames(args.rows, args.keys, args.warmup + args.batches))
    cpu, alerts, steps = [], [], []
    digest = hashlib.sha256()  # every micro-batch's output but the wall-clock emit time: equal across checkouts
    for batch_id, pdf in enumerate(batches):
        gc.collect()
        before = dict(spent)
        began = time.thread_time()
        out = driver.run_frame(pdf, batch_id)
        used = time.thread_time() - began
        shown = out.drop(columns=["emit_time"]).astype(str)
        digest.update("\n".join(map("|".join, shown.itertuples(index=False, name=None))).encode())
        if batch_id >= args.warmup:
            cpu.append(used)
            alerts.append(int((out["match_id"].notna()).sum()))
            steps.append({k: spent.get(k, 0.0) - before.get(k, 0.0) for k in spent})
    import cep

    repo = Path(cep.__file__).resolve().parent.parent
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    result = {
        "python": sys.executable,
        "checkout": f"{repo}@{head.stdout.strip()}",
        "cpu_s_per_batch": [round(c, 4) for c in cpu],
        "cpu_s_p50": round(statistics.median(cpu), 4),
        "alerts_per_batch": round(statistics.mean(alerts)),
        "ticks_per_cpu_s": round(args.rows / statistics.median(cpu)),
        "us_per_alert_p50": None,
        "output_sha256": digest.hexdigest()[:16],
    }
    if steps:
        names = sorted({k for s in steps for k in s})
        medians = {k: statistics.median(s.get(k, 0.0) for s in steps) for k in names}
        result["split_cpu_s_p50"] = {k: round(v, 4) for k, v in medians.items()}
        rows_step = medians.get("alert_rows", 0.0) + medians.get("alert_rows_columns", 0.0)
        result["us_per_alert_p50"] = round(rows_step / statistics.mean(alerts) * 1e6, 2)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=32_000, help="ticks per micro-batch")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the interpreters, alternated")
    parser.add_argument("--python", help="interpreters to alternate, comma-separated (default: this one)")
    parser.add_argument("--split", action="store_true", help="charge the CPU to the steps (wraps them)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rule", help=argparse.SUPPRESS)  # the child's rule file
    parser.add_argument("--watermark-ms", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args()
    if args.child:  # no bench/ on the path: kafka_e2e puts this checkout's cep first, whatever the interpreter's
        print(json.dumps(one(args)))
        return 0
    sys.path.insert(0, str(HERE))
    import kafka_e2e

    rule = Path(tempfile.mkdtemp(prefix="cep-driver-rules-")) / "v_shape.sql"
    rule.write_text(kafka_e2e.QUERY_TEXT)
    pythons = args.python.split(",") if args.python else [sys.executable]
    runs: dict[str, list[dict]] = {p: [] for p in pythons}
    loads = []
    for round_index in range(args.rounds):
        for python in pythons:
            loads.append(os.getloadavg()[0])
            command = [python, __file__, "--child", "--rows", str(args.rows), "--keys", str(args.keys),
                       "--batches", str(args.batches), "--warmup", str(args.warmup), "--rule", str(rule),
                       "--watermark-ms", str(kafka_e2e.WATERMARK_MS)] + (["--split"] if args.split else [])  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            run = json.loads(done.stdout.strip().splitlines()[-1])
            runs[python].append(run)
            said = f"round {round_index} {run['checkout']}: {run['cpu_s_p50']} CPU s per micro-batch, "
            said += f"{run['alerts_per_batch']} alerts, output {run['output_sha256']}, {run.get('split_cpu_s_p50')}"
            print(said, flush=True)
    report = {
        "rows_per_batch": args.rows,
        "keys": args.keys,
        "batches_per_run": args.batches,
        "rounds": args.rounds,
        "load_average_at_each_run": [round(v, 1) for v in loads],
        "runs": {
            python: {
                "checkout": found[0]["checkout"],
                "cpu_s_per_batch_p50": round(statistics.median(c for r in found for c in r["cpu_s_per_batch"]), 4),
                "alerts_per_batch": found[0]["alerts_per_batch"],
                "output_sha256": sorted({r["output_sha256"] for r in found}),
                "each_run": found,
            }
            for python, found in runs.items()
        },
    }
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    for python, found in report["runs"].items():
        print(python, found["checkout"], found["cpu_s_per_batch_p50"], "CPU s per micro-batch (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
