"""``make bench``: generate the tick data, run every measurement, write docs/performance.md.

    .venv/bin/python bench/run.py                 # 1M rows (about 5 minutes on a 2-core machine)
    .venv/bin/python bench/run.py --rows 200000   # quicker
    .venv/bin/python bench/run.py --large         # 10M rows as well (fast path only; long)
    .venv/bin/python bench/run.py --no-spark --no-peers

Every figure is the median of several runs (``--repeats``), in input events per second of wall
time; every ratio compares two figures taken in this run on the same rows. The rows are
``bench/data.py``'s ticks (100 symbols, deterministic), held as Python columns the way
``Query.run`` hands them to the matcher; "end to end" figures start from a pyarrow Table.

Measured:
- the hand-written Python loop for the V-shape (the ceiling), the fast path, the Pike VM;
- queries (a)-(f) of issue 8 on the path each takes, and on the VM;
- ``Query.run`` end to end from Arrow, and ``Query.on_spark`` on local[2] for (a);
- pandas-match-recognize on (a), installed into bench/.venv-peers (never a dependency of cep), with
  whether its output equals ours;
- the hostile patterns of the matcher issue (bench/hostile.py), 10k vs 100k rows.
- PyFlink's MATCH_RECOGNIZE on (a)-(f) in batch mode, installed into bench/.venv-flink (bench/peers/flink.py),
  against cep on the same rows, and against the Spark replay of (a) end to end (``--no-flink`` skips it).
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
from bench.peers import flink as flink_peer  # noqa: E402
from matcher import fastpath  # noqa: E402
from matcher.tables import arrow_to_columns  # noqa: E402

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
  DEFINE A AS A.volume >= 4000, B AS B.volume < PREV(B.volume), C AS C.volume > PREV(C.volume) AND C.price > PREV(C.price))""",
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
}


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
    saved = fastpath.ENABLED
    fastpath.ENABLED = fast
    try:
        return query.plan.run_columns(columns)[1]
    finally:
        fastpath.ENABLED = saved


def path_taken(query: cep.Query, columns: dict) -> str:
    machine = query.plan.machine(tuple(columns))
    plan, reasons = fastpath.analyze(query.statement, machine, tuple(columns))
    return "fast" if plan is not None else "VM (" + "; ".join(reasons) + ")"


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
VM_ROWS = {"b": 20_000, "d": 5_000, "e": 20_000, "f": 20_000}


def bench_queries(columns: dict, small: dict, rows: int, small_rows: int, repeats: int) -> list[dict]:
    results = []
    for name, (title, text) in QUERIES.items():
        query = cep.compile(text)
        path = path_taken(query, columns)
        count = min(VM_ROWS.get(name, small_rows), small_rows)
        target = {k: v[:count] for k, v in small.items()}
        entry = {"query": name, "title": title, "path": path, "small_rows": count}
        vm_s, vm_out = median_seconds(lambda: run_path(query, target, False), repeats)
        entry.update(small_vm_eps=count / vm_s, matches=len(vm_out))
        if path == "fast":
            fast_s, fast_out = median_seconds(lambda: run_path(query, target, True), repeats)
            entry.update(small_fast_eps=count / fast_s, fast_over_vm=vm_s / fast_s, same_output=fast_out == vm_out)
            if name not in VM_ROWS:
                seconds, out = median_seconds(lambda: run_path(query, columns, True), repeats)
                entry.update(rows=rows, fast_eps=rows / seconds, full_matches=len(out))
        print(f"  ({name}) {json.dumps({k: v for k, v in entry.items() if k != 'title'}, default=str)}", flush=True)
        results.append(entry)
    return results


