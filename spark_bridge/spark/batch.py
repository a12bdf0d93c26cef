"""Run a compiled cep query over a static Spark DataFrame.

    match_dataframe(plan, df, *, query_text=None, session_timeout_us=None, match_ids=False,
                    dead_letter=None, stats=None) -> DataFrame

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

Names: Spark never sees the input's column names. They are replaced by positional ones (``__cep_c0``,
...) first, and the matcher gets the real ones back with its Arrow batches; so a name with a backtick
or a dot, and two names that differ only in case (quoted in the query), work as in the Python engine,
where Spark's own name resolution (case-insensitive, dots as struct fields) would fail.

Bad rows (``dead_letter`` / ``stats``, as ``Query.run``'s; docs/reliability.md): a NULL event time
(``null_event_time``, E0440), a NaN event time (``bad_event_time``), NaN in another ORDER BY column
(``wrong_type``) and, when the input has Spark's ``_corrupt_record`` column, the rows its reader could not
read are set aside before anything is matched; the rest matches exactly as without them. Without
``dead_letter`` (and ``stats``) a row its reader could not read is an error (E0442, E0441 or E0445, the
code of its reason), as a value of the wrong type is on the Python engine.
"""

from __future__ import annotations

import datetime as dt
import os
from functools import reduce
from typing import TYPE_CHECKING, Any

from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepError, CepRuntimeError, CepSemanticError, error_wire_note
from cep.matcher.rows.tables import arrow_to_columns, from_rows
from cep.matcher.rows.validate import (
    ERROR,
    ERROR_CODE,
    ERROR_DETAIL,
    REASONS,
    WRONG_KIND_WITHOUT_DEAD_LETTER,
    query_columns,
)
from cep.matcher.sql.datetimes import query_time, utc_now
from cep.matcher.sql.types import coerce, frame_integer_columns
from cep.spark_bridge.engine.keyed import BAD_REASONS
from cep.spark_bridge.engine.replay import MATCH_ID, Replay
from cep.spark_bridge.spark.columns import CORRUPT_RECORD, REJECT, quote
from cep.spark_bridge.spark.inputs import bad_row_reason, unheld_time_columns
from cep.spark_bridge.spark.types import cast_untyped, naive_times_in, output_schema, spark_to_sql

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

# Imported inside functions: pyspark and pyarrow, optional or heavy (the "spark" extra; seconds to import).


def _order_column(name: str, descending: bool, nulls_first: bool | None) -> Column:
    from pyspark.sql import functions as F

    col = F.col(quote(name))
    if nulls_first is None:
        return col.desc() if descending else col.asc()
    if descending:
        return col.desc_nulls_first() if nulls_first else col.desc_nulls_last()
    return col.asc_nulls_first() if nulls_first else col.asc_nulls_last()


def replay_clock(plan: Any, df: DataFrame, column: str | None):
    """The largest event time in ``df`` (its column ``column``) when the query has WITHIN (else None), as
    the matcher's Python value."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    statement = getattr(plan, "statement", None)
    if statement is None or statement.match.within is None or column is None:
        return None
    data_type = df.schema[column].dataType
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        # Epoch microseconds: no time-zone conversion on the way to the driver (the session is UTC).
        micros = df.agg(F.max(F.unix_micros(F.col(quote(column)).cast("timestamp")))).first()[0]
        return None if micros is None else dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    return df.agg(F.max(F.col(quote(column)))).first()[0]


def _match_columns(
    plan: Any,
    df: DataFrame,
    names: list[str],
    partition: list[str],
    schema,
    clock,
    replay=None,
    ordinal: str | None = None,
    source: tuple[str, str | None] | None = None,
) -> DataFrame:
    """Columns end to end: Spark hashes the rows to tasks by the PARTITION BY columns (every partition
    whole in one task), and each task hands its Arrow batches to the matcher as one table. The matcher
    partitions and sorts column-wise itself (``plan.run_frame``), so no Spark sort, no call per group and
    no pandas conversion; its Arrow result is cast to the output schema.

    ``replay``: the keyword arguments of ``cep.spark_bridge.engine.replay.Replay`` (sessions, match ids); each task
    then matches its table as a stream would have (``Replay.run``) instead of ``run_frame``. ``df``'s columns
    are positional names; ``names`` are the input's own, which the matcher gets back in each task.

    ``ordinal``: the name of a last BIGINT column numbering each task's output rows from 0, in the
    matcher's order (partition by partition, matches in order): sorted by the PARTITION BY columns and
    then by it, the output comes in the order the query defines (every partition is in one task).

    ``source``: the query's (text, file name), against which a task renders its CepError (``_shipped``)."""
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
        table = naive_utc(pa.Table.from_batches(batches)).rename_columns(names)
        if table.num_rows == 0:
            return
        with query_time(now):
            try:
                if replay is None:
                    result = plan.run_frame(table, outer_order_and_limit=False, clock=clock)
                else:
                    result = _replay_table(plan, table, replay, clock)
            except CepError as error:
                raise _shipped(error, source) from None
        result = conform_arrow(result, target, schema)
        if ordinal is not None:
            result = result.append_column(ordinal, pa.array(range(result.num_rows), type=pa.int64()))
        yield from result.to_batches()

    out_schema = schema
    if ordinal is not None:
        out_schema = T.StructType(list(schema.fields) + [T.StructField(ordinal, T.LongType(), False)])
    return shuffled.mapInArrow(match_batches, out_schema)


