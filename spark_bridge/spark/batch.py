"""Run a compiled cep query over a static Spark DataFrame.

    match_dataframe(plan, df, *, query_text=None, session_timeout_us=None, match_ids=False) -> DataFrame

How: Spark hashes the rows to tasks by the query's PARTITION BY columns (``repartition``: each query
partition lands whole in one task), each task hands its Arrow batches to the matcher as one Arrow table
(``mapInArrow``), and Spark applies the query's outer ORDER BY / LIMIT to the union of the results.
Columns all the way: the matcher partitions and sorts the task's rows itself, column-wise
(``plan.run_frame``), so there is no Spark sort, no Python call per group and no pandas conversion.

The plan is the matcher's compiled query (``cep.compile(text).plan``). What this module relies on:

- ``plan.partition_names(columns)`` and ``plan.order_names(columns)``: the input columns PARTITION BY
  and ORDER BY name (``grammar/columns.py`` resolves them, as everywhere);
- ``plan.output_types(input_types)``: ``[(output column, SQL type name), ...]`` for the input's
  ``{column: SQL type name}``;
- ``plan.run_frame(table, outer_order_and_limit=False, clock=...)``: the matches of a pyarrow Table
  holding whole partitions (rows in any order: the matcher sorts them by the query's ORDER BY);
- ``plan.sort_keys`` (``[(column, descending, nulls_first), ...]``), ``plan.sort_column_types`` (the keys
  that are not output columns, which the matcher appends to its rows and Spark drops after sorting)
  and ``plan.limit``.

Sessions and match ids (``match_dataframe(..., session_timeout_us=..., match_ids=True)``): each task
replays its table as a stream would have matched it (``cep.spark_bridge.engine.replay.Replay``) instead of
``run_frame``, and ``match_id`` comes last.

Memory: a task holds its whole share of the input (about rows / ``spark.sql.shuffle.partitions``) as
Arrow columns while it matches; raise the shuffle partitions for inputs larger than the workers' memory.

Time: the session runs in UTC (``cep.spark_bridge.spark.session``); timestamps reach the matcher as naive UTC
wall-clock times (``naive_utc``) and go back as UTC instants. A timestamp column stays a timestamp.

A column whose Spark type the matcher has no name for (binary, map, struct, ...) is cast to string first
and typed VARCHAR (``cep.spark_bridge.spark.types``).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from cep.grammar.errors import CepSemanticError
from cep.matcher.rows.tables import arrow_to_columns, from_rows
from cep.matcher.sql.datetimes import query_time, utc_now
from cep.matcher.sql.types import coerce
from cep.spark_bridge.engine.replay import MATCH_ID, Replay
from cep.spark_bridge.spark.columns import quote
from cep.spark_bridge.spark.types import cast_untyped, output_schema, spark_to_sql

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

# Imported inside functions: pyspark and pyarrow, optional or heavy (the "spark" extra; seconds to import).


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
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    statement = getattr(plan, "statement", None)
    if statement is None or statement.match.within is None or not plan.order_columns:
        return None
    column = plan.order_names(df.columns)[0]
    data_type = df.schema[column].dataType
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        # Epoch microseconds: no time-zone conversion on the way to the driver (the session is UTC).
        micros = df.agg(F.max(F.unix_micros(F.col(quote(column)).cast("timestamp")))).first()[0]
        return None if micros is None else dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    return df.agg(F.max(F.col(quote(column)))).first()[0]


def _match_columns(plan: Any, df: "DataFrame", partition: list[str], schema, clock, replay=None,
                   ordinal: str | None = None) -> "DataFrame":
    """Columns end to end: Spark hashes the rows to tasks by the PARTITION BY columns (every partition
    whole in one task), and each task hands its Arrow batches to the matcher as one table. The matcher
    partitions and sorts column-wise itself (``plan.run_frame``), so no Spark sort, no call per group and
    no pandas conversion; its Arrow result is cast to the output schema.

    ``replay``: the keyword arguments of ``cep.spark_bridge.engine.replay.Replay`` (sessions, match ids); each task
    then matches its table as a stream would have (``Replay.run``) instead of ``run_frame``.

    ``ordinal``: the name of a last BIGINT column numbering each task's output rows from 0, in the
    matcher's order (partition by partition, matches in order): sorted by the PARTITION BY columns and
    then by it, the output comes in the order the query defines (every partition is in one task)."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    tasks = max(1, int(df.sparkSession.conf.get("spark.sql.shuffle.partitions", "4") or 4))
    if partition:
        shuffled = df.repartition(tasks, *[_quoted_col(c) for c in partition])
    else:
        shuffled = df.repartition(1)  # one partition of the query: all rows in one task
    target = to_arrow_schema(schema, timezone="UTC")
    now = utc_now()  # CURRENT_TIMESTAMP: when the job is planned, the same in every task (as Spark's)

    def match_batches(batches):
        import pyarrow as pa

        batches = list(batches)
        if not batches:
            return
        table = naive_utc(pa.Table.from_batches(batches))
        if table.num_rows == 0:
            return
        with query_time(now):
            if replay is None:
                result = plan.run_frame(table, outer_order_and_limit=False, clock=clock)
            else:
                result = _replay_table(plan, table, replay, clock)
        result = conform_arrow(result, target, schema)
        if ordinal is not None:
            result = result.append_column(ordinal, pa.array(range(result.num_rows), type=pa.int64()))
        yield from result.to_batches()

    out_schema = schema
    if ordinal is not None:
        out_schema = T.StructType(list(schema.fields) + [T.StructField(ordinal, T.LongType(), False)])
    return shuffled.mapInArrow(match_batches, out_schema)


