"""The fast path's input, in either shape, and where each row goes before matching.

Two shapes of input, one interface (``FastPlan.run`` reads only this):

- ``ListInput``: columns of Python values (``Query.run`` on a list of dicts, the Pike VM's shape);
- ``ArrayInput``: numpy columns read from a pandas DataFrame or a pyarrow Table (``matcher/vector/arrays.py``),
  so that a million-row frame is never turned into a million Python objects.

Both give: the rows' layout (partitions in order of first appearance, each sorted by ORDER BY, equal to
``partitioning.partition_indices``), a condition column gathered into that order for the kernels, the
values of some rows for the output, and the whole input as Python columns for the Pike VM when a batch
goes there.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import operator
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cep.grammar import ast
from cep.matcher.rows.partitioning import partition_indices, sort_columns
from cep.matcher.vector import kernels
from cep.matcher.vector.arrays import ArrayColumn, factorize_text, first_rows_of, key_codes

# Imported inside functions: pandas and pyarrow (heavy; each is needed only for its own kind of input).


@dataclass(frozen=True)
class Layout:
    keys: list[tuple]  # partition keys, in order of first appearance
    order: np.ndarray  # input rows, partition after partition, each partition sorted by ORDER BY
    counts: np.ndarray  # rows per partition
    first_rows: np.ndarray  # an input row of each partition (its first): the key's values for the output


class ListInput:
    """Columns of Python values (None for NULL)."""

    columnar = False

    def __init__(self, columns: dict[str, list]) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values()))) if columns else 0
        self._times: dict[str, tuple[np.ndarray, str]] = {}

    def event_times(self, name: str) -> tuple[np.ndarray, str]:
        """``name``'s values as int64 ticks in input order, and their unit: naive datetimes as
        microseconds ("us"), integers (epoch milliseconds) as they are ("ms"); anything else is
        Unsupported. Converted once: the layout sorts by them when they are the ORDER BY column."""
        if name not in self._times:
            self._times[name] = event_ticks(self.columns[name])
        return self._times[name]

    def python(self) -> dict[str, list]:
        return self.columns

    def load(self, name: str, order: np.ndarray) -> kernels.Value:
        return _gathered(kernels.load_column(self.columns[name]), order)

    def integers(self, values: np.ndarray, typed: bool) -> list:
        return values.tolist()

    def present(self, name: str, order: np.ndarray) -> np.ndarray:
        """Whether each of the rows ``order`` holds a value (not None): the NULL mask of ``load``, or of the
        values themselves where the kernels do not hold them (times, text of odd types...)."""
        try:
            value = self.load(name, order)
        except kernels.Unsupported:
            values = self.gather(name, order, False)
            return np.fromiter((v is not None for v in values), dtype=bool, count=len(order))
        return present_in(value, len(order))

    def gather(self, name: str, rows: np.ndarray, typed: bool) -> list:
        """The values of input ``rows`` (-1: NULL)."""
        values = self.columns[name]
        if rows.size and rows.min() >= 0:
            picked = operator.itemgetter(*rows.tolist())(values)
            return list(picked) if rows.size > 1 else [picked]
        return [None if row < 0 else values[row] for row in rows.tolist()]

    def layout(self, statement: ast.Statement, machine) -> Layout:
        columns, n = self.columns, self.n
        key_columns = [columns[name] for name in machine.partition_names]
        codes, keys, first_rows = _list_codes(key_columns, n)
        sort_keys = sort_columns(statement, machine)
        if len(sort_keys) == 1 and not sort_keys[0][0].descending:
            ticks = self._times.get(sort_keys[0][1])
            if ticks is not None and bool(np.all(ticks[0][1:] >= ticks[0][:-1])):
                sort_keys = []
            elif ticks is None and _non_decreasing(columns[sort_keys[0][1]]):
                sort_keys = []  # already in order (a time-ordered feed): grouping is enough
        sort_arrays = []
        for key, name in sort_keys:
            ticks = None if key.descending else self._times.get(name)
            converted = (ticks[0], None) if ticks is not None else _list_sort_arrays(columns[name], key)
            if converted is None:
                return _python_layout(statement, machine, columns)
            sort_arrays.append((key, *converted))
        return Layout(keys, _order(codes, len(keys), sort_arrays), np.bincount(codes, minlength=len(keys)), first_rows)


class ArrayInput:
    """numpy columns of a pandas DataFrame or a pyarrow Table (``arrays.from_pandas`` / ``from_arrow``)."""

    columnar = True

    def __init__(self, arrays: dict[str, ArrayColumn], n: int, library: str) -> None:
        self.arrays = arrays
        self.n = n
        self.library = library
        self._python: dict[str, list] | None = None
        self._events: ListInput | None = None

    def python(self) -> Mapping[str, list]:
        """The whole input as Python columns (for the Pike VM): each column built once, when first read
        (a batch that runs column-wise reads none; one partition on the VM reads the query's columns)."""
        if self._python is None:
            self._python = _PythonColumns(self.arrays)
        return self._python

    def load(self, name: str, order: np.ndarray) -> kernels.Value:
        column = self.arrays[name]
        if column.kind in ("int", "float", "bool"):
            return kernels.Value(column.kind, column.data[order], None if column.nulls is None else column.nulls[order])
        if column.kind == "str" and column.library == "arrow":
            return _arrow_strings(column, order)
        if column.kind == "str":
            values = column.data[order]
            nulls = None if column.nulls is None else column.nulls[order]
            if nulls is not None:
                values[nulls] = ""
            return kernels.load_strings(values, nulls)
        if column.kind == "time":  # microseconds already, as the Python values hold them: naive, or UTC when zoned
            kind = "ts" if self._zone(column) is None else "tsz"
            return kernels.Value(kind, column.data[order], None if column.nulls is None else column.nulls[order])
        return _gathered(kernels.load_column(self.python()[name]), order)  # as the list path decides

    def present(self, name: str, order: np.ndarray) -> np.ndarray:
        """Whether each of the rows ``order`` holds a value (not NULL), as its Python value is not None."""
        column = self.arrays[name]
        if column.library == "arrow" or column.kind != "other":  # the mask is where the values are None
            return np.ones(len(order), dtype=bool) if column.nulls is None else ~column.nulls[order]
        values = self.python()[name]
        return np.fromiter((value is not None for value in values), dtype=bool, count=self.n)[order]

    @staticmethod
    def _zone(column: ArrayColumn):
        """The time zone of a timestamp column (None: naive)."""
        return getattr(column.source.dtype if column.library == "pandas" else column.source.type, "tz", None)

    def integers(self, values: np.ndarray, typed: bool):
        """An integer output column: typed for the input's library, or Python ints."""
        if not typed:
            return values.tolist()
        if self.library == "pandas":
            import pandas as pd

            return pd.Series(values, dtype=np.int64)
        import pyarrow as pa

        return pa.array(values, type=pa.int64())

    def gather(self, name: str, rows: np.ndarray, typed: bool):
        """The values of input ``rows`` (-1: NULL): typed for the input's library, or Python values."""
        column = self.arrays[name]
        out = column.output(rows) if typed else None
        return column.python(rows) if out is None else out

    def event_times(self, name: str) -> tuple[np.ndarray, str]:
        """As ``ListInput.event_times``: read from the column's numpy data where those are the ticks of its
        Python values (``_own_ticks``), else from the Python values the Pike VM compares."""
        own = _own_ticks(self.arrays[name])
        if own is not None:
            return own
        if self._events is None:
            self._events = ListInput(self.python())
        return self._events.event_times(name)

    def layout(self, statement: ast.Statement, machine) -> Layout:
        arrays, n = self.arrays, self.n
        found = key_codes([arrays[name] for name in machine.partition_names])
        if found is None and machine.partition_names:
            return ListInput(self.python()).layout(statement, machine)
        codes, first_rows = (
            found if found is not None else (np.zeros(n, dtype=np.int64), np.zeros(min(n, 1), dtype=np.int64))
        )
        names = machine.partition_names
        keys = list(zip(*[arrays[name].python(first_rows) for name in names])) if names else [()] * len(first_rows)
        sort_arrays = []
        for key, name in sort_columns(statement, machine):
            column = arrays[name]
            if column.kind not in ("int", "float", "time", "bool") or (
                column.kind == "float"
                and np.isnan(column.data if column.nulls is None else column.data[~column.nulls]).any()
            ):
                return ListInput(self.python()).layout(statement, machine)
            sort_arrays.append((key, column.data, column.nulls))
        return Layout(keys, _order(codes, len(keys), sort_arrays), np.bincount(codes, minlength=len(keys)), first_rows)


# ------------------------------------------------------------------------------------------ helpers


class _PythonColumns(Mapping):
    """``ArrayInput.python()``: name -> the column's Python values (``ArrayColumn.python``), converted on
    first read and kept."""

    def __init__(self, arrays) -> None:
        self._arrays = arrays
        self._read: dict[str, list] = {}

    def __getitem__(self, name: str) -> list:
        found = self._read.get(name)
        if found is None:
            found = self._read[name] = self._arrays[name].python()
        return found

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)