def _shipped(error: CepError, source: tuple[str, str | None] | None) -> CepError:
    """``error`` as a task raises it: rendered against the query's file (the PythonException that
    ``collect()`` raises shows its line and caret) and with a note that carries it whole to the driver,
    where ``error_from_text`` raises it again (``cli_io.spark_cep_error``)."""
    if source is not None and error.source is None:
        error.with_source(*source)
    error.add_note(error_wire_note(error))
    return error


def _replay_table(plan: Any, table, replay: dict, clock):
    """One task's Arrow table replayed with sessions and match ids (``cep.spark_bridge.engine.replay``), as Arrow."""
    columns = arrow_to_columns(table)
    integers = frame_integer_columns(table)
    names, rows = Replay(plan, tuple(columns), integer_columns=integers, **replay).run(
        columns, clock=clock, outer_order_and_limit=False
    )
    return from_rows("arrow", names, rows)


def _quoted_col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(quote(name))


def _check_replay_time(df: DataFrame, column: str | None, name: str | None) -> None:
    """A replay with sessions or match ids carries event time as a stream does: the first ORDER BY
    column (``column`` in ``df``, the input's ``name``) must be a timestamp (E0282, as ``match_stream`` says it)."""
    from pyspark.sql import types as T

    if column is None:
        return  # the replay's engine refuses the query itself (E0280)
    data_type = df.schema[column].dataType
    if not isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        raise CepSemanticError(
            f"the event-time column {name!r} is {data_type.simpleString()}, not timestamp; cast it first "
            f"(e.g. df.withColumn({name!r}, F.col({name!r}).cast('timestamp')))",
            code="E0282",
        )


def naive_utc(table):
    """Spark hands timestamps as UTC instants; the matcher reads naive UTC wall-clock times (as pandas
    gives them to ``applyInPandas``), so the time-zone tag is dropped: the values are unchanged."""
    import pyarrow as pa
    import pyarrow.types as t

    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit), f.nullable) if t.is_timestamp(f.type) and f.type.tz else f
        for f in table.schema
    ]
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


def positional(count: int) -> list[str]:
    """The names Spark sees instead of the input's own (``match_dataframe``'s docstring says why)."""
    return [f"__cep_c{i}" for i in range(count)]


