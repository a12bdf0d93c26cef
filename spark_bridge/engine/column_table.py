"""The column-wise streaming path's state: the rows of many keys as columns (``Rows``), and one table of
every key of a call (``ColumnarTable``: pending rows, carried rows, a few numbers per key, the timers),
as bytes between micro-batches, and those rows as the sequence engine's input (``StreamInput``).
``columnar/`` runs the calls.

A table's bytes carry their kind (``TABLE_KIND``); a ``KeyTable`` refuses them with E0482, and a
``KeyTable`` (the per-key path's checkpoint) is read here: each key's pending rows, and its matcher's
buffered rows from its first undecided start, become columns (``ColumnarTable.from_key_table``).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

import numpy as np

from cep.grammar.errors import CepRuntimeError
from cep.matcher.rows.tables import series_values
from cep.matcher.vector import kernels
from cep.matcher.vector.arrays import factorize_text
from cep.matcher.vector.layout import ListInput
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.key_table import COLUMNAR_KIND, KeyTable
from cep.spark_bridge.engine.keyed import KeyedStream, KeyState

# Imported inside functions: pandas (heavy; only to turn a micro-batch's event times into µs and its text
# keys into codes, in C).

TABLE_KIND = COLUMNAR_KIND
# 3: the timers as two int64 columns (key ids, µs) too; 2: int64, float64 and bool columns as their bytes
# (``pack_column``), the timers a list of pairs; 1: every column as a list of values, one Python object per
# value to build and read at each call. All three are read. A call reads and writes the whole table of its
# bucket, so what is written per key must not cost a Python step per key: with 20,000 keys the pairs took
# most of a call that had a few hundred rows.
TABLE_VERSION = 3
READ_VERSIONS = (1, 2, 3)
# A table's bytes are not zlib-compressed (format 1's were; both are read): zlib cost a tenth of a Spark
# bucket call of query (d), and Spark's state stores compress what they write (LZ4 by default, for the
# HDFS-backed store's files and in RocksDB).
COMPRESS = False
NO_TIME = np.iinfo(np.int64).min  # "none" in an int64 column of event times (no forced release, no session)
# Columns of carried rows: the start's final decision (FAIL, MATCH; -1: none yet) and its items' row counts;
# for a start not decided yet, the rows from it on that its search found no hit in (``decisions.decide``'s
# ``resume``; 0: none, as a checkpoint written before this column reads).
KNOWN, SPAN, SEARCHED = "__cep_decided", "__cep_span", "__cep_searched"


# ------------------------------------------------------------------------------------ rows as columns


def typed(values) -> np.ndarray:
    """A column of Python values as numpy: int64, float64 or bool when every value is of that one Python type
    (no NULL), else an object array of the values themselves. ``tolist()`` gives the values back exactly."""
    kinds = set(map(type, values))
    n = len(values)
    if len(kinds) == 1:
        kind = next(iter(kinds))
        if kind is float:
            return np.array(values, dtype=np.float64)
        if kind is bool:
            return np.array(values, dtype=bool)
        if kind is int:
            try:
                return np.array(values, dtype=np.int64)
            except OverflowError:
                pass
    return np.fromiter(values, dtype=object, count=n)


def series_column(series) -> np.ndarray:
    """A pandas Series as ``typed`` makes its values (``series_values``: NaN in a float column is NULL), taken
    from numpy without a Python object per value where the Series is a NULL-free number or bool column."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype):
        if dtype.kind == "b":
            return series.to_numpy(dtype=bool)
        if dtype.kind == "i" or (dtype.kind == "u" and dtype.itemsize < 8):
            return series.to_numpy().astype(np.int64)
        if dtype.kind == "f":
            values = series.to_numpy().astype(np.float64)
            if not np.isnan(values).any():
                return values
    return typed(series_values(series))


