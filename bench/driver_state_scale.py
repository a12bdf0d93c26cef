"""State at scale in the driver layout (``cep stream --state driver``): what each open key costs the driver.

    .venv/bin/python bench/driver_state_scale.py                       # 100k and 1M keys
    .venv/bin/python bench/driver_state_scale.py --keys 10000,100000

bench/state_scale.py's user-session rule (``PATTERN (A B)`` per ``user_id``, fed logins only: every key keeps
one open partial match), published as ``cep stream`` publishes a rule set, run by ``DriverState`` (the driver
layout's own code, alerting/driver_state.py) in this process, one fresh child process per key count (so the
peak is its own). The driver layout keeps its state in the driver's Python, so this is where it lives; Spark's
read of the micro-batch (Arrow to the driver) is not in these figures.

1. fill: ``--fill-rows`` new keys per micro-batch until every key has its login;
2. steady: ``--steady-batches`` micro-batches of ``--steady-rows`` logins of keys already open, over every
   bucket (each touched bucket's state is decoded, run and encoded again, and goes to the micro-batch's segment);
3. restart: a new ``DriverState`` on the same checkpoint runs one more micro-batch: seconds to load the
   newest manifest and run it.

Reported per key count: the state's bytes (every bucket's encoded bytes) and per key, the state directory on
disk, the peak resident set (``VmHWM``) of the process, the median micro-batch time of each phase, wall and CPU
(the machine is shared: compare CPU seconds; the load average is reported). --json (default
bench/results-driver-state-scale.json).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import state_scale  # bench/, beside this file: its rule

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results-driver-state-scale.json"

QUERY = "-- name: sessions\n" + state_scale.QUERY
START_S = state_scale.START_S
TYPES = {"user_id": "VARCHAR", "ts": "TIMESTAMP", "kind": "VARCHAR"}
HOUR_US = 3_600_000_000


def frame(users: list[int], first_ms: int):
    """Logins of ``users``, one millisecond apart from ``first_ms``, as ``driver_input`` brings them."""
    import pandas as pd

    from cep.spark_bridge.alerting.rule_set import FILE
    from cep.spark_bridge.spark.columns import EVENT_US, RAW, REJECT

    times_ms = [first_ms + i for i in range(len(users))]
    out = pd.DataFrame(
        {
            "user_id": [f"u{u:08d}" for u in users],
            "ts": pd.to_datetime(times_ms, unit="ms"),
            "kind": ["login"] * len(users),
        }
    )
    out[EVENT_US] = [ms * 1000 for ms in times_ms]
    out[REJECT] = out[RAW] = out[FILE] = None
    return out


def peak_rss_kb() -> int:
    with open("/proc/self/status", encoding="utf-8") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))


def one(keys: int, args, work: Path) -> dict:
    """One key count, in this process (the child's)."""
    from cep.spark_bridge.alerting.driver_state import DriverState
    from cep.spark_bridge.alerting.rule_set import build_rule_set
    from cep.spark_bridge.alerting.store import RuleStore

    rules = work / "rules"
    rules.mkdir(parents=True)
    (rules / "sessions.sql").write_text(QUERY)
    payload, ruleset = build_rule_set(str(rules), input_types=TYPES, session_timeout_us=HOUR_US)
    assert not ruleset.errors, [str(e) for e in ruleset.errors]
    store = RuleStore(str(work / "store"))
    store.publish(payload)

    def make() -> DriverState:
        return DriverState(str(work / "ck"), store.directory, columns=list(TYPES), delay_ms=2000,
                           housekeeping_us=HOUR_US)  # fmt: skip

    driver = make()
    clock_ms, batch_id, fill, steady = START_S * 1000, 0, [], []
    for start in range(0, keys, args.fill_rows):
        users = list(range(start, min(keys, start + args.fill_rows)))
        began, cpu = time.perf_counter(), time.process_time()
        driver.run_frame(frame(users, clock_ms), batch_id)
        fill.append((time.perf_counter() - began, time.process_time() - cpu))
        clock_ms += len(users)
        batch_id += 1
    for index in range(args.steady_batches):
        users = [(index * 7919 + i * (keys // args.steady_rows or 1)) % keys for i in range(args.steady_rows)]
        began, cpu = time.perf_counter(), time.process_time()
        driver.run_frame(frame(users, clock_ms), batch_id)
        steady.append((time.perf_counter() - began, time.process_time() - cpu))
        clock_ms += len(users)
        batch_id += 1
    gauges = driver.gauges()
    began = time.perf_counter()
    make().run_frame(frame(list(range(args.steady_rows)), clock_ms), batch_id)
    restart_s = time.perf_counter() - began
    state_dir = work / "ck" / "driver-state"
    return {
        "keys": keys,
        "state_bytes": gauges["state_bytes"],
        "bytes_per_key": round(gauges["state_bytes"] / keys, 1),
        "buckets": gauges["state_rows"],
        "state_dir_bytes": sum(p.stat().st_size for p in state_dir.iterdir()),
        "peak_rss_mb": round(peak_rss_kb() / 1024, 1),
        "fill_batch_s_p50": round(statistics.median(wall for wall, _ in fill), 3),
        "fill_rows_per_cpu_s": round(keys / sum(cpu for _, cpu in fill)),
        "steady_batch_s_p50": round(statistics.median(wall for wall, _ in steady), 3),
        "steady_batch_cpu_s_p50": round(statistics.median(cpu for _, cpu in steady), 3),
        "steady_rows_per_cpu_s": round(args.steady_rows * len(steady) / sum(cpu for _, cpu in steady)),
        "restart_first_batch_s": round(restart_s, 2),
        "load_average": [round(v, 1) for v in os.getloadavg()],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="100000,1000000")
    parser.add_argument("--fill-rows", type=int, default=50_000)
    parser.add_argument("--steady-batches", type=int, default=5)
    parser.add_argument("--steady-rows", type=int, default=5_000)
    parser.add_argument("--json", default=str(RESULTS))
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child: one key count
    args = parser.parse_args()
    if args.one:
        work = Path(tempfile.mkdtemp(prefix="cep-driver-state-"))
        try:
            print(json.dumps(one(args.one, args, work)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    runs = []
    for keys in [int(k) for k in args.keys.split(",")]:
        command = [sys.executable, __file__, "--one", str(keys), "--fill-rows", str(args.fill_rows)]
        command += ["--steady-batches", str(args.steady_batches), "--steady-rows", str(args.steady_rows)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), flush=True)
    report = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "query": QUERY,
        "parameters": {k: getattr(args, k) for k in ("fill_rows", "steady_batches", "steady_rows")},
        "runs": runs,
        "command": "bench/driver_state_scale.py",
    }
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


def report(found: dict) -> list[str]:
    """docs/performance.md's section (bench/run.py calls it)."""
    p = found["parameters"]
    lines = [
        "## State on the driver at scale (bench/driver_state_scale.py)",
        "",
        f"Run {found['when']}: `cep stream --state driver`'s own code (`DriverState`) in one process, no Spark; "
        "bench/state_scale.py's session rule fed logins only, so every key keeps one open partial match; fill: "
        f"{p['fill_rows']:,} new keys per micro-batch; steady: {p['steady_batches']} micro-batches of "
        f"{p['steady_rows']:,} logins of open keys. CPU seconds, since the machine was shared (load: the 1-minute "
        "load average at the end).",
        "",
        "| keys | state bytes | bytes/key | on disk | peak RSS (MB) | fill rows/CPU-s | steady batch CPU s "
        "| restart to first batch (s, wall) | load |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in found["runs"]:
        lines.append(
            f"| {run['keys']:,} | {run['state_bytes']:,} | {run['bytes_per_key']} | {run['state_dir_bytes']:,} "
            f"| {run['peak_rss_mb']} | {run['fill_rows_per_cpu_s']:,} | {run['steady_batch_cpu_s_p50']} "
            f"| {run['restart_first_batch_s']} | {run['load_average'][0]} |"
        )
    return lines


if __name__ == "__main__":
    sys.exit(main())
