"""Moving data between the user's shapes (list of dicts, pandas, pyarrow) and the matcher's columns.

The matcher reads columns of plain Python values with None for NULL. What a value is, the same on
every input kind (docs/semantics.md, "Values"), is decided here, once, at the boundary (``python_values``):

* **NULL**: None; in pandas, the dtype's own missing marker (NaN in a float64 or object column, NaT,
  ``pd.NA``); in Arrow, null.
* **NaN** is a value, not NULL (Spark's rule): one canonical NaN object (``NAN``), so that rows whose
  key is NaN group together (Python's dict compares a NaN only to itself). pandas has no NaN value
  apart from its missing marker except in its nullable ``Float64`` dtype, which keeps both.
* **Time-zone-aware times are instants**, converted to UTC (``datetime.timezone.utc``): Python orders
  and subtracts two datetimes of one zone by wall clock, which is wrong across a DST change.
* **Timestamps keep microseconds** (Spark's and Python's precision): a pandas or Arrow nanosecond
  timestamp loses its nanoseconds (rounded down) and becomes a ``datetime``.
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from cep.matcher.sql.values import times_alike

if TYPE_CHECKING:  # pragma: no cover
    import pandas

# Imported inside functions: pandas and pyarrow (heavy; a list of dicts needs neither).


def kind_of(data: Any) -> str:
    module = type(data).__module__
    if isinstance(data, list):
        return "rows"
    if module.startswith("pandas") and type(data).__name__ == "DataFrame":
        return "pandas"
    if module.startswith("pyarrow") and type(data).__name__ == "Table":
        return "arrow"
    raise TypeError(
        f"Query.run takes a list of dicts, a pandas DataFrame or a pyarrow Table, not {type(data).__name__}"
    )


# The one NaN object every input NaN becomes (see the module docstring).
NAN = float("nan")
_UTC = _dt.UTC


def python_values(values: list) -> list:
    """A column of Python values as the matcher reads it: NaN made the canonical ``NAN``, aware times
    in UTC, pandas Timestamps as ``datetime`` (to the microsecond). ``values`` itself is returned when
    nothing changes (the common case costs one pass over the types)."""
    types = set(map(type, values))
    if float in types and any(v != v for v in values if type(v) is float):
        values = [NAN if type(v) is float and v != v else v for v in values]
    if any(issubclass(t, _dt.datetime) for t in types) and any(
        type(v) is not _dt.datetime or (v.tzinfo is not None and v.tzinfo is not _UTC)
        for v in values
        if isinstance(v, _dt.datetime)
    ):
        values = [instant(v) if isinstance(v, _dt.datetime) else v for v in values]
    return values


def instant(value: _dt.datetime) -> _dt.datetime:
    """A datetime as the matcher keeps it: a plain ``datetime`` to the microsecond, in UTC when aware."""
    if type(value) is not _dt.datetime:
        to_python = getattr(value, "to_pydatetime", None)  # pandas: drops the nanoseconds (rounds down)
        value = to_python(warn=False) if to_python is not None else _dt.datetime.combine(value.date(), value.timetz())
    if value.tzinfo is not None and value.tzinfo is not _UTC and value.utcoffset() is not None:
        return value.astimezone(_UTC)
    return value


def rows_to_columns(rows: list[dict]) -> dict[str, list]:
    names: dict[str, None] = {}
    for row in rows:
        for name in row:
            names.setdefault(name, None)
    return {name: python_values([row.get(name) for row in rows]) for name in names}


def pandas_to_columns(frame, names=None) -> dict[str, list]:
    """Columns of a pandas frame as lists; ``names`` picks some of them without copying the frame."""
    return {str(name): series_values(frame[name]) for name in (frame.columns if names is None else names)}


def series_values(series) -> list:
    """A pandas Series as Python values, None for a missing value (NaN in float64 and object columns,
    NaT, NA; a nullable ``Float64`` column keeps its NaN values apart from its NA)."""
    if isinstance(series.dtype, np.dtype) and series.dtype.kind in "iub":  # no missing values possible
        return series.tolist()
    values = series.astype(object).tolist()
    mask = series.isna().tolist()
    return python_values([None if missing else value for value, missing in zip(values, mask)])


def arrow_values(array) -> list:
    """An Arrow array (or chunked array) as Python values (null: None, NaN stays a value)."""
    return python_values(array.to_pylist())


def arrow_to_columns(table) -> dict[str, list]:
    return {name: arrow_values(table.column(name)) for name in table.column_names}


def to_columns(data: Any) -> tuple[str, dict[str, list]]:
    kind = kind_of(data)
    if kind == "rows":
        return kind, rows_to_columns(data)
    if kind == "pandas":
        return kind, pandas_to_columns(data)
    return kind, arrow_to_columns(data)


def from_rows(kind: str, names: tuple[str, ...], rows: list[tuple]):
    if kind == "rows":
        return [dict(zip(names, row)) for row in rows]
    if not rows:
        return from_columns(kind, names, [[] for _ in names])
    return from_columns(kind, names, [list(values) for values in zip(*rows)])


def from_columns(kind: str, names: tuple[str, ...], columns: list):
    """The result in the input's shape from its columns: each a list of Python values, or a column
    already typed for that shape (a pandas Series / pyarrow Array typed as its Python values would infer,
    ``arrays.ArrayColumn.output``). Python values are typed by the library's own inference, column by
    column (for pandas, ``pandas_series``), so a typed column and the list of its values give the same frame."""
    if kind == "rows":
        return [dict(zip(names, row)) for row in zip(*[_as_list(column) for column in columns])]
    if kind == "pandas":
        import pandas as pd

        if not columns or not len(columns[0]):
            return pd.DataFrame({n: [] for n in names})
        series = [column if isinstance(column, pd.Series) else pandas_series(column) for column in columns]
        frame = pd.concat([s.reset_index(drop=True) for s in series], axis=1, ignore_index=True)
        frame.columns = list(names)
        return frame
    import pyarrow as pa

    if not columns or not len(columns[0]):
        return pa.table({n: [] for n in names})
    arrays = [column if isinstance(column, (pa.Array, pa.ChunkedArray)) else _arrow_array(column) for column in columns]
    return pa.Table.from_arrays(arrays, names=list(names))


def _arrow_array(values: list):
    """An Arrow array of Python values; a column where DATEs meet TIMESTAMPs (``COALESCE(ts, DATE '9999-12-31')``
    where ``ts`` is NULL in some matches) holds TIMESTAMPs, each DATE its midnight, as Spark widens them."""
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        widened = times_alike(values)
        widened = numbers_alike(values) if widened is values else widened
        if widened is values:
            raise
        return pa.array(widened)


def numbers_alike(values: list) -> list:
    """``values`` where numbers of several kinds meet (``COALESCE(A.i, 2.5)``, a CASE of a DECIMAL and a DOUBLE)
    as Spark's common type holds them: a float among them makes each a float (a DOUBLE), else a Decimal among
    integers makes each a Decimal (exactly); ``values`` itself when they are not such a mix."""
    kinds = {type(value) for value in values if value is not None}
    if not kinds or not kinds <= {int, float, Decimal} or len(kinds) == 1:
        return values
    convert = float if float in kinds else Decimal
    return [None if value is None else convert(value) for value in values]


def pandas_series(values: list):
    """A pandas Series of Python values, typed by pandas' inference except where it would change a value:
    integers with a NULL are ``Int64`` (not float64: 7 stays 7, and 64-bit ids keep their digits), floats
    with a NULL or a NaN are ``Float64`` (a NaN value stays apart from NULL, which float64 cannot keep)
    and booleans with a NULL ``boolean``."""
    import pandas as pd

    types = set(map(type, values))
    if _dt.datetime in types and _dt.date in types:  # DATEs among TIMESTAMPs: widened, as Arrow's column is
        values, types = times_alike(values), types - {_dt.date}
    nan = float in types and any(v != v for v in values if type(v) is float)
    if (type(None) in types and len(types) > 1) or nan:
        types.discard(type(None))
        mask = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        try:
            if types == {int}:
                data = np.array([0 if v is None else v for v in values], dtype=np.int64)
                return pd.Series(pd.arrays.IntegerArray(data, mask))
            if types <= {int, float}:
                data = np.array([0.0 if v is None else v for v in values], dtype=np.float64)
                return pd.Series(pd.arrays.FloatingArray(data, mask))
        except OverflowError:  # integers beyond 64 bits: Python objects
            return pd.Series(values, dtype=object)
        if types == {bool}:
            data = np.array([bool(v) for v in values], dtype=bool)
            return pd.Series(pd.arrays.BooleanArray(data, mask))
    return pd.Series(values)


def _as_list(column) -> list:
    return column if isinstance(column, list) else column.tolist() if hasattr(column, "tolist") else column.to_pylist()


def arrow_to_pandas(table) -> pandas.DataFrame:
    """An Arrow table (a file, or a result of either engine) as pandas without changing a value: integer,
    float and boolean columns with a NULL in pandas' nullable dtypes (a NULL stays apart from a NaN, and 7
    stays 7), decimals as ``Decimal``, times with a zone as naive UTC, DuckDB's intervals as durations."""
    import pandas as pd
    import pyarrow.types as t

    frame = table.to_pandas()
    for index, field in enumerate(table.schema):
        column = table.column(index)
        if t.is_timestamp(field.type) and field.type.tz is not None:
            frame.isetitem(index, frame.iloc[:, index].dt.tz_convert("UTC").dt.tz_localize(None))
        elif t.is_interval(field.type):
            frame.isetitem(index, pd.Series([_interval(value) for value in column.to_pylist()], dtype=object))
        elif column.null_count and (t.is_integer(field.type) or t.is_floating(field.type) or t.is_boolean(field.type)):
            frame.isetitem(index, pandas_series(column.to_pylist()))
        elif t.is_floating(field.type) and frame.iloc[:, index].isna().any():  # NaN values: NaN, not pandas' NULL
            frame.isetitem(
                index,
                pd.Series(pd.arrays.FloatingArray(column.to_numpy(), column.is_null().to_numpy(zero_copy_only=False))),
            )
    return frame


def _interval(value):
    """A DuckDB INTERVAL (months, days, nanoseconds): a duration when it has no months, else its text."""
    if value is None:
        return None
    months, days, nanoseconds = value
    if months:
        return f"{months} months {days} days {_dt.timedelta(microseconds=nanoseconds // 1000)}"
    return _dt.timedelta(days=days, microseconds=nanoseconds // 1000)