def bench_v_shape(columns: dict, table, rows: int, repeats: int) -> dict:
    query = cep.compile(QUERIES["a"][1])
    loop_s, loop_out = median_seconds(lambda: v_shape_loop(columns), repeats)
    fast_s, fast_out = median_seconds(lambda: run_path(query, columns, True), repeats)
    e2e_s, _ = median_seconds(lambda: query.run(table), max(1, repeats - 1))
    convert_s, _ = median_seconds(lambda: arrow_to_columns(table), max(1, repeats - 1))
    result = {
        "rows": rows,
        "loop_eps": rows / loop_s,
        "fast_eps": rows / fast_s,
        "fast_over_loop": loop_s / fast_s,
        "same_output_as_loop": [tuple(r) for r in fast_out] == loop_out,
        "end_to_end_arrow_eps": rows / e2e_s,
        "arrow_to_columns_s": convert_s,
        "matches": len(fast_out),
    }
    print(f"  V-shape: {json.dumps(result)}", flush=True)
    return result


def bench_spark(path: Path, rows: int, repeats: int) -> dict:
    try:
        from spark_bridge.session import get_spark

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        began = time.perf_counter()
        spark = get_spark("local[2]", app_name="cep-bench")
        startup = time.perf_counter() - began
        query = cep.compile(QUERIES["a"][1])

        def once():
            return query.on_spark(spark.read.parquet(str(path))).count()

        once()  # warm the Python workers
        seconds, count = median_seconds(once, repeats, clock=time.perf_counter)  # wall: Spark is multi-process
        spark.stop()
        result = {"rows": rows, "startup_s": startup, "eps": rows / seconds, "seconds": seconds, "matches": count}
    except Exception as error:  # noqa: BLE001 - the bench reports what failed and goes on
        result = {"error": f"{type(error).__name__}: {error}"}
    print(f"  Spark local[2]: {json.dumps(result)}", flush=True)
    return result


def bench_pandas_match_recognize(columns_all: dict, path: Path, rows: int, repeats: int) -> dict:
    python = PEER_VENV / "bin" / "python"
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", "pandas-match-recognize==0.2.5", "pyarrow"], check=True)
        out = DATA_DIR / "pmr_out.json"
        subprocess.run([str(python), str(HERE / "peers" / "pmr_runner.py"), str(path), str(rows), "1", str(out)],
                       check=True, timeout=1200)
        peer = json.loads(out.read_text())
    except Exception as error:  # noqa: BLE001
        result = {"error": f"{type(error).__name__}: {error}"}
        print(f"  pandas-match-recognize: {json.dumps(result)}", flush=True)
        return result
    import pandas as pd

    columns = {name: values[:rows] for name, values in columns_all.items()}
    query = cep.compile(QUERIES["a"][1])
    ours_s, ours = median_seconds(lambda: run_path(query, columns, True), repeats)
    # The peer's seconds are CPU seconds of its own process (it is single-threaded).
    ours_rows = [[s, pd.Timestamp(a).isoformat(), b, pd.Timestamp(c).isoformat(), n] for s, a, b, c, n in ours]
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
        saved = fastpath.ENABLED
        fastpath.ENABLED = fast
        try:
            for entry in hostile.main():
                entry["path"] = "fast path enabled" if fast else "VM only"
                out.append(entry)
        except Exception as error:  # noqa: BLE001 - bench/hostile.py belongs to the matcher's tests
            print(f"  hostile patterns: not measured ({type(error).__name__}: {str(error).splitlines()[0]})", flush=True)
            return out
        finally:
            fastpath.ENABLED = saved
    return out


# ---------------------------------------------------------------------------------------- the report


