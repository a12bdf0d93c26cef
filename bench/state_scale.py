"""State at scale: many distinct keys with a partial match open each, on Spark's two state stores.

    .venv/bin/python bench/state_scale.py                          # 100k and 300k keys, RocksDB and HDFS
    .venv/bin/python bench/state_scale.py --keys 100000,1000000 --stores rocksdb

A user-session rule, ``PATTERN (A B)`` per ``user_id`` with A a login and B a logout, fed logins only: every
key keeps one open partial match (its A row) in the state store until the session timeout (1 hour, never
reached here). Per (store, keys) one fresh child process (so the peaks are its own), ``local[2]``, a Parquet
file source read one file per micro-batch (``maxFilesPerTrigger=1``, ``trigger(availableNow=True)``), cep's
``q.on_spark`` into a no-op sink:

1. fill: ``--fill-rows`` new keys per micro-batch until every key has its login, in the order of the buckets
   cep puts them in (``--fill-order bucket``, the default: a fill batch touches rows / keys-per-bucket
   buckets at every size, so that two sizes differ only in the keys held) or by number (``key``: a fill
   batch touches up to one bucket per row, every bucket at 1 million keys);
2. steady: ``--steady-batches`` micro-batches of ``--steady-rows`` logins of keys already open, spread over
   every bucket (the state of a touched bucket is read and written again): the micro-batch time a stream
   with that many open keys pays;
3. restart: the query stopped and started again on its checkpoint with one more file: seconds from
   ``start()`` to the end of its first micro-batch (the state store is loaded from the checkpoint).

``--compare-with DIR`` runs each (store, keys) a second time with another checkout's code (DIR's own
``.venv`` and bench/state_scale.py, e.g. a worktree of the previous release), right after this one's: the two
state layouts side by side under the same load.

``--keys-per-bucket N`` gives each size its own bucket count (about N keys per bucket), ``--conf`` Spark settings
and ``--env`` environment variables (e.g. ``MALLOC_ARENA_MAX=2``) for every run; ``--append`` adds the runs to
those already in --json.

``--jvm-detail`` starts the JVM with Native Memory Tracking and samples, every ``--sample-s`` seconds, each
process's resident set and the JVM's own account of its memory (bench/memory_timeline.py): the heap, metaspace,
direct buffers, and what is resident outside them, which is RocksDB's (and the C library's) native memory. The
timeline, with the start of each phase marked, is in the JSON; the table shows the largest heap and untracked
native memory. After the steady phase it also takes the heap's histogram (``jcmd GC.class_histogram``, after a
full collection): the live heap and its largest classes, what would hold a heap that grows with the keys.

Reported, from Spark's progress read as the service reads it for ``cep_state_bytes`` and
``cep_state_memory_bytes`` (``batch_entry``, spark_bridge/alerting/status.py): the state's bytes per key (the
HDFS-backed store's current version; RocksDB's SST files plus its memtables) and, apart, the store's memory
(``memoryUsedBytes``: the HDFS store's loaded versions on the heap, RocksDB's native memory under its cap, which
is not the state's size); the checkpoint's size on disk, the peak resident set
(``VmHWM``) of the driver's Python, its JVM and the largest Python worker (bench/procmem.py), the median
micro-batch time of each phase. Writes --json (bench/results-state-scale.json), which bench/run.py turns into
docs/performance.md's "State at scale" section. The other engineers' processes share this machine's two
cores: compare the stores within one run, not across runs.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from memory_timeline import JVM_TRACKING_OPTION, MemoryTimeline, class_histogram, largest, largest_jvm  # noqa: E402
from procmem import TreeMemory  # noqa: E402

from cep.spark_bridge.alerting.status import (  # noqa: E402
    HDFS_STATE_METRIC,
    ROCKSDB_SST_METRIC,
    batch_entry,
    operator_state_bytes,
    progress_get,
)
from cep.spark_bridge.spark.buckets import KEY_BUCKETS  # noqa: E402

QUERY = """SELECT * FROM logins MATCH_RECOGNIZE (
  PARTITION BY user_id ORDER BY ts
  MEASURES A.ts AS opened, B.ts AS closed
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B)
  DEFINE A AS A.kind = 'login', B AS B.kind = 'logout')"""
BOUNDED = "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage"
SETTINGS_SHOWN = (
    "spark.sql.streaming.stateStore.providerClass",
    BOUNDED,
    "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB",
    "spark.sql.execution.arrow.maxRecordsPerBatch",
)
START_S = 1_700_000_000  # event times start here (2023-11-14), one millisecond per row


def user_ids(users) -> list[str]:
    return [f"u{u:08d}" for u in users]


def bucket_order(spark, keys: int, key_buckets: int):
    """The keys 0..keys-1 sorted by the bucket cep's keyed operator puts them in (Spark's own hash, computed by
    Spark): filled in this order, a fill micro-batch of R new keys touches about R / (keys per bucket) buckets at
    every size, so the state read and written per fill batch follows R, not the keys already held."""
    import numpy as np
    from pyspark.sql import functions as F

    from cep.spark_bridge.spark.buckets import bucket_expression

    users = spark.range(keys).select(F.format_string("u%08d", F.col("id")).alias("user_id"))
    buckets = users.select(bucket_expression(["user_id"], key_buckets).alias("bucket")).toPandas()["bucket"]
    return np.argsort(buckets.to_numpy(), kind="stable")


def write_files(
    directory: Path, keys: int, fill_rows: int, steady_batches: int, steady_rows: int, fill_order=None
) -> list[int]:
    """The input files, one per micro-batch, named and stamped in reading order; their row counts. The fill
    batches take the keys in ``fill_order`` (default: by number)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True)
    rng = np.random.default_rng(11)
    order = np.arange(keys) if fill_order is None else fill_order
    slices = [order[s : s + fill_rows] for s in range(0, keys, fill_rows)]
    slices += [rng.choice(keys, steady_rows, replace=False) for _ in range(steady_batches + 1)]  # +1: the restart
    clock, counts = START_S * 1000, []
    for index, users in enumerate(slices):
        ts = clock + np.arange(len(users))
        clock += len(users)
        table = pa.table(
            {
                "user_id": pa.array(user_ids(users)),
                "ts": pa.array(ts.astype("datetime64[ms]"), pa.timestamp("ms", tz="UTC")),
                "kind": pa.array(["login"] * len(users)),
            }
        )
        path = directory / f"part-{index:05d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (START_S + index, START_S + index))
        counts.append(len(users))
    return counts


