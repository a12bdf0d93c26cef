"""Run a compiled cep query over a static Spark DataFrame.

    match_dataframe(plan, df) -> DataFrame

How: group the rows by the query's PARTITION BY columns, hand each group to the pure-Python matcher
as one pandas DataFrame (``groupBy(...).applyInPandas``), and let Spark apply the query's outer
ORDER BY / LIMIT to the union of the groups' results.

The plan is the matcher's compiled query (``cep.compile(text).plan``). What this module relies on:

- ``plan.partition_columns``: the PARTITION BY columns as written in the query (resolved here against
  ``df.columns``, case-insensitively when there is no exact match);
- ``plan.output_types(input_types)``: ``[(output column, SQL type name), ...]`` for the input's
  ``{column: SQL type name}``;
- ``plan.run_pandas(pdf)``: the matches of one partition's rows (in any order: the matcher sorts them by
  the query's ORDER BY), as a pandas DataFrame with exactly the output columns;
- ``plan.sort_keys`` (``[(output column, descending, nulls_first), ...]``) and ``plan.limit``.

Time: the session runs in UTC (``spark_bridge.session``), so the pandas frames inside the UDF carry
naive datetime64 values that are UTC wall-clock times, and the matcher's TIMESTAMP outputs go back the
same way. A timestamp column stays a timestamp.

A column whose Spark type the matcher has no name for (binary, map, struct, ...) is cast to string first
and typed VARCHAR (``spark_bridge.types``).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Sequence

from grammar.errors import CepRuntimeError, CepSemanticError
from spark_bridge.types import needs_string_cast, output_schema, spark_to_sql

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import Column, DataFrame

# The grouping column added when the query has no PARTITION BY: every row lands in one group.
_ALL_ROWS_KEY = "__cep_all_rows__"


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier, safe for dots, spaces and backticks."""
    return "`" + name.replace("`", "``") + "`"


def resolve_columns(wanted: Sequence[str], available: Sequence[str], *, clause: str = "PARTITION BY") -> list[str]:
    """Map each name of ``wanted`` to a column of ``available``: exact spelling first, else case-insensitive.

    A name that matches nothing, or only matches several columns that differ by case, raises
    ``CepSemanticError`` naming the available columns.
    """
    resolved: list[str] = []
    for name in wanted:
        bare = name[1:-1] if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"`" else name
        if bare in available:
            resolved.append(bare)
            continue
        candidates = [c for c in available if c.lower() == bare.lower()]
        if len(candidates) == 1:
            resolved.append(candidates[0])
            continue
        if not candidates:
            raise CepSemanticError(
                f"{clause} column {name!r} is not in the input (columns: {', '.join(available)})",
                code="E0220",
            )
        raise CepSemanticError(
            f"{clause} column {name!r} is ambiguous in the input: it matches {', '.join(candidates)}",
            code="E0220",
        )
    return resolved


def _empty_frame(columns: Sequence[tuple[str, str]]) -> "pd.DataFrame":
    import pandas as pd

    dtypes = {"TIMESTAMP": "datetime64[ns]", "BIGINT": "Int64", "INTEGER": "Int32", "DOUBLE": "float64", "BOOLEAN": "boolean"}
    return pd.DataFrame({name: pd.Series([], dtype=dtypes.get(type_name.upper(), "object")) for name, type_name in columns})


def conform(result: "pd.DataFrame | None", columns: Sequence[tuple[str, str]]) -> "pd.DataFrame":
    """Make the matcher's output fit the Arrow schema Spark expects: column order, nullable ints, naive UTC times."""
    import pandas as pd

    names = [name for name, _ in columns]
    if result is None or len(result) == 0:
        return _empty_frame(columns)
    missing = [name for name in names if name not in result.columns]
    if missing:
        raise CepRuntimeError(
            f"the matcher returned columns {list(result.columns)} but the plan promised {names} (missing: {missing})",
            code="E0490",
        )
    out = result.loc[:, names].copy()
    for name, type_name in columns:
        kind = type_name.upper()
        series = out[name]
        if kind == "TIMESTAMP":
            if not pd.api.types.is_datetime64_any_dtype(series):
                series = pd.to_datetime(series, utc=True)
            if getattr(series.dt, "tz", None) is not None:
                series = series.dt.tz_convert("UTC").dt.tz_localize(None)
            out[name] = series
        elif kind in ("BIGINT", "INTEGER", "SMALLINT", "TINYINT"):
            if not pd.api.types.is_integer_dtype(series):
                out[name] = series.astype("Int64" if kind == "BIGINT" else "Int32")
        elif kind == "DOUBLE":
            if not pd.api.types.is_float_dtype(series):
                out[name] = pd.to_numeric(series).astype("float64")
        elif kind == "INTERVAL":
            out[name] = pd.to_timedelta(series)
    return out


