"""``make bench``: generate the tick data, run every measurement, write docs/performance.md.

    .venv/bin/python bench/run.py                 # 1M rows, and 10M for the V-shape and Spark (~15 minutes)
    .venv/bin/python bench/run.py --rows 200000 --large-rows 1000000   # quicker
    .venv/bin/python bench/run.py --no-spark --no-peers
    .venv/bin/python bench/run.py --queries-only      # queries (a)-(h) only, printed (no report written)

Every figure is the median of several runs (``--repeats``), in input events per CPU-second (Spark:
per wall-second); every ratio compares two figures taken in this run on the same rows. The rows are
``bench/data.py``'s ticks (100 symbols, deterministic, Parquet, cached in bench/data/).

Measured:
- queries (a)-(f), and (g): (a) with ALL ROWS PER MATCH, on the path each takes, and on the VM
  (Python columns, --rows);
- the V-shape over --large-rows: ``Query.run(pyarrow.Table)`` (columns end to end), the fast path
  on Python lists, and the hand-written Python loop (the ceiling) on the same rows;
- ``Query.on_spark`` on local[2] for (a) over --rows and --large-rows, step by step (read, shuffle,
  replay), with CPU seconds and peak RSS of the process tree;
- pandas-match-recognize on (a), installed into bench/.venv-peers (never a dependency of cep), with
  whether its output equals ours;
- the hostile patterns of the matcher issue (bench/hostile.py), 10k vs 100k rows.
- query (a) from the --large-rows log written as a Delta table partitioned by day (bench/delta.py), beside
  Parquet, on both engines: whole, column-pruned and partition-pruned reads (``--no-delta`` skips it).
- PyFlink's MATCH_RECOGNIZE on (a)-(g) in batch mode, installed into bench/.venv-flink (bench/peers/flink.py),
  against cep on the same rows, and against the Spark replay of (a) end to end (``--no-flink`` skips it).

The benches run apart (minutes each) add their sections from their own result files when present: the
alert rules (bench/alert_rules.py, ``make bench-rules``), Kafka (bench/kafka_e2e.py, bench/kafka_rates.py; cep
beside Spark's floor: bench/kafka_floor.py) and state at scale (bench/state_scale.py, ``make bench-state``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

import cep  # noqa: E402
from bench import data as bench_data  # noqa: E402
from bench import delta as delta_bench  # noqa: E402
from bench import procmem  # noqa: E402
from bench import rule_loading as rule_loading_bench  # noqa: E402
from bench.peers import flink as flink_peer  # noqa: E402
from cep.matcher.plan import CompiledQuery  # noqa: E402
from cep.matcher.rows.tables import arrow_to_columns  # noqa: E402
from cep.matcher.vector import fastpath, sequence_plan  # noqa: E402

DATA_DIR = HERE / "data"
PEER_VENV = HERE / ".venv-peers"
RESULTS = HERE / "results.json"
DOC = REPO / "docs" / "performance.md"

QUERIES = {
    "a": (
        "V-shape A B+ C+ with PREV",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, LAST(B.price) AS bottom, LAST(C.ts) AS end_ts, COUNT(*) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))""",
    ),
    "b": (
        "falling run, cross-variable and LAST(v, 1) (Flink docs)",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES START_ROW.ts AS start_ts, LAST(PRICE_DOWN.ts) AS bottom_ts, LAST(PRICE_UP.ts) AS end_ts
  ONE ROW PER MATCH AFTER MATCH SKIP TO LAST PRICE_UP
  PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
  DEFINE PRICE_DOWN AS (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price)
                       OR PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
         PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1))""",
    ),
    "c": (
        "3-step sequence, conditions on volume",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES A.ts AS a_ts, C.ts AS c_ts, C.volume AS c_volume
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B C)
  DEFINE A AS A.volume >= 4000, B AS B.volume < PREV(B.volume),
    C AS C.volume > PREV(C.volume) AND C.price > PREV(C.price))""",
    ),
    "d": (
        "price drop WITHIN INTERVAL '10' MINUTE",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES A.ts AS start_ts, C.ts AS drop_ts, A.price - C.price AS fall
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B*? C) WITHIN INTERVAL '10' MINUTE
  DEFINE C AS C.price < A.price - 0.10)""",
    ),
    "e": (
        "running aggregate in DEFINE (volume bars)",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, B.ts AS end_ts, SUM(A.volume) + B.volume AS volume
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A+ B)
  DEFINE A AS SUM(A.volume) < 10000, B AS SUM(A.volume) + B.volume >= 10000)""",
    ),
    "f": (
        "hostile (A|B)* C, C never holds",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES COUNT(*) AS n
  ONE ROW PER MATCH
  PATTERN ((A | B)* C)
  DEFINE A AS price > PREV(price), B AS price <= PREV(price), C AS volume > 5000)""",
    ),
    "g": (
        "V-shape, ALL ROWS PER MATCH (running measures)",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, LAST(B.price) AS bottom, CLASSIFIER() AS step, COUNT(*) AS n
  ALL ROWS PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))""",
    ),
    "h": (
        "absence: a block trade not followed by another within a minute (A !B WITHIN)",
        """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES A.ts AS block_ts, A.volume AS block_volume, COUNT(B.*) AS quiet_ticks, MATCH_STATUS() AS status
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A !B) WITHIN INTERVAL '1' MINUTE
  DEFINE A AS volume >= 5000, B AS volume >= 4800)""",
    ),
}
# Queries the peers cannot run: (h)'s absence `!B` is cep's extension (Flink SQL has no such term).
NO_PEER = frozenset({"h"})
PEER_QUERIES = {name: query for name, query in QUERIES.items() if name not in NO_PEER}


# ------------------------------------------------------------------------------------------ helpers


def median_seconds(function, repeats: int, clock=time.process_time):
    """Median CPU seconds of this process (single-threaded work: robust when the machine is shared)."""
    timings, result = [], None
    for _ in range(repeats):
        began = clock()
        result = function()
        timings.append(clock() - began)
    return statistics.median(timings), result


def ensure_data(rows: int) -> Path:
    path = DATA_DIR / f"ticks_{rows}.parquet"
    if not path.exists():
        bench_data.write(rows, path)
    return path


def load_columns(path: Path, rows: int):
    import pyarrow.parquet as pq

    table = pq.read_table(path).slice(0, rows)
    return table, arrow_to_columns(table)


def run_path(query: cep.Query, columns: dict, fast: bool):
    plan = query.plan if fast else CompiledQuery(query.statement, column_wise=False)
    return plan.run_columns(columns)[1]


def path_taken(query: cep.Query, columns: dict) -> str:
    machine = query.plan.machine(tuple(columns))
    plan, reasons = fastpath.analyze(query.statement, machine, tuple(columns))
    if plan is not None:
        return "fast"
    if sequence_plan.analyze(query.statement, machine, tuple(columns))[0] is not None:
        return "fast"  # the column-wise sequence engine; the report names it
    return "VM (" + "; ".join(reasons) + ")"


def v_shape_loop(columns: dict) -> list[tuple]:
    """The V-shape of query (a), written by hand: the ceiling for any engine in Python.

    Same output as the query (symbol, first A ts, last B price, last C ts, row count), same order.
    Rows arrive in time order per symbol (checked), so grouping keeps each symbol's rows sorted.
    """
    groups: dict = {}
    for symbol, ts, price in zip(columns["symbol"], columns["ts"], columns["price"]):
        group = groups.get(symbol)
        if group is None:
            group = groups[symbol] = ([], [])
        group[0].append(ts)
        group[1].append(price)
    out = []
    for symbol, (times, prices) in groups.items():
        n, i = len(prices), 0
        while i < n:
            j = i + 1
            while j < n and prices[j] < prices[j - 1]:
                j += 1
            if j == i + 1:  # no falling row after A
                i += 1
                continue
            k = j
            while k < n and prices[k] > prices[k - 1]:
                k += 1
            if k == j:  # no rising row: no start inside this fall can match either
                i = j
                continue
            out.append((symbol, times[i], prices[j - 1], times[k - 1], k - i))
            i = k
    return out


# ------------------------------------------------------------------------------------- measurements


# The Pike VM is slow on queries that read the match history (many live partial matches): those run
# on fewer rows, so that the whole bench stays within a few minutes.
VM_REPEATS = 9
VM_ROWS = {"b": 20_000, "d": 5_000, "e": 20_000, "f": 20_000}


def bench_queries(columns: dict, small: dict, rows: int, small_rows: int, repeats: int) -> list[dict]:
    results = []
    for name, (title, text) in QUERIES.items():
        query = cep.compile(text)
        path = path_taken(query, columns)
        count = min(VM_ROWS.get(name, small_rows), small_rows)
        target = {k: v[:count] for k, v in small.items()}
        entry = {"query": name, "title": title, "path": path, "small_rows": count}
        # the VM runs take a tenth of a second: more repeats give a steadier median on a shared machine
        vm_s, vm_out = median_seconds(lambda: run_path(query, target, False), max(repeats, VM_REPEATS))
        entry.update(small_vm_eps=count / vm_s, matches=len(vm_out))
        if path == "fast":
            fast_s, fast_out = median_seconds(lambda: run_path(query, target, True), repeats)
            entry.update(small_fast_eps=count / fast_s, fast_over_vm=vm_s / fast_s, same_output=fast_out == vm_out)
            # the fast path is fast enough for every row, whatever the VM's pace
            seconds, out = median_seconds(lambda: run_path(query, columns, True), repeats)
            entry.update(rows=rows, fast_eps=rows / seconds, full_matches=len(out))
        print(f"  ({name}) {json.dumps({k: v for k, v in entry.items() if k != 'title'}, default=str)}", flush=True)
        results.append(entry)
    return results


