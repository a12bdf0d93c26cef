"""Moving data between the user's shapes (list of dicts, pandas, pyarrow) and the matcher's columns.

The matcher reads columns of plain Python values with None for NULL. pandas marks missing values as
NaN/NaT; those become None here, once, at the boundary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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


def rows_to_columns(rows: list[dict]) -> dict[str, list]:
    names: dict[str, None] = {}
    for row in rows:
        for name in row:
            names.setdefault(name, None)
    return {name: [row.get(name) for row in rows] for name in names}


def pandas_to_columns(frame, names=None) -> dict[str, list]:
    """Columns of a pandas frame as lists; ``names`` picks some of them without copying the frame."""
    return {str(name): series_values(frame[name]) for name in (frame.columns if names is None else names)}


def series_values(series) -> list:
    """A pandas Series as Python values, None for a missing value (NaN, NaT, NA)."""
    if isinstance(series.dtype, np.dtype) and series.dtype.kind in "iub":  # no missing values possible
        return series.tolist()
    values = series.astype(object).tolist()
    mask = series.isna().tolist()
    return [None if missing else value for value, missing in zip(values, mask)]


def arrow_to_columns(table) -> dict[str, list]:
    return {name: table.column(name).to_pylist() for name in table.column_names}


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
    column, so a typed column and the list of its values give the same frame."""
    if kind == "rows":
        return [dict(zip(names, row)) for row in zip(*[_as_list(column) for column in columns])]
    if kind == "pandas":
        import pandas as pd

        if not columns or not len(columns[0]):
            return pd.DataFrame({n: [] for n in names})
        series = [column if isinstance(column, pd.Series) else pd.Series(column) for column in columns]
        frame = pd.concat([s.reset_index(drop=True) for s in series], axis=1, ignore_index=True)
        frame.columns = list(names)
        return frame
    import pyarrow as pa

    if not columns or not len(columns[0]):
        return pa.table({n: [] for n in names})
    arrays = [column if isinstance(column, (pa.Array, pa.ChunkedArray)) else pa.array(column) for column in columns]
    return pa.Table.from_arrays(arrays, names=list(names))


def _as_list(column) -> list:
    return column if isinstance(column, list) else column.tolist() if hasattr(column, "tolist") else column.to_pylist()
