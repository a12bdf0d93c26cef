"""Two alert rules as analysts write them, over generated 10M-event logs: cep against PyFlink, same rows, same text.

    .venv/bin/python bench/alert_rules.py                     # 10M rows per log (make bench-rules)
    .venv/bin/python bench/alert_rules.py --rows 1000000 --no-flink

- brute force: ``FAIL{3,} OK`` within 5 minutes per user, over bench/alert_data.py's login log (100k users);
- card testing: ``SMALL{3,} BIG`` within 10 minutes per card, over its payments log (200k cards).

Measured on the same rows in one run, per rule: cep's ``Query.run(pyarrow.Table)`` (with and without reading
the Parquet file), the Pike VM alone (the column-wise engines off) on a subset of the keys, the Spark replay
``Query.on_spark(spark.read.parquet(...))`` on ``local[2]``, and PyFlink's MATCH_RECOGNIZE in batch mode
(bench/peers/flink.py's venv and runner) on a subset of the keys when the whole log would take it too long.
A subset is whole keys (every row of the users it keeps), so no match is cut. Outputs are compared as sets
of rows; where two engines differ, tests/reference_matcher.py runs on the keys that differ and says who is
right. Results: bench/results-alert-rules.json; bench/run.py's report writes their section of
docs/performance.md (this script rewrites the report when bench/results.json exists).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import cep  # noqa: E402
from bench import alert_data  # noqa: E402
from bench import run as bench_run  # noqa: E402
from bench.peers import flink as flink_peer  # noqa: E402
from cep.matcher.rows.tables import arrow_to_columns  # noqa: E402
from cep.matcher.vector import fastpath, sequence_plan  # noqa: E402

RESULTS = HERE / "results-alert-rules.json"


@dataclass(frozen=True)
class Rule:
    name: str
    title: str
    log: alert_data.LogShape
    flink_columns: str  # the log's columns in Flink's DDL
    text: str


RULES = (
    Rule(
        "brute_force",
        "brute force: 3+ failed logins then a success, within 5 minutes, per user",
        alert_data.LOGINS,
        "user_id STRING, ts TIMESTAMP(3), status STRING",
        """SELECT * FROM logins MATCH_RECOGNIZE (
  PARTITION BY user_id ORDER BY ts
  MEASURES FIRST(FAIL.ts) AS first_fail_ts, LAST(FAIL.ts) AS last_fail_ts, COUNT(FAIL.ts) AS fails,
           OK.ts AS ok_ts
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (FAIL{3,} OK) WITHIN INTERVAL '5' MINUTE
  DEFINE FAIL AS status = 'FAIL', OK AS status = 'OK')""",
    ),
    Rule(
        "card_testing",
        "card testing: 3+ charges under 2.00 then one of 500.00 or more, within 10 minutes, per card",
        alert_data.PAYMENTS,
        "card_id STRING, ts TIMESTAMP(3), amount DOUBLE",
        """SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card_id ORDER BY ts
  MEASURES FIRST(SMALL.ts) AS first_small_ts, COUNT(SMALL.ts) AS small_charges,
           SUM(SMALL.amount) AS small_total, BIG.ts AS big_ts, BIG.amount AS big_amount
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (SMALL{3,} BIG) WITHIN INTERVAL '10' MINUTE
  DEFINE SMALL AS amount < 2.00, BIG AS amount >= 500.00)""",
    ),
)

# The Pike VM alone ran these rules at 150-190k events per CPU-second here: 1M rows of whole keys keep it
# under 10 CPU-seconds a rule (the Python columns it needs weigh about 1 GB per 10M rows besides).
VM_ROWS = 1_000_000
# PyFlink in batch mode ran these rules at 12-16k rows per wall-second on the shared machine (35-55k per
# CPU-second): the whole 10M-row log would take 10-15 minutes a rule; 2M rows of whole keys take 2-3.
FLINK_ROWS = 2_000_000
SPARK_WARMUP_ROWS = 10_000  # a small log of the same shape: the first replay starts Spark's Python workers
REFEREE_KEYS = 20  # the reference matcher is plain Python: seconds per thousand rows of a busy key


# ------------------------------------------------------------------------------------------ helpers


def timed(function, repeats: int) -> tuple[float, float, object]:
    """Median wall and CPU seconds (this process) of ``repeats`` calls, and the last result."""
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def rows_of(table: pa.Table) -> list[tuple]:
    return [tuple(row.values()) for row in table.to_pylist()]


def key_subset(table: pa.Table, key: str, rows: int) -> pa.Table:
    """The rows of the keys with the smallest ids, as many keys as give about ``rows`` rows (whole keys:
    every row of a key kept is kept). Ids are a random draw over activity ranks (bench/alert_data.py), so
    the kept keys are a fair sample of heavy and light ones."""
    if rows >= table.num_rows:
        return table
    counts = pc.value_counts(table[key]).flatten()
    names, sizes = counts[0].to_numpy(zero_copy_only=False), counts[1].to_numpy()
    by_id = np.argsort(names)
    last = int(np.searchsorted(np.cumsum(sizes[by_id]), rows))
    kept = pa.array(names[by_id][: last + 1])
    return table.filter(pc.is_in(table[key], value_set=kept))


def log_stats(rule: Rule, table: pa.Table) -> dict:
    """What the generated log looks like: keys, rows per key, what the rule's conditions select, attacks."""
    per_key = pc.value_counts(table[rule.log.key]).field("counts").to_numpy()
    attacks = alert_data.injected(rule.log, table.num_rows)
    span = pc.subtract(attacks["last_ts"], attacks["first_ts"]).cast("int64").to_numpy() / 1000
    limit_s = int(rule.text.split("WITHIN INTERVAL '")[1].split("'")[0]) * 60
    finished = attacks["finished"].to_numpy(zero_copy_only=False)
    stats = {
        "keys": len(per_key),
        "busiest_key_rows": int(per_key.max()),
        "median_key_rows": float(np.median(per_key)),
        "keys_with_one_row": int((per_key == 1).sum()),
        "attacks": attacks.num_rows,
        "attacks_finished": int(finished.sum()),
        "attacks_finished_within_limit": int((finished & (span < limit_s)).sum()),
        "attacks_longer_than_limit": int((span > limit_s).sum()),
    }
    if rule.log is alert_data.LOGINS:
        stats["fail_share"] = pc.mean(pc.equal(table["status"], "FAIL").cast("int8")).as_py()
    else:
        amount = table["amount"].to_numpy()
        stats.update(small_share=float((amount < 2).mean()), big_share=float((amount >= 500).mean()))
    return stats