def bench_v_shape(path: Path, rows: int, repeats: int) -> dict:
    """Query (a) over ``rows`` rows: ``Query.run`` from a pyarrow Table (columns all the way, reading the
    Parquet file included), the fast path handed Python lists, and the hand-written loop over the same
    Python lists (their conversion is not counted against the loop: it is the loop's natural input)."""
    import pyarrow.parquet as pq

    query = cep.compile(QUERIES["a"][1])
    read_s, table = median_seconds(lambda: pq.read_table(path), repeats)
    arrow_s, arrow_out = median_seconds(lambda: query.run(table), repeats)
    peak_after_arrow = peak_rss_bytes()
    convert_began = time.process_time()
    columns = {name: table.column(name).to_pylist() for name in ("symbol", "ts", "price")}
    convert_s = time.process_time() - convert_began
    loop_s, loop_out = median_seconds(lambda: v_shape_loop(columns), repeats)
    fast_s, fast_out = median_seconds(lambda: run_path(query, columns, True), repeats)
    ours = [tuple(row.values()) for row in arrow_out.to_pylist()]
    result = {
        "rows": rows,
        "loop_eps": rows / loop_s,
        "fast_eps": rows / fast_s,
        "fast_over_loop": loop_s / fast_s,
        "end_to_end_arrow_eps": rows / arrow_s,
        "arrow_over_loop": loop_s / arrow_s,
        "read_parquet_s": read_s,
        "arrow_with_read_eps": rows / (arrow_s + read_s),
        "arrow_to_lists_s": convert_s,
        "same_output_as_loop": ours == loop_out and [tuple(r) for r in fast_out] == loop_out,
        "matches": len(ours),
        "peak_rss_after_arrow_bytes": peak_after_arrow,
        "peak_rss_bytes": peak_rss_bytes(),
    }
    print(f"  V-shape: {json.dumps(result)}", flush=True)
    return result


def peak_rss_bytes() -> int:
    """The peak resident set of this process so far (Linux reports kB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class TreeUsage:
    """CPU seconds and the largest total resident set of this process and all its descendants (Spark's
    JVM and Python workers) while a block runs; the memory sampling is ``bench/procmem.py``'s."""

    def __enter__(self):
        self._memory = procmem.TreeMemory(interval_s=0.2).start()  # often enough for a few-second job
        self._cpu_before = _tree_cpu_s()
        return self

    def __exit__(self, *exc):
        self._memory.stop()
        self.cpu_s = _tree_cpu_s() - self._cpu_before
        self.peak_rss = self._memory.peak_tree_rss_kb * 1024


def _tree_cpu_s() -> float:
    """utime + stime + the reaped children's cutime + cstime (Spark's short-lived Python workers) of the tree."""
    total = 0
    for pid in [os.getpid()] + procmem.descendants(os.getpid()):
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        total += sum(int(x) for x in text[text.rindex(")") + 2 :].split()[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def bench_spark(paths: dict[int, Path], repeats: int) -> dict:
    """``Query.on_spark`` of (a) on local[2] from Parquet, per row count, end to end (``count()`` of the
    matches), and what each step costs: reading alone, reading + the shuffle by symbol + the Arrow
    hand-over to Python (a no-op function), then the whole replay; wall time, CPU seconds of the whole
    process tree, and its peak resident set."""
    try:
        from cep.spark_bridge.spark.session import get_spark

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        began = time.perf_counter()
        spark = get_spark("local[2]", app_name="cep-bench")
        startup = time.perf_counter() - began
        query = cep.compile(QUERIES["a"][1])
        out: dict = {
            "startup_s": startup,
            "shuffle_partitions": int(spark.conf.get("spark.sql.shuffle.partitions")),
            "arrow_batch_rows": int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")),
        }

        def noop(batches):
            for batch in batches:
                yield batch.slice(0, 0)

        steps = {
            "read": lambda p: (
                spark.read.parquet(str(p)).select("symbol", "ts", "price").write.format("noop").mode("overwrite").save()
            ),
            "read_shuffle_python": lambda p: (
                lambda df: df.repartition(out["shuffle_partitions"], "symbol").mapInArrow(noop, df.schema).count()
            )(spark.read.parquet(str(p)).select("symbol", "ts", "price")),
            "replay": lambda p: query.on_spark(spark.read.parquet(str(p))).count(),
        }
        query.on_spark(spark.read.parquet(str(next(iter(paths.values()))))).count()  # warm the Python workers
        for rows, path in paths.items():
            entry: dict = {"rows": rows}
            for step, run in steps.items():
                walls, cpus, peak, result = [], [], 0, None
                for _ in range(repeats if step == "replay" else 1):
                    with TreeUsage() as usage:
                        began = time.perf_counter()
                        result = run(path)
                        walls.append(time.perf_counter() - began)
                    cpus.append(usage.cpu_s)
                    peak = max(peak, usage.peak_rss)
                entry[step] = {
                    "seconds": statistics.median(walls),
                    "cpu_s": statistics.median(cpus),
                    "peak_rss_bytes": peak,
                    "load_average": os.getloadavg()[0],
                }
                if step == "replay":
                    entry["matches"] = result
            entry.update(eps=rows / entry["replay"]["seconds"], seconds=entry["replay"]["seconds"])
            out[str(rows)] = entry
            print(f"  Spark local[2], {rows:,} rows: {json.dumps(entry)}", flush=True)
        out["queries"] = spark_per_query(spark, paths[min(paths)], min(paths), repeats)
        spark.stop()
    except Exception as error:  # noqa: BLE001 - the bench reports what failed and goes on
        out = {"error": f"{type(error).__name__}: {error}"}
        print(f"  Spark local[2]: {json.dumps(out)}", flush=True)
    return out


def spark_per_query(spark, parquet: Path, rows: int, repeats: int) -> dict:
    """The Spark replay of every query on the rows and text PyFlink runs (``bench/peers/flink.py``), for
    the end-to-end comparison with Flink in the same run: wall seconds (median), matches."""
    out = {}
    for q in flink_peer.peer_queries(PEER_QUERIES, rows):
        sql, _ = flink_peer.flink_text(q.text)
        path = str(flink_peer.first_rows(parquet, q.rows).parquet)
        query = cep.compile(sql)
        walls, matches = [], None
        for _ in range(repeats):
            began = time.perf_counter()
            matches = query.on_spark(spark.read.parquet(path)).count()
            walls.append(time.perf_counter() - began)
        out[q.name] = {"rows": q.rows, "seconds": statistics.median(walls), "matches": matches}
        print(f"  Spark local[2], ({q.name}) on Flink's rows: {json.dumps(out[q.name])}", flush=True)
    return out


PMR_OUR_REPEATS = 21


def bench_pandas_match_recognize(table, path: Path, rows: int, repeats: int) -> dict:
    python = PEER_VENV / "bin" / "python"
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "pandas-match-recognize==0.2.5", "pyarrow"], check=True
            )
        out = DATA_DIR / "pmr_out.json"
        subprocess.run(
            [str(python), str(HERE / "peers" / "pmr_runner.py"), str(path), str(rows), str(repeats), str(out)],
            check=True,
            timeout=1200,
        )
        peer = json.loads(out.read_text())
    except Exception as error:  # noqa: BLE001
        result = {"error": f"{type(error).__name__}: {error}"}
        print(f"  pandas-match-recognize: {json.dumps(result)}", flush=True)
        return result
    import pandas as pd

    query = cep.compile(QUERIES["a"][1])
    rows_table = table.slice(0, rows)  # the same rows the peer reads: the file's first ``rows``
    # ours takes milliseconds: many repeats make its median steady on a shared machine
    ours_s, ours = median_seconds(lambda: query.run(rows_table), max(repeats, PMR_OUR_REPEATS))
    # The peer's seconds are CPU seconds of its own process (it is single-threaded).
    ours_rows = [
        [
            r["symbol"],
            pd.Timestamp(r["start_ts"]).isoformat(),
            r["bottom"],
            pd.Timestamp(r["end_ts"]).isoformat(),
            r["n"],
        ]
        for r in ours.to_pylist()
    ]
    key = lambda r: (r[0], r[1] or "")  # noqa: E731
    peer_rows = peer["rows"]
    same = sorted(ours_rows, key=key) == sorted(peer_rows, key=key)
    peer_s = statistics.median(peer["seconds"])
    result = {
        "rows": rows,
        "peer_eps": rows / peer_s,
        "ours_eps": rows / ours_s,
        "ours_over_peer": peer_s / ours_s,
        "same_output": same,
        "peer_matches": len(peer_rows),
        "peer_runs": len(peer["seconds"]),
        "our_matches": len(ours_rows),
    }
    if not same:
        only_ours = [r for r in ours_rows if r not in peer_rows][:3]
        only_peer = [r for r in peer_rows if r not in ours_rows][:3]
        result["examples"] = {"only_ours": only_ours, "only_peer": only_peer}
    print(f"  pandas-match-recognize: {json.dumps(result, default=str)}", flush=True)
    return result


def bench_hostile() -> list[dict]:
    sys.path.insert(0, str(HERE))
    import hostile

    out = []
    try:
        hostile.main  # noqa: B018
    except AttributeError:
        return out
    for fast in (True, False):
        try:
            for entry in hostile.main(column_wise=fast):
                entry["path"] = "fast path enabled" if fast else "VM only"
                out.append(entry)
        except Exception as error:  # noqa: BLE001 - bench/hostile.py belongs to the matcher's tests
            print(
                f"  hostile patterns: not measured ({type(error).__name__}: {str(error).splitlines()[0]})", flush=True
            )
            return out
    return out


# ---------------------------------------------------------------------------------------- the report


