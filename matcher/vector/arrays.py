"""Input columns as numpy arrays, so the fast path can read a pandas DataFrame or a pyarrow Table without
building one Python object per value.

The matcher's reference input is columns of Python values, as ``tables.to_columns`` builds them (None
for NULL; pandas NaN/NaT become None, Arrow NaN stays NaN). An ``ArrayColumn`` holds the same column
as numpy data plus a NULL mask, and can always give back exactly those Python values (``python``), for
all rows or a few. So whichever path runs, it reads the same values: the fast path's kernels read
``data``/``nulls``; the Pike VM and anything unusual read ``python()``.

Output goes the other way: ``output(rows)`` is the column of the given input rows (-1: NULL) in the
input's own library, typed exactly as ``tables.from_columns`` would type the Python values
``python(rows)`` (pandas and Arrow infer a type from Python values; ``output`` reproduces that
inference from the input type). Where the inference is not reproduced exactly (an unusual type), it
returns None and the caller builds the column from the Python values, so both paths stay identical.

Kinds: ``int`` (int64 data), ``float`` (float64), ``bool``, ``str`` (object array of str), ``time``
(int64 ticks of a naive or UTC timestamp, only for sorting), ``other`` (no numpy data: Python values).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from cep.matcher.rows.tables import arrow_values, series_values

# Imported inside functions: pandas and pyarrow (heavy; each is needed only for its own kind of input).

# A partition key may be factorized in numpy only when its equality is Python's equality on the values
# (floats are not: NaN is never equal to itself in Python, and -0.0 == 0.0).
KEY_KINDS = frozenset({"int", "bool", "str", "time"})


@dataclass(frozen=True)
class ArrayColumn:
    """One input column: numpy data with a NULL mask (None: no NULLs), and its source for exact values.

    ``data`` is read from the source on first use: a string column becomes Python objects only when a
    condition or the output reads it."""

    kind: str
    read: Callable[[], np.ndarray | None] = field(repr=False)
    nulls: np.ndarray | None
    source: Any  # the pandas Series or the pyarrow Array
    library: str  # "pandas" or "arrow"

    @cached_property
    def data(self) -> np.ndarray | None:
        return self.read()

    def python(self, rows: np.ndarray | None = None) -> list:
        """The Python values of ``rows`` (all rows when None; -1 gives None), as ``tables.to_columns`` gives them."""
        if self.library == "pandas":
            if rows is None:
                return series_values(self.source)
            values = series_values(self.source.iloc[np.where(rows < 0, 0, rows)])
            return [None if row < 0 else value for value, row in zip(values, rows.tolist())]
        if rows is None:
            return arrow_values(self.source)
        import pyarrow as pa

        return arrow_values(self.source.take(pa.array(rows, mask=rows < 0)))

    def output(self, rows: np.ndarray):
        """The column of ``rows`` (-1: NULL) typed as Python values would be, or None when not reproduced."""
        missing = rows < 0
        if self.nulls is not None:
            missing = missing | self.nulls[np.where(missing, 0, rows)]
        if missing.all():  # every value NULL: the inference gives an untyped column (object / null)
            return None
        if self.library == "pandas":
            return _pandas_output(self, rows, missing)
        return _arrow_output(self, rows, missing)


def _pandas_output(column: ArrayColumn, rows: np.ndarray, missing: np.ndarray):
    """pandas infers int64 from Python ints, float64 from floats, bool, datetime64[ns] from naive
    Timestamps, object from strings; with a NULL among them ints, floats and bools are pandas' nullable
    Int64, Float64 and boolean, and floats with a NaN Float64 (``tables.pandas_series``)."""
    import pandas as pd

    taken = np.where(missing, 0, rows)
    kind, any_missing = column.kind, bool(missing.any())
    if kind == "int":
        data = column.data[taken]
        if not any_missing:
            return pd.Series(data, dtype=np.int64)
        return pd.Series(pd.arrays.IntegerArray(data.astype(np.int64), missing))
    if kind == "float":
        out = column.data[taken]  # a copy (fancy indexing)
        if not any_missing and not np.isnan(out).any():
            return pd.Series(out)
        out[missing] = 0.0
        return pd.Series(pd.arrays.FloatingArray(out, missing))
    if kind == "bool":
        if not any_missing:
            return pd.Series(column.data[taken])
        return pd.Series(pd.arrays.BooleanArray(column.data[taken].astype(bool), missing))
    if kind == "str":
        out = column.data[taken]
        out[missing] = None
        return pd.Series(out, dtype=object)
    dtype = column.source.dtype
    if kind == "time" and isinstance(dtype, np.dtype):  # naive: Timestamps infer datetime64[ns]
        # to the microsecond, rounded down, as every input kind keeps time (tables.instant)
        out = column.source.to_numpy()[taken].astype("datetime64[us]").astype("datetime64[ns]")
        out[missing] = np.datetime64("NaT")
        return pd.Series(out)
    return None


# Arrow types whose Python values infer back to a known type: (type test, inferred type).
def _arrow_inferred(arrow_type):
    import pyarrow as pa
    import pyarrow.types as t

    if t.is_signed_integer(arrow_type) or arrow_type in (pa.uint8(), pa.uint16(), pa.uint32()):
        return pa.int64()
    if t.is_floating(arrow_type):
        return pa.float64()
    if t.is_boolean(arrow_type):
        return pa.bool_()
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return pa.string()
    if t.is_timestamp(arrow_type) and arrow_type.tz is None and arrow_type.unit in ("s", "ms", "us"):
        return pa.timestamp("us")
    if t.is_date32(arrow_type):
        return pa.date32()
    return None


def _arrow_output(column: ArrayColumn, rows: np.ndarray, missing: np.ndarray):
    import pyarrow as pa

    target = _arrow_inferred(column.source.type)
    if target is None:
        return None
    indices = pa.array(rows, mask=rows < 0) if (rows < 0).any() else pa.array(rows)
    return column.source.take(indices).cast(target)


# ------------------------------------------------------------------------------------------ reading


class LazyColumns(Mapping):
    """Column name -> ``ArrayColumn``, each read from the frame when first asked for (a query reads
    a few of a table's columns)."""

    def __init__(self, names: list[str], reader: Callable[[str], ArrayColumn]) -> None:
        self._names = names
        self._reader = reader
        self._read: dict[str, ArrayColumn] = {}

    def __getitem__(self, name: str) -> ArrayColumn:
        found = self._read.get(name)
        if found is None:
            if name not in self._names:
                raise KeyError(name)
            found = self._read[name] = self._reader(name)
        return found

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name) -> bool:
        return name in self._names