def engine_path(query: cep.Query, column_names: tuple[str, ...]) -> str:
    """Which engine takes the query's batches (the first line of ``cep explain``'s path, in short)."""
    machine = query.plan.machine(column_names)
    plan, reasons = fastpath.analyze(query.statement, machine, column_names)
    if plan is not None:
        return "regex fast path"
    if sequence_plan.analyze(query.statement, machine, column_names)[0] is not None:
        return "column-wise sequence engine"
    return "Pike VM (" + "; ".join(reasons) + ")"


def partition_stats(query: cep.Query, column_names: tuple[str, ...]) -> dict:
    """How many partitions the column-wise engines matched and how many fell back to the VM so far (their
    counters, read defensively: the engines' internals change under this bench)."""
    machine = query.plan.machine(column_names)
    found = {}
    for kept in (machine.column_plans.sequence, machine.column_plans.regex):
        plan = kept[0] if isinstance(kept, tuple) else kept
        found.update(getattr(plan, "stats", None) or {})
    return dict(found)


def only_in(a: list[tuple], b: list[tuple]) -> list[tuple]:
    return sorted(set(map(flink_peer.normalized, a)) - set(map(flink_peer.normalized, b)), key=str)


def referee(rule: Rule, table: pa.Table, engines: dict[str, list[tuple]]) -> dict:
    """On the keys where the engines' outputs differ (at most REFEREE_KEYS), which engine's rows equal those
    of tests/reference_matcher.py, an independent plain-Python evaluation of the standard."""
    sys.path.insert(0, str(REPO / "tests"))
    from reference_matcher import reference_run  # tests/ is not a package; only needed when outputs differ

    outputs = list(engines.values())
    differing = set()
    for a in outputs:
        for b in outputs:
            differing |= {row[0] for row in only_in(a, b)}
    keys = sorted(differing)[:REFEREE_KEYS]
    part = table.filter(pc.is_in(table[rule.log.key], value_set=pa.array(keys, pa.string())))
    part = part.sort_by([(rule.log.key, "ascending"), ("ts", "ascending")])
    reference = [tuple(r.values()) for r in reference_run(cep.compile(rule.text).statement, part.to_pylist())]
    verdict = {
        "differing_keys": len(differing),
        "keys_refereed": len(keys),
        "reference_matches": len(reference),
        "examples": {},
    }
    refereed = set(keys)
    for engine, rows in engines.items():
        mine = [row for row in rows if row[0] in refereed]
        extra, missing = only_in(mine, reference), only_in(reference, mine)
        verdict[f"{engine}_equals_reference"] = not extra and not missing and len(mine) == len(reference)
        if extra or missing:
            verdict["examples"][engine] = {
                "not_in_reference": [list(map(str, r)) for r in extra[:3]],
                "missing": [list(map(str, r)) for r in missing[:3]],
            }
    return verdict


