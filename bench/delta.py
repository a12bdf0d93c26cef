"""The bench log as a Delta table: query (a) replayed from Delta beside the same rows from Parquet, on both engines.

    .venv/bin/python bench/delta.py --rows 10000000            # alone: writes bench/results-delta.json
    .venv/bin/python bench/delta.py --rows 1000000 --no-spark

``make bench`` (bench/run.py) runs ``bench()`` over its --large-rows file in the same run as its Parquet
figures; run alone, the figures go to bench/results-delta.json and bench/run.py's report shows them when
results.json has none of its own. The table is ``bench/data.py``'s ticks written once with ``deltalake``,
partitioned by day (``day``: the UTC date of ``ts``), into bench/data/ticks_<rows>_delta/.

Measured, python engine (CPU seconds of this process, median of --repeats): the read, then read + match, of
(1) the Parquet file's three columns the query reads, (2) the Delta table whole (every column, as a reader that
does not prune would), (3) the Delta table pruned to the query's columns (``delta_io.columns_read``, what
``cep run --input delta:PATH`` reads), (4) the same statement over ``(SELECT * FROM ticks WHERE day = first day)``:
the condition ``delta_io.pushed_filters`` finds in it, pushed into the read as ``cep run`` pushes it (the other
day's files are never opened). Spark (wall seconds, session started): query (a) from Parquet, and from Delta
through Delta's connector as ``cep run --engine spark`` reads it (``read_delta``: pruned, then pushed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

import cep  # noqa: E402
from bench import data as bench_data  # noqa: E402

DATA_DIR = HERE / "data"
RESULTS = HERE / "results-delta.json"
V_SHAPE = """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, LAST(B.price) AS bottom, LAST(C.ts) AS end_ts, COUNT(*) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C+)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))"""


def one_day(day: str) -> str:
    """Query (a) over one day of the ticks: a condition on the table's partition column, in the clause's input."""
    return V_SHAPE.replace(
        "FROM ticks MATCH_RECOGNIZE", f"FROM (SELECT * FROM ticks WHERE day = '{day}') MATCH_RECOGNIZE"
    )


def ensure_delta(parquet: Path, rows: int) -> Path:
    """The Parquet ticks as a Delta table partitioned by day (written once, kept beside the Parquet file)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import write_deltalake

    path = DATA_DIR / f"ticks_{rows}_delta"
    if not (path / "_delta_log").is_dir():
        table = pq.read_table(parquet)
        table = table.append_column("day", pc.strftime(table.column("ts"), format="%Y-%m-%d"))
        write_deltalake(str(path), table, partition_by=["day"])
    return path


def _median(function, repeats: int, clock):
    from bench.run import median_seconds  # here: bench/run.py imports this module at its top

    return median_seconds(function, repeats, clock)


def bench_python(parquet: Path, delta: Path, rows: int, repeats: int) -> dict:
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from cep.delta_io import columns_read, pushed_filters, read_delta_arrow, snapshot_of

    query = cep.compile(V_SHAPE)
    named = columns_read(cep.compile_sql(V_SHAPE))
    snapshot = snapshot_of(f"delta:{delta}")
    first_day = sorted(p["day"] for p in DeltaTable(str(delta)).partitions())[0]
    day_statement = cep.compile_sql(one_day(first_day))
    day_columns, day_filters = columns_read(day_statement), pushed_filters(day_statement, "ticks")
    reads = {
        "parquet": lambda: pq.read_table(parquet, columns=["symbol", "ts", "price"]),
        "delta_whole": lambda: read_delta_arrow(snapshot),
        "delta_pruned": lambda: read_delta_arrow(snapshot, named),
        "delta_pruned_one_day": lambda: read_delta_arrow(snapshot, day_columns, day_filters),
    }
    out: dict = {
        "columns_read": [c for c in ("symbol", "ts", "price", "volume", "day") if c in named],
        "first_day": first_day,
        "pushed": [f"{f.column} {f.op} {f.values[0]!r}" for f in day_filters],
    }
    for name, read in reads.items():
        read_s, table = _median(read, repeats, time.process_time)
        total_s, matches = _median(lambda: query.run(read()).num_rows, repeats, time.process_time)
        out[name] = {
            "rows_read": table.num_rows,
            "columns": table.num_columns,
            "read_cpu_s": read_s,
            "read_and_match_cpu_s": total_s,
            "matches": matches,
            "eps": table.num_rows / total_s,
        }
        print(f"  python, {name}: {json.dumps(out[name])}", flush=True)
    return out