# The microseconds of datetime.min and datetime.max since the epoch: naive datetimes exist only between.
_DATETIME_MICROS = (-62_135_596_800_000_000, 253_402_300_799_999_999)


def _own_ticks(column: ArrayColumn) -> tuple[np.ndarray, str] | None:
    """``event_ticks`` of the column's Python values, read from its numpy data without building them, where
    that is exact: no NULL (``event_ticks`` refuses one), integers of an integer type (Python ints, "ms"),
    or naive timestamps (their Python values are naive datetimes to the microsecond, rounded down as
    ``arrays._microseconds`` rounds). None: ask the Python values (aware times, other kinds)."""
    if column.nulls is not None or column.kind not in ("int", "time"):
        return None
    source = column.source
    if column.library == "arrow":
        native = column.kind == "int" or source.type.tz is None
    else:
        native = isinstance(source.dtype, np.dtype)  # not nullable Int64 nor an aware datetime64
    if not native:
        return None
    ticks = column.data
    if column.kind == "int":
        return ticks, "ms"
    if ticks.size and (ticks.min() < _DATETIME_MICROS[0] or ticks.max() > _DATETIME_MICROS[1]):
        return None  # no datetime holds them: the Python values say what happens
    return ticks, "us"


def present_in(value: kernels.Value, size: int) -> np.ndarray:
    """Where a kernel ``Value`` of ``size`` rows holds a value (its NULL mask inverted)."""
    if value.kind == "null" or value.nulls is None:
        return np.full(size, value.kind != "null")
    return ~value.nulls