def write_report(results: dict) -> None:
    v = results["v_shape"]
    lines = [
        "# Performance",
        "",
        "Written by `make bench` (`bench/run.py`) from `bench/results.json`; do not edit by hand.",
        f"Machine: {results['machine']}. Every figure is a median of {results['repeats']} runs ({VM_REPEATS} for the"
        f" VM's short runs, {PMR_OUR_REPEATS} for cep against pandas-match-recognize), in input",
        "events per CPU-second of the measuring process (single-threaded work; the machine is shared, so wall",
        "time is noisy), except Spark (wall time); every ratio compares two figures of the same run on the same rows.",
        "Data: `bench/data.py` ticks (100 symbols, one tick per symbol per second, random-walk prices), generated",
        "once per row count into `bench/data/` (Parquet, deterministic).",
        "",
        "![events per second, log scale](performance.svg)",
        "",
        f"## V-shape (query a) over {v['rows']:,} rows: columns end to end against the hand-written loop",
        "",
        "| what | events/s | ratio to the hand-written loop |",
        "| --- | ---: | ---: |",
        "| hand-written Python loop over Python lists (the ceiling; building the lists not counted) "
        f"| {v['loop_eps']:,.0f} | 1.00 |",
        "| `Query.run(pyarrow.Table)`: the fast path over the Arrow columns, result built as an Arrow table "
        f"| {v['end_to_end_arrow_eps']:,.0f} | {v['arrow_over_loop']:.2f} |",
        "| the same, reading the Parquet file included "
        f"| {v['arrow_with_read_eps']:,.0f} | {v['arrow_with_read_eps'] / v['loop_eps']:.2f} |",
        "| fast path handed Python lists (`plan.run_columns`, the list-of-dicts input) "
        f"| {v['fast_eps']:,.0f} | {v['fast_over_loop']:.2f} |",
        "",
        f"Same output as the hand-written loop: {v['same_output_as_loop']} ({v['matches']:,} matches). Reading the "
        f"Parquet file takes {v['read_parquet_s']:.2f} s; turning the three columns the loop reads into Python lists "
        f"takes {v['arrow_to_lists_s']:.1f} s, which `Query.run` on a table no longer does. Peak RSS of the bench "
        f"process (over its whole life, so every earlier measurement counts) after `Query.run` on the table: "
        f"{v['peak_rss_after_arrow_bytes'] / 1e9:.2f} GB; after building the Python lists for the loop: "
        f"{v['peak_rss_bytes'] / 1e9:.2f} GB.",
        "",
    ]
    lines += spark_report(results.get("spark_runs"))
    lines += [
        "## Queries (a)-(h)",
        "",
    ]
    if results.get("queries_run"):  # `bench/run.py --update-queries`: this table comes from a later run
        run = results["queries_run"]
        lines += [
            f"Measured apart from the other sections, on {run['date']} (`bench/run.py --update-queries`; load"
            f" average {', '.join(map(str, run['load_average']))} at its end "
            f"on {results['machine'].split(',')[1].strip()}).",
            "",
        ]
    lines += [
        "| query | path | rows | fast path events/s | VM events/s | fast / VM | same output |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for q in results["queries"]:
        fast = f"{q['small_fast_eps']:,.0f}" if "small_fast_eps" in q else "-"
        ratio = f"{q['fast_over_vm']:.1f}x" if "fast_over_vm" in q else "-"
        same = str(q.get("same_output", "-"))
        lines.append(
            f"| ({q['query']}) {q['title'].replace('|', chr(92) + '|')} | {q['path']} "
            f"| {q['small_rows']:,} | {fast} | {q['small_vm_eps']:,.0f} | {ratio} | {same} |"
        )
        if "fast_eps" in q:
            lines.append(
                f"| ({q['query']}) same, {q['rows']:,} rows | fast | {q['rows']:,} | {q['fast_eps']:,.0f} | | | |"
            )
    lines += ["", "## Peers", ""]
    pmr = results.get("pandas_match_recognize")
    if pmr and "error" not in pmr:
        lines += [
            "| engine, query (a) | rows | events/s | ours / theirs | same output |",
            "| --- | ---: | ---: | ---: | --- |",
            f"| pandas-match-recognize 0.2.5 (own venv, median of {pmr.get('peer_runs', 1)} runs) "
            f"| {pmr['rows']:,} | {pmr['peer_eps']:,.0f} | | |",
            f"| cep `Query.run(pyarrow.Table)` (median of {PMR_OUR_REPEATS} runs: it takes milliseconds) "
            f"| {pmr['rows']:,} | {pmr['ours_eps']:,.0f} | {pmr['ours_over_peer']:,.0f}x | {pmr['same_output']} |",
            "",
            "Both run on the same rows (the first rows of the 1M-row Parquet file), per CPU-second of their own",
            "process. pandas-match-recognize runs query (a) rewritten as `A.ts` and unqualified `price < PREV(price)`:",
            "with our text (`FIRST(A.ts)`, `B.price < PREV(B.price)`) version 0.2.5 returns NULL for every",
            "measure but `COUNT(*)` (its bug). It runs on a slice because it is slow (minutes per million rows).",
        ]
        if not pmr["same_output"]:
            lines.append(f"Differences (first rows): `{json.dumps(pmr.get('examples'), default=str)}`")
    elif pmr:
        lines.append(f"pandas-match-recognize: not measured ({pmr['error']}).")
    spark = results.get("spark")
    lines += flink_peer.report_lines(results.get("flink"), spark) + [""]
    if results.get("hostile"):
        lines += [
            "## Hostile patterns (bench/hostile.py): 10k vs 100k rows where nothing matches",
            "",
            "| pattern | path | 10k rows (s) | 100k rows (s) | ratio (linear = 10) |",
            "| --- | --- | ---: | ---: | ---: |",
        ]
    for h in results.get("hostile", []):
        lines.append(f"| `{h['pattern']}` | {h['path']} | {h['10k_s']:.3f} | {h['100k_s']:.3f} | {h['ratio']:.1f} |")
    lines += alert_rules_report()
    lines += alerting_worker_report()
    lines += time_conditions_report()
    lines += kafka_report()
    lines += webhook_drain_report()
    lines += state_reports()
    lines += stream_jvm_report()
    lines += delta_report(results)
    lines += rule_loading_report()
    lines += ["", "## Notes", ""] + [f"- {note}" for note in NOTES] + [""]
    DOC.write_text("\n".join(lines))


def delta_report(results: dict) -> list[str]:
    """The Delta section: this run's (make bench), else the last run of bench/delta.py alone."""
    found = results.get("delta")
    if found is None and delta_bench.RESULTS.exists():
        found = json.loads(delta_bench.RESULTS.read_text())
    return [""] + delta_bench.report(found) if found else []


def rule_loading_report() -> list[str]:
    """The rule-loading section, from the last run of bench/rule_loading.py (run apart: a few minutes)."""
    if not rule_loading_bench.RESULTS.exists():
        return []
    return rule_loading_bench.report(json.loads(rule_loading_bench.RESULTS.read_text()))


def state_reports() -> list[str]:
    """cep beside Spark's floor through Kafka, and state at scale: each from its own bench's last run."""
    import driver_state_scale
    import kafka_driver
    import kafka_floor
    import state_scale

    lines: list[str] = []
    # the newer of make bench-kafka's own run and the last run made for the floor alone (bench/kafka_e2e.py --json
    # bench/results-kafka-floor.json), of those that had the floor
    runs = [json.loads(path.read_text()) for path in (KAFKA_E2E, kafka_floor.RESULTS) if path.exists()]
    runs = [run for run in runs if any("floor" in step for step in run.get("steps", []))]
    if runs:
        lines += [""] + kafka_floor.report(max(runs, key=lambda run: run["when"]))
    if kafka_driver.RESULTS.exists():
        lines += [""] + kafka_driver.report(json.loads(kafka_driver.RESULTS.read_text()))
    if driver_state_scale.RESULTS.exists():
        lines += [""] + driver_state_scale.report(json.loads(driver_state_scale.RESULTS.read_text()))
    if state_scale.RESULTS.exists():
        lines += [""] + state_scale.report(json.loads(state_scale.RESULTS.read_text()))
    return lines


def stream_jvm_report() -> list[str]:
    """cep stream's driver JVM settings side by side, from bench/stream_cpu.py's runs with ``--jvm``."""
    import stream_cpu

    return stream_cpu.report()


def _two_queries(e2e: dict) -> bool:
    """Runs recorded before the stream became one query have no ``stream_layout``: they ran two."""
    return e2e.get("stream_layout", "two queries") == "two queries"


def _handover(e2e: dict) -> str:
    if _two_queries(e2e):
        return (
            "the alert is then committed to the alert files, read by a second (delivery) query at its next trigger "
            "and sent by each sink's lane."
        )
    return "the alert is then committed to the alert files and handed to each sink's lane in the same micro-batch."


def _batches_to_alert(e2e: dict) -> str:
    return "two to three" if _two_queries(e2e) else "one to two"


KAFKA_E2E = HERE / "results-kafka-e2e.json"
KAFKA_RATES = HERE / "results-kafka-rates.json"


def kafka_report() -> list[str]:
    """The Kafka section, from the runs of bench/kafka_e2e.py and bench/kafka_rates.py (run apart: minutes each)."""
    lines: list[str] = []
    if KAFKA_E2E.exists():
        lines += kafka_e2e_report(json.loads(KAFKA_E2E.read_text()))
    if KAFKA_RATES.exists():
        rates = json.loads(KAFKA_RATES.read_text())
        lines += [
            "",
            "### The broker and the clients alone (bench/kafka_rates.py)",
            "",
            f"{rates['messages']:,} messages of ~{rates['bytes_per_message']:.0f} bytes, 1 partition, confluent-kafka; "
            "the Python producer, not the broker, is the limit for alert volumes:",
            "",
            "| | messages/s |",
            "| --- | ---: |",
            f"| produce, acks=all, idempotent | {rates['produce']['msgs_per_s']:,.0f} |",
            "| produce in transactions, a commit per 1,000 "
            f"| {rates['produce_transactional_1000']['msgs_per_s']:,.0f} |",
            f"| consume, read_uncommitted | {rates['consume']['msgs_per_s']:,.0f} |",
            "| consume a transactional topic, read_committed "
            f"| {rates['consume_read_committed_txn']['msgs_per_s']:,.0f} |",
            "| Spark static read + `from_json` (warm session) "
            f"| {rates['spark_static_read_from_json']['msgs_per_s']:,.0f} |",
            "",
            "Spark's Kafka connector costs about 0.5 s of session start as cached jars (`spark.jars`), 1.6 s through "
            "Ivy (`spark.jars.packages`), which also resolves at every start (`bench/kafka_connector_startup.py`, "
            "`bench/results-kafka-connector.json`).",
        ]
    return lines


WEBHOOK_DRAIN = HERE / "results-webhook-drain.json"


def webhook_drain_report() -> list[str]:
    """The webhook lane's drain after an outage, before and after keep-alive and batches (bench/webhook_drain.py)."""
    if not WEBHOOK_DRAIN.exists():
        return []
    found = json.loads(WEBHOOK_DRAIN.read_text())
    before, after = found.get("before"), found.get("after")
    if not after:
        return []
    first = next(iter(after["runs"].values()))
    lines = [
        "",
        "## Webhook lane after an outage (bench/webhook_drain.py)",
        "",
        f"A backlog of {first['alerts']:,} alerts (an outage's worth) delivered by one webhook sink in micro-batches "
        f"of {after['micro_batch']}, as its lane delivers them, to an HTTP/1.1 receiver on 127.0.0.1 (Python's "
        "`ThreadingHTTPServer` with `TCP_NODELAY`, parsing every body). *Before*: the sink that opened a "
        "connection per request (`Connection: close`) and sent one alert per request unless told otherwise; "
        "*after*: one kept connection per sink, Alertmanager in lists of 64. Alerts per second of wall time, the "
        f"median of {first.get('repeats', 1)} runs; after: run {after['when']}, {after['machine']}"
        + (f"; before: run {before['when']}, {before['machine']}" if before else "")
        + ". Reproduce: `.venv/bin/python bench/webhook_drain.py` (and with an older checkout's interpreter, "
        "`--label before`). On 2 cores shared with other work the figures move by a factor of 2 between runs; "
        "the requests and connections do not. On loopback a new connection costs little: over a network each "
        "one adds a round trip, and TLS two more, so a kept connection gains more the farther the receiver is.",
        "",
        "| body format | before: alerts/s | requests | connections | after: alerts/s | requests | connections |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, run in after["runs"].items():
        old = (before or {}).get("runs", {}).get(label)
        was = f"{old['alerts_per_s']:,.0f} | {old['requests']:,} | {old['connections']:,}" if old else "- | - | -"
        lines.append(f"| {label} | {was} | {run['alerts_per_s']:,.0f} | {run['requests']:,} | {run['connections']:,} |")
    return lines


ALERT_RULES = HERE / "results-alert-rules.json"
TIME_CONDITIONS = HERE / "results-time-conditions.json"


def time_conditions_report() -> list[str]:
    """The section on interval arithmetic in DEFINE, from bench/time_conditions.py's run (a few minutes)."""
    if not TIME_CONDITIONS.exists():
        return []
    res = json.loads(TIME_CONDITIONS.read_text())
    lines = [
        "",
        "## Interval arithmetic on times in DEFINE (bench/time_conditions.py)",
        "",
        f"{res['rows']:,} generated sensor readings ({res['sensors']:,} sensors, a reading every 20 s to 2 min, "
        f"one in {round(1 / res['gap_share'])} after a gap of 10 to 60 minutes). Until the kernels evaluated "
        "intervals (timestamps as int64 microseconds), both queries ran on the Pike VM: its figure, on the first "
        f"{res['vm_rows']:,} rows in the same run, is the *before*. Events per CPU-second, median of "
        f"{res['repeats']} runs (the VM: one run); run {res['when']}, {res['machine']}. Reproduce: "
        "`.venv/bin/python bench/time_conditions.py`. Timestamps, dates and intervals are int64 ticks in the "
        "kernels (`matcher/vector/kernels.py`), so comparisons and `+`/`-` are exact integer operations; the list "
        "figure includes turning the dicts into columns (most of its time). sensor_gap.sql's measures read "
        "`PREV(GAP.ts)`, a row outside the match, so its output is built per partition from Python values: on a "
        "pyarrow Table that means converting the table to Python values, which is why the Table is slower there.",
        "",
        "| query | path (`cep explain`) | list of dicts | pyarrow Table | Pike VM (before) | list / VM | Table / VM "
        "| same output as the VM |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for query in res["queries"].values():
        lines.append(
            f"| {query['title']} | {query['path'].removeprefix('path: ').split(':')[0]} "
            f"| {query['list_eps_per_cpu']:,.0f} "
            f"| {query['arrow_eps_per_cpu']:,.0f} | {query['vm_eps_per_cpu']:,.0f} | {query['list_over_vm']:.1f}x "
            f"| {query['arrow_over_vm']:.1f}x | {query['same_output']} |"
        )
    return lines


ALERTING_WORKER = HERE / "results-alerting-worker.json"


def alerting_worker_report() -> list[str]:
    """The alerting worker's bucket calls, column-wise rules on and off (bench/alerting_worker.py's run)."""
    if not ALERTING_WORKER.exists():
        return []
    res = json.loads(ALERTING_WORKER.read_text())
    params = res["params"]
    lines = [
        "",
        "## The alerting worker's bucket calls, column-wise rules on and off (bench/alerting_worker.py)",
        "",
        f"`AlertStep` (the service's step per partition spec and bucket of keys) driven in-process over "
        f"{params['rows']:,} ticks of {params['symbols']:,} symbols in {params['batches']} micro-batches (64 buckets, "
        "watermark delay 5 s), each rule set on one PARTITION BY. Only the bucket calls are timed (CPU seconds, "
        f'best of {params["repeat"]}); input rows per CPU-second of those calls. "per key" runs every rule on its '
        'own Pike VM (what the service ran before, `AlertStep(column_wise=False)`); "column-wise" runs the rules '
        "`choose_route` routes column-wise on the column-wise step and the others per key. "
        f"Run {res['when']}, {res['machine']}.",
        "",
        "| rules (bench/run.py's queries) | per key (rows/CPU-s) | column-wise (rows/CPU-s) | speed-up | alerts "
        "| same alerts |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for entry in res["sets"].values():
        names = ", ".join(
            f"{letter} ({'column-wise' if entry['routes'].get(f'q{letter}/{letter}') == 'column-wise' else 'per key'})"
            for letter in entry["rules"]
        )
        lines.append(
            f"| {names} | {entry['per_key']['rows_per_cpu_s']:,} | {entry['column_wise']['rows_per_cpu_s']:,} "
            f"| {entry['speedup']:.2f}x | {entry['alerts']:,} | {entry['same_alerts']} |"
        )
    return lines


def alert_rules_report() -> list[str]:
    """The alert-rule section, from bench/alert_rules.py's run (apart from make bench: about half an hour)."""
    if not ALERT_RULES.exists():
        return []
    res = json.loads(ALERT_RULES.read_text())
    flink = res.get("flink") or {}
    lines = [
        "",
        f"## Alert rules over generated {res['rows'] / 1e6:g}M-event logs, against PyFlink (bench/alert_rules.py)",
        "",
        "Two rules as an analyst writes them, the same text on every engine"
        + _flink_acceptance(flink)
        + ". The logs come from `bench/alert_data.py` (seeded, "
        f"{res['rows']:,} rows each, cached in `bench/data/`): skewed activity (Zipf-like: a few keys with thousands "
        "of events, most with a handful), sessions over 7 days, 3% failed logins (20% for one user in twenty), "
        "log-normal amounts, and one injected attack per 5,000 rows, a third of them too slow for the rule's "
        "limit. Reproduce: `make bench-rules` (then `bench/run.py --report-only` rewrites this page from the "
        f"result files). Run {res['when']}, {res['machine']}; each figure one run (`--repeats {res['repeats']}`).",
        "",
    ]
    for name, rule in res["rules"].items():
        log, ours, vm = rule["log"], rule["cep"], rule["vm"]
        spark = rule.get("spark")
        peer = (flink.get("rules") or {}).get(name)
        extra = (
            f", {log['fail_share']:.1%} FAIL"
            if "fail_share" in log
            else f", {log['small_share']:.2%} under 2.00, {log['big_share']:.2%} at 500.00 or more"
        )
        lines += [
            f"### {rule['title'].capitalize()}",
            "",
            "```sql",
            rule["text"],
            "```",
            "",
            f"{ours['rows']:,} rows over {log['keys']:,} keys (busiest {log['busiest_key_rows']:,} rows, median "
            f"{log['median_key_rows']:g}){extra}; {log['attacks']:,} attacks injected, {log['attacks_finished']:,} "
            f"finished ({log['attacks_finished_within_limit']:,} of them within the limit), "
            f"{log['attacks_longer_than_limit']:,} longer than the limit. cep's path (`cep explain`): "
            f"**{ours['path']}**; partitions per run: `{json.dumps(ours.get('partitions', {}))}`.",
            "",
            "| engine | rows | events per CPU-s | events/s (wall) | matches | same matches as cep | load (1 min) |",
            "| --- | ---: | ---: | ---: | ---: | --- | ---: |",
            "| cep `Query.run(pyarrow.Table)` "
            f"| {ours['rows']:,} | {ours['eps_per_cpu']:,.0f} | {ours['eps_wall']:,.0f} "
            f"| {ours['matches']:,} | | {_load(ours)} |",
            f"| the same, reading the Parquet file included | {ours['rows']:,} | {ours['eps_per_cpu_with_read']:,.0f} "
            f"| {ours['eps_wall_with_read']:,.0f} | | | |",
            f"| Pike VM alone (`column_wise=False`), a subset of whole keys | {vm['rows']:,} "
            f"| {vm['vm_eps_per_cpu']:,.0f} | {vm['vm_eps_wall']:,.0f} | {vm['vm_matches']:,} | {vm['same_vm_as_cep']} "
            f"| {_load(vm)} |",
            "| cep `Query.run` on that subset "
            f"| {vm['rows']:,} | {vm['cep_eps_per_cpu']:,.0f} | | {vm['cep_matches']:,} "
            f"| ({vm['cep_over_vm_per_cpu']:.1f}x the VM per CPU-s) | |",
        ]
        if spark:
            lines.append(
                f"| Spark replay `Query.on_spark(spark.read.parquet(...))` on `local[2]` (CPU: the process tree) "
                f"| {spark['rows']:,} | {spark['eps_per_cpu']:,.0f} | {spark['eps_wall']:,.0f} "
                f"| {spark['spark_matches']:,} | {spark['same_spark_as_cep']} | {_load(spark)} |"
            )
        if peer and "flink_eps_per_cpu" in peer:
            lines += [
                f"| PyFlink batch, a subset of whole keys (wall after start-up; CPU: Python + JVM) | {peer['rows']:,} "
                f"| {peer['flink_eps_per_cpu']:,.0f} | {peer['flink_eps_wall']:,.0f} | {peer['flink_matches']:,} "
                f"| {peer['same_flink_as_cep']} | {_load(flink)} |",
                "| cep `Query.run` on Flink's rows (reading included) "
                f"| {peer['rows']:,} | {peer['cep_eps_per_cpu']:,.0f} "
                f"| {peer['cep_eps_wall']:,.0f} | {peer['cep_matches']:,} | ({peer['cep_over_flink_per_cpu']:.1f}x "
                f"Flink per CPU-s, {peer['cep_over_flink_wall']:.1f}x in wall) | |",
            ]
        elif peer:
            lines.append(f"| PyFlink | | rejected: {peer.get('rejected', '').replace('|', chr(92) + '|')} | | | | |")
        lines.append("")
        for engine, entry in (("the VM", vm), ("Spark", spark), ("Flink", peer)):
            if entry and "referee" in entry:
                lines.append(
                    f"Where {engine} and cep differ: `{json.dumps(entry['referee'], default=str)}` "
                    "(`tests/reference_matcher.py` on the differing keys)."
                )
                lines.append("")
    if "not_run" in flink:
        lines += [f"PyFlink: not run: {flink['not_run']}.", ""]
    elif flink:
        lines += [
            f"PyFlink (`{flink['ok']}`, `bench/.venv-flink`, batch mode, CSV of the same rows: its PyPI package has no "
            f"Parquet format) ran both rules in one process: start-up {flink['startup']['wall_s']:.1f} s, peak RSS "
            f"{flink['peak_rss_bytes'] / 1e9:.2f} GB. It runs on a subset of whole keys (every row of the users or "
            "cards it keeps, so no match is cut): at its pace here the whole log would take about "
            + " and ".join(
                f"{res['rows'] / r['flink_eps_wall'] / 60:.0f} minutes ({name.replace('_', ' ')})"
                for name, r in flink["rules"].items()
                if "flink_eps_wall" in r
            )
            + ", where the bench allows Flink about 5 minutes a rule.",
            "",
        ]
    loads = [r["spark"]["load_average"] for r in res["rules"].values() if "spark" in r]
    loads += [flink["load_average"]] if "load_average" in flink else []
    lines += [
        "The machine is shared with other work"
        + (
            f" (load average {', '.join(f'{v:.1f}' for v in loads)} on "
            f"{os.cpu_count()} cores during the Spark and Flink runs)"
            if loads
            else ""
        )
        + ": wall times stretch, CPU seconds much less; compare per CPU-second. cep's `Query.run` uses one core, "
        "Spark and Flink both. `cep.compile(text, column_wise=False)` turns off both column-wise engines "
        "(the regex fast path "
        "and the sequence engine): the VM then runs every partition.",
        "",
    ] + ALERT_RULES_READING
    return lines


def _load(entry: dict) -> str:
    """The 1-minute load average when a figure was taken ("" for a run from before it was recorded)."""
    return f"{entry['load_average']:.1f}" if "load_average" in entry else ""


# Why cep's figures are what they are (written from the runs on record; re-read them after a new run).
ALERT_RULES_READING = [
    "**Where the time went, and what changed.** In the run before this one (2026-11-26 16:19 UTC) cep ran "
    "these rules at 135k and 188k events per CPU-second, 1.1x and 1.4x its own Pike VM, although the column-wise "
    "sequence engine took every partition: profiling `Query.run` on the 10M-row tables (`cProfile` with a CPU clock) "
    "showed 90% of the time outside matching, in turning whole Arrow columns into Python objects. Four conversions "
    "went, each replaced by a read of the same values from the column itself:",
    "",
    "- `SequencePlan.run` built the whole input as Python lists up front (for the partitions the VM might take): "
    "`ArrayInput.python()` is now a mapping that converts a column when a VM partition first reads it, so a batch "
    "that runs column-wise converts none;",
    "- `WITHIN`'s event times were read from the Python datetimes (10M `datetime` objects, then pandas back to "
    "ticks): they are now the timestamp column's own microseconds (`layout._own_ticks`), for a column without "
    "NULLs, naive, inside `datetime`'s range; exact because the Python values the VM compares are those same "
    "microseconds (Arrow keeps them; pandas' nanoseconds are rounded down on both sides); any other column (aware, "
    "with NULLs) still goes through the Python values;",
    "- `COUNT(FAIL.ts)`: counting a column the kernels do not hold (times) built all its Python values to test "
    "`is not None`; it now reads the column's NULL mask (`ArrayInput.present`), which is where its Python values are "
    "None by construction (`arrays.py`);",
    "- `status = 'FAIL'` read the Arrow string column as 10M Python `str`, then numpy unicode: it is now dictionary-"
    "encoded by Arrow, the few distinct values converted once and gathered by code (`layout._arrow_strings`), the "
    "same numpy array (a column of mostly distinct values keeps the old conversion).",
    "",
    "The Spark replay gained with it (100k and 131k events per CPU-second of its process tree then): its tasks hand "
    "their Arrow batches to the same `Query.run`. "
    "What remains is numpy work that grows with the rows: grouping 10M rows by key (a stable sort, about 1.2 "
    "CPU-s), the per-start scan (about 1 CPU-s), AFTER MATCH SKIP's walk and the WITHIN limits. The property "
    "tests (`tests/test_sequence.py`, among them one over Arrow and pandas text and time columns) check the "
    "output against the VM on every route.",
    "",
]


def _flink_acceptance(flink: dict) -> str:
    """Whether Flink took the rules' texts as written (bench/peers/flink.py's rewrites), from the results."""
    rules = flink.get("rules") or {}
    if not rules:
        return ""
    rejected = [name for name, r in rules.items() if "rejected" in r]
    rewritten = {name: r["rewrites"] for name, r in rules.items() if r.get("rewrites")}
    if not rejected and not rewritten:
        return " (Flink accepts both as written: `{3,}` and `WITHIN INTERVAL` need no rewrite)"
    return (
        f" (Flink rejects {', '.join(rejected) or 'none'}; rewrites: "
        + ("; ".join(f"{n}: {', '.join(w)}" for n, w in rewritten.items()) or "none")
        + ")"
    )


KAFKA_E2E_ENGINES = {
    "cep": "cep stream `--state spark`, `--sink kafka://`",
    "cep-exactly-once": "cep stream `--state spark`, `--sink kafka-exactly-once://`",
    "flink": "Flink SQL, Kafka connector",
}
# The run's side group of ``cep stream --state driver`` (bench/kafka_e2e.py, on unless --no-driver-state): its rows
# under their own names, so that each path says its layout whatever cep stream's default.
KAFKA_E2E_DRIVER = {
    "cep": "cep stream `--state driver`, `--sink kafka://`",
    "cep-exactly-once": "cep stream `--state driver`, `--sink kafka-exactly-once://`",
}


def _span(values, fmt: str = "{:,.0f}", unit: str = "") -> str:
    """'a to b' (or 'a') of the values present, for prose written from the run's own numbers."""
    found = sorted(v for v in values if v is not None)
    if not found:
        return "-"
    low, high = fmt.format(found[0]), fmt.format(found[-1])
    return f"{low}{unit}" if low == high else f"{low} to {high}{unit}"


# Keeping up, as issue targets measure it: finished/s at least this share of the ticks sent per second.
KEPT_UP_SHARE = 0.95


def _driver_latency(steps: list[dict]) -> str:
    """The driver layout's side of the latency bullet, when the run had it (``--state driver``)."""
    sides = [s["driver"] for s in steps if (s.get("driver") or {}).get("cep_batches")]
    if not sides:
        return ""
    latencies = [((d.get("engines") or {}).get("cep") or {}).get("latency_p50_s") for d in sides]
    return (
        " With `--state driver` the rules run in the micro-batch's `foreachBatch`, which also runs Spark's next "
        "watermark over the buckets whose timers it passed: the alert leaves in the micro-batch that read the tick "
        "that moved the watermark past the match, one micro-batch sooner; its micro-batches took "
        f"{_span([d['cep_batches']['batch_p50_s'] for d in sides], '{:.1f}', ' s')} at the median and its p50 "
        f"latency was {_span(latencies, '{:.1f}', ' s')}."
    )


def _count(value: float | None) -> str:
    """A count for a table cell, "-" where the run did not measure it."""
    return "-" if value is None else f"{value:,.0f}"


def _keeping_up(steps: list[dict], engines: list[dict | None]) -> str:
    """Where an engine kept up (finished/s over sent/s at least ``KEPT_UP_SHARE``), each rate's share, and when it
    caught up after each step (within the settle time) or that it did not: what the table's columns show."""
    ran = [(s, e) for s, e in zip(steps, engines) if e]
    if not ran:
        return "did not run in this one"
    sent = {s["rate_asked"]: s["events_per_s_sent"] for s, _ in ran if s["events_per_s_sent"]}
    whole = {s["rate_asked"]: e["events_per_s"] / sent[s["rate_asked"]] for s, e in ran if s["rate_asked"] in sent}
    steady = {
        s["rate_asked"]: e["events_per_s_steady"] / sent[s["rate_asked"]]
        for s, e in ran
        if s["rate_asked"] in sent and e.get("events_per_s_steady") is not None
    }
    share = steady or whole  # the steady-state rate where the run measured it: it does not count the lag
    kept = [rate for rate, part in share.items() if part >= KEPT_UP_SHARE]
    caught = [e["caught_up_s"] for _, e in ran if e["caught_up_s"] is not None]
    behind = [s["rate_asked"] for s, e in ran if e["caught_up_s"] is None]
    text = (
        f"kept up at {', '.join(kept) + ' ticks/s' if kept else 'none of the rates'} ("
        + ("steady finished/s over sent/s: " if steady else "finished/s over sent/s: ")
        + ", ".join(f"{part:.0%} at {rate}" for rate, part in share.items())
        + ("; over the whole step: " + ", ".join(f"{part:.0%}" for part in whole.values()) if steady else "")
        + ")"
    )
    if caught:
        text += f"; its alerts reached the step's last tick {_span(caught, '{:.0f}', ' s')} after the step"
    if behind:
        text += (
            f"; at {', '.join(behind)} they did not within the settle time (it fell behind: the latency then "
            "measures the backlog, not the engine)"
        )
    return text


def kafka_e2e_reading(e2e: dict) -> list[str]:
    """What the numbers say, computed from the run on record, so that the prose always agrees with its tables."""
    steps = e2e["steps"]
    cep = [s["engines"]["cep"] for s in steps]
    once = [s["engines"].get("cep-exactly-once") for s in steps]
    flink = [s["engines"].get("flink") for s in steps]
    batches = [s["cep_batches"] for s in steps]
    cores = [s["cpu_s"]["cep"] / s["seconds"] for s in steps]

    def per_cpu(step: dict, name: str) -> float | None:
        cpu, engine = step["cpu_s"].get(name.split("-")[0]), step["engines"].get(name)
        return engine["events_per_s"] * step["seconds"] / cpu if cpu and engine else None

    ratios = [per_cpu(s, "flink") / per_cpu(s, "cep") for s in steps if per_cpu(s, "flink") and per_cpu(s, "cep")]
    driver_ratios = [  # the same for the side group of --state driver, when it ran
        per_cpu(s, "flink") / (d["engines"]["cep"]["events_per_s"] * s["seconds"] / d["cpu_s"])
        for s in steps
        if (d := s.get("driver")) and d.get("cpu_s") and (d.get("engines") or {}).get("cep") and per_cpu(s, "flink")
    ]
    extra = [
        o["latency_p50_s"] - c["latency_p50_s"]
        for o, c in zip(once, cep)
        if o and o["latency_p50_s"] is not None and c["latency_p50_s"] is not None
    ]

    first = steps[0]
    layouts = [(e2e.get("state", "spark"), cep)]
    if any(s.get("driver") for s in steps):
        layouts.append(("driver", [((s.get("driver") or {}).get("engines") or {}).get("cep") for s in steps]))
    check = e2e.get("check", {})
    duplicates = {name: check[name]["duplicate_messages"] for name in ("cep", "cep-exactly-once") if name in check}
    lines = [
        "",
        f"Reading it (the run on record: {e2e['nproc']} cores at a load average of "
        f"{_span([s['load_average'][0] for s in steps], '{:.1f}')} during the steps; cep's process tree used "
        f"{_span(cores, '{:.2f}')} of a core, on average per step):",
        "",
        f"- **What dominates cep's latency is the micro-batch.** With `--state {e2e.get('state', 'spark')}`, a tick "
        "is matched in the first micro-batch whose watermark (set at the end of the micro-batch before, from the "
        "largest event time read) has passed it, so at "
        f"the earliest one micro-batch after the one that read it; {_handover(e2e)} So the latency is the watermark "
        f"({e2e['watermark']}) plus {_batches_to_alert(e2e)} micro-batch durations plus the trigger "
        f"({e2e['trigger']}); the "
        f"exactly-once lane adds its transaction (its p50 is {_span(extra, '{:.1f}', ' s')} above the at-least-once "
        f"lane's here). In this run a micro-batch held {_span([b['rows_per_batch'] for b in batches])} ticks and took "
        f"{_span([b['batch_p50_s'] for b in batches], '{:.1f}', ' s')} at the median (at most "
        f"{_span([b['batch_max_s'] for b in batches], '{:.1f}', ' s')}); cep was "
        f"{e2e.get('warmup_lag_s', {}).get('cep', 0):.0f} s behind when the steps began, and its p50 latency was "
        f"{_span([c['latency_p50_s'] for c in cep], '{:.1f}', ' s')}." + _driver_latency(steps),
        f"- **Where cep kept up** (finished/s at least {KEPT_UP_SHARE:.0%} of the ticks sent per second): "
        + "; ".join(f"`--state {layout}` {_keeping_up(steps, engines)}" for layout, engines in layouts)
        + ". The table's finished/s counts the ticks up to the newest alert's last tick by the step's end, so the "
        f"lag at the step's end costs it about that lag over the step's {e2e['seconds_per_rate']:.0f} s: an alert "
        "that waits the watermark never reaches 100% on it. The steady finished/s counts the ticks finished from "
        "10 s into the step to its end, per second of that window: an engine that keeps up with a constant lag "
        "finishes ticks as fast as they are sent over any window, so it reaches 100% whatever its lag, and falls "
        "short only when the lag grows.",
        f"- **What dominates Flink's is the watermark.** Flink matches record by record once the watermark (emitted "
        f"every 200 ms) passes a tick: at {first['rate_asked']} ticks/s its p50 is "
        f"{_span([flink[0]['latency_p50_s']] if flink[0] else [], '{:.1f}', ' s')} for a {e2e['watermark']} watermark; "
        f"it {_keeping_up(steps, flink)}.",
        f"- **Per CPU second** (the column least changed by the load), Flink finished {_span(ratios, '{:.1f}')} times "
        f"as many ticks as `cep stream --state {e2e.get('state', 'spark')}` (its Spark JVM, its Python workers and "
        "its driver, "
        + ("two queries" if _two_queries(e2e) else "its query")
        + " and the sinks' lanes)"
        + (f", and {_span(driver_ratios, '{:.1f}')} times as many as `--state driver`" if driver_ratios else "")
        + ". The cost per micro-batch and per key call is Spark's and Python's "
        "(docs/streaming-measurements.md); "
        "the matcher alone is far faster on this query (the tables above).",
        "- **The alerts are right on every path** when the table above says so (same matches as `q.run`, nothing "
        "missing or extra); duplicates on the cep topics: "
        + ", ".join(f"{KAFKA_E2E_ENGINES[n]} {d:,}" for n, d in duplicates.items())
        + " (the at-least-once sink may repeat an alert only after a failure and a redelivery).",
        "- Re-run it on an idle machine before drawing conclusions on cep's latency: the load averages above say how "
        "much of the machine the engines had.",
    ]
    return lines


def software_line(found: dict | None) -> list[str]:
    """The versions the run had (bench/software.py), to tell a slower library from a slower change."""
    if not found:
        return []
    return ["Software in this run: " + ", ".join(f"{name} {version}" for name, version in found.items()) + ".", ""]


def kafka_e2e_report(e2e: dict) -> list[str]:
    """The end-to-end table: per rate and engine, what was finished, the alert latency, the CPU; then the check."""
    flink = e2e["flink"]
    cell = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    lines = [
        "",
        "## Through Kafka, end to end (bench/kafka_e2e.py)",
        "",
        "`make bench-kafka` (`.venv/bin/python bench/kafka_e2e.py`, then `bench/run.py --report-only`; "
        f"{e2e['seconds_per_rate']:.0f} s per rate, "
        + (
            "30 to 60 minutes in all for the engines one after another"
            if e2e.get("mode") == "one after another"
            else "10 to 20 minutes in all"
        )
        + ", the longer on a loaded machine, `--help` "
        f"for the options). A real Kafka 4.4 broker on this machine; one producer sends ticks of {e2e['keys']} symbols "
        "(a random walk each, keyed by symbol, event time = the wall clock when sent) to a 4-partition topic at each "
        "rate in turn, `max` being as fast as this Python producer goes. "
        + (
            "Each engine ran alone (with the broker and the producer), one after another, on a topic of its own fed "
            "the same ticks at the same rates, as each would run in production: `cep "
            if e2e.get("mode") == "one after another"
            else "On that topic, at the same time: `cep "
        )
        + f"stream` (`local[2]`, watermark {e2e['watermark']}, trigger {e2e['trigger']}) with both Kafka sinks at once "
        "(each on its own delivery lane), and "
        + (
            f"Flink SQL `MATCH_RECOGNIZE` in streaming mode ({flink['package']}, `{flink['connector']}`, parallelism "
            f"{flink['parallelism']}, watermark {e2e['watermark']}, checkpoints every {flink['checkpoint_interval']}, "
            "its at-least-once Kafka sink)"
            if flink["ran"]
            else f"no Flink ({flink['why_not']})"
        )
        + f". Both run one text, query ({e2e['query']}) as Flink accepts it ({'; '.join(e2e['rewrites'])}):",
        "",
        "```sql",
        e2e["query_text"],
        "```",
        "",
        *software_line(e2e.get("software")),
        (
            f"Flink's Kafka SQL connector: Maven Central serves `{flink['connector'].rsplit(':', 1)[0]}` "
            "up to 5.0.0-2.2, built for Flink 2.2, and none for 2.3; that jar, copied by `mvn dependency:copy` "
            "(bench/peers/flink_kafka_pom.xml) into `~/.cache/cep/` once, runs this job on PyFlink 2.3.0."
            if flink["ran"]
            else f"Flink is not in this run: {flink['why_not']}."
        ),
        "",
        "- **latency**: when the alert was consumed here (`read_committed`) minus when the tick that completed the "
        "match was produced; it includes the watermark delay by design (a match is final once the watermark passes "
        "its last tick), so its floor is the watermark;",
        "- **finished/s**: ticks the engine had finished during the step (produced at or before the newest last "
        "tick of its alerts consumed by the step's end) per second; **lag**: the step's end minus that newest "
        "tick; **caught up**: seconds after the step's end until its alerts reached the step's last tick "
        "(`-`: not within the settle time, it fell behind);",
        "- **CPU s**: of each process tree during the step (cep: its driver, Spark's JVM and Python workers; "
        "Flink: its Python and JVM), out of 2 cores x the step's seconds; **finished per CPU-s**: the ticks it "
        "finished in the step per CPU second it used (what the machine's load changes least); the broker's and "
        "the producer's CPU are in the last columns.",
        "",
        f"Run {e2e['when']} on {e2e['nproc']} cores shared with other work (load averages below: read the numbers "
        f"as upper bounds on cost). Start-up until each engine ran: "
        + ", ".join(f"{name} {s:.0f} s" for name, s in e2e["startup_s"].items())
        + f"; then a warm-up of {e2e['warmup_s']:.0f} s at {e2e['settle_rate']} ticks/s, "
        "until every engine had sent an alert and then until its alerts were within 15 s of the newest tick, for 120 "
        "s at most (not measured: a query's first micro-batches plan it and start Python workers); the lag left then: "
        + ", ".join(f"{name} {s:.0f} s" for name, s in e2e.get("warmup_lag_s", {}).items())
        + ".",
        "",
        "| rate asked | sent/s | engine | finished/s | steady finished/s | alerts | latency p50 (s) | p99 (s) "
        "| max (s) | lag (s) | caught up (s) | engine CPU s | finished per CPU-s | broker + producer CPU s "
        "| load (1 min) |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for step in e2e["steps"]:
        driver = step.get("driver") or {}
        rows = [(KAFKA_E2E_ENGINES[name], e, step["cpu_s"].get(name.split("-")[0]), name.split("-")[0])
                for name, e in step["engines"].items()]  # fmt: skip
        rows += [(KAFKA_E2E_DRIVER[name], e, driver.get("cpu_s"), "driver")
                 for name, e in (driver.get("engines") or {}).items() if name in KAFKA_E2E_DRIVER]  # fmt: skip
        for label, e, cpu, group in rows:
            alone = (step.get("alone") or {}).get(group)  # its own run's load, broker and producer
            broker, bench, load = (
                (alone["broker_cpu_s"], alone["bench_cpu_s"], alone["load_average"][0])
                if alone
                else (step["cpu_s"]["broker"], step["cpu_s"]["bench"], step["load_average"][0])
            )
            lines.append(
                f"| {step['rate_asked']} | {step['events_per_s_sent']:,.0f} | {label} | "
                f"{e['events_per_s']:,.0f} | {_count(e.get('events_per_s_steady'))} | {e['alerts']:,} "
                f"| {cell(e['latency_p50_s'])} | {cell(e['latency_p99_s'])} "
                f"| {cell(e['latency_max_s'])} | {cell(e['lag_at_end_s'])} | {cell(e['caught_up_s'])} | {cell(cpu)} "
                f"| {e['events_per_s'] * step['seconds'] / cpu if cpu else 0:,.0f} "
                f"| {broker:.0f} + {bench:.0f} | {load:.1f} |"
            )
    lines += [
        "",
        "cep's micro-batches during each step (from its status file"
        + ("; the delivery query's are not in it):" if _two_queries(e2e) else "):"),
        "",
        "| rate asked | layout | micro-batches | ticks per micro-batch | duration p50 (s) | max (s) |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for step in e2e["steps"]:
        layouts = [(f"`--state {e2e.get('state', 'spark')}`", step["cep_batches"])]
        if (step.get("driver") or {}).get("cep_batches"):
            layouts.append(("`--state driver`", step["driver"]["cep_batches"]))
        for layout, b in layouts:
            lines.append(
                f"| {step['rate_asked']} | {layout} | {b['batches']} | {b['rows_per_batch'] or 0:,} "
                f"| {cell(b['batch_p50_s'])} | {cell(b['batch_max_s'])} |"
            )
    check = e2e["check"]
    if "error" in check:
        failed = f"The check of the alerts against `q.run` failed: {check['error']}."
        return lines + ["", failed] + kafka_e2e_reading(e2e)
    driver_check = (e2e.get("driver") or {}).get("check") or {}
    checked = [(KAFKA_E2E_ENGINES[n], check[n]) for n in KAFKA_E2E_ENGINES if n in check]
    checked += [
        (KAFKA_E2E_DRIVER[n], driver_check[n]) for n in KAFKA_E2E_DRIVER if isinstance(driver_check.get(n), dict)
    ]
    right = all(c["same_matches"] for _, c in checked)
    lines += [
        "",
        f"**{'The alerts are right' if right else 'The alerts are not all right'}.** The stream's rule "
        f"replayed (`cep.compile_rule(rule).run(ticks, match_ids=True)`, the same text) over the "
        f"{check['ticks_before']:,} ticks produced up to {check['final_before']} (of {e2e['ticks_total']:,} in the "
        f"run; the cut-off: where every engine's alerts had got to) finds {check['expected_matches']:,} matches; "
        "consumed from each topic up to then"
        + (
            " (an engine run on its own topic is checked against the replay of that topic's ticks, the same "
            "sequence at the same rates: "
            + ", ".join(
                f"{KAFKA_E2E_ENGINES[n]} {check[n]['expected_matches']:,} matches"
                for n in KAFKA_E2E_ENGINES
                if n in check and check[n].get("expected_matches") is not None
            )
            + ")"
            if e2e.get("mode") == "one after another"
            else ""
        )
        + ":",
        "",
        "| engine | alerts (distinct keys) | same matches as `q.run` | missing | extra | messages | duplicates |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for label, c in checked:
        lines.append(
            f"| {label} | {c['alerts']:,} | {'yes' if c['same_matches'] else '**no**'} | "
            f"{c['missing']:,} | {c['extra']:,} | {c['messages']:,} | {c['duplicate_messages']:,} |"
        )
    lines += [
        "",
        "cep's keys are its `match_id`s (the Kafka message key); Flink's sink has no key, so its matches are "
        "compared as (symbol, first tick, last tick). Duplicates: messages minus distinct keys (the "
        "at-least-once sink may repeat an alert after a failure, the exactly-once sink must not).",
    ]
    lines += kafka_e2e_reading(e2e)
    return lines


def spark_report(runs: dict | None) -> list[str]:
    if not runs:
        return []
    if "error" in runs:
        return [f"Spark: not measured ({runs['error']}).", ""]
    lines = [
        "## Spark replay (query a) from Parquet on `local[2]`",
        "",
        f"`Query.on_spark(spark.read.parquet(...)).count()`, wall time, session already started "
        f"(start: {runs['startup_s']:.1f} s). Each step adds work to the previous one: reading the three columns "
        "the query reads; then Spark's shuffle by symbol and the Arrow hand-over to Python (a function that "
        "returns nothing); then the whole replay (`mapInArrow`: the matcher's column path over each task's "
        f"Arrow table, {runs['shuffle_partitions']} shuffle partitions, Arrow batches of "
        f"{runs['arrow_batch_rows']:,} rows). CPU seconds and peak RSS are those of the whole process tree "
        "(this driver, Spark's JVM, its Python workers).",
        "",
        "| rows | step | wall s | events/s (wall) | CPU s | events per CPU-s | peak RSS (GB) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    titles = {"read": "read", "read_shuffle_python": "+ shuffle + Arrow to Python", "replay": "whole replay"}
    for entry in runs.values():
        if not isinstance(entry, dict) or "replay" not in entry:  # "queries": the per-query replays (Flink's section)
            continue
        for step, title in titles.items():
            m = entry[step]
            lines.append(
                f"| {entry['rows']:,} | {title} | {m['seconds']:.1f} | {entry['rows'] / m['seconds']:,.0f} "
                f"| {m['cpu_s']:.1f} | {entry['rows'] / m['cpu_s']:,.0f} | {m['peak_rss_bytes'] / 1e9:.2f} |"
            )
    lines += [
        "",
        "On a shared machine the wall time also counts other processes' work; the CPU seconds do not. With the"
        " machine otherwise idle and both cores busy (two read tasks, then the shuffle partitions two at a time),"
        " the wall time would approach CPU seconds / 2: an estimate, not a measurement of this run."
        f" Load average {_load_text(runs)}.",
        "",
    ]
    return lines


def _load_text(runs: dict) -> str:
    loads = [
        m["load_average"]
        for entry in runs.values()
        if isinstance(entry, dict)
        for m in entry.values()
        if isinstance(m, dict) and "load_average" in m
    ]
    if not loads:
        return "not recorded in this run (see `uptime` when it ran)"
    return f"during these runs: {min(loads):.1f} to {max(loads):.1f} (2 cores)"


def write_plot(results: dict) -> None:
    """docs/performance.svg: events/s of each engine on query (a), log scale (matplotlib, the report extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - the dev environment has it
        return
    bars: list[tuple[str, float]] = []
    v = results["v_shape"]
    bars += [
        (f"hand-written loop ({v['rows'] / 1e6:g}M)", v["loop_eps"]),
        (f"cep Query.run(Arrow) ({v['rows'] / 1e6:g}M)", v["end_to_end_arrow_eps"]),
        (f"cep fast path, Python lists ({v['rows'] / 1e6:g}M)", v["fast_eps"]),
    ]
    for entry in (results.get("spark_runs") or {}).values():
        if isinstance(entry, dict) and "replay" in entry:  # a row count's runs, not "queries"
            bars.append((f"cep on Spark local[2], wall ({entry['rows'] / 1e6:g}M)", entry["eps"]))
    a = next((q for q in results.get("queries", []) if q["query"] == "a"), None)
    if a:
        bars.append((f"cep Pike VM ({a['small_rows'] / 1e6:g}M)", a["small_vm_eps"]))
    pmr = results.get("pandas_match_recognize") or {}
    if "peer_eps" in pmr:
        bars.append((f"pandas-match-recognize ({pmr['rows'] / 1e6:g}M)", pmr["peer_eps"]))
    flink_a = next(
        (q for q in (results.get("flink") or {}).get("queries", []) if q.get("query") == "a" and "flink_eps" in q), None
    )
    if flink_a:
        bars.append((f"PyFlink, end to end, wall ({flink_a['rows'] / 1e6:g}M)", flink_a["flink_eps_end_to_end"]))
    plt.rcParams["svg.hashsalt"] = "cep-bench"  # stable ids: the file changes only when the figures do
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(bars) + 1))
    labels, values = zip(*reversed(bars))
    ax.barh(labels, values, color="#4878a8")
    ax.set_xscale("log")
    ax.set_xlabel("events per second (query a; CPU-second unless 'wall')")
    for y, value in enumerate(values):
        ax.text(value, y, f" {value:,.0f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(DOC.with_suffix(".svg"), metadata={"Date": None})
    plt.close(fig)


NOTES = [
    "The fast path (`matcher/vector/fastpath.py`, `matcher/vector/kernels.py`) takes queries whose DEFINE conditions "
    "read only the current row and PREV/NEXT at constant offsets (qualified references only to the variable being "
    "defined), without WITHIN, SEEK or absence terms, with at most 8 variables, and whose pattern is regex-safe: no "
    "unbounded repetition of a group that can span several rows, no two unbounded loops on one path over a shared "
    "variable. Per batch, the kernels may decline data they cannot evaluate exactly (integers beyond 64 bits, mixed "
    "types, naive and zoned times in one column, a time past the year 9999), and a partition whose loops could make "
    "the regex engine restart quadratically goes to the run scan (a pattern that is a sequence of runs, "
    "`matcher/vector/runs.py`: linear) or else to the VM; so does a batch where two loops on one path can take the "
    "same row.",
    "Queries (b), (d), (e) read the match history (cross-variable references, LAST(v, 1), WITHIN, aggregates):"
    " the regex path declines them and the column-wise sequence engine (`matcher/vector/sequence.py`) takes"
    " them: every start row at once, item by item with numpy, the time limit, the earlier variables' rows and"
    " the running aggregates read per start; a start whose run has several ends tries them in the order the pattern"
    " prefers (at most `MAX_RUN_ENDS`; past that, its partition runs on the Pike VM)."
    " Its cost is the sum over start rows of the rows each looks at (a start that never matches"
    " looks at its whole WITHIN window). (f) is a sequence of runs whose A/B rows exclude C's: its run of A/B rows as"
    " long as the partition would make `re` restart quadratically, so `matcher/vector/runs.py` scans it in linear"
    " time with numpy (before, its guard sent the rows to the VM).",
    "(h) is an absence, `A !B` WITHIN one minute (cep's extension; the peers have no such term): the sequence"
    " engine takes it, and since B's condition reads only its row, the first B row after every row is one"
    " reversed running minimum, so no start is scanned; the match completes when time reaches the deadline."
    " `A !B C` runs as a run of rows that are not B before C, scanned from every start. SHOW TIMEOUT MATCHES"
    " rows are computed column-wise with the matches (MATCH_NUMBER() NULL, the search going on at the next"
    " row): (d) with SHOW TIMEOUT MATCHES went from about 93k to about 700k events per CPU-second on 1M rows"
    " when they stopped going through the per-partition output.",
    "(g) is (a) with ALL ROWS PER MATCH and running measures: the fast path builds its output rows column-wise"
    " (`matcher/vector/all_rows.py`), where it used to build each row in Python (about 190k events/s); its table row is"
    " the Python-lists input, `Query.run` on an Arrow table does about 5M events/s. Flink rejects ALL ROWS PER MATCH.",
    "The one-buffer scan: for ONE ROW PER MATCH with SKIP PAST LAST ROW, every partition's bytes go into one"
    " buffer with a separator byte after each, and one `re.split` returns the bytes before each match and each"
    " group's bytes; their lengths give every group's position with no match object per match.",
    "`Query.run` on a pandas DataFrame or a pyarrow Table hands the fast path numpy columns"
    " (`matcher/vector/arrays.py`, `matcher/vector/layout.py`): partitions by factorizing the key column, ORDER BY by a"
    " numpy sort (or none when the rows are already in time order), conditions by the kernels, and, for ONE"
    " ROW PER MATCH with FIRST/LAST/column/COUNT/MATCH_NUMBER measures, the result as typed columns taken from"
    " the input (`np.take` / Arrow `take`), typed as the Python values would be. Other queries convert the"
    " frame to Python values as before; `tests/test_fastpath.py` checks that both give the same frame.",
    "The Spark replay hashes rows to tasks by the PARTITION BY columns and hands each task's Arrow batches to"
    " the matcher as one table (`mapInArrow`, `spark_bridge/spark/batch.py`); only the columns the query reads are"
    " shuffled. What is left is Spark's own reading and shuffle (the first two rows of each Spark table).",
    "Streaming is measured apart, by `bench/streaming_overhead.py` (docs/streaming-measurements.md): a"
    " micro-batch of 100,000 events over 10,000 keys took 1.7-1.8 s with key buckets on a quiet machine, the"
    " fixed cost of a micro-batch 0.55-0.65 s; the hot-key and soak runs are in docs/reliability.md.",
    "The Pike VM reads `FIRST(A.x)` in DEFINE from a position carried with each thread (`FIRST_ROW` in"
    " `matcher/sql/running.py`) and `FIRST(x)` of the whole match from the thread's start: constant time, where it"
    " used to walk the thread's history back to its first row on every evaluation (a partial match open for n rows"
    " cost n^2 row looks, and trying each later start over an open tail at the end of the input n^3: 1,000 rows"
    " took 7 s, now 1.5 s on a loaded 2-core machine, with the query of"
    " `tests/test_matcher_hostile.py::test_an_open_tail_past_the_rescan_limit_is_refused_and_below_it_runs`). The"
    " rescan of an open tail by each later start stays quadratic: `MAX_TAIL_RESCAN_ROWS` (E0431) bounds it; bound"
    " such patterns with WITHIN.",
    "The sequence engine (`matcher/vector/sequence.py`; queries (b), (d), (e)) avoids scanning each start's run"
    " row by row where it can prove the result the same: a run that takes every row before a last single row"
    " compared with an earlier item (`A B*? C`, `C.price < A.price - 0.10`) ends at the first hit found by a"
    " sparse table of range minima and a binary descent (`first_hit.py`); a run under a running SUM/COUNT"
    " threshold of non-negative integers ends by cumulative sums (`cumulative.py`); AFTER MATCH SKIP is walked"
    " once per emitted match and ONE ROW PER MATCH measures are computed for all matches at once"
    " (`sequence_output.py`): rows of a variable, counts, integer SUMs and `+ - *` as column programs, any other"
    " measure (ROUND, CASE, AVG/MIN/MAX, COUNT(DISTINCT), SUM over floats or DECIMALs, CLASSIFIER...) by the Pike"
    " VM's own measure code called once per match over that match's rows, so with the VM's values and types; a"
    " measure with PREV (it reads rows before the match) is computed by the same measure code over the match's rows"
    " and the rows PREV reaches before it (`sequence_output.reading_before`, as the streaming path does); only a"
    " measure with NEXT (rows after the match) sends the batch's output through the per-partition `PartitionOutput`."
    " `cep explain` names the routes; a batch they cannot take is scanned as before.",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--small-rows", type=int, default=200_000, help="rows for the VM comparisons")
    parser.add_argument("--peer-rows", type=int, default=100_000, help="rows for pandas-match-recognize")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--large-rows",
        type=int,
        default=10_000_000,
        help="rows for the V-shape against the loop and the Spark replay (besides --rows)",
    )
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--no-flink", action="store_true", help="skip PyFlink (about 5 minutes)")
    parser.add_argument("--no-hostile", action="store_true")
    parser.add_argument(
        "--no-delta", action="store_true", help="skip query (a) from the --large-rows log as a Delta table"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite docs/performance.md from bench/results.json"
    )
    parser.add_argument(
        "--queries-only",
        action="store_true",
        help="measure queries (a)-(h) only and print them; writes neither results.json nor the report",
    )
    parser.add_argument(
        "--update-queries",
        action="store_true",
        help="measure queries (a)-(h) only, put them into bench/results.json (with the date and the"
        " load average of this run) and rewrite docs/performance.md",
    )
    args = parser.parse_args(argv)
    if args.report_only:
        write_report(json.loads(RESULTS.read_text()))
        write_plot(json.loads(RESULTS.read_text()))
        return 0

    began = time.perf_counter()
    print(f"data: {args.rows:,} rows", flush=True)
    path = ensure_data(args.rows)
    table, columns = load_columns(path, args.rows)
    small = {name: values[: args.small_rows] for name, values in columns.items()}
    results: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "repeats": args.repeats,
    }
    print("queries (a)-(h)", flush=True)
    results["queries"] = bench_queries(columns, small, args.rows, min(args.small_rows, args.rows), args.repeats)
    if args.update_queries:
        kept = json.loads(RESULTS.read_text())
        kept["queries"] = results["queries"]
        kept["queries_run"] = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_average": [round(x, 1) for x in os.getloadavg()],
        }
        RESULTS.write_text(json.dumps(kept, indent=2, default=str))
        write_report(kept)
        write_plot(kept)
        return 0
    if args.queries_only:
        for entry in results["queries"]:
            fast = entry.get("fast_eps")
            print(
                f"({entry['query']}) {entry['path'][:40]:40} VM {entry['small_vm_eps']:>12,.0f} "
                f"ev/s on {entry['small_rows']:,} rows"
                + (
                    f"   column-wise {fast:>12,.0f} ev/s on {entry['rows']:,} rows "
                    f"({fast / entry['small_vm_eps']:.1f}x the VM)"
                    f" same output: {entry['same_output']}"
                    if fast
                    else ""
                )
            )
        return 0
    del columns, small  # the Python columns would weigh on the memory measured below
    if not args.no_peers:
        print("pandas-match-recognize", flush=True)
        results["pandas_match_recognize"] = bench_pandas_match_recognize(table, path, args.peer_rows, args.repeats)
    print(f"data: {args.large_rows:,} rows", flush=True)
    large_path = ensure_data(args.large_rows)
    if not args.no_spark:
        print("Spark", flush=True)
        runs = bench_spark({args.rows: path, args.large_rows: large_path}, args.repeats)
        results["spark_runs"] = runs
        # the Flink section compares with the replay of the same rows as its own (--rows)
        results["spark"] = (
            {**runs[str(args.rows)], "startup_s": runs["startup_s"], "queries": runs.get("queries")}
            if "error" not in runs
            else runs
        )
    if not args.no_delta:
        print("Delta", flush=True)
        results["delta"] = delta_bench.bench(large_path, args.large_rows, args.repeats, spark=not args.no_spark)
    print("V-shape against the hand-written loop", flush=True)
    results["v_shape"] = bench_v_shape(large_path, args.large_rows, args.repeats)
    if not (args.no_peers or args.no_flink):
        print("PyFlink", flush=True)
        results["flink"] = flink_peer.bench(PEER_QUERIES, path, args.rows, args.repeats)
    if not args.no_hostile:
        print("hostile patterns", flush=True)
        results["hostile"] = bench_hostile()
    results["total_s"] = time.perf_counter() - began
    RESULTS.write_text(json.dumps(results, indent=2, default=str))
    write_report(results)
    write_plot(results)
    print(f"wrote {DOC.relative_to(REPO)} in {results['total_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
