"""A streaming DataFrame made ready for a stateful cep operator: types, bad rows, and event time.

Both stateful operators (one query, ``spark/streaming.py``; a rule set, ``alerting/query.py``) start
the same way: ``prepare_input`` (columns the matcher has no type for become strings), ``mark_bad_rows``
(unreadable lines, far-future times: a reason per row, the event time set to NULL) and
``with_watermark``, the one event-time prologue: the time column must be a timestamp, a watermark the
DataFrame already declares must be on it and agree with the ``watermark`` asked for, and otherwise
``withWatermark`` is added here, after bad rows are marked (a bad row's NULL time cannot move it).
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING, Any

from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepSemanticError
from cep.matcher.rows.text_types import FIRST_HELD_TIME, LAST_HELD_TIME
from cep.matcher.rows.validate import REASONS
from cep.spark_bridge.engine.durations import parse_duration
from cep.spark_bridge.engine.keyed import (
    BAD_EVENT_TIME,
    BAD_FUTURE_TIME,
    BAD_NOT_JSON,
    BAD_NOT_UTF8,
    BAD_NULL_TIME,
    BAD_REASONS,
    BAD_WRONG_TYPE,
)
from cep.spark_bridge.engine.state_codec import datetime_to_micros
from cep.spark_bridge.spark.columns import (
    BASE64_PREFIX,
    CORRUPT_RECORD,
    MESSAGE_METADATA,
    NOT_UTF8_MARK,
    RAW,
    REJECT,
    WATERMARK_KEY,
    quote,
)
from cep.spark_bridge.spark.types import cast_untyped

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

DEFAULT_WATERMARK = "10 seconds"
# The REJECT mark of a clock row (``clock_rows``): it moves the watermark, then is dropped before any rule.
CLOCK_ROW = "__cep_clock"
CLOCK_ROWS_PER_SECOND = 1  # one is enough to move the watermark; each trigger then runs a micro-batch
_FIRST_HELD_US, _LAST_HELD_US = datetime_to_micros(FIRST_HELD_TIME), datetime_to_micros(LAST_HELD_TIME)


def prepare_input(df: DataFrame) -> DataFrame:
    """Columns the matcher has no type for travel as strings; the ``__cep_`` prefix is ours."""
    df = cast_untyped(df)
    taken = [c for c in df.columns if c.startswith("__cep_")]
    if taken:
        raise CepSemanticError(f"input columns may not start with '__cep_' (found {', '.join(taken)})", code="E0284")
    check_stream_names(df.columns)
    return df


def check_stream_names(names) -> None:
    """The names a stream's stateful operator cannot carry, refused before Spark fails on them: a name with a
    backtick (PySpark's ``applyInPandasWithState`` reads every column by its raw name) and names that differ
    only in case (Spark's analyzer, case-insensitive, cannot tell them apart). The static replay renames
    the columns and takes both."""
    for name in names:
        if "`" in name:
            raise CepSemanticError(
                f"input column {name!r} has a backtick in its name, which Spark's stateful operators cannot read",
                code="E0287",
                hint="rename it first: df.toDF(*new_names) (withColumnRenamed cannot name it either)",
            )
    clash = ColumnNames(names).case_clash()
    if clash is not None:
        other, name = clash[:2]
        raise CepSemanticError(
            f"input columns {other!r} and {name!r} differ only in case, which Spark's analyzer cannot tell apart "
            "in a stream",
            code="E0287",
            hint="rename one first: df.toDF(*new_names)",
        )


def mark_bad_rows(
    df: DataFrame, time_column: str | None, *, max_future_skew_us: int | None = None, null_time: bool = False
) -> DataFrame:
    """``df`` with the reason each row is bad in ``REJECT`` (NULL: good), what it was in ``RAW`` (the
    unreadable line, or the row as read, as JSON),
    the event time set to NULL on bad rows, and without ``CORRUPT_RECORD``.

    It must run before ``withWatermark``: a bad row's time is NULL there, so it never moves the watermark.
    The reasons are ``bad_row_reason``'s.
    """
    from pyspark.sql import functions as F

    data = [c for c in df.columns if c != CORRUPT_RECORD]
    time = F.col(quote(time_column)) if time_column is not None else None
    reason = bad_row_reason(df, time_column, max_future_skew_us=max_future_skew_us, null_time=null_time)
    # What the rejected row was: the line Spark could not read, else the row as read (its event time too).
    as_read = F.when(reason.isNotNull(), F.to_json(F.struct(*[F.col(quote(c)) for c in data])))
    raw = F.coalesce(unread_text(), as_read) if CORRUPT_RECORD in df.columns else as_read
    df = df.select(*[F.col(quote(c)) for c in data], reason.alias(REJECT), raw.alias(RAW))
    # A bad row's times are NULL from here on (it is in RAW as read): its event time cannot move the
    # watermark, and no time the stateful operator cannot hold reaches it.
    for name in {*unheld_time_columns(df), *([time_column] if time is not None else [])}:
        df = df.withColumn(name, F.when(F.col(REJECT).isNull(), F.col(quote(name))))
    return df


def unread_text() -> Column:
    """``_corrupt_record`` as a dead letter keeps it: the line as it was, or for bytes that are not UTF-8
    ``base64:`` and their base64 (the Kafka reader's marked value already is; a reader's raw line is encoded
    here), never text with U+FFFD in place of the bytes."""
    from pyspark.sql import functions as F

    line = F.col(CORRUPT_RECORD)
    as_bytes = line.cast("binary")
    marked = F.substring(as_bytes, 1, len(NOT_UTF8_MARK)) == F.lit(bytearray(NOT_UTF8_MARK))
    kept = F.substring(as_bytes, len(NOT_UTF8_MARK) + 1, 2**31 - 1).cast("string")
    encoded = F.concat(F.lit(BASE64_PREFIX), F.base64(as_bytes))
    return F.when(F.is_valid_utf8(line), line).when(marked, kept).otherwise(encoded)


def bad_row_reason(
    df: DataFrame,
    time_column: str | None,
    *,
    max_future_skew_us: int | None = None,
    null_time: bool = False,
    nan_columns: tuple[str, ...] = (),
) -> Column:
    """The reason a row of ``df`` is bad, as a string column (NULL: good). Checked in this order:
    ``not_utf8`` (the line's bytes are not UTF-8: ``unread_text``), ``not_json`` (Spark read nothing from
    the line), ``bad_event_time`` (the line was read but its event
    time was not), ``wrong_type`` (a value did not fit the schema), ``future_event_time`` (the event time
    is more than ``max_future_skew_us`` ahead of the micro-batch's processing time, ``current_timestamp()``,
    which Spark fixes per micro-batch and keeps on a re-run), with ``null_time`` also ``null_event_time``
    (else the engine finds those itself), then NaN in the ``nan_columns`` (ORDER BY columns: NaN is no
    time): ``bad_event_time`` for the event time, ``wrong_type`` for another."""
    from pyspark.sql import functions as F

    # What the line itself gave: not the columns a reader adds about the message (Kafka's topic, offset, ...).
    from_text = [
        f.name for f in df.schema.fields if f.name != CORRUPT_RECORD and not (f.metadata or {}).get(MESSAGE_METADATA)
    ]
    time = F.col(quote(time_column)) if time_column is not None else None
    reason = None

    def otherwise(condition, name):
        return F.when(condition, F.lit(name)) if reason is None else reason.when(condition, F.lit(name))

    if CORRUPT_RECORD in df.columns:
        unread = F.col(CORRUPT_RECORD).isNotNull()
        nothing_read = (
            reduce(lambda a, b: a & b, [F.col(quote(c)).isNull() for c in from_text]) if from_text else F.lit(True)
        )
        reason = otherwise(unread & ~F.is_valid_utf8(F.col(CORRUPT_RECORD)), BAD_NOT_UTF8)
        reason = otherwise(unread & nothing_read, BAD_NOT_JSON)
        if time is not None:
            reason = otherwise(unread & time.isNull(), BAD_EVENT_TIME)
        reason = otherwise(unread, BAD_WRONG_TYPE)
    # Before the times pandas cannot hold: an event time in 2999 is a clock or a producer gone wrong, and its
    # reason says so (future_event_time, with the skew) rather than only that the engines cannot hold it.
    if max_future_skew_us is not None and time is not None:
        ahead = F.unix_micros(time) > batch_time_us() + F.lit(max_future_skew_us)
        reason = otherwise(ahead, BAD_FUTURE_TIME)
    for name in unheld_time_columns(df):  # a time pandas cannot hold would fail the whole micro-batch
        value = F.unix_micros(F.col(quote(name)).cast("timestamp"))  # a TIMESTAMP_NTZ column too
        outside = (value < F.lit(_FIRST_HELD_US)) | (value > F.lit(_LAST_HELD_US))
        reason = otherwise(outside, BAD_EVENT_TIME if name == time_column else BAD_WRONG_TYPE)
    if null_time and time is not None:
        reason = otherwise(time.isNull(), BAD_NULL_TIME)
    for name in nan_columns:
        reason = otherwise(F.isnan(F.col(quote(name))), BAD_EVENT_TIME if name == time_column else BAD_WRONG_TYPE)
    return (reason if reason is not None else F.lit(None)).cast("string")


def batch_time_us() -> Column:
    """The micro-batch's time in µs: ``current_timestamp()``, which Spark fixes per micro-batch and keeps on a
    re-run, read when the rows are, not compiled in. Spark writes that time into the Java code it generates for
    the stage as a number, so the code of a stage that used it differed at every micro-batch and was compiled
    again before any of its tasks ran: for the first stage (the parse, the plan's largest code), hundreds of
    milliseconds per micro-batch on a loaded machine. ``reflect`` is evaluated by the code rather than written
    into it, so the code stays the same and is compiled once; it costs about a microsecond per row."""
    from pyspark.sql import functions as F

    return F.expr("reflect('java.lang.Long', 'valueOf', unix_micros(current_timestamp()))").cast("long")


def clock_rows(df: DataFrame, time_column: str, lag_us: int) -> DataFrame:
    """Rows of ``df``'s schema (as ``mark_bad_rows`` left it) from Spark's ``rate`` source: the event time is
    the wall clock minus ``lag_us``, every other column NULL, ``REJECT`` = ``CLOCK_ROW``. Unioned with the
    input, they move the watermark by the wall clock when the input is quiet (``--idle-watermark``); the
    stateful operator's prologue drops them after its watermark (``alerting.query.match_rules``)."""
    from pyspark.sql import functions as F

    ticks = (
        df.sparkSession.readStream.format("rate")
        .option("rowsPerSecond", CLOCK_ROWS_PER_SECOND)
        .option("numPartitions", 1)
        .load()
    )
    moment = F.timestamp_micros(F.unix_micros(F.col("timestamp")) - F.lit(lag_us))
    columns = []
    for field in df.schema.fields:
        if field.name == time_column:
            value = moment
        elif field.name == REJECT:
            value = F.lit(CLOCK_ROW)
        else:
            value = F.lit(None)
        columns.append(value.cast(field.dataType).alias(field.name))
    return ticks.select(*columns)


def unheld_time_columns(df: DataFrame) -> list[str]:
    """The TIMESTAMP columns of ``df``: each may hold a time the engines cannot hold (``bad_row_reason``)."""
    from pyspark.sql import types as T

    return [f.name for f in df.schema.fields if isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType))]


def blank_misshapen_csv_lines(df: DataFrame) -> DataFrame:
    """``df`` (CSV read in PERMISSIVE mode, with ``_corrupt_record``) with every column of the CSV line NULL on
    a line that has the wrong number of fields; columns after ``_corrupt_record`` (a Kafka message's
    metadata) are not the line's and stay.

    Spark (the file reader and ``from_csv`` alike) fills such a line's columns from left to right (a missing
    field is NULL, an extra one dropped) and keeps its text in ``_corrupt_record``, as it does for a value of
    the wrong type. The two differ in what can be trusted: a short or long line's values may sit in the
    wrong columns. Reading the text again with every column as STRING tells them apart: a string always
    fits, so that parse fails only on the field count. Such a line then has no column read, which
    ``mark_bad_rows`` calls ``not_json`` (a line the reader could not read at all), with its text as it was."""
    from pyspark.sql import functions as F

    position = df.columns.index(CORRUPT_RECORD)
    data, rest = df.columns[:position], df.columns[position + 1 :]
    as_text = ", ".join(f"`f{i}` STRING" for i in range(len(data))) + f", `{CORRUPT_RECORD}` STRING"
    fields = F.from_csv(
        F.col(CORRUPT_RECORD), as_text, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD}
    )
    misshapen = F.col(CORRUPT_RECORD).isNotNull() & fields[CORRUPT_RECORD].isNotNull()
    return df.select(
        *[F.when(~misshapen, F.col(quote(c))).alias(c) for c in data],
        F.col(CORRUPT_RECORD),
        *[F.col(quote(c)) for c in rest],
    )


