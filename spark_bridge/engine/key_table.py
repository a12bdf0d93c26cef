"""Many keys' states in one: a ``KeyTable`` holds each key's state bytes and timer, exactly as
``KeyedStream.process`` left them, so that one call can run every key of a bucket (``spark/buckets.py``
says why the Spark bridge groups keys in buckets) and ``LocalStream`` can keep its keys the same way.

A key is called when it has rows, or when the watermark has reached its timer; the table asks for the
earliest timer of its keys. Per key the calls are the ones ``LocalStream`` makes: the engine cannot tell
a bucketed call from a lone one, so the output is the same. The bucket count is part of the table (a
key's bucket must not change across a restart): a table written with one count refuses another (E0482).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cep.grammar.errors import CepRuntimeError
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.keyed import StepResult

TABLE_VERSION = 2
READ_VERSIONS = (1, 2)
NO_TIMER = np.iinfo(np.int64).min  # a key without a timer, in format 2's int64 timers
# The ``kind`` of a column-wise table's bytes (``columnar.TABLE_KIND``; columnar.py imports this module's
# neighbours, so the word is repeated here rather than imported).
COLUMNAR_KIND = "cep-columnar-keys"


@dataclass
class KeyTable:
    """The states and timers of many keys, each exactly as ``KeyedStream.process`` left it."""

    buckets: int = 0  # the bucket count that placed these keys here (0: not bucketed, as in LocalStream)
    states: dict[tuple, bytes] = field(default_factory=dict)
    timers: dict[tuple, int] = field(default_factory=dict)

    def due(self, watermark_us: int, busy) -> list[tuple]:
        """Keys without rows in this call whose timer the watermark has reached (Spark's rule for one key)."""
        return [key for key, timer in self.timers.items() if key not in busy and watermark_us >= timer]

    def step(self, engine, key: tuple, columns: dict | None, event_us: list | None, watermark_us: int, **options):
        """One key's call: ``engine.process`` on its saved state; the table keeps what it returns."""
        result = engine.process(
            self.states.get(key), key, columns, event_us, watermark_us, timed_out=columns is None, **options
        )
        self.put(key, result.state, result.timer_us)
        return result

    def put(self, key: tuple, state: bytes | None, timer_us: int | None) -> None:
        """Keep ``key``'s new state and timer (None: forget the key)."""
        if state is None:
            self.states.pop(key, None)
        else:
            self.states[key] = state
        self.timers.pop(key, None)
        if state is not None and timer_us is not None:
            self.timers[key] = timer_us

    def next_timer(self) -> int | None:
        return min(self.timers.values()) if self.timers else None

    def __bool__(self) -> bool:
        return bool(self.states)

    # ---------------------------------------------------------------------------------- as bytes

    def encode(self) -> bytes:
        # Each key's state is already encoded (and compressed when large); the table only frames them.
        keys = list(self.states)
        timers = self.timers
        at = np.fromiter((timers.get(key, NO_TIMER) for key in keys), dtype=np.int64, count=len(keys))
        data: dict[str, Any] = {"v": TABLE_VERSION, "buckets": self.buckets, "key_count": len(keys)}
        if len(set(map(len, keys))) <= 1:  # a stream's keys: one value per partition column
            data["key_columns"] = [list(column) for column in zip(*keys)]
        else:  # keys of several widths (a table filled by hand): a list per key
            data["key_rows"] = [list(key) for key in keys]
        data["timers"] = at.astype("<i8", copy=False).tobytes()
        data["states"] = list(self.states.values())
        return codec.encode(data)

    @classmethod
    def decode(cls, blob: bytes | None, buckets: int) -> KeyTable:
        if blob is None:
            return cls(buckets=buckets)
        data: Any = codec.decode(blob)
        if isinstance(data, dict) and data.get("kind") == COLUMNAR_KIND:
            raise CepRuntimeError(
                "this checkpoint was written by the column-wise streaming path (every key of a bucket in one "
                "table), and this query now runs per key; restart with a new checkpoint location, or run it "
                "column-wise again",
                code="E0482",
            )
        if isinstance(data, dict) and "buckets" in data and data.get("v") not in READ_VERSIONS:
            raise CepRuntimeError(
                f"this checkpoint's key table has format version {data.get('v')}; this cep reads "
                f"{', '.join(map(str, READ_VERSIONS))}. Run the cep version that wrote it, or restart with a new "
                "checkpoint location",
                code="E0481",
            )
        if not isinstance(data, dict) or "buckets" not in data:
            raise CepRuntimeError(
                "this checkpoint holds one state per key, written before key buckets; restart with a new "
                "checkpoint location (a single query can also keep it with on_spark(..., key_buckets=0))",
                code="E0482",
            )
        if data["buckets"] != buckets:
            raise CepRuntimeError(
                f"this checkpoint was written with key_buckets={data['buckets']}, not {buckets}: a key's bucket would "
                "change and its state be lost; keep the count or restart with a new checkpoint location",
                code="E0482",
            )
        table = cls(buckets=buckets)
        if data["v"] == 1:  # a list [key, timer, state] per key
            for key, timer, state in data["keys"]:
                key = tuple(key)
                table.states[key] = state
                if timer is not None:
                    table.timers[key] = timer
            return table
        count = data["key_count"]
        if "key_rows" in data:
            keys = [tuple(key) for key in data["key_rows"]]
        else:
            keys = list(zip(*data["key_columns"])) if data["key_columns"] else [()] * count
        table.states = dict(zip(keys, data["states"]))
        at = np.frombuffer(data["timers"], dtype="<i8")
        held = np.flatnonzero(at != NO_TIMER).tolist()
        table.timers = dict(zip([keys[i] for i in held], at[held].tolist()))
        return table


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off for one bucket call. Decoding a bucket's table makes an object
    per key (its key tuple, its state bytes), and every so many new objects the collector walks all the objects
    that survived earlier passes, the table's included: with tens of thousands of keys in a bucket that walk took
    about half of a call. A table holds no reference cycles; cycles the engine makes in a call are collected at
    the next pass after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def split_by_key(keys: Sequence[tuple]) -> dict[tuple, list[int]]:
    """Row indices per key, keys in order of first appearance."""
    groups: dict[tuple, list[int]] = {}
    for index, key in enumerate(keys):
        found = groups.get(key)
        if found is None:
            groups[key] = [index]
        else:
            found.append(index)
    return groups


def merge_results(parts: Sequence[tuple[StepResult, list[int] | None]]) -> StepResult:
    """One result for a bucket's call from its keys' results; each key's late-row indices (into its own
    rows, ``indices``) become indices into the bucket's frame. State and timer stay with the table."""
    merged = StepResult(state=None, timer_us=None, stats={})
    stats = merged.stats
    for result, indices in parts:
        merged.rows.extend(result.rows)
        merged.match_ids.extend(result.match_ids)
        if result.late:
            merged.late.extend((indices[i], reason) for i, reason in result.late)
        for name, value in result.stats.items():
            stats[name] = stats.get(name, 0) + value
    return merged


def step_bucket(step, engine, pdf, state, watermark_us: int):
    """One Spark call for a bucket: every key with rows in ``pdf``, then every key whose timer is due.

    ``step`` is the Spark bridge's per-call object: ``step.inputs(pdf)`` gives the columns the engine
    reads, event times and reject reasons for the whole frame, and ``step.row_keys(pdf)`` each row's
    partition key (as the batch path sees it). Returns (merged result, the table)."""
    table = KeyTable.decode(state.get[0] if state.exists else None, step.key_buckets)
    parts: list[tuple[StepResult, list[int] | None]] = []
    groups: dict[tuple, list[int]] = {}
    if pdf is not None:
        columns, times, rejected = step.inputs(pdf)
        groups = split_by_key(step.row_keys(pdf))
        whole = len(groups) == 1
        for key, indices in groups.items():
            if whole:
                own_columns, own_times, own_rejected = columns, times, rejected
            else:
                own_columns = {name: [values[i] for i in indices] for name, values in columns.items()}
                own_times = None if times is None else [times[i] for i in indices]
                own_rejected = None if rejected is None else [rejected[i] for i in indices]
            result = table.step(engine, key, own_columns, own_times, watermark_us, rejected=own_rejected)
            parts.append((result, indices))
    for key in table.due(watermark_us, groups):
        parts.append((table.step(engine, key, None, None, watermark_us), None))
    return merge_results(parts), table
