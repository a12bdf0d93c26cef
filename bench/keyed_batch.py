"""Where the Python side of a keyed micro-batch goes: ``AlertStep``'s bucket calls on the Kafka bench's shape.

    .venv/bin/python bench/keyed_batch.py [--rows 500,4000,20000] [--buckets 64,16,4] [--batches 10]

``cep stream --state spark`` runs its rules in ``applyInPandasWithState``: Spark calls ``AlertStep`` once per
(partition spec, bucket of keys) that has rows or a due timer in the micro-batch (``spark/buckets.py``). Here
the same calls run in-process, on bench/kafka_e2e.py's stream: its rule (bench/run.py's V shape as Flink
accepts it), 1,000 symbols ticking in turn, watermark 2 s with each key's early release, ``--rows`` ticks per
micro-batch (a 4 s micro-batch holds 4,000 ticks at 1k/s, 20,000 at 5k/s). Keys are placed in buckets by
CRC-32 here (Murmur3 on Spark: the same spread). Per rows and bucket count, after two warm-up micro-batches,
CPU time (``time.process_time``) per micro-batch and per call, split into:

- ``read_state``: the bucket's state value decoded (``BucketState.decode``) and each column-wise rule's table
  (``BucketState.rule_state``);
- ``inputs``: the call's rows as the column-wise step reads them (``BucketInputs``);
- ``engine``: the rest of the call: matching, alerts, timers;
- ``write_state``: the state value encoded (``BucketState.encode``);
- ``output``: the frame handed back to Spark (``AlertStep._frame``);

and the state bytes a micro-batch reads and writes (what crosses the JVM, Arrow and Python per call). Spark's
own part of the call (Arrow to pandas and back, the state store) is not here: docs/streaming.md ("A keyed
micro-batch, measured") has it from a profile of the running stream. Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

SYMBOLS = 1000
DELAY_MS = 2000  # bench/kafka_e2e.py's watermark
SESSION_US = 3_600_000_000
WARM_UP = 2  # micro-batches before the timing starts: a first call compiles the rule, a first state is empty
PARTS = ("read_state", "inputs", "write_state", "output")


class Timers:
    """CPU seconds spent inside chosen functions, by part (nested parts are not expected: each is a leaf)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.on = False

    def wrap(self, owner, name: str, part: str, *, static: bool = False) -> None:
        original = owner.__dict__[name]
        inner = original.__func__ if isinstance(original, (classmethod, staticmethod)) else original

        def timed(*args, **kwargs):
            if not self.on:
                return inner(*args, **kwargs)
            began = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[part] += time.process_time() - began

        if isinstance(original, classmethod):
            setattr(owner, name, classmethod(timed))
        elif isinstance(original, staticmethod) or static:
            setattr(owner, name, staticmethod(timed))
        else:
            setattr(owner, name, timed)


def publish_rule(directory: Path) -> str:
    from kafka_e2e import QUERY_TEXT

    from cep.spark_bridge.alerting.rule_set import build_rule_set
    from cep.spark_bridge.alerting.store import RuleStore

    rules = directory / "rules"
    rules.mkdir(parents=True)
    (rules / "v_shape.sql").write_text(f"-- name: a\n{QUERY_TEXT}\n", encoding="utf-8")
    types = {"symbol": "VARCHAR", "ts": "TIMESTAMP", "price": "DOUBLE"}
    payload, loaded = build_rule_set(str(rules), input_types=types, session_timeout_us=SESSION_US)
    assert not loaded.errors, [str(e) for e in loaded.errors]
    store = RuleStore(str(directory / "store"))
    store.publish(payload)
    return store.directory