def match_dataframe(
    plan: Any,
    df: DataFrame,
    *,
    query_text: str | None = None,
    session_timeout_us: int | None = None,
    match_ids: bool = False,
    dead_letter: Any = None,
    stats: dict | None = None,
    ordinal: str | None = None,
    source: tuple[str, str | None] | None = None,
) -> DataFrame:
    """The matches of ``plan`` over the static DataFrame ``df``, as a DataFrame (lazy: nothing runs until an action).

    ``session_timeout_us`` / ``match_ids``: replay as the stream would have matched (``cep.spark_bridge.engine.replay``:
    sessions split at event-time gaps, a last column ``match_id`` hashing ``query_text``). The event-time
    column must then be a timestamp, and without ``dead_letter`` a NULL one is an error (E0440) raised here.

    ``dead_letter``: bad rows are set aside (the module docstring lists them) as a DataFrame of the row's
    columns plus ``_cep_error``, ``_cep_error_code`` and ``_cep_error_detail``: appended to a list, passed to
    a function, or written as JSON lines to a directory path (replaced if it exists; written now).
    ``stats``: a dict filled now (one Spark job) with ``events_in``, ``dead_lettered``,
    ``duplicates_dropped`` (0), ``events_matched`` and ``by_reason``, as ``Query.run`` fills it.
    ``ordinal``: a last column numbering each task's rows in the matcher's order (``_match_columns``), for
    a caller that sorts the output in the order the query defines.
    ``source``: the query's (text, file name): an error raised in a task is rendered against it (its line
    and caret, as the python engine renders it) and carried whole to the driver (``_shipped``).
    """
    from pyspark.sql import functions as F

    names = list(df.columns)
    _check_input_names(names)
    data = [name for name in names if name != CORRUPT_RECORD]
    spark_names = dict(
        zip(
            names,
            [CORRUPT_RECORD if name == CORRUPT_RECORD else safe for name, safe in zip(names, positional(len(names)))],
        )
    )
    df = cast_untyped(df.toDF(*[spark_names[name] for name in names]))

    input_types = {name: spark_to_sql(df.schema[spark_names[name]].dataType) for name in data}
    # output_types checks the query against the input's columns first (its errors point into the query).
    columns = [(name, type_name) for name, type_name in plan.output_types(input_types)]
    partition = list(plan.partition_names(data))
    order = list(plan.order_names(data)) if plan.order_columns else []
    event_time = order[0] if order else None
    time_column = spark_names[event_time] if event_time is not None else None
    replay = None
    if session_timeout_us is not None or match_ids:
        replay = {
            "query_text": query_text if query_text is not None else repr(plan.statement),
            "session_timeout_us": session_timeout_us,
            "match_ids": match_ids,
        }
        _check_replay_time(df, time_column, event_time)
        Replay(plan, tuple(data), **replay)  # the query's errors on the driver, not in a task
        if match_ids:
            columns.append((MATCH_ID, "VARCHAR"))
    # Outer ORDER BY keys that are not output columns travel as extra columns, dropped after sorting.
    sort_columns = plan.sort_column_types(input_types) if hasattr(plan, "sort_column_types") else []
    schema = output_schema(columns + sort_columns, naive_times=naive_times_in(df.schema))

    if CORRUPT_RECORD in df.columns:
        read = query_columns(plan.statement, plan.machine(tuple(data)), ColumnNames(data))
        if len(read) < len(data):  # some columns the query never reads: their odd values do not count
            df = _forget_unread_columns(df, [(name, spark_names[name]) for name in data if name in read])
    if dead_letter is not None or stats is not None:
        df = _set_bad_rows_aside(df, names, spark_names, event_time, order, dead_letter, stats)
    else:
        if CORRUPT_RECORD in df.columns or unheld_time_columns(df):
            _refuse_unread_rows(df, time_column, spark_names)
        if replay is not None and time_column is not None:
            _refuse_null_event_times(df, time_column, event_time)
    if CORRUPT_RECORD in df.columns:
        df = df.drop(CORRUPT_RECORD)

    # Only the columns the matcher reads travel through the shuffle and into Python (ONE ROW PER MATCH
    # reads the PARTITION BY, ORDER BY and referenced columns; ALL ROWS outputs every column).
    read = set(plan.machine(tuple(data)).columns) | set(partition) | set(order)
    kept = [name for name in data if name in read]
    df = df.select(*[F.col(spark_names[name]) for name in kept])

    # WITHIN, timeouts and absence deadlines are decided by the replay's clock: the largest event time
    # of the WHOLE input, as in the Python engine, not of each group (one small Spark job first).
    clock = replay_clock(plan, df, time_column)
    partition_columns = [spark_names[name] for name in partition]
    out = _match_columns(plan, df, kept, partition_columns, schema, clock, replay, ordinal, source)

    sort_keys = getattr(plan, "sort_keys", None) or []
    if callable(sort_keys):  # resolved against the input's columns
        sort_keys = sort_keys(data)
    sort_keys = list(sort_keys)
    limit = getattr(plan, "limit", None)
    if sort_keys or limit is not None or sort_columns:
        # Outer ORDER BY keys that are not output columns (sort_columns) travel to here, dropped after sorting.
        output_names = [name for name, _ in columns + sort_columns] + ([ordinal] if ordinal is not None else [])
        out = out.toDF(*positional(len(output_names)))  # output names may also differ only in case
        by_name = dict(zip(output_names, out.columns))
        if sort_keys:
            out = out.orderBy(
                *[_order_column(by_name[name], bool(desc), nulls_first) for name, desc, nulls_first in sort_keys]
            )
        if limit is not None:
            out = out.limit(int(limit))
        if sort_columns:
            out = out.drop(*[by_name[name] for name, _ in sort_columns])
        out = out.toDF(*[name for name in output_names if name not in dict(sort_columns)])
    return out