def from_pandas(frame) -> LazyColumns:
    by_name = {str(name): name for name in frame.columns}
    return LazyColumns(list(by_name), lambda name: _pandas_column(frame[by_name[name]]))


def _pandas_column(series) -> ArrayColumn:
    import pandas as pd

    dtype = series.dtype
    kind = getattr(dtype, "kind", "O")
    masked = isinstance(dtype, pd.api.extensions.ExtensionDtype)
    nulls = series.isna().to_numpy() if masked or kind in "fMO" else None
    if nulls is not None and not nulls.any():
        nulls = None

    def column(kind: str, read) -> ArrayColumn:
        return ArrayColumn(kind, read, nulls, series, "pandas")

    if kind == "i" or (kind == "u" and dtype.itemsize < 8):
        if masked:
            return column("int", lambda: series.to_numpy(dtype=np.int64, na_value=0))
        return column("int", lambda: series.to_numpy().astype(np.int64, copy=False))
    if kind == "f":
        return column("float", lambda: series.to_numpy(dtype=np.float64, na_value=np.nan))
    if kind == "b":
        return column("bool", lambda: series.to_numpy(dtype=bool, na_value=False) if masked else series.to_numpy())
    if kind == "M":  # naive or aware: microseconds of the instant, which order as the Python values do
        return column("time", lambda: _microseconds(np.asarray(series.array.asi8), getattr(dtype, "unit", "ns")))
    if (kind == "O" or isinstance(dtype, pd.StringDtype)) and pd.api.types.infer_dtype(series, skipna=True) in (
        "string",
        "empty",
    ):
        return column("str", lambda: series.to_numpy(dtype=object, na_value=None))
    return column("other", lambda: None)


def from_arrow(table) -> LazyColumns:
    return LazyColumns(list(table.column_names), lambda name: _arrow_column(table.column(name)))


def _arrow_column(chunked) -> ArrayColumn:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as t

    array = chunked.combine_chunks() if isinstance(chunked, pa.ChunkedArray) else chunked
    kind_type = array.type
    nulls = array.is_null().to_numpy(zero_copy_only=False) if array.null_count else None
    filled = (lambda value: pc.fill_null(array, value)) if array.null_count else (lambda value: array)

    def column(kind: str, read) -> ArrayColumn:
        return ArrayColumn(kind, read, nulls, array, "arrow")

    if t.is_signed_integer(kind_type) or kind_type in (pa.uint8(), pa.uint16(), pa.uint32()):
        return column("int", lambda: filled(0).to_numpy().astype(np.int64, copy=False))
    if t.is_floating(kind_type):
        return column("float", lambda: filled(0).to_numpy().astype(np.float64, copy=False))
    if t.is_boolean(kind_type):
        return column("bool", lambda: filled(False).to_numpy(zero_copy_only=False))
    if t.is_string(kind_type) or t.is_large_string(kind_type):
        return column("str", lambda: array.to_numpy(zero_copy_only=False))
    if t.is_timestamp(kind_type):
        return column("time", lambda: _microseconds(pc.fill_null(array.cast(pa.int64()), 0).to_numpy(), kind_type.unit))
    return column("other", lambda: None)