def bench_spark(parquet: Path, delta: Path, repeats: int, first_day: str) -> dict:
    try:
        from cep.delta_io import columns_read, pushed_filters, snapshot_of
        from cep.spark_bridge.spark.delta import read_delta
        from cep.spark_bridge.spark.session import get_spark

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        began = time.perf_counter()
        spark = get_spark("local[2]", app_name="cep-bench-delta", delta=True)
        out: dict = {"startup_s": time.perf_counter() - began}
        query = cep.compile(V_SHAPE)
        snapshot = snapshot_of(f"delta:{delta}")
        day_statement = cep.compile_sql(one_day(first_day))
        day_columns, day_filters = columns_read(day_statement), pushed_filters(day_statement, "ticks")
        named = columns_read(cep.compile_sql(V_SHAPE))
        sources = {
            "parquet": lambda: spark.read.parquet(str(parquet)).select("symbol", "ts", "price"),
            "delta_pruned": lambda: read_delta(spark, snapshot, named),
            "delta_pruned_one_day": lambda: read_delta(spark, snapshot, day_columns, day_filters),
        }
        query.on_spark(sources["parquet"]()).count()  # warm the Python workers
        for name, source in sources.items():
            seconds, matches = _median(lambda: query.on_spark(source()).count(), repeats, time.perf_counter)
            rows = source().count()
            out[name] = {
                "rows_read": rows,
                "seconds": seconds,
                "matches": matches,
                "eps": rows / seconds,
                "load_average": os.getloadavg()[0],
            }
            print(f"  Spark, {name}: {json.dumps(out[name])}", flush=True)
        return out
    except Exception as error:  # noqa: BLE001 - the bench reports what failed and goes on
        print(f"  Spark over Delta: {type(error).__name__}: {error}", flush=True)
        return {"error": f"{type(error).__name__}: {error}"}


def bench(parquet: Path, rows: int, repeats: int, *, spark: bool = True) -> dict:
    """Query (a) over the ``rows`` ticks of ``parquet``, from Parquet and from Delta, both engines."""
    delta = ensure_delta(parquet, rows)
    out = {
        "rows": rows,
        "python": bench_python(parquet, delta, rows, repeats),
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    if spark:
        out["spark"] = bench_spark(parquet, delta, repeats, out["python"]["first_day"])
    return out


def report(results: dict | None) -> list[str]:
    """The Delta section of docs/performance.md."""
    if not results:
        return []
    py = results["python"]
    lines = [
        f"## Query (a) from a Delta table ({results['rows']:,} rows, partitioned by day)",
        "",
        f"The bench ticks as a Delta table (`bench/delta.py`, {results['date']}, load average "
        f"{', '.join(map(str, results['load_average']))} on 2 cores), beside the same rows from Parquet. Python "
        "engine: CPU seconds of the process, median of its runs.",
        "",
        "| python engine reads | rows read | columns | read CPU s | read + match CPU s | events per CPU-s | matches |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    titles = {
        "parquet": "Parquet, the 3 columns the query reads",
        "delta_whole": "Delta, every column (no pruning)",
        "delta_pruned": f"Delta, pruned to {', '.join(py['columns_read'])} (`cep run --input delta:`)",
        "delta_pruned_one_day": f"Delta, pruned, `WHERE day = '{py['first_day']}'` pushed into the read",
    }
    for key, title in titles.items():
        m = py[key]
        lines.append(
            f"| {title} | {m['rows_read']:,} | {m['columns']} | {m['read_cpu_s']:.2f} | "
            f"{m['read_and_match_cpu_s']:.2f} | {m['eps']:,.0f} | {m['matches']:,} |"
        )
    spark = results.get("spark")
    if spark and "error" not in spark:
        lines += [
            "",
            "| Spark `local[2]` (session started) | rows read | wall s | events/s (wall) | matches |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for key in ("parquet", "delta_pruned", "delta_pruned_one_day"):
            m = spark[key]
            lines.append(
                f"| {titles[key].replace(' (`cep run --input delta:`)', '')} | {m['rows_read']:,} | "
                f"{m['seconds']:.1f} | {m['eps']:,.0f} | {m['matches']:,} |"
            )
    elif spark:
        lines += ["", f"Spark over Delta: not measured ({spark['error']})."]
    else:
        lines += ["", "Spark over Delta: not measured in this run (`--no-spark`)."]
    whole, pruned, day = py["delta_whole"], py["delta_pruned"], py["delta_pruned_one_day"]
    lines += [
        "",
        f"Column pruning: reading only the columns the statement names ({', '.join(py['columns_read'])}) took "
        f"{pruned['read_cpu_s']:.2f} CPU-s where the whole table took {whole['read_cpu_s']:.2f}; the `volume` and "
        "`day` columns are never decoded. Partition pruning: the statement over `(SELECT * FROM ticks WHERE day = "
        f"'{py['first_day']}')` has its condition pushed into the read"
        + (f" ({', '.join(py['pushed'])})" if py.get("pushed") else "")
        + ", "
        f"which opens only that day's files and reads {day['rows_read']:,} of {whole['rows_read']:,} rows, so "
        f"reading and matching cost {day['read_and_match_cpu_s'] / pruned['read_and_match_cpu_s']:.0%} of the whole "
        "table's; its matches differ because it is another input. The pruned and the whole read find the same "
        "matches as Parquet. Read + match from Delta costs more than from the Parquet file although the read itself "
        "costs less: the difference is in "
        "matching the table delta-rs returns, which this bench does not break down further.",
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args(argv)
    parquet = DATA_DIR / f"ticks_{args.rows}.parquet"
    if not parquet.exists():
        DATA_DIR.mkdir(exist_ok=True)
        bench_data.write(args.rows, parquet)
    results = bench(parquet, args.rows, args.repeats, spark=not args.no_spark)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(f"wrote {RESULTS.relative_to(REPO)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
