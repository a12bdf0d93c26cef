"""The alerting service's per-bucket step (``AlertStep``, spark_bridge/alerting/worker.py) in-process, with its
column-wise rules on the column-wise step against every rule per key, for docs/performance.md.

    .venv/bin/python bench/alerting_worker.py                  # 200,000 ticks, 1,000 symbols, 6 micro-batches
    .venv/bin/python bench/alerting_worker.py --rows 400000 --repeat 1

A rule set of bench/run.py's queries on one PARTITION BY (symbol): b, c, d, e and h, then with the V-shape (a), then
the V-shape alone (its runs before the last item stream column-wise too: docs/streaming.md, "The V shape"). The
ticks of bench/data.py go through ``Explode`` and are grouped by (partition spec, bucket of keys) as Spark groups
them (64 buckets; a CRC-32 places keys here, a Murmur3 hash on Spark), micro-batch by micro-batch in time order
(watermark delay 5 s, session timeout 1 hour, then empty micro-batches that fire the timers). Only the ``AlertStep``
calls are timed (``time.process_time``, best of --repeat): input rows per CPU-second of the bucket calls, with the
column-wise rules on (``AlertStep(column_wise=True)``, the service's default) and off (every rule on its per-key
Pike VM, what the service ran before). Both runs must give the same alerts (match ids included).
Writes bench/results-alerting-worker.json; bench/run.py's report puts it on docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

RESULTS = REPO / "bench" / "results-alerting-worker.json"
BUCKETS = 64  # spark_bridge/spark/buckets.py's KEY_BUCKETS
DELAY_MS = 5_000
SESSION_US = 3_600_000_000
COLUMN_WISE_RULES = "bcdeh"
V_SHAPE_RULE = "a"


class _State:
    """What ``applyInPandasWithState`` hands the function for one group (bytes kept between micro-batches)."""

    def __init__(self, value, watermark_ms: int) -> None:
        self.value, self.watermark_ms, self.timeout = value, watermark_ms, None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value) -> None:
        self.value = tuple(value)

    def remove(self) -> None:
        self.value = None

    def setTimeoutTimestamp(self, ms: int) -> None:  # noqa: N802 - Spark's name
        self.timeout = ms

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802
        return self.watermark_ms


def rule_set(directory: Path, letters: str, columns_types: dict) -> str:
    """Publish the rules of ``letters`` (bench/run.py's queries); returns the store directory."""
    from run import QUERIES

    from cep.spark_bridge.alerting.rule_set import build_rule_set
    from cep.spark_bridge.alerting.store import RuleStore

    rules = directory / "rules"
    rules.mkdir(parents=True)
    for letter in letters:
        (rules / f"q{letter}.sql").write_text(f"-- name: {letter}\n{QUERIES[letter][1]}\n", encoding="utf-8")
    payload, loaded = build_rule_set(str(rules), input_types=columns_types, session_timeout_us=SESSION_US)
    assert not loaded.errors, [str(e) for e in loaded.errors]
    store = RuleStore(str(directory / "store"))
    store.publish(payload)
    return store.directory


def run(store_dir: str, batches: list, *, column_wise: bool) -> tuple[float, list[tuple], dict]:
    """(CPU seconds in the bucket calls, the alerts, the routes of the rules)."""
    import pandas as pd

    from cep.spark_bridge.alerting.rule_set import KIND_MATCH, PKEY, SPEC
    from cep.spark_bridge.alerting.worker import AlertStep, Explode, runtime_for
    from cep.spark_bridge.spark.columns import EVENT_US, KIND

    columns = list(batches[0].columns)
    explode = Explode(store_dir, columns)
    # keys release up to their own bound, as on Spark
    step = AlertStep(store_dir, 3_600_000_000, BUCKETS, column_wise=column_wise, release_delay_ms=DELAY_MS)
    states: dict = {}
    timers: dict = {}
    watermark_ms, max_ms = 0, None
    cpu = 0.0
    alerts: list[tuple] = []
    for pdf in batches:
        groups = {}
        if len(pdf):
            exploded = pd.concat(list(explode(iter([pdf]))), ignore_index=True)
            exploded["bucket"] = [zlib.crc32(k.encode()) % BUCKETS for k in exploded[PKEY]]
            groups = {k: f.drop(columns="bucket").reset_index(drop=True) for k, f in exploded.groupby([SPEC, "bucket"])}
        calls = list(groups.items()) + [
            (k, None) for k, t in sorted(timers.items()) if k not in groups and watermark_ms > t
        ]
        for key, frame in calls:
            state = _State(states.get(key), watermark_ms)
            started = time.process_time()
            out = list(step(key, iter([] if frame is None else [frame]), state))
            cpu += time.process_time() - started
            if state.value is None:
                states.pop(key, None)
                timers.pop(key, None)
            else:
                states[key], timers[key] = state.value, state.timeout
            for part in out:
                matched = part[part[KIND] == KIND_MATCH]
                alerts += list(zip(matched["rule_id"], matched["match_id"], matched["measures"]))
        if len(pdf):
            ms = int(pdf[EVENT_US].max()) // 1000
            max_ms = ms if max_ms is None else max(max_ms, ms)
            watermark_ms = max(watermark_ms, max_ms - DELAY_MS)
    runtime = runtime_for(store_dir, "0")
    routes = {rule_id: runtime.rule(rule_id).route.stream for rule_id in runtime.entries}
    return cpu, sorted(alerts), routes


def micro_batches(rows: int, symbols: int, count: int) -> list:
    """The ticks as pandas frames with the event time in µs (what ``Explode`` gets on Spark)."""
    import numpy as np
    from data import generate

    table = generate(rows, symbols=symbols).to_pandas()
    table["ts"] = table["ts"].astype("datetime64[us]")
    table["__cep_event_us"] = table["ts"].to_numpy().astype("datetime64[us]").astype(np.int64)
    size = -(-len(table) // count)
    frames = [table.iloc[i * size : (i + 1) * size].reset_index(drop=True) for i in range(count)]
    return frames + [table.iloc[0:0]] * 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--symbols", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", default=str(RESULTS))
    args = parser.parse_args(argv)
    from cep.spark_bridge.spark.columns import EVENT_US

    batches = micro_batches(args.rows, args.symbols, args.batches)
    batches = [b.rename(columns={"__cep_event_us": EVENT_US}) for b in batches]
    types = {"symbol": "VARCHAR", "ts": "TIMESTAMP", "price": "DOUBLE", "volume": "BIGINT"}
    results: dict = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "params": {k: v for k, v in vars(args).items() if k != "json"},
        "sets": {},
    }
    for letters in (COLUMN_WISE_RULES, COLUMN_WISE_RULES + V_SHAPE_RULE, V_SHAPE_RULE):
        with tempfile.TemporaryDirectory() as tmp:
            store_dir = rule_set(Path(tmp), letters, types)
            entry: dict = {"rules": list(letters)}
            outputs = {}
            for column_wise in (False, True):
                best = None
                for _ in range(args.repeat):
                    cpu, alerts, routes = run(store_dir, batches, column_wise=column_wise)
                    best = cpu if best is None else min(best, cpu)
                outputs[column_wise] = alerts
                name = "column_wise" if column_wise else "per_key"
                entry[name] = {"cpu_s": round(best, 3), "rows_per_cpu_s": round(args.rows / best)}
                entry["routes"] = routes
            entry["alerts"] = len(outputs[True])
            entry["same_alerts"] = outputs[True] == outputs[False]
            entry["speedup"] = round(entry["per_key"]["cpu_s"] / entry["column_wise"]["cpu_s"], 2)
            results["sets"][letters] = entry
            print(
                f"rules {letters}: per key {entry['per_key']['rows_per_cpu_s']:>9,} rows/CPU-s, column-wise "
                f"{entry['column_wise']['rows_per_cpu_s']:>9,} ({entry['speedup']}x), {entry['alerts']:,} alerts, "
                f"same: {entry['same_alerts']}"
            )
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0 if all(e["same_alerts"] for e in results["sets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