def ticks(rows: int, batches: int, seed: int = 7) -> list:
    """The tagged frames a bucket call gets, one per micro-batch: 1,000 symbols in turn, a random walk each."""
    import numpy as np
    import pandas as pd

    from cep.spark_bridge.alerting.rule_set import PKEY
    from cep.spark_bridge.spark.columns import EVENT_US

    rng = np.random.default_rng(seed)
    total = rows * batches
    symbol_index = np.arange(total) % SYMBOLS
    steps = rng.normal(size=total)
    price = np.empty(total)
    for s in range(SYMBOLS):  # each symbol's own walk
        mine = symbol_index == s
        price[mine] = 100 + np.cumsum(steps[mine])
    start_ms = 1_700_000_000_000
    ms = start_ms + (np.arange(total) * 1000 // (rows // 4 or 1))  # rows/4 ticks a second: 4 s per micro-batch
    frame = pd.DataFrame(
        {
            "symbol": [f"S{i:04d}" for i in symbol_index],
            "ts": pd.to_datetime(ms, unit="ms"),
            "price": price,
            EVENT_US: ms * 1000,
        }
    )
    frame.insert(0, PKEY, ['{"symbol": "%s"}' % s for s in frame["symbol"]])
    return [frame.iloc[i * rows : (i + 1) * rows].reset_index(drop=True) for i in range(batches)]


def run(store_dir: str, frames: list, buckets: int, timers: Timers) -> dict:
    from alerting_worker import _State

    from cep.spark_bridge.alerting.rule_set import PKEY, SPEC
    from cep.spark_bridge.alerting.worker import AlertStep, runtime_for
    from cep.spark_bridge.spark.columns import EVENT_US

    (spec,) = runtime_for(store_dir).rules_by_spec
    step = AlertStep(store_dir, SESSION_US, buckets, release_delay_ms=DELAY_MS)
    states: dict = {}
    deadlines: dict = {}
    watermark_ms, newest_ms = 0, 0
    cpu = calls = bytes_read = bytes_written = 0
    timers.seconds = dict.fromkeys(PARTS, 0.0)
    for index, frame in enumerate(frames):
        timed = index >= WARM_UP
        tagged = frame.assign(**{SPEC: spec})
        bucket_of = [zlib.crc32(k.encode()) % buckets for k in tagged[PKEY]]
        groups = {b: f.drop(columns="b").reset_index(drop=True) for b, f in tagged.assign(b=bucket_of).groupby("b")}
        due = [b for b, t in sorted(deadlines.items()) if b not in groups and t is not None and watermark_ms > t]
        timers.on = timed
        began = time.process_time()
        for bucket in list(groups) + due:
            state = _State(states.get(bucket), watermark_ms)
            read = len(state.value[0]) if state.value is not None else 0
            list(step((spec, bucket), iter([groups[bucket]] if bucket in groups else []), state))
            if state.value is None:
                states.pop(bucket, None)
                deadlines.pop(bucket, None)
            else:
                states[bucket], deadlines[bucket] = state.value, state.timeout
            if timed:
                calls += 1
                bytes_read += read
                bytes_written += len(state.value[0]) if state.value is not None else 0
        if timed:
            cpu += time.process_time() - began
        timers.on = False
        newest_ms = max(newest_ms, int(frame[EVENT_US].max()) // 1000)
        watermark_ms = newest_ms - DELAY_MS
    measured = len(frames) - WARM_UP
    parts = {name: 1000 * seconds / measured for name, seconds in timers.seconds.items()}
    parts["engine"] = 1000 * cpu / measured - sum(parts.values())
    return {
        "cpu_ms": 1000 * cpu / measured,
        "calls": calls / measured,
        "ms_per_call": 1000 * cpu / calls,
        "state_kb": (bytes_read + bytes_written) / measured / 1024,
        **parts,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="500,4000,20000", help="ticks per micro-batch")
    parser.add_argument("--buckets", default="64,16,4", help="bucket counts (--key-buckets)")
    parser.add_argument("--batches", type=int, default=10)
    args = parser.parse_args(argv)

    from cep.spark_bridge.alerting import bucket_state, worker

    timers = Timers()
    timers.wrap(bucket_state.BucketState, "decode", "read_state")
    timers.wrap(bucket_state.BucketState, "rule_state", "read_state")
    timers.wrap(bucket_state.BucketState, "encode", "write_state")
    timers.wrap(bucket_state.BucketInputs, "__post_init__", "inputs")
    timers.wrap(worker.AlertStep, "_frame", "output")
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs; CPU ms per micro-batch")
    header = "rows  buckets  calls  total   per call  read_state  inputs  engine  write_state  output  state KB"
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        store_dir = publish_rule(Path(tmp))
        for rows in map(int, args.rows.split(",")):
            frames = ticks(rows, args.batches)
            for buckets in map(int, args.buckets.split(",")):
                r = run(store_dir, frames, buckets, timers)
                print(
                    f"{rows:>5} {buckets:>7} {r['calls']:>6.0f} {r['cpu_ms']:>7.0f} {r['ms_per_call']:>9.2f}"
                    f" {r['read_state']:>11.0f} {r['inputs']:>7.0f} {r['engine']:>7.0f} {r['write_state']:>12.0f}"
                    f" {r['output']:>7.0f} {r['state_kb']:>9.0f}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
