"""Spark's micro-batch rules in-process: ``LocalStream`` drives a ``KeyedStream`` as the Spark bridge
does, with no Spark (the tests check the engine on many more micro-batch splits than a Spark run can
afford; ``docs/streaming.md`` shows it at work)."""

from __future__ import annotations

import zlib
from typing import Iterable

from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.key_table import KeyTable
from cep.spark_bridge.engine.keyed import STAT_NAMES, KeyedStream


class LocalStream:
    """Spark's micro-batch rules without Spark, driving ``KeyedStream`` the way the Spark bridge does.

    * The watermark of batch ``n`` is ``max event time (ms) of batches < n - delay``, never decreasing
      (batch 0: 0), as Spark computes it.
    * Every row reaches the engine (the Spark bridge makes Spark keep rows it would drop as late).
    * A key with rows in a batch is called with them; a key without rows is called with none when
      its timer has passed (``watermark >= timer``); ``run_batch([])`` is a batch with no data.
    * ``buckets`` > 0: keys are kept in that many ``KeyTable``s, each saved as bytes between batches,
      as the Spark bridge keeps one per bucket of keys (a Python hash places keys here, not Spark's).
    """

    def __init__(self, engine: KeyedStream, delay_ms: int, *, buckets: int = 0) -> None:
        self.engine = engine
        self.delay_ms = delay_ms
        self.buckets = buckets
        self.watermark_ms = 0
        self.max_event_ms: int | None = None
        self.tables: dict[int, KeyTable | bytes] = {}
        self.stats = dict.fromkeys(STAT_NAMES, 0)

    @property
    def states(self) -> dict[tuple, bytes]:
        """Every key's saved state (for inspection)."""
        return {key: blob for bucket in list(self.tables) for key, blob in self._table(bucket).states.items()}

    @property
    def timers(self) -> dict[tuple, int]:
        """Every key's timer, in µs (for inspection)."""
        return {key: us for bucket in list(self.tables) for key, us in self._table(bucket).timers.items()}

    def _bucket(self, key: tuple) -> int:
        return zlib.crc32(codec.canonical(list(key)).encode()) % self.buckets if self.buckets else 0

    def _table(self, bucket: int) -> KeyTable:
        table = self.tables.get(bucket)
        if not isinstance(table, KeyTable):
            table = self.tables[bucket] = KeyTable.decode(table, self.buckets)
        return table

    def run_batch(self, rows: Iterable[dict]) -> tuple[list[tuple], list[str], list[tuple[str, dict]]]:
        """One micro-batch; returns (output rows, their match ids, late (reason, row) pairs)."""
        engine = self.engine
        watermark_us = self.watermark_ms * 1000
        groups: dict[tuple, list[dict]] = {}
        for row in rows:
            groups.setdefault(tuple(row.get(c) for c in engine.partition_columns), []).append(row)
        out: list[tuple] = []
        ids: list[str] = []
        late: list[tuple[str, dict]] = []
        calls = [(key, group) for key, group in groups.items()]
        for bucket in list(self.tables):
            calls += [(key, None) for key in self._table(bucket).due(watermark_us, groups)]
        for key, group in calls:
            table = self._table(self._bucket(key))
            if group is None:
                result = table.step(engine, key, None, None, watermark_us)
            else:
                columns = {name: [r.get(name) for r in group] for name in engine.read_columns}
                if engine.time_column is None:
                    times = None
                else:
                    times = [None if r.get(engine.time_column) is None else codec.datetime_to_micros(r[engine.time_column]) for r in group]
                result = table.step(engine, key, columns, times, watermark_us)
                for index, reason in result.late:
                    late.append((reason, group[index]))
            out.extend(result.rows)
            ids.extend(result.match_ids)
            for name, value in result.stats.items():
                self.stats[name] += value
        if self.buckets:  # what Spark keeps between micro-batches: bytes
            self.tables = {b: t.encode() if isinstance(t, KeyTable) else t for b, t in self.tables.items() if not isinstance(t, KeyTable) or t}
        if engine.time_column is not None:
            for row in [r for g in groups.values() for r in g]:
                value = row.get(engine.time_column)
                if value is not None:
                    ms = codec.datetime_to_micros(value) // 1000
                    self.max_event_ms = ms if self.max_event_ms is None else max(self.max_event_ms, ms)
            if self.max_event_ms is not None:
                self.watermark_ms = max(self.watermark_ms, self.max_event_ms - self.delay_ms)
        return out, ids, late
