"""DEFINE conditions on times (interval arithmetic) column-wise against the Pike VM, over generated sensor readings.

    .venv/bin/python bench/time_conditions.py                    # 1M readings, the VM on 200k of them
    .venv/bin/python bench/time_conditions.py --rows 200000 --vm-rows 50000 --repeats 1

- patterns/sensor_gap.sql as shipped: ``GAP AS ts - PREV(ts) >= INTERVAL '10' MINUTE`` (the regex fast path);
- a time between two variables' rows: ``C.ts - A.ts <= INTERVAL '2' MINUTE`` (the sequence engine).

Until the kernels evaluated intervals, both ran on the Pike VM ("IntervalLiteral is not evaluated
column-wise"): the VM's figure, measured in the same run on the same rows, is the "before". Figures are
input events per CPU-second of this process (median of ``--repeats``), for a list of dicts (Python
datetimes) and a pyarrow Table (``timestamp[us]``); every column-wise output is compared with the VM's on
the rows both ran. Results: bench/results-time-conditions.json; bench/run.py's report writes their section
of docs/performance.md (``time_conditions_report``) (this script rewrites the report when bench/results.json exists).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import cep  # noqa: E402
from bench import run as bench_run  # noqa: E402
from bench.alert_rules import timed  # noqa: E402

RESULTS = HERE / "results-time-conditions.json"
SENSORS = 2_000
# Each reading comes 20 s to 2 min after the one before (with microseconds); one in 200 after a gap of
# 10 to 60 minutes, which sensor_gap.sql reports.
GAP_SHARE = 0.005

QUERIES = {
    "sensor_gap": (
        "patterns/sensor_gap.sql: a reading 10 minutes or more after the one before (ts - PREV(ts))",
        (REPO / "patterns" / "sensor_gap.sql").read_text(),
    ),
    "three_steps": (
        "three readings over 20.0, each within 2 minutes of the first (C.ts - A.ts)",
        """
SELECT * FROM readings MATCH_RECOGNIZE (
  PARTITION BY sensor ORDER BY ts
  MEASURES A.ts AS first_ts, C.ts AS last_ts, C.ts - A.ts AS took
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B C)
  DEFINE A AS value > 20.0, B AS value > 20.0 AND B.ts - A.ts <= INTERVAL '2' MINUTE,
         C AS value > 20.0 AND C.ts - A.ts <= INTERVAL '2' MINUTE)""",
    ),
}


def readings(rows: int, seed: int = 19) -> pa.Table:
    """``rows`` readings of ``SENSORS`` sensors, each sensor's in time order, interleaved as a feed."""
    rng = np.random.default_rng(seed)
    sensor = rng.integers(0, SENSORS, rows)
    steps = rng.integers(20_000_000, 120_000_000, rows)
    gaps = rng.random(rows) < GAP_SHARE
    steps[gaps] = rng.integers(600_000_000, 3_600_000_000, int(gaps.sum()))
    order = np.argsort(sensor, kind="stable")
    micros = np.empty(rows, dtype=np.int64)
    by_sensor = np.cumsum(steps[order])
    starts = np.searchsorted(sensor[order], np.arange(SENSORS))
    first = np.repeat(
        by_sensor[np.minimum(starts, rows - 1)] - steps[order][np.minimum(starts, rows - 1)],
        np.diff(np.append(starts, rows)),
    )
    micros[order] = by_sensor - first
    base = int((dt.datetime(2024, 3, 1) - dt.datetime(1970, 1, 1)) / dt.timedelta(microseconds=1))
    feed = np.argsort(micros, kind="stable")  # the feed arrives in time order, sensors interleaved
    return pa.table(
        {
            "sensor": pa.array([f"S{k:04d}" for k in sensor[feed]]),
            "ts": pa.array(micros[feed] + base, type=pa.timestamp("us")),
            "value": pa.array(np.round(rng.normal(20.0, 2.0, rows), 2)),
        }
    )


def on_vm(query: cep.Query, data):
    return cep.compile(query.text, column_wise=False).run(data)


def measure(name: str, text: str, table: pa.Table, vm_rows: int, repeats: int) -> dict:
    query = cep.compile(text)
    rows = table.to_pylist()
    subset = rows[:vm_rows]
    path = next((line.strip() for line in query.explain().splitlines() if line.strip().startswith("path:")), "?")
    arrow_wall, arrow_cpu, arrow_out = timed(lambda: query.run(table), repeats)
    list_wall, list_cpu, list_out = timed(lambda: query.run(rows), repeats)
    _, vm_cpu, vm_out = timed(lambda: on_vm(query, subset), 1)
    _, small_cpu, small_out = timed(lambda: query.run(subset), repeats)
    same = small_out == vm_out and arrow_out.to_pylist() == list_out
    n, m = len(rows), len(subset)
    return {
        "title": QUERIES[name][0],
        "text": text.strip(),
        "path": path,
        "rows": n,
        "vm_rows": m,
        "matches": len(list_out),
        "vm_matches": len(vm_out),
        "same_output": same,
        "arrow_eps_per_cpu": n / arrow_cpu,
        "arrow_eps_wall": n / arrow_wall,
        "list_eps_per_cpu": n / list_cpu,
        "list_eps_wall": n / list_wall,
        "vm_eps_per_cpu": m / vm_cpu,
        "subset_eps_per_cpu": m / small_cpu,
        "list_over_vm": (n / list_cpu) / (m / vm_cpu),
        "arrow_over_vm": (n / arrow_cpu) / (m / vm_cpu),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--vm-rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-report", action="store_true", help="do not rewrite docs/performance.md")
    args = parser.parse_args(argv)
    table = readings(args.rows)
    results = {
        "rows": args.rows,
        "sensors": SENSORS,
        "gap_share": GAP_SHARE,
        "vm_rows": min(args.vm_rows, args.rows),
        "repeats": args.repeats,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "queries": {},
    }
    for name, (_, text) in QUERIES.items():
        results["queries"][name] = res = measure(name, text, table, args.vm_rows, args.repeats)
        print(
            f"{name}: {res['path']}\n  list {res['list_eps_per_cpu']:,.0f}/CPU-s, "
            f"arrow {res['arrow_eps_per_cpu']:,.0f}, "
            f"VM {res['vm_eps_per_cpu']:,.0f} ({res['list_over_vm']:.1f}x), matches {res['matches']:,}, "
            f"same as the VM: {res['same_output']}",
            flush=True,
        )
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    if not args.no_report and bench_run.RESULTS.exists():
        bench_run.main(["--report-only"])
        print(f"rewrote {bench_run.DOC.relative_to(REPO)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
