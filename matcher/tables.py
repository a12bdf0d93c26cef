"""Moving data between the user's shapes (list of dicts, pandas, pyarrow) and the matcher's columns.

The matcher reads columns of plain Python values with None for NULL. pandas marks missing values as
NaN/NaT; those become None here, once, at the boundary.
"""

from __future__ import annotations

from typing import Any


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
    columns = {}
    for name in frame.columns if names is None else names:
        series = frame[name]
        if series.dtype.kind in "iub":  # no missing values possible: the fast path
            columns[str(name)] = series.tolist()
            continue
        values = series.astype(object).tolist()
        mask = series.isna().tolist()
        columns[str(name)] = [None if missing else value for value, missing in zip(values, mask)]
    return columns


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
    if kind == "pandas":
        import pandas as pd

        return pd.DataFrame.from_records(rows, columns=list(names)) if rows else pd.DataFrame({n: [] for n in names})
    import pyarrow as pa

    return pa.Table.from_pylist([dict(zip(names, row)) for row in rows]) if rows else pa.table({n: [] for n in names})
