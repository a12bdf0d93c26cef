"""Runs MATCH_RECOGNIZE queries on Flink SQL in batch mode, inside bench/.venv-flink (never imported by cep).

    bench/.venv-flink/bin/python bench/peers/flink_runner.py SPEC.json OUT.json

SPEC.json: ``{"warmup_csv": path, "work_dir": dir, "queries": {name: {"sql": text, "csv": path, "rows": n}}}``.
Each CSV has no header and ts as ``YYYY-MM-DD HH:MM:SS``. A query reads the table its entry names
(``"table"``, with ``"columns"`` in Flink's DDL, e.g. ``"user_id STRING, ts TIMESTAMP(3)"``), else ``ticks``
with the columns of bench/data.py's ticks (symbol, ts, price, volume); it is registered over the query's CSV.

OUT.json: ``{"startup": timing, "queries": {name: timing + {"rows": n, "output": [[...], ...]}
or {"error": sentence}}, "peak_rss_bytes": n}``, where a timing is ``{"wall_s", "cpu_s"}``; CPU is
this process plus the JVM (the JVM is the child that pyflink starts; its CPU comes from /proc, because
it is still running when we measure). Start-up is everything up to the end of one small warm-up query:
the JVM, the TableEnvironment, and the first job's planning and code generation.

Matches go to a CSV sink (``CREATE TABLE ... AS SELECT``), not through ``collect()``: collecting
iterates in Python, one gateway call per row, which would time pyflink's bridge, not Flink.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import resource
import shutil
import sys
import time

# The mini-cluster's heap. With the default (a quarter of the machine's memory) the JVM grows to 2-3 GB
# and runs no faster (measured here with PyFlink 2.3); 2 GB leaves room for 1M buffered rows.
JVM_HEAP = "-Xmx2g"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

TICKS_COLUMNS = "symbol STRING, ts TIMESTAMP(3), price DOUBLE, volume BIGINT"
TABLE_DDL = """CREATE TEMPORARY TABLE {table} ({columns})
WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')"""
SINK_DDL = """CREATE TABLE {name} WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')
AS {select}"""
# The warm-up: a small MATCH_RECOGNIZE, so that start-up includes loading the planner and the CEP operator.
WARMUP_SQL = """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts MEASURES A.ts AS a_ts ONE ROW PER MATCH
  PATTERN (A B) DEFINE B AS price > PREV(price))"""


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (field 3 onwards), or None if the process has ended."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def descendants(pid: int) -> list[int]:
    """Process ids below ``pid`` (the JVM and anything it started), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = stat_fields(int(entry))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def child_cpu_seconds() -> float:
    """User + system CPU seconds of the running descendants (the JVM)."""
    total = 0
    for fields in filter(None, map(stat_fields, descendants(os.getpid()))):
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / CLOCK_TICKS


def peak_rss_bytes() -> int:
    """Peak resident set of this process plus the JVM's (VmHWM: the high-water mark)."""
    total = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


class Stopwatch:
    """Wall and CPU (this process + the JVM) between start() and stop()."""

    def start(self) -> Stopwatch:
        self.wall, self.cpu = time.perf_counter(), time.process_time() + child_cpu_seconds()
        return self

    def stop(self) -> dict:
        return {
            "wall_s": time.perf_counter() - self.wall,
            "cpu_s": time.process_time() + child_cpu_seconds() - self.cpu,
        }


def run_query(
    env, name: str, sql: str, csv_path: str, work_dir: str, table: str = "ticks", columns: str = TICKS_COLUMNS
) -> list[list[str]]:
    """Registers ``table`` over ``csv_path``, writes the matches to a CSV sink, returns its rows as text."""
    env.execute_sql(f"DROP TEMPORARY TABLE IF EXISTS {table}")
    env.execute_sql(TABLE_DDL.format(table=table, columns=columns, path=csv_path))
    out_dir = os.path.join(work_dir, f"out_{name}")
    shutil.rmtree(out_dir, ignore_errors=True)
    env.execute_sql(f"DROP TABLE IF EXISTS sink_{name}")
    env.execute_sql(SINK_DDL.format(name=f"sink_{name}", path=out_dir, select=sql)).wait()
    rows = []
    for part in sorted(glob.glob(os.path.join(out_dir, "**", "*"), recursive=True)):
        if os.path.isfile(part) and not os.path.basename(part).startswith("."):
            with open(part, newline="") as handle:
                rows.extend(csv.reader(handle))
    return rows


def first_line(error: BaseException) -> str:
    """The first line naming the cause: Flink wraps its reason in several Java stack traces."""
    lines = [line.strip() for line in str(error).splitlines() if "Exception:" in line]
    return (lines[-1] if lines else str(error).strip().splitlines()[0])[:500]


def main() -> int:
    began_wall = time.perf_counter()
    spec_path, out_path = sys.argv[1], sys.argv[2]
    with open(spec_path) as handle:
        spec = json.load(handle)
    os.environ["JVM_ARGS"] = f"{os.environ.get('JVM_ARGS', '')} {JVM_HEAP}".strip()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    run_query(env, "warmup", WARMUP_SQL, spec["warmup_csv"], spec["work_dir"])
    startup = {"wall_s": time.perf_counter() - began_wall, "cpu_s": time.process_time() + child_cpu_seconds()}
    results = {"startup": startup, "queries": {}}
    for name, query in spec["queries"].items():
        watch = Stopwatch().start()
        try:
            output = run_query(
                env,
                name,
                query["sql"],
                query["csv"],
                spec["work_dir"],
                query.get("table", "ticks"),
                query.get("columns", TICKS_COLUMNS),
            )
        except Exception as error:  # noqa: BLE001 - a rejected query is a result, reported by name
            results["queries"][name] = {"error": first_line(error)}
        else:
            results["queries"][name] = {**watch.stop(), "rows": query["rows"], "output": output}
        print(
            f"flink ({name}): { ({k: v for k, v in results['queries'][name].items() if k != 'output'}) }",
            file=sys.stderr,
            flush=True,
        )
    results["peak_rss_bytes"] = peak_rss_bytes()
    with open(out_path, "w") as handle:
        json.dump(results, handle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