def key_codes(raw) -> tuple[np.ndarray, list]:
    """(code per row, distinct keys in order of first appearance), keys equal as Python compares them."""
    if len(raw) and all(type(v) is str for v in raw[:64]) and set(map(type, raw)) == {str}:
        return factorize_text(np.asarray(raw, dtype=object))  # strings hashed in C, codes by first appearance
    first: dict = {}
    setdefault = first.setdefault
    codes = np.fromiter((setdefault(v, len(first)) for v in raw), dtype=np.int64, count=len(raw))
    return codes, list(first)


def as_column(values) -> np.ndarray:
    return values if isinstance(values, np.ndarray) else typed(values)


def _concat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not len(a):
        return b
    if not len(b):
        return a
    if a.dtype != b.dtype:  # one of them holds other values (a NULL, a mixed type): retype, or keep objects
        a, b = (typed(x.tolist()) if x.dtype == object else x for x in (a, b))
        if a.dtype != b.dtype:
            a, b = a.astype(object), b.astype(object)
    return np.concatenate([a, b])


@dataclass
class Rows:
    """Rows of many keys as columns: key id, event time (µs), and the other columns (``typed``)."""

    kid: np.ndarray
    us: np.ndarray
    cols: dict[str, np.ndarray]

    @classmethod
    def empty(cls, names) -> Rows:
        return cls(
            np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            {name: np.zeros(0, dtype=object) for name in names},
        )

    def __len__(self) -> int:
        return len(self.kid)

    def take(self, rows: np.ndarray) -> Rows:
        if len(rows) == len(self.kid) and (len(rows) == 0 or (rows[0] == 0 and bool((np.diff(rows) == 1).all()))):
            return self
        return Rows(self.kid[rows], self.us[rows], {name: values[rows] for name, values in self.cols.items()})

    def __add__(self, other: Rows) -> Rows:
        if not len(other):
            return self
        if not len(self):
            return other
        names = dict.fromkeys(list(self.cols) + list(other.cols))
        return Rows(
            np.concatenate([self.kid, other.kid]),
            np.concatenate([self.us, other.us]),
            {name: _concat(self._column(name), other._column(name)) for name in names},
        )

    def _column(self, name: str) -> np.ndarray:
        """A column; the decision columns a carried row keeps (``KNOWN``, ``SPAN``) read -1 and 0 elsewhere."""
        found = self.cols.get(name)
        if found is None:
            return np.full(len(self.kid), -1 if name == KNOWN else 0, dtype=np.int64)
        return found

    def pack(self, as_bytes: bool = False) -> dict:
        """The rows as plain data: lists of values, or with ``as_bytes`` numeric columns as bytes (``pack_column``)."""
        column = pack_column if as_bytes else np.ndarray.tolist
        return {"kid": column(self.kid), "us": column(self.us), "cols": {n: column(v) for n, v in self.cols.items()}}

    @classmethod
    def unpack(cls, data: dict) -> Rows:
        return cls(
            int_column(data["kid"]),
            int_column(data["us"]),
            {name: unpack_column(values) for name, values in data["cols"].items()},
        )


# The numpy types a column keeps as bytes in a table's state (little-endian, as numpy names them).
_RAW_TYPES = {np.dtype(np.int64): "<i8", np.dtype(np.float64): "<f8", np.dtype(bool): "|b1"}
_RAW_READ = {name: np.dtype(name) for name in _RAW_TYPES.values()}


def pack_column(values: np.ndarray):
    """A column as state data: an int64, float64 or bool column as ``{"dtype", "data"}`` (its bytes: one
    ``marshal`` object, no Python object per value), any other column as the list of its values."""
    name = _RAW_TYPES.get(values.dtype)
    if name is None:
        return values.tolist()
    return {"dtype": name, "data": np.ascontiguousarray(values, dtype=np.dtype(name)).tobytes()}


