"""Hot keys: one partition key with 2,000,000 events and 100,000 keys with a few each, through the streaming engine.

    .venv/bin/python bench/hot_keys.py --json bench/results-hot-keys.json     # the numbers in docs/reliability.md
    .venv/bin/python bench/hot_keys.py --hot-rows 50000 --small-keys 2000 --spark-hot-rows 0   # a quick look

The scenario (``make_events``; numpy PCG64 with a fixed seed, so every run sees the same rows):

* the hot key ``HOT``: ``--hot-rows`` ticks, one per millisecond of event time, prices a random walk in
  cents (so V-shapes complete all the time);
* ``--small-keys`` keys ``K000000`` ...: ``SMALL_EVENTS`` ticks each, 1-3 s apart, starting anywhere in
  the hot key's time span;
* micro-batches of ``BATCH_SECONDS`` of event time, shuffled inside; one hot row in ``DEFER_EVERY``
  arrives one micro-batch late (still inside the watermark delay, so without the cap it would be on
  time); a last batch holds one row of its own key far ahead, so every session ends.

The query is the V-shape (patterns/v_shape.sql), watermark ``DELAY_SECONDS``, session timeout
``SESSION_SECONDS``, ``max_pending_rows`` = --max-pending-rows. The hot key holds about
(delay + batch) x 1,000 rows waiting for the watermark, more than the cap: each micro-batch it releases
early, which is counted (``cap_hits``), and its deferred rows that arrive at or below the forced
release are late (``behind_forced_release``), never dropped silently.

Two runs:

1. the engine in-process (``cep.spark_bridge.engine.local.LocalStream``: Spark's micro-batch rules, no Spark) at
   full size. Checks, after every micro-batch, the hot key's pending rows against the cap and its live
   partial matches against ``cep.matcher.pike.vm.MAX_LIVE_THREADS``, and, at the end, that every small key's
   matches equal ``q.run`` over its rows and the hot key's equal ``q.run`` over its rows that were not
   late. Reports rows/s, peak RSS, state bytes per key (hot and small), cap hits, late rows by reason.
2. Spark local[2], Parquet file source, one file per micro-batch, a no-op sink, at --spark-hot-rows /
   --spark-small-keys (default 100,000 / 5,000, about 40 s; the full size,
   ``--spark-hot-rows 2000000 --spark-small-keys 100000``, took 266 s on a quiet machine). Reports
   rows/s, the metrics, Spark's state-store size, and the peak memory of the driver, the JVM and the Python
   workers (/proc VmHWM).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from procmem import TreeMemory  # noqa: E402
from streaming_overhead import VSHAPE, schema  # noqa: E402

SEED = 20240102
T0 = np.datetime64("2024-01-01T00:00:00", "us")
COLUMNS = ("symbol", "ts", "price", "volume")
HOT_KEY = "HOT"
END_KEY = "~END"  # the last batch's key, far ahead of everything: the watermark passes every session
HOT_RATE_PER_S = 1_000  # one hot tick per millisecond of event time
SMALL_EVENTS = 3
BATCH_SECONDS = 5
# The watermark delay is longer than a micro-batch, so a row deferred by one batch is still on time
# for the watermark: only the cap can make it late.
DELAY_SECONDS = 10
SESSION_SECONDS = 60
DEFER_EVERY = 1_000
# Below the hot key's rows per micro-batch (batch x rate = 5,000), let alone the (delay + batch) x rate
# = 15,000 it would hold waiting for the watermark: the cap is hit every micro-batch, and the rows
# deferred by one batch arrive below the forced release.
DEFAULT_MAX_PENDING_ROWS = 2_000


@dataclass(frozen=True)
class Scenario:
    hot_rows: int = 2_000_000
    small_keys: int = 100_000
    small_events: int = SMALL_EVENTS
    batch_seconds: int = BATCH_SECONDS
    delay_seconds: int = DELAY_SECONDS
    session_seconds: int = SESSION_SECONDS
    defer_every: int = DEFER_EVERY
    max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS
    seed: int = SEED


@dataclass(frozen=True)
class Events:
    """Every row as columns; ``key`` is -1 for the hot key, else the small key's number."""

    key: np.ndarray  # int32
    us: np.ndarray  # int64, event time in µs after T0
    cents: np.ndarray  # int64
    batches: tuple  # per micro-batch, the row indices in arrival order (shuffled)
    small_names: tuple

    def symbol(self, index: int) -> str:
        k = int(self.key[index])
        return HOT_KEY if k < 0 else self.small_names[k]