# The fields of a dead-letter record, in order (``dead_letter_columns``).
DEAD_LETTER_NAMES = ("_cep_error", "_cep_error_code", "_cep_input", "_cep_file", "_cep_time")


def dead_letter_columns(file: Any = None) -> list:
    """The dead-letter fields of a ``mark_bad_rows`` row (NULL on a good one): the fields of the batch
    dead letter (``cep.matcher.rows.validate``: ``_cep_error``, ``_cep_error_code``) and ``_cep_input`` (the line,
    or the row as read, as JSON), ``_cep_file`` (the input file: ``file``, default ``input_file_name()``,
    valid only next to the scan), ``_cep_time`` (the micro-batch's time)."""
    from pyspark.sql import functions as F

    reason = F.col(REJECT)
    code = F.lit(None).cast("string")
    for name in reversed(BAD_REASONS):
        code = F.when(reason == name, F.lit(REASONS[name])).otherwise(code)
    where = F.input_file_name() if file is None else file
    values = (reason, code, F.col(RAW), where, F.timestamp_micros(batch_time_us()))
    return [value.alias(name) for value, name in zip(values, DEAD_LETTER_NAMES)]


def dead_letter_rows(marked: DataFrame) -> DataFrame:
    """The bad rows of a ``mark_bad_rows`` frame as dead-letter records (``DEAD_LETTER_NAMES``)."""
    from pyspark.sql import functions as F

    return marked.where(F.col(REJECT).isNotNull()).select(*dead_letter_columns())