def _order_column(name: str, descending: bool, nulls_first: bool | None) -> "Column":
    from pyspark.sql import functions as F

    col = F.col(quote(name))
    if nulls_first is None:
        return col.desc() if descending else col.asc()
    if descending:
        return col.desc_nulls_first() if nulls_first else col.desc_nulls_last()
    return col.asc_nulls_first() if nulls_first else col.asc_nulls_last()


def replay_clock(plan: Any, df: "DataFrame"):
    """The largest event time in ``df`` when the query has WITHIN (else None), as the matcher's Python value."""
    import datetime as dt

    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    statement = getattr(plan, "statement", None)
    if statement is None or statement.match.within is None or not plan.order_columns:
        return None
    column = resolve_columns([plan.order_columns[0]], df.columns, clause="ORDER BY")[0]
    data_type = df.schema[column].dataType
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        # Epoch microseconds: no time-zone conversion on the way to the driver (the session is UTC).
        micros = df.agg(F.max(F.unix_micros(F.col(quote(column)).cast("timestamp")))).first()[0]
        return None if micros is None else dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    return df.agg(F.max(F.col(quote(column)))).first()[0]


def match_dataframe(plan: Any, df: "DataFrame") -> "DataFrame":
    """The matches of ``plan`` over the static DataFrame ``df``, as a DataFrame (lazy: nothing runs until an action)."""
    from pyspark.sql import functions as F

    # Columns the matcher has no type for travel as strings.
    casts = [field.name for field in df.schema.fields if needs_string_cast(field.dataType)]
    for name in casts:
        df = df.withColumn(name, F.col(quote(name)).cast("string"))

    input_types = {field.name: spark_to_sql(field.dataType) for field in df.schema.fields}
    # output_types checks the query against the input's columns first (its errors point into the query).
    columns = [(name, type_name) for name, type_name in plan.output_types(input_types)]
    partition = resolve_columns(list(plan.partition_columns or []), df.columns)
    schema = output_schema(columns)

    if partition:
        grouped = df.groupBy(*[F.col(quote(c)) for c in partition])
        drop_key = None
    else:
        key = _ALL_ROWS_KEY
        while key in df.columns:
            key = "_" + key
        grouped = df.withColumn(key, F.lit(0)).groupBy(F.col(quote(key)))
        drop_key = key

    # The matcher can coerce its values to the declared types itself (newer plans take output_types).
    try:
        typed = "output_types" in inspect.signature(plan.run_pandas).parameters
    except (TypeError, ValueError):  # pragma: no cover - a C-level or odd callable
        typed = False

    # WITHIN, timeouts and absence deadlines are decided by the replay's clock: the largest event time
    # of the WHOLE input, as in the Python engine, not of each group (one small Spark job first).
    clock = replay_clock(plan, df)

    def match_group(pdf: "pd.DataFrame") -> "pd.DataFrame":
        if drop_key is not None:
            pdf = pdf.drop(columns=[drop_key])
        options = {"output_types": columns} if typed else {}
        if clock is not None:
            options["clock"] = clock
        return conform(plan.run_pandas(pdf, **options), columns)

    out = grouped.applyInPandas(match_group, schema=schema)

    sort_keys = getattr(plan, "sort_keys", None) or []
    if callable(sort_keys):  # resolved against the input's columns
        sort_keys = sort_keys(list(df.columns))
    sort_keys = list(sort_keys)
    if sort_keys:
        out = out.orderBy(*[_order_column(name, bool(desc), nulls_first) for name, desc, nulls_first in sort_keys])
    limit = getattr(plan, "limit", None)
    if limit is not None:
        out = out.limit(int(limit))
    return out
