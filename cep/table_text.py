"""Match tables as text: one cell's text for every value the engines return, and the aligned table that
``cep run`` prints (also the cells of ``cep report``)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from cep.spark_bridge.sinks.safe_text import visible

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# Imported inside functions: pandas (heavy; `cep check` never needs it).


def cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):  # also numpy's float64; NaN is a value (pandas' NULL is NA)
        return "NaN" if math.isnan(value) else repr(float(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    try:
        import pandas as pd

        if value is pd.NaT or (not isinstance(value, (str, list, tuple, dict)) and pd.isna(value) is True):
            return "NULL"
        if isinstance(value, pd.Timestamp):
            value = value.to_pydatetime(warn=False)
    except (ImportError, TypeError, ValueError):
        pass
    if isinstance(value, timedelta):  # also pandas' Timedelta: "00:14:00", not "0 days 00:14:00"
        return _duration(value)
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        if value.tzinfo is not None:
            text += value.strftime("%z")
        return text
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy scalars and arrays
        return cell(value.tolist())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(cell(v) for v in value) + "]"
    return str(value)


def _duration(value: timedelta) -> str:
    micros = int(value // timedelta(microseconds=1))
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, micros = divmod(micros, 1_000_000)
    days, seconds = divmod(seconds, 86_400)
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if micros:
        text += f".{micros:06d}".rstrip("0")
    if days:
        text = f"{days} day{'s' if days > 1 else ''} {text}"
    return sign + text


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float, Decimal))
        and not isinstance(value, bool)
        or (hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iuf")
    )


def pd_is_float(series: Any) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_float_dtype(series))


def _pad_decimals(rows: list[list[str]], index: int, max_decimals: int = 6) -> None:
    """Give a float column's cells the same number of decimals (40.9 next to 41.12 prints as 40.90)."""
    decimals = 0
    for row in rows:
        cell = row[index]
        if not re.fullmatch(r"-?\d+(\.\d+)?", cell):
            if cell == "NULL":
                continue
            return  # exponents, inf: leave the column as is
        decimals = max(decimals, len(cell.partition(".")[2]))
    if decimals == 0 or decimals > max_decimals:
        return
    for row in rows:
        if row[index] != "NULL":
            row[index] = f"{float(row[index]):.{decimals}f}"


def format_table(pdf: pd.DataFrame) -> str:
    """A plain aligned text table: a header, a rule, one line per row; numbers right-aligned, NULL for missing.
    Control characters in a value (an ANSI escape, a newline) are shown as escapes (``\x1b``, ``\n``): data
    can neither repaint the terminal nor break the table."""
    columns = [visible(str(c)) for c in pdf.columns]
    rows = [[visible(cell(v)) for v in record] for record in pdf.itertuples(index=False, name=None)]
    for i in range(len(columns)):
        dtype = pdf.dtypes.iloc[i]
        if str(dtype) in ("float64", "float32", "float16"):  # numpy floats: NaN is pandas' NULL there (Float64: NA)
            for row in rows:
                if row[i] == "NaN":
                    row[i] = "NULL"
    numeric = [
        all(_is_number(v) for v in pdf.iloc[:, i].dropna().tolist()) and pdf.iloc[:, i].notna().any()
        for i in range(len(columns))
    ]
    for i in range(len(columns)):
        if pd_is_float(pdf.iloc[:, i]):
            _pad_decimals(rows, i)
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]

    def line(cells: Sequence[str]) -> str:
        parts = [cell.rjust(w) if num else cell.ljust(w) for cell, w, num in zip(cells, widths, numeric)]
        return "  ".join(parts).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def _is_scalar(value: Any) -> bool:
    if isinstance(value, (list, tuple, dict, set)):
        return False
    return not (hasattr(value, "dtype") and getattr(value, "ndim", 0) > 0)


def display_order(pdf: pd.DataFrame) -> pd.DataFrame:
    """Without an ORDER BY the engines return rows in different orders; show them sorted, the same way."""
    if len(pdf) < 2:
        return pdf
    sortable = [c for c in pdf.columns if pdf[c].dtype != object or all(_is_scalar(v) for v in pdf[c])]
    if not sortable:
        return pdf
    try:
        return pdf.sort_values(sortable, kind="mergesort", na_position="last").reset_index(drop=True)
    except (TypeError, ValueError):
        return pdf