def bad_row_counts(df: DataFrame, metrics_name: str) -> DataFrame:
    """``df`` (with ``DEAD_LETTER_NAMES``) observed as one count per reason per micro-batch (``metrics_name``)."""
    from pyspark.sql import functions as F

    return df.observe(
        metrics_name, *[F.count(F.when(F.col("_cep_error") == name, 1)).alias(name) for name in BAD_REASONS]
    )


def with_watermark(
    df: DataFrame,
    time_column: str,
    watermark: Any = None,
    *,
    mark_bad: bool = False,
    max_future_skew_us: int | None = None,
) -> tuple[DataFrame, int]:
    """The event-time prologue of a stateful operator: (``df`` with its watermark, the delay in ms).

    ``time_column`` must be a timestamp. A watermark ``df`` already declares (``withWatermark``) must be on
    that column, and ``watermark`` ("30 seconds", a timedelta), when given too, must equal its delay;
    without one, ``withWatermark(time_column, watermark or DEFAULT_WATERMARK)`` is added here. With
    ``mark_bad``, ``mark_bad_rows`` runs first, so that a bad row's NULL time cannot move the watermark;
    ``max_future_skew_us`` must then act before it too, so it cannot go with a declared watermark.
    """
    from pyspark.sql import types as T

    field = df.schema[time_column]
    if not isinstance(field.dataType, T.TimestampType):
        raise CepSemanticError(
            f"the event-time column {time_column!r} is {field.dataType.simpleString()}, not timestamp; "
            f"cast it first (e.g. df.withColumn({time_column!r}, F.col({time_column!r}).cast('timestamp')))",
            code="E0282",
        )
    declared = [f.name for f in df.schema.fields if WATERMARK_KEY in (f.metadata or {})]
    others = [c for c in declared if c != time_column]
    if others:
        raise CepSemanticError(
            f"the DataFrame declares its watermark on {', '.join(others)}, but the event time is {time_column!r}; "
            f"declare it with withWatermark({time_column!r}, ...) or not at all",
            code="E0283",
        )
    if declared and max_future_skew_us is not None:
        raise CepSemanticError(
            "max_future_skew must act before the watermark, "
            f"but the DataFrame already declares one on {time_column!r}; "
            "pass the delay as watermark=... instead of calling withWatermark",
            code="E0283",
        )
    if mark_bad:  # with a declared watermark, unreadable lines are still rejected (their times reached it)
        df = mark_bad_rows(df, time_column, max_future_skew_us=max_future_skew_us)
    if declared:
        delay_ms = int(field.metadata[WATERMARK_KEY])
        if watermark is not None and parse_duration(watermark, what="watermark") != delay_ms * 1000:
            raise CepSemanticError(
                f"watermark={watermark!r} differs from the delay already declared on {time_column!r} "
                f"({delay_ms} ms); pass one or the other",
                code="E0283",
            )
        return df, delay_ms
    delay_ms = parse_duration(watermark if watermark is not None else DEFAULT_WATERMARK, what="watermark") // 1000
    return df.withWatermark(quote(time_column), f"{delay_ms} milliseconds"), delay_ms