def commit_of(root: Path) -> str:
    done = subprocess.run(["git", "-C", str(root), "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    return done.stdout.strip()[:60] or str(root)


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def batch_numbers(progress: list) -> list[dict]:
    """The micro-batches with rows, each read from Spark's progress by the code that gives the service's status and
    ``/metrics`` (``batch_entry``): ``state_bytes`` is ``cep_state_bytes`` (the state's size: the HDFS-backed
    store's current version; RocksDB's SST files plus the memtables charged to its cache) and
    ``state_memory_bytes`` is ``cep_state_memory_bytes`` (Spark's ``memoryUsedBytes``: the memory the store takes,
    which on RocksDB is its native memory under the cap, not the state's size)."""
    out = []
    for p in progress:
        entry = batch_entry(p, None)
        if not entry["input_rows"]:
            continue
        operators = progress_get(p, "stateOperators", []) or []
        out.append(
            {
                "rows": entry["input_rows"],
                "ms": entry["duration_ms"],
                "add_batch_ms": entry["durations_ms"].get("addBatch"),
                "state_rows": entry["state_rows"],
                "state_bytes": entry["state_bytes"],
                "state_memory_bytes": entry["state_memory_bytes"],
                # the state store's share: updating it (the calls included) and committing (writing its files)
                "state_updates_ms": sum(progress_get(op, "allUpdatesTimeMs", 0) for op in operators),
                "state_commit_ms": sum(progress_get(op, "commitTimeMs", 0) for op in operators),
                # the parts of those two figures in the store's own account, summed over the operators
                "store_metrics": store_metrics(operators),
            }
        )
    return out


def store_metrics(operators: list) -> dict:
    """The store's custom metrics the state's size and memory are made of (RocksDB's SST files, pinned blocks,
    block cache and memtables; the HDFS-backed store's current version), summed over the operators."""
    found: dict[str, int] = {}
    for op in operators:
        for name, value in (progress_get(op, "customMetrics", {}) or {}).items():
            if name == HDFS_STATE_METRIC or (
                name.startswith("rocksdb") and ("Memory" in name or "Size" in name or "Usage" in name)
            ):
                found[name] = found.get(name, 0) + int(value or 0)
    return found


def start(spark, q, source: Path, checkpoint: Path, key_buckets: int):
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("user_id", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("kind", T.StringType()),
        ]
    )
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
    out = q.on_spark(df, watermark="1 second", session_timeout="1 hour", key_buckets=key_buckets)
    return (
        out.writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )


def buckets_for(keys: int, args) -> int:
    """The key buckets of a run: ``--key-buckets``, or with ``--keys-per-bucket`` as many as hold that many keys each
    (the next power of two, at least 1)."""
    if not args.keys_per_bucket:
        return args.key_buckets
    wanted = max(1, -(-keys // args.keys_per_bucket))
    return 1 << (wanted - 1).bit_length()


def wait_marking(query, timeline: MemoryTimeline, fill_batches: int) -> None:
    """Wait for ``query`` to end, marking in ``timeline`` when its fill batches are done (the steady ones begin)."""
    marked = False
    while not query.awaitTermination(2):
        progress = query.lastProgress
        if not marked and progress and progress["batchId"] >= fill_batches - 1:
            timeline.mark("steady")
            marked = True


def one(store: str, keys: int, args) -> dict:
    """One (store, keys) run in this process; returns its numbers."""
    import cep
    from cep.spark_bridge.spark.session import checkpoint_state_store, get_spark

    work = Path(tempfile.mkdtemp(prefix="cep-state-scale-"))
    if args.jvm_detail:  # read by the JVM spark-submit starts (and by its launcher, which ends at once)
        os.environ["JAVA_TOOL_OPTIONS"] = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} {JVM_TRACKING_OPTION}".strip()
    memory = TreeMemory().start()
    timeline = MemoryTimeline(os.getpid(), interval_s=args.sample_s).start()
    key_buckets = buckets_for(keys, args)
    try:
        conf = dict(item.split("=", 1) for item in args.conf)
        spark = get_spark("local[2]", app_name="cep-state-scale", state_store=store, conf=conf)
        order = bucket_order(spark, keys, key_buckets) if args.fill_order == "bucket" else None
        counts = write_files(work / "all", keys, args.fill_rows, args.steady_batches, args.steady_rows, order)
        source = work / "in"
        source.mkdir()
        q = cep.compile(QUERY)
        files = sorted((work / "all").iterdir())
        for f in files[:-1]:
            shutil.copy2(f, source / f.name)
        fills = len(counts) - args.steady_batches - 1
        timeline.mark("fill")
        started = time.perf_counter()
        query = start(spark, q, source, work / "ck", key_buckets)
        wait_marking(query, timeline, fills)
        run_s = time.perf_counter() - started
        batches = batch_numbers(query.recentProgress)
        fill, steady = batches[:fills], batches[fills:]
        checkpoint_bytes = directory_bytes(work / "ck")
        # every key open and the query stopped: the heap's live objects by class, what holds it as keys grow
        jvm = largest_jvm(os.getpid()) if args.jvm_detail else None
        histogram = class_histogram(jvm) if jvm else {}
        shutil.copy2(files[-1], source / files[-1].name)
        timeline.mark("restart")
        started = time.perf_counter()
        again = start(spark, q, source, work / "ck", key_buckets)
        again.awaitTermination()
        restart_s = time.perf_counter() - started
        restarted = batch_numbers(again.recentProgress)
        last = steady[-1] if steady else fill[-1]
        out = {
            "store": store,
            "store_in_checkpoint": checkpoint_state_store(work / "ck"),
            "keys": keys,
            "key_buckets": key_buckets,
            "conf": conf,
            # what the session ran with, cep's defaults included (the RocksDB cap, the Arrow batch rows)
            "settings": {key: spark.conf.get(key, None) for key in SETTINGS_SHOWN},
            "fill_rows": args.fill_rows,
            "fill_order": args.fill_order,
            "steady_batches": args.steady_batches,
            "steady_rows": args.steady_rows,
            "batches": len(batches),
            "run_s": round(run_s, 1),
            "fill_batch_median_s": round(statistics.median(b["ms"] for b in fill) / 1000, 2),
            "fill_batch_max_s": round(max(b["ms"] for b in fill) / 1000, 2),
            "steady_batch_median_s": round(statistics.median(b["ms"] for b in steady) / 1000, 2) if steady else None,
            "steady_state_commit_median_s": (
                round(statistics.median(b["state_commit_ms"] for b in steady) / 1000, 2) if steady else None
            ),
            "state_rows": last["state_rows"],
            "state_bytes": last["state_bytes"],
            "state_bytes_per_key": round(last["state_bytes"] / keys, 1),
            "state_memory_bytes": last["state_memory_bytes"],
            "checkpoint_mb": round(checkpoint_bytes / 1e6, 1),
            "checkpoint_bytes_per_key": round(checkpoint_bytes / keys, 1),
            "restart_to_first_batch_s": round(restart_s, 1),
            "restart_batch_s": round(restarted[0]["ms"] / 1000, 2) if restarted else None,
        }
        out["peak_mb"] = memory.stop()
        out["timeline"] = timeline.stop()
        out["store_metrics_last_steady"] = last["store_metrics"]
        out["heap_histogram_after_steady"] = histogram
        out["jvm_breakdown_peak_mb"] = {
            part: largest(out["timeline"], "jvm_native_mb", part) for part in ("java_heap", "other", "untracked")
        }
        spark.stop()
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _GroupState:
    """What cep's step reads and writes of pyspark's GroupState, for calling it outside Spark."""

    def __init__(self) -> None:
        self.blob, self.watermark_ms, self.hasTimedOut = None, 0, False

    exists = property(lambda self: self.blob is not None)
    get = property(lambda self: (self.blob,))

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802 (pyspark's name)
        return self.watermark_ms

    def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802
        return 0

    def update(self, value) -> None:
        self.blob = value[0]

    def remove(self) -> None:
        self.blob = None

    def setTimeoutTimestamp(self, ms) -> None:  # noqa: N802
        pass


def bucket_profile(keys: int, rows: int, repeats: int) -> dict:
    """One bucket holding ``keys`` open keys, called outside Spark with ``rows`` logins of its keys (the function
    Spark calls, ``_SparkStep``, column-wise as QUERY runs): median seconds of the whole call and of its parts,
    reading the table from its bytes and writing it back, the rest being the engine's work on the rows."""
    import contextlib

    import numpy as np
    import pandas as pd

    import cep
    from cep.spark_bridge.engine.column_table import ColumnarTable
    from cep.spark_bridge.spark import streaming
    from cep.spark_bridge.spark.columns import EVENT_US, MARKER
    from cep.spark_bridge.spark.streaming import _SparkStep

    paused = streaming.gc_paused

    def frame(users, first_ms: int):
        out = pd.DataFrame(
            {
                "user_id": user_ids(users),
                "ts": pd.to_datetime(first_ms + np.arange(len(users)), unit="ms"),
                "kind": ["login"] * len(users),
            }
        )
        out[EVENT_US] = out["ts"].astype("int64") // 1000
        out[MARKER] = pd.NaT
        return out

    q = cep.compile(QUERY)
    columns = ("user_id", "ts", "kind")
    types = {"user_id": "VARCHAR", "ts": "TIMESTAMP", "kind": "VARCHAR"}
    step = _SparkStep(
        q.plan,
        columns,
        ("user_id",),
        query_text=q.text,
        session_timeout_us=3_600_000_000,
        max_pending_rows=1_000,
        output_columns=q.plan.output_types(types),
        late_rows=True,
        key_buckets=KEY_BUCKETS,
    )
    state, start_ms = _GroupState(), START_S * 1000
    for first in range(0, keys, 50_000):
        list(step(("bucket",), iter([frame(range(first, min(keys, first + 50_000)), start_ms + first)]), state))
    state.watermark_ms = start_ms + keys - 1_000
    rng = np.random.default_rng(5)
    called = frame(rng.choice(keys, rows, replace=False), start_ms + keys)
    cstep = step.columnar()
    timings: dict[str, list[float]] = {
        "call_s": [],
        "call_with_gc_walks_s": [],
        "read_table_s": [],
        "write_table_s": [],
    }
    for _ in range(repeats):
        for name, held_off in (("call_s", streaming.gc_paused), ("call_with_gc_walks_s", contextlib.nullcontext)):
            saved, streaming.gc_paused = state.blob, held_off  # nullcontext: the collector on, as it was before
            try:
                started = time.perf_counter()
                list(step(("bucket",), iter([called.copy()]), state))
                timings[name].append(time.perf_counter() - started)
            finally:
                streaming.gc_paused, state.blob = paused, saved
        started = time.perf_counter()
        table = ColumnarTable.decode(state.blob, cstep.columns, KEY_BUCKETS, cstep.engine)
        timings["read_table_s"].append(time.perf_counter() - started)
        started = time.perf_counter()
        table.encode()
        timings["write_table_s"].append(time.perf_counter() - started)
    out = {name: round(statistics.median(values), 4) for name, values in timings.items()}
    out["engine_work_s"] = round(out["call_s"] - out["read_table_s"] - out["write_table_s"], 4)
    out.update(keys=keys, rows=rows, repeats=repeats, table_bytes=len(state.blob))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="100000,300000", help="distinct keys per run, comma separated")
    parser.add_argument("--stores", default="rocksdb,hdfs")
    parser.add_argument("--fill-rows", type=int, default=50_000, help="new keys per micro-batch while filling")
    parser.add_argument(
        "--fill-order",
        choices=("bucket", "key"),
        default="bucket",
        help="the fill's keys by bucket (a fill batch touches rows/keys-per-bucket buckets at every size) or by number",
    )
    parser.add_argument("--steady-batches", type=int, default=4)
    parser.add_argument("--steady-rows", type=int, default=2_000)
    parser.add_argument("--key-buckets", type=int, default=KEY_BUCKETS, help="cep's key buckets (on_spark)")
    parser.add_argument(
        "--keys-per-bucket", type=int, help="instead of --key-buckets: buckets of about this many keys (power of 2)"
    )
    parser.add_argument(
        "--jvm-detail", action="store_true", help="the JVM's native memory by part (Native Memory Tracking, jcmd)"
    )
    parser.add_argument("--sample-s", type=float, default=15.0, help="seconds between memory timeline samples")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        help="KEY=VALUE: an environment variable of each run's process, its JVM and workers (MALLOC_ARENA_MAX=2)",
    )
    parser.add_argument(
        "--conf", action="append", default=[], help="KEY=VALUE: a Spark setting for every run (repeatable)"
    )
    parser.add_argument("--compare-with", help="another checkout: each run again with its code (its own .venv)")
    parser.add_argument(
        "--bucket-profile",
        help="keys per bucket, comma separated: call one bucket outside Spark (no Spark run) and split its time",
    )
    parser.add_argument("--profile-rows", type=int, default=300, help="rows of the profiled call")
    parser.add_argument("--one", help="internal: run one store:keys in this process and print its JSON")
    parser.add_argument("--json", default=str(HERE / "results-state-scale.json"))
    parser.add_argument("--append", action="store_true", help="keep the runs already in --json, add these after")
    args = parser.parse_args()
    if args.bucket_profile:
        found = [bucket_profile(int(k), args.profile_rows, 5) for k in args.bucket_profile.split(",")]
        for one_bucket in found:
            one_bucket["load_average"] = [round(x, 2) for x in os.getloadavg()]
            print(json.dumps(one_bucket), flush=True)
        path = Path(args.json)
        report = json.loads(path.read_text()) if path.exists() else {}
        report["bucket_profile"] = {"when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "runs": found}
        path.write_text(json.dumps(report, indent=1) + "\n")
        return 0
    if args.one:
        store, keys = args.one.split(":")
        print("RESULT " + json.dumps(one(store, int(keys), args)), flush=True)
        return 0
    codes = [("this", REPO)] + ([("compared", Path(args.compare_with).resolve())] if args.compare_with else [])
    runs = []
    for keys in [int(k) for k in args.keys.split(",")]:
        for store in args.stores.split(","):  # the stores side by side at each size: the load is alike
            for code, root in codes:
                load = [round(x, 2) for x in os.getloadavg()]
                commit = commit_of(root)
                python = sys.executable if code == "this" else str(root / ".venv" / "bin" / "python")
                command = [python, str(root / "bench" / "state_scale.py"), "--one", f"{store}:{keys}"]
                command += ["--fill-rows", str(args.fill_rows), "--steady-batches", str(args.steady_batches)]
                command += ["--steady-rows", str(args.steady_rows), "--key-buckets", str(args.key_buckets)]
                if code == "this":  # a compared checkout may not know these
                    command += ["--fill-order", args.fill_order]
                    command += ["--sample-s", str(args.sample_s)] + (["--jvm-detail"] if args.jvm_detail else [])
                    if args.keys_per_bucket:
                        command += ["--keys-per-bucket", str(args.keys_per_bucket)]
                command += [f"--conf={item}" for item in args.conf]
                env = {**os.environ, **dict(item.split("=", 1) for item in args.env)}
                done = subprocess.run(command, capture_output=True, text=True, cwd=root, env=env)
                result = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
                run = json.loads(result[0]) if result else {"store": store, "keys": keys, "error": done.stderr[-2000:]}
                run["code"] = code if code == "this" else f"{code}: {commit}"
                run["env"] = dict(item.split("=", 1) for item in args.env)
                run["load_average_before"] = load
                run["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
                runs.append(run)
                print(json.dumps(run), flush=True)
    report = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "query": QUERY,
        "params": {k: v for k, v in vars(args).items() if k not in ("one", "json", "compare_with")},
        "this_commit": commit_of(REPO),
        "runs": runs,
        "command": "make bench-state  (.venv/bin/python bench/state_scale.py)",
    }
    path = Path(args.json)
    if args.append and path.exists():  # the runs before these, and the note that says how they were run
        earlier = json.loads(path.read_text())
        report["runs"] = earlier.get("runs", []) + runs
        report.update({"note": earlier["note"]} if "note" in earlier else {})
    if path.exists() and "bucket_profile" in json.loads(path.read_text()):  # kept: --bucket-profile runs apart
        report["bucket_profile"] = json.loads(path.read_text())["bucket_profile"]
    path.write_text(json.dumps(report, indent=1) + "\n")
    return 0


RESULTS = HERE / "results-state-scale.json"


def store_label(run: dict) -> str:
    """The store, and the settings given with --conf (by the last part of their names) and --env."""
    settings = {name.rsplit(".", 1)[-1]: value for name, value in (run.get("conf") or {}).items()}
    ran_with = run.get("settings") or {}
    cap = ran_with.get("spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB")
    if run["store"] == "rocksdb" and cap and "maxMemoryUsageMB" not in settings:  # cep's session set it
        settings["maxMemoryUsageMB"] = f"{cap} (cep's default)"
    settings.update(run.get("env") or {})
    if "LD_PRELOAD" in settings:  # the allocator's library by its name, not its directory
        settings["LD_PRELOAD"] = Path(settings["LD_PRELOAD"]).name
    return run["store"] + "".join(f"<br>{name}={value}" for name, value in settings.items())


def breakdown(run: dict) -> str:
    """The JVM's largest committed heap and its largest native memory outside what it tracks (RocksDB and the C
    library's allocations), from the memory timeline (--jvm-detail); "-" without it."""
    found = run.get("jvm_breakdown_peak_mb") or {}
    if found.get("java_heap") is None:
        return "-"
    return f"{found['java_heap']:,.0f} / {found.get('untracked') or 0:,.0f}"


def state_figures(run: dict) -> tuple[float | None, int]:
    """A run's state bytes per key (``cep_state_bytes``) and its store's memory (``cep_state_memory_bytes``).

    A run from before the bench read both (an older record, or ``--compare-with``) kept Spark's ``memoryUsedBytes``
    as ``state_bytes``: that is its store's memory. Its state's size is derived from the store metrics it kept, by
    the service's own rule, where they hold it: RocksDB's SST files and memtables when its memory was bounded
    (unbounded, the memtables are not charged to the cache, so the figure would miss them); otherwise None."""
    if "state_memory_bytes" in run:
        return run["state_bytes_per_key"], run["state_memory_bytes"]
    bounded = (run.get("conf") or {}).get(BOUNDED, (run.get("settings") or {}).get(BOUNDED)) == "true"
    metrics = run.get("store_metrics_last_steady") or {}
    state = operator_state_bytes({"customMetrics": metrics}) if bounded and ROCKSDB_SST_METRIC in metrics else 0
    return (round(state / run["keys"], 1) if state else None), run["state_bytes"]


def store_and_live_heap(run: dict) -> str:
    """The store's memory as Spark reports it at the last steady batch (``memoryUsedBytes``, ``cep_state_memory_bytes``:
    RocksDB's block cache, memtables and pinned blocks under its cap; the HDFS store's loaded versions on the heap)
    and the JVM's live heap after a full collection (the heap histogram, --jvm-detail), in MB; "-" for what a run
    did not record."""
    live = (run.get("heap_histogram_after_steady") or {}).get("live_heap_mb")
    return f"{state_figures(run)[1] / 2**20:,.0f} / " + (f"{live:,.0f}" if live is not None else "-")


def per_key_text(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def code_label(code: str) -> str:
    """ "this", or "compared 1a2b3c4" (the compared checkout's commit)."""
    name, _, commit = code.partition(": ")
    return f"{name} {commit[:7]}" if commit else name


def report(found: dict) -> list[str]:
    """docs/performance.md's "State at scale" section from a run's JSON."""
    p = found["params"]
    compared = any(run.get("code", "this") != "this" for run in found["runs"])
    lines = [
        "## State at scale (bench/state_scale.py)",
        "",
        f"`make bench-state` ({found['when']}, {found['nproc']} cores shared with other engineers' jobs: the load "
        "average before each run is in the table; compare the stores at one size, not across sizes). "
        "`PATTERN (A B)` per `user_id` fed logins only, so every key keeps one open partial match; "
        "fill: new keys per micro-batch until every key has its login; steady: micro-batches of "
        f"{p['steady_rows']:,} logins of open keys over every bucket; `local[2]`, a no-op sink."
        + (f" ({found['note']}.)" if found.get("note") else "")
        + (
            f" Each case ran with this code ({found.get('this_commit', 'this')}) and then with the compared "
            "checkout's (`--compare-with`), one after the other."
            if compared
            else ""
        ),
        "",
        "| keys | store | code | key buckets | fill rows/batch | state bytes/key (`cep_state_bytes`) "
        "| checkpoint bytes/key | peak RSS driver / JVM / worker (MB) | JVM heap / untracked native, largest (MB) "
        "| store memory (`cep_state_memory_bytes`) / live heap after GC (MB) | fill batch p50 (s) "
        "| steady batch p50 (s) | restart to first batch (s) | load before |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for run in found["runs"]:
        code = code_label(run.get("code", "this"))
        if "error" in run:
            lines.append(
                f"| {run['keys']:,} | {run['store']} | {code} | failed: {run['error'].splitlines()[-1][:80]} |"
            )
            continue
        peaks = run["peak_mb"]["peak_process_mb"]
        lines.append(
            f"| {run['keys']:,} | {store_label(run)} | {code} | {run.get('key_buckets', KEY_BUCKETS)} | "
            f"{run['fill_rows']:,}{' by key' if run.get('fill_order', 'key') == 'key' else ''} | "
            f"{per_key_text(state_figures(run)[0])} | "
            f"{run['checkpoint_bytes_per_key']:,.0f} | {peaks.get('driver', 0):,.0f} / {peaks.get('jvm', 0):,.0f} / "
            f"{peaks.get('python_worker', 0):,.0f} | {breakdown(run)} | {store_and_live_heap(run)} | "
            f"{run['fill_batch_median_s']} | "
            f"{run['steady_batch_median_s']}"
            + (
                f" (store commit {run['steady_state_commit_median_s']})"
                if run.get("steady_state_commit_median_s") is not None
                else ""
            )
            + " | "
            f"{run['restart_to_first_batch_s']} | {run['load_average_before'][0]} |"
        )
    profile = found.get("bucket_profile")
    if profile:
        lines += [
            "",
            f"One bucket's call outside Spark (`--bucket-profile`, {profile['when']}): the function Spark calls "
            "for a bucket holding that many open keys, with a few hundred rows; median seconds of the call, of "
            "reading its table from the state's bytes and writing it back, and the rest (the engine's work, "
            "including its per-key timers); the call again with Python's cyclic collector left on.",
            "",
            "| keys in the bucket | rows | call (s) | read table (s) | write table (s) | the rest (s) "
            "| call, collector on (s) | table bytes/key | load |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for run in profile["runs"]:
            lines.append(
                f"| {run['keys']:,} | {run['rows']} | {run['call_s']} | {run['read_table_s']} | "
                f"{run['write_table_s']} | {run['engine_work_s']} | {run['call_with_gc_walks_s']} | "
                f"{run['table_bytes'] / run['keys']:,.0f} | {run['load_average'][0]} |"
            )
    return lines


if __name__ == "__main__":
    sys.exit(main())