def unpack_column(packed) -> np.ndarray:
    """``pack_column``'s column back (a list of values: ``typed``, as format 1 kept every column)."""
    if not isinstance(packed, dict):
        return typed(packed)
    kind = _RAW_READ.get(packed.get("dtype"))
    if kind is None or not isinstance(packed.get("data"), bytes) or len(packed["data"]) % kind.itemsize:
        raise CepRuntimeError(
            f"column-wise streaming state holds a column cep cannot read ({packed.get('dtype')!r})", code="E0481"
        )
    return np.frombuffer(packed["data"], dtype=kind).astype(kind.newbyteorder("="))  # a writable copy


def read_timers(packed) -> dict[int, int]:
    """A table's timers, key id -> µs: two int64 columns (format 3) or a list of pairs (formats 1 and 2)."""
    if isinstance(packed, dict):
        return dict(zip(int_column(packed["kid"]).tolist(), int_column(packed["us"]).tolist()))
    return {kid: us for kid, us in packed}


def int_column(packed) -> np.ndarray:
    """An int64 column (key ids, event times, per-key numbers) of either format."""
    return unpack_column(packed) if isinstance(packed, dict) else np.asarray(packed, dtype=np.int64)


# Per-key numbers of a ColumnarTable: name -> initial value (int64 columns indexed by key id).
KEY_FIELDS = {
    "forced": NO_TIME,  # the key's forced-release point (max_pending_rows), or none
    "live": 0,  # 1: a session is open (the per-key path's matcher is not None)
    "start": NO_TIME,  # the open session's first event time
    "last": NO_TIME,  # its last row's event time
    "total": 0,  # rows in the open session so far
    "number": 0,  # matches emitted in the open session
    "context": 0,  # carried rows before the first start not yet decided (PREV reads them)
    "sessions": 0,  # sessions closed
    # last, so that a table written before it (which lacks it) reads back with its fields in this order
    "bound": NO_TIME,  # the key's own release bound past the watermark (keyed.own_bound_us), or none
}