def _check_input_names(names: list[str]) -> None:
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise CepSemanticError(
            f"the input has more than one column named {repeated[0]!r}",
            code="E0220",
            hint="give the columns distinct names (df.toDF(*names))",
        )


def _refuse_null_event_times(df: DataFrame, time_column: str, name: str) -> None:
    """A replay cannot place a row without event time: say so now, with the way out, rather than from a task."""
    from pyspark.sql import functions as F

    found = df.where(F.col(time_column).isNull()).limit(1).count()
    if found:
        raise CepRuntimeError(
            f"the input has rows with a NULL event time ({name!r}); "
            "a replay with sessions or match ids cannot place them",
            code="E0440",
            hint="pass dead_letter= (cep run --dead-letter FILE) to set such rows aside, as a stream does",
        )


def _forget_unread_columns(df: DataFrame, read: list[tuple[str, str]]) -> DataFrame:
    """``df`` with ``_corrupt_record`` cleared on rows whose odd values all sit in columns the query never
    reads, as the python engine checks only the columns the query reads (``read``: (input name, Spark
    name) pairs of those it reads). A column is odd on a row when its value is NULL though the row's line,
    the JSON object ``files.apply_json_kinds`` keeps in ``_corrupt_record``, holds one there. Text that is
    not a JSON object (a line Spark could not read at all, a CSV line) is left alone, and so is every row
    when a read column's name cannot be written as a JSON path."""
    from pyspark.sql import functions as F

    if any("'" in name or "]" in name for name, _ in read):
        return df
    corrupt = F.col(CORRUPT_RECORD)
    odd = [
        F.col(quote(spark_name)).isNull() & F.get_json_object(corrupt, f"$['{name}']").isNotNull()
        for name, spark_name in read
    ]
    odd_in_read = reduce(lambda a, b: a | b, odd) if odd else F.lit(False)
    is_object = F.trim(corrupt).startswith("{") & F.get_json_object(corrupt, "$").isNotNull()
    forget = corrupt.isNotNull() & is_object & ~odd_in_read
    return df.withColumn(CORRUPT_RECORD, F.when(forget, F.lit(None).cast("string")).otherwise(corrupt))


def _refuse_unread_rows(df: DataFrame, time_column: str | None, spark_names: dict[str, str]) -> None:
    """Rows the reader read only in part (``_corrupt_record`` set) would match with NULLs for what it could
    not read: without a dead letter that is an error (one small Spark job), never a silently different
    answer. Its code is the python engine's for the same rows, E0410 (a value of the wrong kind stops a
    run without a dead letter); with one, each row is set aside with its reason's own code (E0441, E0442)."""
    from pyspark.sql import functions as F

    reason = bad_row_reason(df, time_column)
    as_read = F.to_json(
        F.struct(*[F.col(quote(spark)).alias(name) for name, spark in spark_names.items() if spark in df.columns])
    )
    line = F.coalesce(F.col(CORRUPT_RECORD), as_read) if CORRUPT_RECORD in df.columns else as_read
    found = df.where(reason.isNotNull()).select(reason.alias("reason"), line).limit(1).collect()
    if found:
        why, line = found[0]
        raise CepRuntimeError(
            f"the input has rows its reader could not read ({why}), the first: {line}",
            code=WRONG_KIND_WITHOUT_DEAD_LETTER,
            hint="pass dead_letter= (cep run --dead-letter FILE) to set such rows aside and count them",
        )