def _gathered(value: kernels.Value, order: np.ndarray) -> kernels.Value:
    if value.kind == "null":
        return value
    return kernels.Value(value.kind, value.data[order], None if value.nulls is None else value.nulls[order])


def _arrow_strings(column: ArrayColumn, order: np.ndarray) -> kernels.Value:
    """An Arrow string column in ``order`` as the kernels' numpy unicode, through its dictionary: a
    column of few distinct values (a status, a country) becomes numpy strings once per distinct value,
    not once per row. The same array as ``load_strings`` of its values ("" where NULL)."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column.source)  # NULL rows: a NULL index
    distinct = encoded.dictionary.to_numpy(zero_copy_only=False)
    if 2 * len(distinct) > len(order):  # mostly distinct values: no gain over one conversion per row
        values = column.data[order]
        if column.nulls is not None:
            values[column.nulls[order]] = ""
        return kernels.load_strings(values, None if column.nulls is None else column.nulls[order])
    table = kernels.load_strings(np.append(distinct, ""), None)  # the last entry: NULL's ""
    codes = pc.fill_null(encoded.indices, len(distinct)).to_numpy().astype(np.int64, copy=False)
    nulls = None if column.nulls is None else column.nulls[order]
    return kernels.Value("str", table.data[codes[order]], nulls)


def _python_layout(statement: ast.Statement, machine, columns: dict[str, list]) -> Layout:
    """ORDER BY values numpy cannot order exactly as Python does (strings, dates, ...): sort in Python."""
    groups = partition_indices(statement, machine, columns)
    n = sum(len(indices) for _, indices in groups)
    order = np.fromiter(itertools.chain.from_iterable(idx for _, idx in groups), dtype=np.int64, count=n)
    counts = np.array([len(idx) for _, idx in groups], dtype=np.int64)
    first_rows = np.array([min(idx) for _, idx in groups], dtype=np.int64)
    return Layout([key for key, _ in groups], order, counts, first_rows)


def _list_codes(key_columns: list[list], n: int):
    """(code per row, keys in order of first appearance, first row of each key) for Python key values."""
    if not key_columns:
        return np.zeros(n, dtype=np.int64), [()] if n else [], np.zeros(min(n, 1), dtype=np.int64)
    seen: dict = {}
    if len(key_columns) == 1 and set(map(type, key_columns[0])) == {str}:
        # codes in order of first appearance, as the dict gives them
        codes, uniques = factorize_text(np.asarray(key_columns[0], dtype=object))
        keys = [(k,) for k in uniques]
    else:
        setdefault = seen.setdefault
        values = key_columns[0] if len(key_columns) == 1 else zip(*key_columns)
        codes = np.fromiter((setdefault(k, len(seen)) for k in values), dtype=np.int64, count=n)
        keys = [(k,) for k in seen] if len(key_columns) == 1 else list(seen)
    return codes, keys, first_rows_of(codes, len(keys))


def _order(codes: np.ndarray, parts: int, sort_arrays: list) -> np.ndarray:
    """Input rows grouped by partition code (stable), each group sorted by the ORDER BY arrays."""
    if len(sort_arrays) == 1:
        key, data, nulls = sort_arrays[0]
        if not key.descending and nulls is None and bool(np.all(data[1:] >= data[:-1])):
            sort_arrays = []  # already in order (a time-ordered feed): grouping is enough
    if not sort_arrays:
        if parts <= 1:
            return np.arange(len(codes), dtype=np.int64)
        # a stable sort of small integers is a radix sort in numpy: linear in the rows
        small = codes.astype(np.int16) if parts < 2**15 else codes
        return np.argsort(small, kind="stable").astype(np.int64, copy=False)
    lex = []
    for key, data, nulls in reversed(sort_arrays):  # np.lexsort: the last key is the primary one
        lex.extend(_rank_arrays(data, nulls, key))
    lex.append(codes)
    return np.lexsort(lex)


def _rank_arrays(data: np.ndarray, nulls: np.ndarray | None, key: ast.SortKey) -> list[np.ndarray]:
    """(value, null rank) arrays that order rows as ``outer.sort_key`` does (NULLs first or last)."""
    nulls_first = key.descending if key.nulls_first is None else key.nulls_first
    if nulls is not None:
        rank_of_null = (2 if nulls_first else 0) if key.descending else (0 if nulls_first else 2)
        rank = np.where(nulls, rank_of_null, 1)
        data = np.where(nulls, 0, data)
    else:
        rank = np.ones(len(data), dtype=np.int64)
    if key.descending:  # reverse=True keeps equal keys in input order: a stable ascending sort of -key
        return [-data, -rank]
    return [data, rank]


def event_ticks(values: list) -> tuple[np.ndarray, str]:
    """(int64 ticks, unit) of a column of event times, compared exactly as the VM compares the values
    (``machine.Within``): naive datetimes as µs, or integer epoch milliseconds; else Unsupported."""
    kinds = set(map(type, values))
    if kinds <= {int} and kinds:
        try:
            return np.asarray(values, dtype=np.int64), "ms"
        except OverflowError:
            raise kernels.Unsupported("integer event times beyond 64 bits") from None
    if kinds and all(issubclass(k, _dt.datetime) for k in kinds):
        import pandas as pd  # its datetime conversion runs in C (numpy's takes microseconds a value)

        # from an object array: pandas' own conversion of a list first copies it element by element
        objects = np.fromiter(values, dtype=object, count=len(values))
        if kinds == {_dt.datetime}:  # whole microseconds by construction: converted to them directly
            try:
                return pd.DatetimeIndex(objects, dtype="datetime64[us]").asi8, "us"
            except (TypeError, ValueError):  # pandas refuses aware times into a naive type
                raise kernels.Unsupported("time-zone-aware event times") from None
        try:
            index = pd.DatetimeIndex(objects)
        except (TypeError, ValueError):  # out of the nanosecond range, or aware and naive mixed
            raise kernels.Unsupported("event times pandas does not convert exactly") from None
        if index.tz is not None:
            raise kernels.Unsupported("time-zone-aware event times")
        nanos = index.as_unit("ns").asi8
        if (nanos % 1000).any():
            raise kernels.Unsupported("event times finer than a microsecond")
        return nanos // 1000, "us"
    raise kernels.Unsupported("event times that are not all naive datetimes or all integers")


def _non_decreasing(values) -> bool:
    try:
        return None not in values and all(map(operator.le, values, itertools.islice(values, 1, None)))
    except TypeError:
        return False


def _list_sort_arrays(values: list, key: ast.SortKey):
    """(data, nulls) for a column of Python values, or None if numpy cannot order them as Python does."""
    types = set(map(type, values))
    has_null = type(None) in types
    types.discard(type(None))
    n = len(values)
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=n) if has_null else None
    filled = [0 if v is None else v for v in values] if has_null else values
    try:
        if not types:
            data = np.zeros(n, dtype=np.int64)
        elif types == {int}:
            data = np.array(filled, dtype=np.int64)
            if data.size and np.abs(data).max() >= 2**62:
                return None
        elif types <= {int, float}:
            data = np.array(filled, dtype=np.float64)
            if np.isnan(data).any() or (int in types and np.abs(data).max() > 2**53):
                return None
        else:
            import pandas as pd

            if not types <= {_dt.datetime, pd.Timestamp}:
                return None
            if any(v.tzinfo is not None for v in values if v is not None):
                return None
            data = pd.DatetimeIndex([None if v is None else v for v in values]).asi8.copy()
    except (OverflowError, ValueError, TypeError):
        return None
    return data, nulls