@dataclass
class ColumnarTable:
    """Every key of a call: pending rows, carried rows and a few numbers per key, as columns."""

    columns: tuple[str, ...]
    buckets: int = 0
    keys: list[tuple] = field(default_factory=list)
    index: dict[tuple, int] = field(default_factory=dict)
    fields: dict[str, np.ndarray] = field(default_factory=dict)
    timers: dict[int, int] = field(default_factory=dict)  # key id -> µs, in the order Spark's timers are set
    pending: Rows | None = None
    carried: Rows | None = None
    # ``dedup_key``: key id -> the dedup values it remembers -> their event times (µs), as a ``KeyState.seen``
    seen: dict[int, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, initial in KEY_FIELDS.items():
            self.fields.setdefault(name, np.full(len(self.keys), initial, dtype=np.int64))
        if self.pending is None:
            self.pending = Rows.empty(self.columns)
        if self.carried is None:
            self.carried = Rows.empty(self.columns)

    def ids(self, keys: list[tuple]) -> np.ndarray:
        """The key id of each key, adding the new ones."""
        index, known = self.index, self.keys
        found = list(map(index.get, keys))  # in C: most keys of a call are known
        if None in found:
            for position, key in enumerate(keys):
                if found[position] is None:
                    kid = index.get(key)  # a key may come twice among the new ones (1 and 1.0)
                    if kid is None:
                        kid = index[key] = len(known)
                        known.append(key)
                    found[position] = kid
        out = np.asarray(found, dtype=np.int64)
        grow = len(known) - len(self.fields["live"])
        if grow:
            for name, initial in KEY_FIELDS.items():
                self.fields[name] = np.concatenate([self.fields[name], np.full(grow, initial, dtype=np.int64)])
        return out

    def holding(self) -> np.ndarray:
        """Key ids that have state (an open session, pending rows or remembered dedup values)."""
        has = self.fields["live"].astype(bool)
        has[self.pending.kid] = True
        if self.seen:
            has[np.fromiter(self.seen, dtype=np.int64, count=len(self.seen))] = True
        return np.flatnonzero(has)

    def __bool__(self) -> bool:
        return bool(len(self.holding()))

    def key_state(self, kid: int) -> bytes:
        """One key's part of the table as bytes (for inspection: ``LocalStream.states``)."""
        mine = lambda rows: rows.take(np.flatnonzero(rows.kid == kid)).pack()  # noqa: E731
        return codec.encode(
            {
                "kind": TABLE_KIND,
                "key": list(self.keys[kid]),
                "pending": mine(self.pending),
                "carried": mine(self.carried),
                "fields": {name: int(values[kid]) for name, values in self.fields.items()},
                "seen": _seen_lists(self.seen.get(kid)),
            }
        )

    def encode(self) -> bytes:
        """The table as bytes, without the keys that hold nothing (their ids are given anew)."""
        keep = self.holding()
        renumber = np.full(len(self.keys), -1, dtype=np.int64)
        renumber[keep] = np.arange(len(keep))

        def rows(part: Rows) -> dict:
            packed = part.pack(as_bytes=True)
            packed["kid"] = pack_column(renumber[part.kid])
            return packed

        return codec.encode(
            {
                "kind": TABLE_KIND,
                "v": TABLE_VERSION,
                "buckets": self.buckets,
                "columns": list(self.columns),
                "key_count": len(keep),
                "key_columns": [list(column) for column in zip(*[self.keys[k] for k in keep.tolist()])],
                "fields": {name: pack_column(values[keep]) for name, values in self.fields.items()},
                # in key order, as a KeyTable writes its timers (in the order of its keys): a restored table calls
                # the keys its timers make due in the same order on both paths
                "timers": self._packed_timers(renumber),
                "pending": rows(self.pending),
                "carried": rows(self.carried),
                # a table without dedup values writes no entry, so its bytes are those of a table from before them
                **(
                    {"seen": [[int(renumber[k]), _seen_lists(v)] for k, v in sorted(self.seen.items())]}
                    if self.seen
                    else {}
                ),
            },
            compress=COMPRESS,
        )

    def _packed_timers(self, renumber: np.ndarray) -> dict:
        """The timers of the kept keys as two int64 columns, by key id, in the new ids (``renumber``)."""
        held, at = self.timer_arrays()
        new = renumber[held]
        kept = new >= 0
        order = np.argsort(new[kept], kind="stable")
        return {"kid": pack_column(new[kept][order]), "us": pack_column(at[kept][order])}

    def timer_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(key ids, µs) of the timers, in the order they were set."""
        timers = self.timers
        return (
            np.fromiter(timers, dtype=np.int64, count=len(timers)),
            np.fromiter(timers.values(), dtype=np.int64, count=len(timers)),
        )

    def drop_timers(self, kids: np.ndarray) -> None:
        """Drop the timers of ``kids`` (the others keep their order), with numpy rather than a pop per key."""
        held, at = self.timer_arrays()
        dropping = np.zeros(len(self.keys), dtype=bool)
        dropping[kids] = True
        keep = ~dropping[held]
        if not keep.all():
            self.timers.clear()
            self.timers.update(zip(held[keep].tolist(), at[keep].tolist()))

    def next_timer(self) -> int | None:
        return min(self.timers.values()) if self.timers else None

    @classmethod
    def decode(
        cls, blob: bytes | None, columns: tuple[str, ...], buckets: int, engine: KeyedStream | None = None
    ) -> ColumnarTable:
        """The table of ``blob``; a per-key path's ``KeyTable`` is read too when ``engine`` is given (its keys'
        states become columns: an upgraded stream keeps its checkpoint)."""
        if blob is None:
            return cls(columns=columns, buckets=buckets)
        data = codec.decode(blob)
        if engine is not None and not (isinstance(data, dict) and data.get("kind") == TABLE_KIND):
            # the per-key path's table (or its refusal, E0482, of a checkpoint from before key buckets)
            return cls.from_key_table(KeyTable.decode(blob, buckets), engine, columns)
        if not isinstance(data, dict) or data.get("kind") != TABLE_KIND:
            raise CepRuntimeError(
                "this checkpoint was written by the per-key streaming path (one state per key), and this query "
                "now runs on the column-wise path; restart with a new checkpoint location, or keep the per-key "
                "path (columnar=False)",
                code="E0482",
            )
        if data.get("v") not in READ_VERSIONS:
            raise CepRuntimeError(
                f"column-wise streaming state version {data.get('v')} is not one of "
                f"{', '.join(map(str, READ_VERSIONS))} (this cep reads those)",
                code="E0481",
            )
        if data["buckets"] != buckets:
            raise CepRuntimeError(
                f"this checkpoint was written with key_buckets={data['buckets']}, not {buckets}: a key's bucket would "
                "change and its state be lost; keep the count or restart with a new checkpoint location",
                code="E0482",
            )
        if tuple(data["columns"]) != tuple(columns):
            raise CepRuntimeError(
                "this checkpoint holds other columns than the query reads; restart with a new checkpoint location",
                code="E0482",
            )
        if "keys" in data:  # format 1: a list per key
            keys = [tuple(key) for key in data["keys"]]
        else:  # a list per key column (a key of no columns: the count alone)
            keys = list(zip(*data["key_columns"])) if data["key_columns"] else [()] * data["key_count"]
        table = cls(
            columns=columns,
            buckets=buckets,
            keys=keys,
            index=dict(zip(keys, range(len(keys)))),
            fields={name: int_column(values) for name, values in data["fields"].items()},
            timers=read_timers(data["timers"]),
            pending=Rows.unpack(data["pending"]),
            carried=Rows.unpack(data["carried"]),
            seen={kid: _seen_dict(saved) for kid, saved in data.get("seen", ())},
        )
        return table

    @classmethod
    def from_key_table(cls, key_table: KeyTable, engine: KeyedStream, columns: tuple[str, ...]) -> ColumnarTable:
        """The per-key path's states as a column-wise table: each key's pending rows, and its matcher's
        buffered rows from its first undecided start (``search_start``, the rows PREV reads before it)
        as carried rows; its partial matches are found again from those rows."""
        keys = list(key_table.states)
        table = cls(columns=columns, buckets=key_table.buckets)
        kids = table.ids(keys)
        f = table.fields
        pending, carried = [], []
        for kid, key in zip(kids.tolist(), keys):
            st = KeyState.decode(key_table.states[key])
            if st.seen:
                table.seen[kid] = _seen_dict(st.seen)
            if st.pending:
                us = np.asarray(st.pending["us"], dtype=np.int64)
                pending.append(
                    Rows(
                        np.full(len(us), kid, dtype=np.int64),
                        us,
                        {name: typed(st.pending["cols"][name]) for name in columns},
                    )
                )
            if st.forced is not None:
                f["forced"][kid] = st.forced
            if st.bound is not None:
                f["bound"][kid] = st.bound
            f["sessions"][kid] = st.sessions
            m = st.matcher
            if m is not None:
                f["live"][kid] = 1
                f["start"][kid] = NO_TIME if st.start is None else st.start
                f["last"][kid] = NO_TIME if st.last is None else st.last
                f["total"][kid], f["number"][kid] = m["total"], m["match_number"]
                f["context"][kid] = m["search_start"] - m["base"]
                times = m["cols"][engine.time_column]
                us = np.fromiter((codec.datetime_to_micros(t) for t in times), dtype=np.int64, count=len(times))
                carried.append(
                    Rows(np.full(len(us), kid, dtype=np.int64), us, {name: typed(m["cols"][name]) for name in columns})
                )
            if key in key_table.timers:
                table.timers[kid] = key_table.timers[key]
        for part in pending:
            table.pending = table.pending + part
        for part in carried:
            table.carried = table.carried + part
        return table


def _seen_lists(seen: dict | None) -> dict | None:
    """Remembered dedup values as ``KeyState.seen`` writes them: {"keys": [...], "us": [...]}, or None."""
    return {"keys": list(seen), "us": list(seen.values())} if seen else None


def _seen_dict(saved: dict | None) -> dict:
    return dict(zip(saved["keys"], saved["us"])) if saved else {}


# The µs range numpy turns into datetime objects (years 1 to 9999); outside, ``micros_to_datetime`` clamps.
DATETIME_US = (codec.datetime_to_micros(_dt.datetime.min), codec.datetime_to_micros(_dt.datetime.max))


def datetimes(us: np.ndarray) -> list:
    """Naive UTC datetimes of µs values, as ``state_codec.micros_to_datetime`` gives them (in C)."""
    if len(us) and (us.min() < DATETIME_US[0] or us.max() > DATETIME_US[1]):
        return [codec.micros_to_datetime(t) for t in us.tolist()]
    return us.astype("datetime64[us]").astype(object).tolist()


def event_micros(values: list) -> tuple[np.ndarray, np.ndarray]:
    """(µs since 1970 as ``state_codec.datetime_to_micros`` gives them, NULL mask) of event-time values."""
    n = len(values)
    # an object array for pandas: it copies a list into one itself, at twice the cost
    if None in values:
        nulls = np.fromiter((v is None for v in values), dtype=bool, count=n)
        present = np.fromiter((v for v in values if v is not None), dtype=object, count=n - int(nulls.sum()))
    else:
        nulls, present = np.zeros(n, dtype=bool), np.fromiter(values, dtype=object, count=n)
    try:
        import pandas as pd  # its datetime conversion runs in C

        index = pd.DatetimeIndex(present)
        if index.tz is not None:
            index = index.tz_convert("UTC").tz_localize(None)
        nanos = index.as_unit("ns").asi8
        if (nanos % 1000).any():
            raise ValueError("finer than a microsecond")
        found = nanos // 1000
    except (TypeError, ValueError, OverflowError, ImportError):  # mixed zones, out of pandas' range, ...
        found = np.fromiter((codec.datetime_to_micros(v) for v in present), dtype=np.int64, count=len(present))
    us = np.zeros(n, dtype=np.int64)
    us[~nulls] = found
    return us, nulls


class StreamInput(ListInput):
    """The rows of a call as the engine's input (``layout.ListInput``'s interface over ``typed`` columns);
    event times become datetimes only where read."""

    def __init__(self, rows: Rows, time_column: str) -> None:
        super().__init__({})
        self.n = len(rows)
        self.rows, self.time_column = rows, time_column

    def _values(self, name: str) -> np.ndarray:
        if name == self.time_column and name not in self.rows.cols:
            return np.asarray(datetimes(self.rows.us) + [None], dtype=object)[:-1]
        return self.rows.cols[name]

    def python(self) -> dict[str, list]:
        return {name: self._values(name).tolist() for name in tuple(self.rows.cols) + (self.time_column,)}

    def load(self, name: str, order: np.ndarray) -> kernels.Value:
        if name == self.time_column and name not in self.rows.cols:  # µs already: the naive UTC datetimes' ticks
            us = self.rows.us
            if not len(us) or (us.min() >= DATETIME_US[0] and us.max() <= DATETIME_US[1]):
                return kernels.Value("ts", us[order], None)
        values = self._values(name)
        kind = _KINDS.get(values.dtype.kind)
        if kind is None:
            return kernels.load_column(values[order].tolist())
        return kernels.Value(kind, values[order], None)

    def gather(self, name: str, rows: np.ndarray, typed: bool) -> list:
        if name == self.time_column and name not in self.rows.cols:
            found = datetimes(self.rows.us[np.where(rows < 0, 0, rows)])
        else:
            found = self._values(name)[np.where(rows < 0, 0, rows)].tolist()
        if len(rows) and rows.min() < 0:
            found = [None if row < 0 else value for value, row in zip(found, rows.tolist())]
        return found


_KINDS = {"i": "int", "f": "float", "b": "bool"}  # numpy dtype kind -> kernel kind (``typed`` columns: no NULL)