def make_events(sc: Scenario) -> Events:
    rng = np.random.default_rng(sc.seed)
    hot_us = np.arange(sc.hot_rows, dtype=np.int64) * (1_000_000 // HOT_RATE_PER_S)
    span_us = max(int(hot_us[-1]) if sc.hot_rows else 0, 1_000_000)
    steps = rng.integers(-5, 6, size=sc.hot_rows)
    hot_cents = np.maximum(10_000 + np.cumsum(steps), 1)
    n_small = sc.small_keys * sc.small_events
    small_key = np.repeat(np.arange(sc.small_keys, dtype=np.int32), sc.small_events)
    starts = rng.integers(0, max(span_us - sc.small_events * 3_000_000, 1), size=sc.small_keys)
    gaps = rng.integers(1, 4, size=(sc.small_keys, sc.small_events)) * 1_000_000
    gaps[:, 0] = 0
    small_us = (starts[:, None] + np.cumsum(gaps, axis=1)).reshape(-1)
    small_cents = rng.integers(9_000, 11_000, size=n_small)

    key = np.concatenate([np.full(sc.hot_rows, -1, dtype=np.int32), small_key])
    us = np.concatenate([hot_us, small_us])
    cents = np.concatenate([hot_cents, small_cents])
    batch = us // (sc.batch_seconds * 1_000_000)
    deferred = np.zeros(len(us), dtype=bool)
    deferred[: sc.hot_rows] = (np.arange(sc.hot_rows) % sc.defer_every) == sc.defer_every - 1
    batch = batch + deferred
    order = np.argsort(batch, kind="stable")
    bounds = np.searchsorted(batch[order], np.arange(int(batch.max()) + 2 if len(batch) else 1))
    batches = tuple(rng.permutation(order[a:b]) for a, b in zip(bounds[:-1], bounds[1:]))
    names = tuple(f"K{j:06d}" for j in range(sc.small_keys))
    return Events(key=key, us=us, cents=cents, batches=batches, small_names=names)


def end_row(ev: Events, sc: Scenario) -> dict:
    last = int(ev.us.max()) if len(ev.us) else 0
    ahead = last + (sc.delay_seconds + sc.session_seconds + 3_600) * 1_000_000
    return {"symbol": END_KEY, "ts": (T0 + np.timedelta64(ahead, "us")).astype(object), "price": 100.0, "volume": 100}


def rows_of(ev: Events, indices: np.ndarray) -> list[dict]:
    """The rows at ``indices`` as dicts (what ``LocalStream.run_batch`` and ``q.run`` take)."""
    times = (T0 + ev.us[indices].astype("timedelta64[us]")).astype(object)
    prices = (ev.cents[indices] / 100.0).tolist()
    return [
        {"symbol": ev.symbol(i), "ts": t, "price": p, "volume": 100} for i, t, p in zip(indices.tolist(), times, prices)
    ]


def micro_batches(ev: Events, sc: Scenario) -> Iterator[list[dict]]:
    """The stream: each micro-batch's rows, then the batch with the far-ahead row."""
    for indices in ev.batches:
        yield rows_of(ev, indices)
    yield [end_row(ev, sc)]


# ------------------------------------------------------------------------------------ in-process


@dataclass
class EngineRun:
    """What one in-process run observed (``run_engine``)."""

    rows_in: int
    engine_seconds: float
    outputs: dict  # symbol -> list of output rows
    late: dict  # (symbol, ts) of every late row -> reason
    stats: dict  # LocalStream.stats, summed over the calls
    hot_pending_max: int  # the hot key's pending rows after a call, largest seen
    hot_live_max: int  # the hot key's live partial matches after a call, largest seen
    hot_state_bytes: list  # the hot key's state size after each micro-batch
    small_state_bytes: list  # sizes of the small keys' states, sampled
    keys_in_state_max: int


def key_states(stream) -> dict:
    """Every key's saved state in a ``LocalStream``: its ``states``, or those of its key tables."""
    if hasattr(stream, "states"):
        return stream.states
    merged: dict = {}
    for table in stream.tables.values():
        merged.update(getattr(table, "states", {}))  # unbucketed tables stay decoded between batches
    return merged


def run_engine(sc: Scenario, ev: Events, *, sample_every: int = 20) -> EngineRun:
    """Stream ``ev`` through ``KeyedStream`` + ``LocalStream``; observe the hot key after every batch."""
    import cep
    from cep.spark_bridge.engine import state_codec
    from cep.spark_bridge.engine.keyed import KeyedStream
    from cep.spark_bridge.engine.local import LocalStream

    q = cep.compile(VSHAPE)
    engine = KeyedStream(
        q.plan,
        COLUMNS,
        query_text=VSHAPE,
        session_timeout_us=sc.session_seconds * 1_000_000,
        max_pending_rows=sc.max_pending_rows,
    )
    # The per-key path: the hot key's own state (its pending rows, its live partial matches) is what is watched;
    # the V shape would otherwise stream column-wise, one table for all keys.
    stream = LocalStream(engine, delay_ms=sc.delay_seconds * 1000, columnar=False)
    outputs: dict[str, list] = {}
    late: dict[tuple, str] = {}
    hot_pending = hot_live = keys_max = rows_in = 0
    hot_sizes: list[int] = []
    small_sizes: list[int] = []
    elapsed = 0.0
    hot = (HOT_KEY,)
    for number, batch in enumerate(itertools.chain(micro_batches(ev, sc), [[]])):  # lazily: rows per batch only
        rows_in += len(batch)
        began = time.perf_counter()
        out, _, late_rows = stream.run_batch(batch)
        elapsed += time.perf_counter() - began
        for row in out:
            outputs.setdefault(row[0], []).append(row)
        for reason, row in late_rows:
            late[(row["symbol"], row["ts"])] = reason
        states = key_states(stream)
        blob = states.get(hot)
        hot_sizes.append(len(blob) if blob else 0)
        if blob:
            st = state_codec.decode(blob)
            hot_pending = max(hot_pending, len(st["pending"]["us"]) if st["pending"] else 0)
            if st["m"] is not None:  # the matcher's saved state: its live partial matches
                hot_live = max(hot_live, len(st["m"]["threads"]))
        keys_max = max(keys_max, len(states))
        if number % sample_every == 0:
            small_sizes += [len(b) for k, b in states.items() if k != hot]
    return EngineRun(
        rows_in, elapsed, outputs, late, dict(stream.stats), hot_pending, hot_live, hot_sizes, small_sizes, keys_max
    )


def replay(rows: list[dict]) -> list[tuple]:
    """``q.run`` over ``rows``: the batch answer the stream must equal."""
    import cep

    return sorted((tuple(r.values()) for r in cep.compile(VSHAPE).run(rows)), key=repr)


def check_against_replay(ev: Events, run: EngineRun) -> dict:
    """Small keys: every match equals the replay. Hot key: equals the replay over its rows that were not late."""
    small = np.flatnonzero(ev.key >= 0)
    got_small = sorted((r for s, rows in run.outputs.items() if s not in (HOT_KEY, END_KEY) for r in rows), key=repr)
    expected_small = replay(rows_of(ev, small))
    hot_rows = [r for r in rows_of(ev, np.flatnonzero(ev.key < 0)) if (HOT_KEY, r["ts"]) not in run.late]
    expected_hot = replay(hot_rows)
    got_hot = sorted(run.outputs.get(HOT_KEY, []), key=repr)
    return {
        "small_keys_equal_replay": got_small == expected_small,
        "small_key_matches": len(got_small),
        "hot_key_equals_replay_of_its_on_time_rows": got_hot == expected_hot,
        "hot_key_matches": len(got_hot),
    }


def engine_report(sc: Scenario) -> dict:
    from cep.matcher.pike.vm import MAX_LIVE_THREADS

    began = time.perf_counter()
    ev = make_events(sc)
    generate_s = time.perf_counter() - began
    run = run_engine(sc, ev)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    reasons = Counter(run.late.values())
    hot_sizes = [s for s in run.hot_state_bytes if s]
    tenth = hot_sizes[: max(1, len(hot_sizes) // 10)]
    report = {
        "rows_in": run.rows_in,
        "generate_s": round(generate_s, 1),
        "engine_s": round(run.engine_seconds, 1),
        "rows_per_s": round(run.rows_in / run.engine_seconds) if run.engine_seconds else None,
        "peak_rss_mb": round(peak_rss_mb, 1),
        "cap_hits": run.stats["cap_hits"],
        "late_by_reason": dict(sorted(reasons.items())),
        "hot_rows_deferred": int(sc.hot_rows // sc.defer_every),
        "hot_pending_rows_max": run.hot_pending_max,
        "max_pending_rows": sc.max_pending_rows,
        "hot_live_matches_max": run.hot_live_max,
        "max_live_threads": MAX_LIVE_THREADS,
        "under_caps": run.hot_pending_max <= sc.max_pending_rows and run.hot_live_max <= MAX_LIVE_THREADS,
        "hot_state_bytes": {
            "max_first_tenth": max(tenth) if tenth else 0,
            "max": max(hot_sizes) if hot_sizes else 0,
            "median": round(statistics.median(hot_sizes)) if hot_sizes else 0,
        },
        "small_state_bytes": {
            "median": round(statistics.median(run.small_state_bytes)) if run.small_state_bytes else 0,
            "max": max(run.small_state_bytes, default=0),
            "samples": len(run.small_state_bytes),
        },
        "keys_in_state_max": run.keys_in_state_max,
        "matches_out": sum(len(v) for k, v in run.outputs.items() if k != END_KEY),
    }
    report.update(check_against_replay(ev, run))
    return report


# ------------------------------------------------------------------------------------------ Spark


def write_parquet_batches(ev: Events, sc: Scenario, directory: Path) -> int:
    """One Parquet file per micro-batch, modification times increasing so the source reads them in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    for index, batch in enumerate(micro_batches(ev, sc)):
        table = pa.Table.from_pylist(batch).cast(
            pa.schema(
                [
                    ("symbol", pa.string()),
                    ("ts", pa.timestamp("us", tz="UTC")),
                    ("price", pa.float64()),
                    ("volume", pa.int64()),
                ]
            )
        )
        path = directory / f"part-{index:05d}.parquet"
        pq.write_table(table, path)
        stamp = 1_700_000_000 + 10 * index
        os.utime(path, (stamp, stamp))
        count += table.num_rows
    return count


def spark_report(sc: Scenario, partitions: int) -> dict:
    import cep
    from cep.spark_bridge.spark.session import get_spark

    work = Path(tempfile.mkdtemp(prefix="cep-hot-keys-"))
    try:
        ev = make_events(sc)
        rows = write_parquet_batches(ev, sc, work / "in")
        memory = TreeMemory().start()
        # Spark's Python workers import cep from this tree too (they inherit the JVM's environment).
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        spark = get_spark("local[2]", app_name="cep-hot-keys", shuffle_partitions=partitions)
        q = cep.compile(VSHAPE)
        df = spark.readStream.schema(schema()).option("maxFilesPerTrigger", 1).parquet(str(work / "in"))
        out = q.on_spark(
            df,
            watermark=f"{sc.delay_seconds} seconds",
            session_timeout=f"{sc.session_seconds} seconds",
            max_pending_rows=sc.max_pending_rows,
        )
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", str(len(ev.batches) + 10))
        began = time.perf_counter()
        query = (
            out.writeStream.format("noop")
            .queryName("hot_keys")
            .option("checkpointLocation", str(work / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        wall = time.perf_counter() - began
        progress = list(query.recentProgress)
        mem = memory.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    metrics: Counter = Counter()
    pending_max = state_rows = state_memory = 0
    trigger_ms = 0
    for p in progress:
        row = (p.get("observedMetrics") or {}).get("cep")
        if row is not None:
            values = row.asDict()
            metrics.update({k: v for k, v in values.items() if v and k not in ("pending_rows", "state_bytes")})
            pending_max = max(pending_max, values.get("pending_rows") or 0)
        trigger_ms += p["durationMs"].get("triggerExecution", 0)
        for op in p.get("stateOperators") or []:
            state_rows = max(state_rows, op.get("numRowsTotal", 0))
            state_memory = max(state_memory, op.get("memoryUsedBytes", 0))
    return {
        "hot_rows": sc.hot_rows,
        "small_keys": sc.small_keys,
        "rows_in": rows,
        "micro_batches": len([p for p in progress if p["numInputRows"] > 0]),
        "wall_s": round(wall, 1),
        "rows_per_s": round(rows / wall) if wall else None,
        "metrics": dict(sorted(metrics.items())),
        "pending_rows_max_in_a_batch": pending_max,
        "state_store_keys_max": state_rows,
        "state_store_memory_mb_max": round(state_memory / 2**20, 1),
        "memory": mem,
    }


def run_part(part: str, args) -> dict:
    """One part in a child process, so each one's peak memory is its own."""
    import subprocess

    command = [sys.executable, __file__, "--part", part] + [
        f"--{name.replace('_', '-')}={value}" for name, value in vars(args).items() if name not in ("part", "json")
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{part} part failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hot-rows", type=int, default=2_000_000)
    parser.add_argument("--small-keys", type=int, default=100_000)
    parser.add_argument("--max-pending-rows", type=int, default=DEFAULT_MAX_PENDING_ROWS)
    parser.add_argument("--spark-hot-rows", type=int, default=100_000, help="0: skip the Spark run")
    parser.add_argument("--spark-small-keys", type=int, default=5_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--part", choices=("all", "engine", "spark"), default="all", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)

    if args.part == "engine":
        scenario = Scenario(hot_rows=args.hot_rows, small_keys=args.small_keys, max_pending_rows=args.max_pending_rows)
        print(json.dumps({"scenario": asdict(scenario), **engine_report(scenario)}, default=str))
        return 0
    if args.part == "spark":
        scenario = Scenario(
            hot_rows=args.spark_hot_rows, small_keys=args.spark_small_keys, max_pending_rows=args.max_pending_rows
        )
        print(json.dumps({"scenario": asdict(scenario), **spark_report(scenario, args.partitions)}, default=str))
        return 0

    results: dict = {"load_average_before": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count()}
    results["engine_in_process"] = run_part("engine", args)
    if args.spark_hot_rows:
        results["spark"] = run_part("spark", args)
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(results, indent=2, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