def _microseconds(ticks: np.ndarray, unit: str) -> np.ndarray:
    """Ticks of a time unit as whole microseconds, rounded down (tables.instant keeps microseconds)."""
    if unit == "ns":
        return ticks // 1000
    return ticks * {"s": 1_000_000, "ms": 1000}.get(unit, 1)


def key_codes(columns: list[ArrayColumn]) -> tuple[np.ndarray, np.ndarray] | None:
    """(code per row, first row of each code), codes numbered in order of first appearance, as the
    Python grouping by value gives them; None when a key column is not of an exactly comparable kind."""
    import pandas as pd

    if not columns or any(column.kind not in KEY_KINDS for column in columns):
        return None
    codes = None
    for column in columns:
        if column.library == "arrow" and column.kind == "str":
            import pyarrow.compute as pc

            encoded = pc.dictionary_encode(column.source, null_encoding="encode")
            own = encoded.indices.to_numpy().astype(np.int64, copy=False)
        else:
            if column.kind == "str":  # None marks NULL itself
                own, _ = factorize_text(column.data, use_na_sentinel=False)
            else:
                own, _ = pd.factorize(column.data, use_na_sentinel=False)
            if column.nulls is not None and column.kind != "str":
                # a NULL key is one group of its own (its data is a filler): give it an unused code,
                # then number the codes again in order of first appearance
                own = pd.factorize(np.where(column.nulls, own.max() + 1, own))[0]
            own = own.astype(np.int64, copy=False)
        codes = own if codes is None else pd.factorize(codes * (int(own.max()) + 1) + own, use_na_sentinel=False)[0]
    codes = np.asarray(codes, dtype=np.int64)
    return codes, first_rows_of(codes, int(codes.max()) + 1 if codes.size else 0)


def first_rows_of(codes: np.ndarray, parts: int) -> np.ndarray:
    """The first row holding each code (codes numbered by first appearance)."""
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    # numbered by first appearance, code c first occurs where the running maximum first reaches c
    seen = np.maximum.accumulate(codes)
    rises = np.flatnonzero(seen[1:] > seen[:-1])  # code c + 1 first occurs right after the maximum was c
    first = np.concatenate((np.zeros(1, dtype=np.int64), rises + 1))
    assert len(first) == parts, "codes must be numbered 0, 1, ... in order of first appearance"
    return first


def factorize_text(values: np.ndarray, use_na_sentinel: bool = True) -> tuple[np.ndarray, list]:
    """``pd.factorize`` of an object array of text (and NULLs): (int64 code per row, distinct values), codes in
    order of first appearance. pandas before 3.1 hashes and compares its object strings only up to their first
    NUL character (pandas-dev/pandas#34551), so ``'a'`` and ``'a\\x00b'`` would share a code and two partitions
    would become one: text holding NUL is factorized through an escape that keeps every value apart."""
    import pandas as pd

    codes, distinct = pd.factorize(values, sort=False, use_na_sentinel=use_na_sentinel)
    codes = codes.astype(np.int64, copy=False)
    if not _holds_nul(values):
        return codes, distinct.tolist()
    escaped = np.empty(len(values), dtype=object)
    escaped[:] = [_without_nul(v) if type(v) is str else v for v in values.tolist()]
    codes, _ = pd.factorize(escaped, sort=False, use_na_sentinel=use_na_sentinel)
    codes = codes.astype(np.int64, copy=False)
    coded = np.flatnonzero(codes >= 0)
    firsts = coded[first_rows_of(codes[coded], int(codes.max()) + 1 if coded.size else 0)]
    return codes, values[firsts].tolist()


def groupers(frame: Any, columns: Sequence[str]) -> list:
    """What to hand pandas' ``groupby`` to group ``frame`` by ``columns``: each column as it is, but a text
    column holding NUL as its ``factorize_text`` codes, since ``groupby`` compares strings as ``pd.factorize``
    does, up to the first NUL. The groups' keys are then codes for such a column: read a group's values from
    its first row."""
    import pandas as pd

    found = []
    for name in columns:
        column = frame[name]
        if column.dtype == object or pd.api.types.is_string_dtype(column.dtype):
            values = column.to_numpy(dtype=object)
            if _holds_nul(values):
                codes, _ = factorize_text(values, use_na_sentinel=False)
                column = pd.Series(codes, index=frame.index, name=name)
        found.append(column)
    return found


def _holds_nul(values: np.ndarray) -> bool:
    import pandas as pd

    present = values[pd.notna(values)]
    try:
        return "\x00" in "".join(present)  # one pass in C; the usual column holds only text
    except TypeError:
        return any(type(v) is str and "\x00" in v for v in present.tolist())


def _without_nul(text: str) -> str:
    """An injective rewrite of ``text`` free of NUL: SOH doubles, NUL becomes SOH STX (a prefix code)."""
    return text.replace("\x01", "\x01\x01").replace("\x00", "\x01\x02")