def _set_bad_rows_aside(
    df: DataFrame,
    names: list[str],
    spark_names: dict[str, str],
    event_time: str | None,
    order: list[str],
    dead_letter: Any,
    stats: dict | None,
) -> DataFrame:
    """``df`` without its bad rows; the bad ones go to ``dead_letter`` and the counts to ``stats``."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    time_column = spark_names[event_time] if event_time is not None else None
    fractional = (T.DoubleType, T.FloatType)
    nan_columns = tuple(
        spark_names[name] for name in order if isinstance(df.schema[spark_names[name]].dataType, fractional)
    )
    reason = bad_row_reason(df, time_column, null_time=True, nan_columns=nan_columns)
    marked = df.withColumn(REJECT, reason)
    if stats is not None:
        counts = {row[0]: row[1] for row in marked.groupBy(REJECT).count().collect()}
        by_reason = {name: counts[name] for name in BAD_REASONS if counts.get(name)}
        total = sum(counts.values())
        bad = sum(by_reason.values())
        stats.update(
            {
                "events_in": total,
                "dead_lettered": bad,
                "duplicates_dropped": 0,
                "events_matched": total - bad,
                "by_reason": by_reason,
            }
        )
    if dead_letter is not None:
        records = marked.where(F.col(REJECT).isNotNull()).select(
            *[F.col(spark_names[name]).alias(name) for name in names],
            F.col(REJECT).alias(ERROR),
            _code(F.col(REJECT)).alias(ERROR_CODE),
            _detail(
                F.col(REJECT),
                event_time,
                [(name, spark_names[name]) for name in order if spark_names[name] in nan_columns],
            ).alias(ERROR_DETAIL),
        )
        _send(records, dead_letter)
    return marked.where(F.col(REJECT).isNull()).drop(REJECT)


def _code(reason: Column) -> Column:
    from pyspark.sql import functions as F

    code = F.lit(None).cast("string")
    for name in reversed(BAD_REASONS):
        code = F.when(reason == name, F.lit(REASONS[name])).otherwise(code)
    return code


def _detail(reason: Column, event_time: str | None, nan_columns: list[tuple[str, str]]) -> Column:
    """The sentence of a dead-letter record, in the Python engine's words where the reason is the same
    (``nan_columns``: the ORDER BY columns that can hold NaN, as (input name, Spark name))."""
    from pyspark.sql import functions as F

    detail = F.when(reason == "not_json", F.lit(f"Spark's reader could not read the line (it is in {CORRUPT_RECORD})"))
    if event_time is not None:
        detail = detail.when(reason == "null_event_time", F.lit(f"event time '{event_time}' is NULL"))
    for name, column in nan_columns:
        what = "event time" if name == event_time else "column"
        detail = detail.when(F.isnan(F.col(column)), F.lit(f"{what} '{name}' is NaN, which cannot be ordered"))
    if event_time is not None:
        detail = detail.when(
            reason == "bad_event_time",
            F.lit(f"event time '{event_time}' could not be read (the line is in {CORRUPT_RECORD})"),
        )
    return detail.when(
        reason == "wrong_type", F.lit(f"a value did not fit its column's type (the line is in {CORRUPT_RECORD})")
    )


def _send(records: DataFrame, dead_letter: Any) -> None:
    """The dead-letter records to where ``dead_letter`` says: a list, a function, or a directory path."""
    if isinstance(dead_letter, list):
        dead_letter.append(records)
    elif isinstance(dead_letter, (str, os.PathLike)):
        records.write.mode("overwrite").json(os.fspath(dead_letter))
    elif callable(dead_letter):
        dead_letter(records)
    else:
        raise TypeError(
            f"dead_letter must be a list, a function taking a DataFrame or a directory path, "
            f"not {type(dead_letter).__name__}"
        )