def write_report(results: dict) -> None:
    v = results["v_shape"]
    lines = [
        "# Performance",
        "",
        "Written by `make bench` (`bench/run.py`) from `bench/results.json`; do not edit by hand.",
        f"Machine: {results['machine']}. Every figure is a median of {results['repeats']} runs, in input",
        "events per CPU-second of the measuring process (single-threaded work; the machine is shared, so wall",
        "time is noisy), except Spark (wall time); every ratio compares two figures of the same run on the same rows.",
        f"Data: `bench/data.py` ticks (100 symbols, one tick per symbol per second, random-walk prices), {v['rows']:,} rows",
        "unless a row says otherwise; the matcher is handed Python columns, as `Query.run` hands them over.",
        "",
        "## V-shape (query a): fast path against the hand-written loop",
        "",
        "| what | events/s | ratio to the hand-written loop |",
        "| --- | ---: | ---: |",
        f"| hand-written Python loop (the ceiling) | {v['loop_eps']:,.0f} | 1.00 |",
        f"| fast path (`plan.run_columns`, numpy + re) | {v['fast_eps']:,.0f} | {v['fast_over_loop']:.2f} |",
        f"| `Query.run(pyarrow.Table)` end to end (fast path + Arrow-to-Python conversion) | {v['end_to_end_arrow_eps']:,.0f} | {v['end_to_end_arrow_eps'] / v['loop_eps']:.2f} |",
        "",
        f"Same output as the hand-written loop: {v['same_output_as_loop']} ({v['matches']:,} matches). "
        f"Converting the Arrow table to Python columns alone takes {v['arrow_to_columns_s']:.2f} s "
        f"({v['rows'] / v['arrow_to_columns_s']:,.0f} rows/s), which bounds `Query.run` today (see below).",
        "",
        "## Queries (a)-(f)",
        "",
        "| query | path | rows | fast path events/s | VM events/s | fast / VM | same output |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for q in results["queries"]:
        fast = f"{q['small_fast_eps']:,.0f}" if "small_fast_eps" in q else "-"
        ratio = f"{q['fast_over_vm']:.1f}x" if "fast_over_vm" in q else "-"
        same = str(q.get("same_output", "-"))
        lines.append(f"| ({q['query']}) {q['title'].replace('|', chr(92) + '|')} | {q['path']} | {q['small_rows']:,} | {fast} | {q['small_vm_eps']:,.0f} | {ratio} | {same} |")
        if "fast_eps" in q:
            lines.append(f"| ({q['query']}) same, {q['rows']:,} rows | fast | {q['rows']:,} | {q['fast_eps']:,.0f} | | | |")
    lines += ["", "## Peers", ""]
    pmr = results.get("pandas_match_recognize")
    if pmr and "error" not in pmr:
        lines += [
            "| engine, query (a) | rows | events/s | ours / theirs | same output |",
            "| --- | ---: | ---: | ---: | --- |",
            f"| pandas-match-recognize 0.2.5 (own venv, one run) | {pmr['rows']:,} | {pmr['peer_eps']:,.0f} | | |",
            f"| cep fast path | {pmr['rows']:,} | {pmr['ours_eps']:,.0f} | {pmr['ours_over_peer']:,.0f}x | {pmr['same_output']} |",
            "",
            "pandas-match-recognize runs query (a) rewritten as `A.ts` and unqualified `price < PREV(price)`:",
            "with our text (`FIRST(A.ts)`, `B.price < PREV(B.price)`) version 0.2.5 returns NULL for every",
            "measure but `COUNT(*)` (its bug). It runs on a smaller slice because it is slow.",
        ]
        if not pmr["same_output"]:
            lines.append(f"Differences (first rows): `{json.dumps(pmr.get('examples'), default=str)}`")
    elif pmr:
        lines.append(f"pandas-match-recognize: not measured ({pmr['error']}).")
    spark = results.get("spark")
    if spark and "error" not in spark:
        lines += ["", f"Spark `local[2]`, query (a), {spark['rows']:,} rows from Parquet, `on_spark(df).count()`: "
                  f"{spark['eps']:,.0f} events/s end to end ({spark['seconds']:.1f} s; session start {spark['startup_s']:.1f} s, not counted)."]
    elif spark:
        lines += ["", f"Spark: not measured ({spark['error']})."]
    lines += flink_peer.report_lines(results.get("flink"), spark) + [""]
    if results.get("hostile"):
        lines += ["## Hostile patterns (bench/hostile.py): 10k vs 100k rows where nothing matches", "",
                  "| pattern | path | 10k rows (s) | 100k rows (s) | ratio (linear = 10) |", "| --- | --- | ---: | ---: | ---: |"]
    for h in results.get("hostile", []):
        lines.append(f"| `{h['pattern']}` | {h['path']} | {h['10k_s']:.3f} | {h['100k_s']:.3f} | {h['ratio']:.1f} |")
    lines += ["", "## Notes", ""] + [f"- {note}" for note in NOTES] + [""]
    DOC.write_text("\n".join(lines))


NOTES = [
    "The fast path (`matcher/fastpath.py`, `matcher/kernels.py`) takes queries whose DEFINE conditions read only"
    " the current row and PREV/NEXT at constant offsets (qualified references only to the variable being"
    " defined), without WITHIN, SEEK or absence terms, with at most 8 variables, and whose pattern is"
    " regex-safe: no unbounded repetition of a group that can span several rows, no two unbounded loops on"
    " one path over a shared variable. Per batch, the kernels may decline data they cannot evaluate exactly"
    " (integers beyond 64 bits, mixed types), and a partition whose loops could make the regex engine restart"
    " quadratically goes to the VM; so does a batch where two loops on one path can take the same row.",
    "Queries (b), (d), (e) read the match history (cross-variable references, LAST(v, 1), WITHIN, aggregates)"
    " and run on the Pike VM. (f) is eligible in form but its guard sends the rows to the VM (one run of A/B"
    " rows as long as the partition, so `re` would restart quadratically).",
    "`Query.run` converts Arrow/pandas to Python lists before matching (matcher/tables.py); for 1M rows with a"
    " timestamp column that costs more than the fast path itself. Handing the fast path numpy/Arrow columns"
    " directly is the next step for the end-to-end figure.",
    "10M rows (`--large`) is not part of the default run: generating, converting and matching 10M rows takes"
    " several minutes and ~6 GB on this 2-core machine; the 1M figures scale linearly on the fast path.",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--small-rows", type=int, default=200_000, help="rows for the VM comparisons")
    parser.add_argument("--peer-rows", type=int, default=100_000, help="rows for pandas-match-recognize")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--large", action="store_true", help="also run the fast path on 10M rows")
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--no-flink", action="store_true", help="skip PyFlink (about 5 minutes)")
    parser.add_argument("--no-hostile", action="store_true")
    parser.add_argument("--report-only", action="store_true", help="rewrite docs/performance.md from bench/results.json")
    args = parser.parse_args(argv)
    if args.report_only:
        write_report(json.loads(RESULTS.read_text()))
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
    print("V-shape against the hand-written loop", flush=True)
    results["v_shape"] = bench_v_shape(columns, table, args.rows, args.repeats)
    print("queries (a)-(f)", flush=True)
    results["queries"] = bench_queries(columns, small, args.rows, min(args.small_rows, args.rows), args.repeats)
    if args.large:
        large_path = ensure_data(10_000_000)
        large_table, large_columns = load_columns(large_path, 10_000_000)
        results["v_shape_10m"] = bench_v_shape(large_columns, large_table, 10_000_000, 1)
        del large_table, large_columns
    if not args.no_peers:
        print("pandas-match-recognize", flush=True)
        results["pandas_match_recognize"] = bench_pandas_match_recognize(columns, path, args.peer_rows, args.repeats)
    if not args.no_spark:
        print("Spark", flush=True)
        results["spark"] = bench_spark(path, args.rows, args.repeats)
    if not (args.no_peers or args.no_flink):
        print("PyFlink", flush=True)
        results["flink"] = flink_peer.bench(QUERIES, path, args.rows, args.repeats)
    if not args.no_hostile:
        print("hostile patterns", flush=True)
        results["hostile"] = bench_hostile()
    results["total_s"] = time.perf_counter() - began
    RESULTS.write_text(json.dumps(results, indent=2, default=str))
    write_report(results)
    print(f"wrote {DOC.relative_to(REPO)} in {results['total_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