def _replay_table(plan: Any, table, replay: dict, clock):
    """One task's Arrow table replayed with sessions and match ids (``cep.spark_bridge.engine.replay``), as Arrow."""
    columns = arrow_to_columns(table)
    names, rows = Replay(plan, tuple(columns), **replay).run(columns, clock=clock, outer_order_and_limit=False)
    return from_rows("arrow", names, rows)


def _quoted_col(name: str) -> "Column":
    from pyspark.sql import functions as F

    return F.col(quote(name))


def _check_replay_time(plan: Any, df: "DataFrame") -> None:
    """A replay with sessions or match ids carries event time as a stream does: the first ORDER BY
    column must be a timestamp (E0282, as ``match_stream`` says it)."""
    from pyspark.sql import types as T

    if not plan.order_columns:
        return  # the replay's engine refuses the query itself (E0280)
    column = plan.order_names(df.columns)[0]
    data_type = df.schema[column].dataType
    if not isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        raise CepSemanticError(
            f"the event-time column {column!r} is {data_type.simpleString()}, not timestamp; cast it first "
            f"(e.g. df.withColumn({column!r}, F.col({column!r}).cast('timestamp')))",
            code="E0282",
        )


def naive_utc(table):
    """Spark hands timestamps as UTC instants; the matcher reads naive UTC wall-clock times (as pandas
    gives them to ``applyInPandas``), so the time-zone tag is dropped: the values are unchanged."""
    import pyarrow as pa
    import pyarrow.types as t

    fields = [pa.field(f.name, pa.timestamp(f.type.unit), f.nullable) if t.is_timestamp(f.type) and f.type.tz else f
              for f in table.schema]
    return table.cast(pa.schema(fields)) if fields != list(table.schema) else table


def conform_arrow(result, target, schema):
    """The matcher's Arrow result cast to the Arrow schema Spark expects (``target``, from ``schema``).

    The result's types are those of its Python values (``tables.from_columns``); a column whose type
    does not cast (e.g. integers in a VARCHAR column) is rebuilt from its values with ``coerce``."""
    import pyarrow as pa

    arrays = []
    for index, field in enumerate(target):
        column = result.column(index)
        try:
            arrays.append(column.cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            type_name = spark_to_sql(schema.fields[index].dataType)
            values = [coerce(value, type_name) for value in column.to_pylist()]
            arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=target)


def match_dataframe(plan: Any, df: "DataFrame", *, query_text: str | None = None, session_timeout_us: int | None = None,
                    match_ids: bool = False, ordinal: str | None = None) -> "DataFrame":
    """The matches of ``plan`` over the static DataFrame ``df``, as a DataFrame (lazy: nothing runs until an action).

    ``session_timeout_us`` / ``match_ids``: replay as the stream would have matched (``cep.spark_bridge.engine.replay``:
    sessions split at event-time gaps, a last column ``match_id`` hashing ``query_text``). The event-time
    column must then be a timestamp. ``ordinal``: a last column numbering each task's rows in the matcher's
    order (``_match_columns``), for a caller that sorts the output in the order the query defines.
    """
    from pyspark.sql import functions as F

    df = cast_untyped(df)

    input_types = {field.name: spark_to_sql(field.dataType) for field in df.schema.fields}
    # output_types checks the query against the input's columns first (its errors point into the query).
    columns = [(name, type_name) for name, type_name in plan.output_types(input_types)]
    partition = list(plan.partition_names(df.columns))
    replay = None
    if session_timeout_us is not None or match_ids:
        replay = {"query_text": query_text if query_text is not None else repr(plan.statement),
                  "session_timeout_us": session_timeout_us, "match_ids": match_ids}
        _check_replay_time(plan, df)
        Replay(plan, tuple(df.columns), **replay)  # the query's errors on the driver, not in a task
        if match_ids:
            columns.append((MATCH_ID, "VARCHAR"))
    # Outer ORDER BY keys that are not output columns travel as extra columns, dropped after sorting.
    sort_columns = plan.sort_column_types(input_types) if hasattr(plan, "sort_column_types") else []
    schema = output_schema(columns + sort_columns)

    # Only the columns the matcher reads travel through the shuffle and into Python (ONE ROW PER MATCH
    # reads the PARTITION BY, ORDER BY and referenced columns; ALL ROWS outputs every column).
    read = set(plan.machine(tuple(df.columns)).columns) | set(partition) | set(plan.order_names(df.columns))
    if len(read) < len(df.columns):
        df = df.select(*[F.col(quote(c)) for c in df.columns if c in read])

    # WITHIN, timeouts and absence deadlines are decided by the replay's clock: the largest event time
    # of the WHOLE input, as in the Python engine, not of each group (one small Spark job first).
    clock = replay_clock(plan, df)
    out = _match_columns(plan, df, partition, schema, clock, replay, ordinal)

    sort_keys = getattr(plan, "sort_keys", None) or []
    if callable(sort_keys):  # resolved against the input's columns
        sort_keys = sort_keys(list(df.columns))
    sort_keys = list(sort_keys)
    if sort_keys:
        out = out.orderBy(*[_order_column(name, bool(desc), nulls_first) for name, desc, nulls_first in sort_keys])
    if sort_columns:
        out = out.drop(*[name for name, _ in sort_columns])
    limit = getattr(plan, "limit", None)
    if limit is not None:
        out = out.limit(int(limit))
    return out
