"""The state of one alerting bucket call (a partition spec's bucket of keys), and what the column-wise rules read.

``AlertStep`` (worker.py) runs a rule on the column-wise step (``engine/columnar.py``: every key of the
call at once) when ``choose_route`` gives the rule's stream that path, the route ``cep explain`` prints;
the others run per key on the Pike VM. So a bucket's state has two parts:

* ``keys``: a ``KeyTable`` of each key's entries of the per-key rules (a dict by rule id, as before);
* ``rules``: per column-wise rule, one ``ColumnarTable`` of every key of the bucket, the time of each key's
  last alert (suppression), and the gauges last reported for the rule (live starts, pending rows, keys).

The bytes carry a kind and a version (``BUCKET_KIND``, ``BUCKET_VERSION``). A checkpoint written before
column-wise rules holds a bare ``KeyTable``: it is read, and the entries of the rules that now run
column-wise move into their tables (``ColumnarTable.from_key_table``: pending rows and the rows from the
first undecided start), so an upgraded service keeps its partial matches. ``per_key`` lists the rules
whose entries the key table may hold, so that move is looked for only when a rule changed path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cep.grammar.errors import CepRuntimeError
from cep.spark_bridge.alerting.alert_rows import UNESCAPED
from cep.spark_bridge.alerting.rule_set import PKEY
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.column_table import KNOWN, ColumnarTable, key_codes, series_column
from cep.spark_bridge.engine.key_table import KeyTable
from cep.spark_bridge.engine.keyed import KeyState
from cep.spark_bridge.sinks.alerts import jsonable
from cep.spark_bridge.spark.columns import EVENT_US, NULL_TIME

# Imported inside functions: pandas (heavy; only a Spark call's frame needs it).

BUCKET_KIND = "cep-alert-bucket"
BUCKET_VERSION = 1

# One key's entry of one per-key rule in ``keys`` (a list, in the key's dict by rule id):
VERSION, BLOB, LIVE, PENDING, LAST_ALERT, TIMER = range(6)


@dataclass
class ColumnRuleState:
    """One column-wise rule's state in a bucket."""

    version: str
    table: ColumnarTable
    # partition key (JSON text) -> (the key's values, the event time of its last alert, µs): kept while the
    # suppression interval is open or the key holds rows, as the per-key entry keeps ``LAST_ALERT``
    last_alerts: dict[str, tuple[tuple | None, int]] = field(default_factory=dict)
    gauges: tuple[int, int, int] = (0, 0, 0)  # live starts, pending rows, keys with state, as last reported

    def __bool__(self) -> bool:
        return bool(self.table) or bool(self.last_alerts)