def agreement(rule: Rule, table: pa.Table, engines: dict[str, list[tuple]]) -> dict:
    """Whether every engine's output equals the first's (as sets of rows), and the referee where not."""
    (first, ours), *others = engines.items()
    result = {f"{first}_matches": len(ours)}
    for engine, rows in others:
        result[f"{engine}_matches"] = len(rows)
        result[f"same_{engine}_as_{first}"] = (
            not only_in(ours, rows) and not only_in(rows, ours) and len(rows) == len(ours)
        )
    if not all(v for k, v in result.items() if k.startswith("same_")):
        result["referee"] = referee(rule, table, engines)
    return result


# ------------------------------------------------------------------------------------- measurements


def bench_cep(rule: Rule, path: Path, repeats: int) -> tuple[dict, list[tuple]]:
    """``Query.run(pyarrow.Table)`` on the whole log, reading the Parquet file apart and included."""
    query = cep.compile(rule.text)
    read_wall, read_cpu, table = timed(lambda: pq.read_table(path), repeats)
    before = partition_stats(query, tuple(table.column_names))
    wall, cpu, out = timed(lambda: query.run(table), repeats)
    after = partition_stats(query, tuple(table.column_names))
    rows = table.num_rows
    entry = {
        "rows": rows,
        "keys": pc.count_distinct(table[rule.log.key]).as_py(),
        "path": engine_path(query, tuple(table.column_names)),
        "partitions": {k: (after[k] - before.get(k, 0)) // repeats for k in after},
        "read_wall_s": read_wall,
        "read_cpu_s": read_cpu,
        "run_wall_s": wall,
        "run_cpu_s": cpu,
        "eps_per_cpu": rows / cpu,
        "eps_wall": rows / wall,
        "eps_per_cpu_with_read": rows / (cpu + read_cpu),
        "eps_wall_with_read": rows / (wall + read_wall),
        "matches": out.num_rows,
        "load_average": os.getloadavg()[0],
    }
    print(f"  cep Query.run: {json.dumps(entry)}", flush=True)
    return entry, rows_of(out)


def bench_vm(rule: Rule, table: pa.Table, rows: int, repeats: int) -> dict:
    """The Pike VM alone (``column_wise=False``: no column-wise engine) against ``Query.run`` on
    the same subset of whole keys, Python columns for the VM as ``bench/run.py`` gives it."""
    query = cep.compile(rule.text)
    part = key_subset(table, rule.log.key, rows)
    columns = arrow_to_columns(part)
    vm_wall, vm_cpu, vm_out = timed(lambda: bench_run.run_path(query, columns, False), repeats)
    wall, cpu, out = timed(lambda: query.run(part), repeats)
    ours = rows_of(out)
    vm_rows = [tuple(r) for r in vm_out]
    entry = {
        "rows": part.num_rows,
        "keys": pc.count_distinct(part[rule.log.key]).as_py(),
        "vm_cpu_s": vm_cpu,
        "vm_wall_s": vm_wall,
        "vm_eps_per_cpu": part.num_rows / vm_cpu,
        "vm_eps_wall": part.num_rows / vm_wall,
        "cep_eps_per_cpu": part.num_rows / cpu,
        "cep_over_vm_per_cpu": vm_cpu / cpu,
        "load_average": os.getloadavg()[0],
        **agreement(rule, part, {"cep": ours, "vm": vm_rows}),
    }
    print(f"  Pike VM alone: {json.dumps(entry, default=str)}", flush=True)
    return entry


def spark_session():
    from cep.spark_bridge.spark.session import get_spark  # optional heavy dependency: Spark starts a JVM

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return get_spark("local[2]", app_name="cep-bench-alert-rules")


def bench_spark(spark, rule: Rule, path: Path, ours: list[tuple], table: pa.Table, repeats: int) -> dict:
    """``Query.on_spark(spark.read.parquet(path))`` collected (the matches are few), wall and the whole
    process tree's CPU (driver, JVM, Python workers: bench/run.py's TreeUsage)."""
    query = cep.compile(rule.text)
    warm = alert_data.ensure(rule.log, SPARK_WARMUP_ROWS)
    query.on_spark(spark.read.parquet(str(warm))).count()  # start the Python workers, compile the plan
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        with bench_run.TreeUsage() as usage:
            began = time.perf_counter()
            out = query.on_spark(spark.read.parquet(str(path))).collect()
            walls.append(time.perf_counter() - began)
        cpus.append(usage.cpu_s)
    rows = table.num_rows
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    theirs = [tuple(r) for r in out]
    entry = {
        "rows": rows,
        "wall_s": wall,
        "cpu_s": cpu,
        "eps_wall": rows / wall,
        "eps_per_cpu": rows / cpu,
        "peak_rss_bytes": usage.peak_rss,
        "load_average": os.getloadavg()[0],
        **agreement(rule, table, {"cep": ours, "spark": theirs}),
    }
    print(f"  Spark local[2]: {json.dumps(entry, default=str)}", flush=True)
    return entry


def write_csv(table: pa.Table, path: Path) -> None:
    """Headerless CSV with ts as text, as bench/peers/flink_runner.py's tables read it (%S prints the millis)."""
    text = table.set_column(1, "ts", pc.strftime(table["ts"], "%Y-%m-%d %H:%M:%S"))
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    pcsv.write_csv(text, partial, pcsv.WriteOptions(include_header=False, quoting_style="none"))
    os.replace(partial, path)


def flink_files(rule: Rule, table: pa.Table, rows: int) -> tuple[pa.Table, Path, Path]:
    """The subset Flink runs on (whole keys, about ``rows`` rows) as CSV (Flink) and Parquet (cep), cached."""
    part = key_subset(table, rule.log.key, rows)
    stem = alert_data.path_of(rule.log, table.num_rows).stem + f"_keys_{part.num_rows}"
    csv, parquet = (alert_data.DATA_DIR / f"{stem}.{kind}" for kind in ("csv", "parquet"))
    if not (csv.exists() and parquet.exists()):
        write_csv(part, csv)
        pq.write_table(part, parquet)
    return part, csv, parquet


def bench_flink(subsets: dict[str, tuple[Rule, pa.Table, Path, Path]], repeats: int) -> dict:
    """Both rules in one Flink process (one start-up), then cep on the same rows and text; never raises."""
    installed = flink_peer.setup()
    if "reason" in installed:
        return {"not_run": installed["reason"]}
    work_root = alert_data.DATA_DIR / "flink"
    work_root.mkdir(parents=True, exist_ok=True)
    warmup = flink_peer.first_rows(bench_run.ensure_data(flink_peer.WARMUP_ROWS), flink_peer.WARMUP_ROWS).csv
    plan = {name: (rule, *flink_peer.flink_text(rule.text)) for name, (rule, *_rest) in subsets.items()}
    with tempfile.TemporaryDirectory(prefix="rules-", dir=work_root) as work:
        spec = {
            "warmup_csv": str(warmup),
            "work_dir": work,
            "queries": {
                name: {
                    "sql": sql,
                    "csv": str(subsets[name][2]),
                    "rows": subsets[name][1].num_rows,
                    "table": rule.log.table,
                    "columns": rule.flink_columns,
                }
                for name, (rule, sql, _) in plan.items()
            },
        }
        (Path(work) / "spec.json").write_text(json.dumps(spec))
        began = time.perf_counter()
        failure = flink_peer.run_runner(Path(work) / "spec.json", Path(work) / "out.json")
        if failure:
            return {"not_run": failure, **installed}
        flink = json.loads((Path(work) / "out.json").read_text())
    result = {
        **installed,
        "process_wall_s": time.perf_counter() - began,
        "startup": flink["startup"],
        "peak_rss_bytes": flink["peak_rss_bytes"],
        "load_average": os.getloadavg()[0],
        "rules": {},
    }
    for name, (rule, sql, rewrites) in plan.items():
        _, part, _, parquet = subsets[name]
        run = flink["queries"][name]
        entry = {
            "rows": part.num_rows,
            "keys": pc.count_distinct(part[rule.log.key]).as_py(),
            "rewrites": list(rewrites),
            "flink_sql_differs": sql != rule.text,
        }
        if "error" in run:
            entry["rejected"] = run["error"]
        else:
            query = cep.compile(sql)
            wall, cpu, out = timed(lambda: query.run(pq.read_table(parquet)), repeats)
            ours = rows_of(out)
            theirs = flink_peer.typed_like(ours, run["output"])
            rows = part.num_rows
            entry.update(
                flink_wall_s=run["wall_s"],
                flink_cpu_s=run["cpu_s"],
                flink_eps_wall=rows / run["wall_s"],
                flink_eps_per_cpu=rows / run["cpu_s"],
                flink_eps_end_to_end=rows / (run["wall_s"] + flink["startup"]["wall_s"]),
                cep_wall_s=wall,
                cep_cpu_s=cpu,
                cep_eps_wall=rows / wall,
                cep_eps_per_cpu=rows / cpu,
                cep_over_flink_per_cpu=run["cpu_s"] / cpu,
                cep_over_flink_wall=run["wall_s"] / wall,
                **agreement(rule, part, {"cep": ours, "flink": theirs}),
            )
        print(f"  PyFlink ({name}): {json.dumps(entry, default=str)}", flush=True)
        result["rules"][name] = entry
    return result


# ------------------------------------------------------------------------------------------ the run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows per log")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="runs per figure (the median); one run of 10M rows takes minutes on a shared 2-core machine",
    )
    parser.add_argument(
        "--flink-rows",
        type=int,
        default=FLINK_ROWS,
        help="rows (whole keys) Flink runs on; the whole log if at least --rows",
    )
    parser.add_argument("--vm-rows", type=int, default=VM_ROWS, help="rows (whole keys) for the Pike VM alone")
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--no-flink", action="store_true")
    parser.add_argument("--no-report", action="store_true", help="leave docs/performance.md alone")
    parser.add_argument(
        "--flink-only",
        action="store_true",
        help="run PyFlink (and cep on its rows) again, keeping the other figures of the results file",
    )
    args = parser.parse_args(argv)
    if args.flink_only:
        return flink_again(args)
    began = time.perf_counter()
    results: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "repeats": args.repeats,
        "rows": args.rows,
        "vm_rows": args.vm_rows,
        "generator_seed": alert_data.SEED,
        "rules": {},
    }
    tables, outputs = {}, {}
    for rule in RULES:
        print(f"{rule.name}: {args.rows:,} rows", flush=True)
        generated = time.perf_counter()
        path = alert_data.ensure(rule.log, args.rows)
        entry = {
            "title": rule.title,
            "text": rule.text,
            "file": str(path.relative_to(REPO)),
            "generate_or_find_s": time.perf_counter() - generated,
        }
        entry["cep"], outputs[rule.name] = bench_cep(rule, path, args.repeats)
        tables[rule.name] = pq.read_table(path)
        entry["log"] = log_stats(rule, tables[rule.name])
        print(f"  log: {json.dumps(entry['log'])}", flush=True)
        entry["vm"] = bench_vm(rule, tables[rule.name], args.vm_rows, args.repeats)
        results["rules"][rule.name] = entry
    if not args.no_spark:
        print("Spark local[2]", flush=True)
        began_spark = time.perf_counter()
        spark = spark_session()
        results["spark_startup_s"] = time.perf_counter() - began_spark
        try:
            for rule in RULES:
                results["rules"][rule.name]["spark"] = bench_spark(
                    spark,
                    rule,
                    alert_data.path_of(rule.log, args.rows),
                    outputs[rule.name],
                    tables[rule.name],
                    args.repeats,
                )
        finally:
            spark.stop()
    if not args.no_flink:
        print("PyFlink", flush=True)
        subsets = {rule.name: (rule, *flink_files(rule, tables[rule.name], args.flink_rows)) for rule in RULES}
        results["flink"] = bench_flink(subsets, args.repeats)
    results["total_s"] = time.perf_counter() - began
    return written(results, args.no_report)


def flink_again(args) -> int:
    """The Flink part alone, on the logs of the results file's row count, its other figures kept."""
    results = json.loads(RESULTS.read_text())
    tables = {rule.name: pq.read_table(alert_data.ensure(rule.log, results["rows"])) for rule in RULES}
    subsets = {rule.name: (rule, *flink_files(rule, tables[rule.name], args.flink_rows)) for rule in RULES}
    results["flink"] = bench_flink(subsets, args.repeats)
    return written(results, args.no_report)


def written(results: dict, no_report: bool) -> int:
    RESULTS.write_text(json.dumps(results, indent=2, default=str))
    print(f"wrote {RESULTS.relative_to(REPO)}", flush=True)
    if not no_report and bench_run.RESULTS.exists():
        bench_run.main(["--report-only"])
        print(f"rewrote {bench_run.DOC.relative_to(REPO)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