@dataclass
class BucketState:
    """A bucket call's state: the per-key rules' key table and the column-wise rules' tables."""

    keys: KeyTable
    raw_rules: dict[str, list] = field(default_factory=dict)  # rule id -> encoded entry, decoded on first use
    rules: dict[str, ColumnRuleState] = field(default_factory=dict)
    per_key: frozenset[str] | None = None  # rules whose entries ``keys`` may hold (None: any, an old checkpoint)

    @classmethod
    def decode(cls, blob: bytes | None, buckets: int) -> BucketState:
        if blob is None:
            return cls(keys=KeyTable(buckets=buckets), per_key=frozenset())
        data: Any = codec.decode(blob)
        if not (isinstance(data, dict) and data.get("kind") == BUCKET_KIND):  # written before column-wise rules
            return cls(keys=KeyTable.decode(blob, buckets), per_key=None)
        if data.get("v") != BUCKET_VERSION:
            raise CepRuntimeError(
                f"alerting state version {data.get('v')} is not {BUCKET_VERSION} (this cep reads that one)",
                code="E0481",
            )
        keys = KeyTable.decode(data["keys"], buckets) if data["keys"] is not None else KeyTable(buckets=buckets)
        return cls(keys=keys, raw_rules=dict(data["rules"]), per_key=frozenset(data["per_key"]))

    def rule_ids(self) -> set[str]:
        """The column-wise rules with state here."""
        return set(self.raw_rules) | set(self.rules)

    def version_of(self, rule_id: str) -> str:
        found = self.rules.get(rule_id)
        return found.version if found is not None else self.raw_rules[rule_id][0]

    def gauges_of(self, rule_id: str) -> tuple[int, int, int]:
        found = self.rules.get(rule_id)
        return found.gauges if found is not None else tuple(self.raw_rules[rule_id][3])

    def drop(self, rule_id: str) -> None:
        self.rules.pop(rule_id, None)
        self.raw_rules.pop(rule_id, None)

    def rule_state(self, rule_id: str, version: str, columnar_step) -> ColumnRuleState:
        """The state of a column-wise rule (new if it has none here)."""
        found = self.rules.get(rule_id)
        if found is not None:
            return found
        raw = self.raw_rules.pop(rule_id, None)
        engine = columnar_step.engine
        if raw is None:
            found = ColumnRuleState(version, columnar_step.new_table(self.keys.buckets))
        else:
            table = ColumnarTable.decode(raw[1], columnar_step.columns, self.keys.buckets, engine)
            last = {pkey: (tuple(key) if key is not None else None, us) for pkey, (key, us) in raw[2].items()}
            found = ColumnRuleState(raw[0], table, last, tuple(raw[3]))
        self.rules[rule_id] = found
        return found

    def encode(self, per_key: Sequence[str], compress: bool = True) -> bytes:
        rules = dict(self.raw_rules)
        for rule_id, rs in self.rules.items():
            if rs or any(rs.gauges):
                last = {
                    pkey: [list(key) if key is not None else None, us] for pkey, (key, us) in rs.last_alerts.items()
                }
                rules[rule_id] = [rs.version, rs.table.encode() if rs.table else None, last, list(rs.gauges)]
        return codec.encode(
            {
                "kind": BUCKET_KIND,
                "v": BUCKET_VERSION,
                "keys": self.keys.encode() if self.keys else None,
                "rules": rules,
                "per_key": sorted(per_key),
            },
            compress,
        )

    def __bool__(self) -> bool:
        return bool(self.keys) or bool(self.raw_rules) or any(bool(rs) for rs in self.rules.values())

    def next_timer(self, watermark_us: int, housekeeping_us: int, open_until) -> int | None:
        """The earliest wake-up: a key's timer, a column-wise table's, a suppression interval's end; a table
        with state and no timer wakes up once per housekeeping interval (so a removed rule's state goes)."""
        timers = [self.keys.next_timer()] if self.keys else []
        if self.raw_rules:
            timers.append(watermark_us + housekeeping_us)
        for rule_id, rs in self.rules.items():
            timer = rs.table.next_timer()
            if timer is None and rs.table:
                timer = watermark_us + housekeeping_us
            timers.append(timer)
            ends = [open_until(rule_id, us) for _, us in rs.last_alerts.values()]
            timers += [end for end in ends if end is not None and end > watermark_us]
        timers = [t for t in timers if t is not None]
        return min(timers) if timers else None

    def move_to_columns(self, rules: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
        """Key entries of ``rules`` (rule id -> compiled rule, each running column-wise now) move into their
        column-wise tables, with each key's last alert and the rule's gauges; returns the gauges moved."""
        wanted = {rule_id: rule for rule_id, rule in rules.items() if rule_id not in self.rule_ids()}
        if self.per_key is not None:
            wanted = {rule_id: rule for rule_id, rule in wanted.items() if rule_id in self.per_key}
        if not wanted or not self.keys:
            return {}
        moved = {rule_id: KeyTable(buckets=self.keys.buckets) for rule_id in wanted}
        last: dict[str, dict] = {rule_id: {} for rule_id in wanted}
        gauges = dict.fromkeys(wanted, (0, 0, 0))
        for pkey, blob in list(self.keys.states.items()):
            entries = codec.decode(blob)
            taken = False
            for rule_id, rule in wanted.items():
                entry = entries.get(rule_id)
                if entry is None or entry[VERSION] != rule.version:
                    continue  # (another version's entry is dropped, and counted, by the key's next call)
                del entries[rule_id]
                taken = True
                key = None
                if entry[BLOB] is not None:
                    key = tuple(KeyState.decode(entry[BLOB]).key)
                    moved[rule_id].put(key, entry[BLOB], entry[TIMER])
                if entry[LAST_ALERT] is not None:
                    last[rule_id][pkey[0]] = (key, entry[LAST_ALERT])
                live, pending, keys = gauges[rule_id]
                gauges[rule_id] = (live + entry[LIVE], pending + entry[PENDING], keys + 1)
            if taken:
                timers = [e[TIMER] for e in entries.values() if e[TIMER] is not None]
                kept_timer = self.keys.timers.get(pkey)
                self.keys.put(pkey, codec.encode(entries) if entries else None, min(timers) if timers else kept_timer)
        for rule_id, rule in wanted.items():
            step = rule.columnar
            table = ColumnarTable.from_key_table(moved[rule_id], step.engine, step.columns)
            self.rules[rule_id] = ColumnRuleState(rule.version, table, last[rule_id], gauges[rule_id])
        return gauges


def table_gauges(table: ColumnarTable) -> tuple[int, int, int]:
    """(live starts, pending rows, keys with state) of a column-wise table: the starts not decided yet are
    the carried rows past each key's context rows with no final decision kept."""
    carried = table.carried
    live = 0
    if len(carried):
        kid = carried.kid
        first = np.flatnonzero(np.r_[True, kid[1:] != kid[:-1]])
        position = np.arange(len(kid)) - np.repeat(first, np.diff(np.r_[first, len(kid)]))
        open_start = position >= table.fields["context"][kid]
        known = carried.cols.get(KNOWN)
        if known is not None:
            open_start &= known < 0
        live = int(open_start.sum())
    return live, len(table.pending), len(table.holding())


@dataclass
class BucketInputs:
    """A bucket frame's rows as the column-wise step reads them: each row's key code, the keys (their values,
    as the per-key path takes them from the key's first row) and partition key texts, event times, and
    columns converted once for every column-wise rule of the call."""

    pdf: Any
    partition: tuple[str, ...]
    codes: np.ndarray = field(init=False)
    pkeys: list[str] = field(init=False)
    keys: list[tuple] = field(init=False)
    event_us: np.ndarray = field(init=False)
    null_time: np.ndarray = field(init=False)
    columns: dict[str, np.ndarray] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        pdf = self.pdf
        self.codes, self.pkeys = key_codes(pdf[PKEY].tolist())
        n = len(self.codes)
        first = np.zeros(len(self.pkeys), dtype=np.int64)
        first[self.codes[::-1]] = np.arange(n - 1, -1, -1)
        self.keys = list(zip(*(first_values(pdf[name], first) for name in self.partition))) or [()] * len(first)
        times = pdf[EVENT_US].to_numpy(dtype=np.int64)
        self.null_time = times == NULL_TIME
        self.event_us = np.where(self.null_time, 0, times)

    def read(self, names: Sequence[str]) -> dict[str, np.ndarray]:
        for name in names:
            if name not in self.columns:
                self.columns[name] = series_column(self.pdf[name])
        return {name: self.columns[name] for name in names}


def first_values(column, rows: np.ndarray) -> list:
    """``scalar`` of ``column``'s cells at ``rows``: taken as one column where its dtype is numpy's (``tolist`` gives
    the cells ``iat`` gives, numpy's scalars as Python's), cell by cell for pandas' own dtypes."""
    if isinstance(column.dtype, np.dtype):
        return [scalar(value) for value in column.take(rows).tolist()]
    return [scalar(column.iat[row]) for row in rows.tolist()]


def key_text(partition: Sequence[str], key: tuple) -> str:
    """A partition key as the JSON object ``Explode`` tags rows with (``{"card": "c1"}``)."""
    return UNESCAPED.encode({c: jsonable(v) for c, v in zip(partition, key)})


def scalar(value: Any) -> Any:
    """One pandas cell as the batch path's Python value (what ``pandas_to_columns`` gives)."""
    if value is None:
        return None
    if hasattr(value, "to_pydatetime"):
        try:
            import pandas as pd

            if value is pd.NaT:
                return None
        except ImportError:  # pragma: no cover
            pass
        return value
    if type(value).__module__ == "numpy":
        if getattr(value, "dtype", None) is not None and value.dtype.kind in "mM":
            import pandas as pd

            return None if pd.isna(value) else pd.Timestamp(value)
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value
