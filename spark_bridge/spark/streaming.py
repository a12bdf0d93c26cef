"""Run a compiled cep query over a *streaming* Spark DataFrame: keyed matcher state across micro-batches.

    match_stream(plan, df, *, query_text=None, watermark=None, session_timeout=None, late="output",
                 max_pending_rows=DEFAULT_MAX_PENDING_ROWS, metrics_name="cep", dedup_key=None,
                 max_future_skew=None, key_buckets=KEY_BUCKETS, max_match_rows=DEFAULT_MAX_MATCH_ROWS) -> DataFrame

The result is a streaming DataFrame in append mode: the statement's output columns, then

    match_id         32 hex digits, the same for every output row of one match, deterministic
    cep_late_reason  NULL for a match; for a late input row: behind_watermark | behind_forced_release;
                     for a bad one: null_event_time | not_json | wrong_type | bad_event_time |
                     future_event_time                               (only with late="output")
    cep_late_row     NULL for a match; the input row as JSON, or for a line Spark could not read
                     (``_corrupt_record``) its original text         (only with late="output")

How (``docs/streaming.md`` has the reasons and the measurements):

* ``groupBy(PARTITION BY columns).applyInPandasWithState(..., "append", EventTimeTimeout)``; the
  per-key work is ``cep.spark_bridge.engine.keyed.KeyedStream`` (buffer until the watermark passes, sort, feed
  the matcher, sessions, caps, match ids); its state is one binary column (``state_codec``).
* Event time: the first ORDER BY column, a TimestampType column, carried as microseconds
  (``unix_micros``) so no time zone or pandas conversion touches the comparisons. A watermark the
  DataFrame already declares on that column is used as is; otherwise ``withWatermark(column, watermark
  or DEFAULT_WATERMARK)`` is added here.
* Late rows: in event-time-timeout mode Spark drops, before the function, the rows at or below the
  previous micro-batch's watermark, silently. To see them, the watermark marker (the column metadata
  ``spark.watermarkDelayMs`` that tells the stateful operator which column to filter on) is moved
  from the event-time column to an all-NULL timestamp column: the watermark itself is still computed
  upstream from the real event times, timers still fire on it, and the operator's late filter
  (``NULL <= watermark`` is not true) drops nothing. The engine then routes every late row itself.
* Bad rows (``mark_bad_rows``, before ``withWatermark``): a row Spark's PERMISSIVE reader could not
  read (the ``_corrupt_record`` column, when the input has it), or whose event time is further ahead of
  the micro-batch's processing time than ``max_future_skew``, gets a reason and a NULL event time, so
  it can never move the watermark; it travels through the stateful operator like a row without event
  time and comes out as a rejected row. ``dedup_key``: repeats are dropped per key by the engine.
* Metrics: every call also emits one statistics row; ``DataFrame.observe(metrics_name, ...)`` sums
  them per micro-batch (``query.lastProgress["observedMetrics"][metrics_name]``), then they are
  filtered out of the result.

``ORDER BY PROCTIME()`` (processing time) needs no watermark: each key's rows are matched in the order
they reach it, as they arrive; such results are not reproducible by a replay.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Iterator

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.spark.batch import quote, resolve_columns
from cep.spark_bridge.engine.key_table import KEY_BUCKETS, bucket_expression, step_bucket
from cep.spark_bridge.engine.keyed import (
    BAD_EVENT_TIME,
    BAD_FUTURE_TIME,
    BAD_NOT_JSON,
    BAD_NULL_TIME,
    BAD_REASONS,
    BAD_WRONG_TYPE,
    DEFAULT_MAX_MATCH_ROWS,
    DEFAULT_MAX_PENDING_ROWS,
    STAT_NAMES,
    KeyedStream,
    spark_timeout_ms,
)
from cep.spark_bridge.spark.types import needs_string_cast, output_schema, spark_to_sql

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

DEFAULT_WATERMARK = "10 seconds"
LATE_MODES = ("output", "count")

MATCH_ID = "match_id"
LATE_REASON = "cep_late_reason"
LATE_ROW = "cep_late_row"

# Internal columns; none survives into the result.
_ALL_ROWS_KEY = "__cep_all_rows__"
_BUCKET = "__cep_bucket__"
_EVENT_US = "__cep_event_us"
_MARKER = "__cep_watermark_marker"
_KIND = "__cep_kind"
_STATS = "__cep_stats"  # one array<bigint> per statistics row, in STAT_NAMES order
_REJECT = "__cep_reject"  # the reason a row is bad (mark_bad_rows), NULL for a good row
_RAW = "__cep_raw"  # the text of a line Spark could not read, NULL otherwise
_NULL_TIME = -(2**63)  # unix_micros of a NULL event time, so the column stays int64 in pandas
_WATERMARK_KEY = "spark.watermarkDelayMs"

# The column Spark's PERMISSIVE JSON/CSV reader fills with a line it cannot read (its default
# ``columnNameOfCorruptRecord``); an input with this column has its bad lines rejected with a reason.
CORRUPT_RECORD = "_corrupt_record"

KIND_MATCH, KIND_LATE, KIND_STATS = 0, 1, 2

# ------------------------------------------------------------------------------------------ durations

_UNITS_US = {
    "us": 1, "microsecond": 1, "microseconds": 1,
    "ms": 1_000, "milli": 1_000, "millis": 1_000, "millisecond": 1_000, "milliseconds": 1_000,
    "s": 1_000_000, "sec": 1_000_000, "secs": 1_000_000, "second": 1_000_000, "seconds": 1_000_000,
    "m": 60_000_000, "min": 60_000_000, "mins": 60_000_000, "minute": 60_000_000, "minutes": 60_000_000,
    "h": 3_600_000_000, "hour": 3_600_000_000, "hours": 3_600_000_000,
    "d": 86_400_000_000, "day": 86_400_000_000, "days": 86_400_000_000,
    "w": 604_800_000_000, "week": 604_800_000_000, "weeks": 604_800_000_000,
}
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")


def parse_duration(value: Any, *, what: str = "duration") -> int:
    """``"30 seconds"``, ``"30s"``, ``"1 hour 30 minutes"``, ``"500ms"``, a timedelta -> microseconds (>= 0)."""
    if isinstance(value, _dt.timedelta):
        total = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    elif isinstance(value, str):
        text = value.strip()
        if text.lower().startswith("interval"):
            text = text[8:]
        total, position = 0, 0
        for match in _DURATION_PART.finditer(text):
            if match.start() != position:
                break
            unit = _UNITS_US.get(match.group(2).lower())
            if unit is None:
                raise ValueError(f"unknown unit {match.group(2)!r} in {what} {value!r} (e.g. '30 seconds', '5m', '1 hour')")
            total += round(float(match.group(1)) * unit)
            position = match.end()
        if position != len(text) or not text:
            raise ValueError(f"cannot read {what} {value!r} (e.g. '30 seconds', '5m', '1 hour')")
    else:
        raise TypeError(f"{what} must be a string like '30 seconds' or a datetime.timedelta, not {type(value).__name__}")
    if total < 0:
        raise ValueError(f"{what} {value!r} is negative")
    return total


# ---------------------------------------------------------------------------------------- the result


def _json_value(value: Any):
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    return str(value)


def _typed(values: list, type_name: str):
    """A column of Python values as the array Spark's Arrow conversion expects for ``type_name``."""
    import numpy as np
    import pandas as pd

    kind = type_name.upper()
    has_null = any(v is None for v in values)
    if kind == "TIMESTAMP":
        return np.array(values, dtype="datetime64[us]").astype("datetime64[ns]")
    if kind in ("BIGINT", "INTEGER"):
        if not has_null:
            return np.array(values, dtype="int64" if kind == "BIGINT" else "int32")
        return pd.array(values, dtype="Int64" if kind == "BIGINT" else "Int32")
    if kind == "DOUBLE":
        return np.array([np.nan if v is None else v for v in values], dtype="float64")
    if kind == "BOOLEAN" and not has_null:
        return np.array(values, dtype=bool)
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


class _SparkStep:
    """The function ``applyInPandasWithState`` calls for each key; holds the engine per worker process.

    Per call it costs: the input columns the engine needs (no copy of the frame), the engine, one
    output frame (matches, late rows, and one statistics row whose counts are an array column).
    """

    def __init__(self, plan, input_columns, partition_columns, *, query_text, session_timeout_us, max_pending_rows,
                 output_columns, late_rows: bool, dedup_key=(), dedup_horizon_us: int = 0, marked: bool = False,
                 key_buckets: int = 0, max_match_rows: int = DEFAULT_MAX_MATCH_ROWS) -> None:
        self.plan = plan
        self.input_columns = tuple(input_columns)
        self.partition_columns = tuple(partition_columns)
        self.query_text = query_text
        self.session_timeout_us = session_timeout_us
        self.max_pending_rows = max_pending_rows
        self.max_match_rows = max_match_rows
        self.output_columns = list(output_columns)  # (name, SQL type) of the statement's output
        self.late_rows = late_rows
        self.dedup_key = tuple(dedup_key)
        self.dedup_horizon_us = dedup_horizon_us
        self.marked = marked  # the frames carry _REJECT and _RAW (mark_bad_rows)
        self.key_buckets = key_buckets  # > 0: Spark groups by a bucket of keys (cep.spark_bridge.engine.key_table)
        self.result_columns = self.output_columns + [(MATCH_ID, "VARCHAR"), (LATE_REASON, "VARCHAR"), (LATE_ROW, "VARCHAR"), (_KIND, "INTEGER"), (_STATS, "ARRAY<BIGINT>")]
        self._engine: KeyedStream | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_engine"] = None  # built again in each worker
        return state

    def engine(self) -> KeyedStream:
        if self._engine is None:
            self._engine = KeyedStream(
                self.plan,
                self.input_columns,
                query_text=self.query_text,
                session_timeout_us=self.session_timeout_us,
                max_pending_rows=self.max_pending_rows,
                dedup_key=self.dedup_key,
                dedup_horizon_us=self.dedup_horizon_us,
                max_match_rows=self.max_match_rows,
            )
        return self._engine

    def _key(self, key, pdf) -> tuple:
        """The partition key as the batch path sees it (``pandas_to_columns`` values)."""
        from cep.matcher.rows.tables import pandas_to_columns

        if not self.partition_columns:
            return ()
        values = []
        for value in key:
            if hasattr(value, "item") and type(value).__module__ == "numpy" and not isinstance(value, np_datetime_types()):
                value = value.item()
            if value is None or isinstance(value, (str, bool, int, float)):
                values.append(None if isinstance(value, float) and value != value else value)
            else:  # timestamps, dates, decimals: take the first row's values the batch way
                first = pandas_to_columns(pdf.iloc[:1], self.partition_columns)
                return tuple(first[name][0] for name in self.partition_columns)
        return tuple(values)

    def inputs(self, pdf) -> tuple[dict, list | None, list | None]:
        """What the engine reads of a frame: its columns, event times (µs, None for NULL) and reject reasons."""
        from cep.matcher.rows.tables import pandas_to_columns

        engine = self.engine()
        columns = pandas_to_columns(pdf, engine.read_columns)
        times = rejected = None
        if engine.time_column is not None:
            times = [None if us == _NULL_TIME else us for us in pdf[_EVENT_US].tolist()]
        if self.marked:
            reasons = pdf[_REJECT]
            rejected = reasons.where(reasons.notna(), None).tolist() if reasons.notna().any() else None
        return columns, times, rejected

    def row_keys(self, pdf) -> list[tuple]:
        """Each row's partition key, as the batch path sees it (``pandas_to_columns`` values)."""
        from cep.matcher.rows.tables import pandas_to_columns

        values = pandas_to_columns(pdf, self.partition_columns)
        return list(zip(*[values[name] for name in self.partition_columns]))

    def __call__(self, key, frames: Iterator["pd.DataFrame"], state) -> Iterator["pd.DataFrame"]:
        import pandas as pd

        engine = self.engine()
        watermark_ms = 0 if engine.proctime else state.getCurrentWatermarkMs()
        parts = [frame for frame in frames if len(frame)]
        pdf = None
        if parts:
            pdf = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
        if self.key_buckets:
            result, table = step_bucket(self, engine, pdf, state, watermark_ms * 1000)
            new_state, timer_us = (table.encode() if table else None), table.next_timer()
        else:
            columns = times = key_values = rejected = None
            if pdf is not None:
                columns, times, rejected = self.inputs(pdf)
                key_values = self._key(key, pdf)
            blob = state.get[0] if state.exists else None
            result = engine.process(blob, key_values, columns, times, watermark_ms * 1000, timed_out=state.hasTimedOut,
                                    rejected=rejected)
            new_state, timer_us = result.state, result.timer_us

        if new_state is None:
            if state.exists:
                state.remove()
        else:
            state.update((new_state,))
            if timer_us is not None and not engine.proctime:
                state.setTimeoutTimestamp(spark_timeout_ms(timer_us, watermark_ms))
        yield self._frame(result, pdf)

    def _frame(self, result, pdf) -> "pd.DataFrame":
        import pandas as pd

        from cep.matcher.rows.tables import pandas_to_columns
        from cep.matcher.sql.types import coerce

        rows = result.rows
        late = result.late if self.late_rows else []
        n_rows, n_late = len(rows), len(late)
        pad = [None] * (n_late + 1)
        data: dict[str, Any] = {}
        for position, (name, type_name) in enumerate(self.output_columns):
            data[name] = _typed([coerce(row[position], type_name) for row in rows] + pad, type_name)
        reasons: list = []
        payloads: list = []
        if late:
            names = list(self.input_columns)
            picked = pdf.iloc[[index for index, _ in late]]
            values = pandas_to_columns(picked, names)
            raw = picked[_RAW].tolist() if self.marked else [None] * n_late
            for offset, (_, reason) in enumerate(late):
                reasons.append(reason)
                if isinstance(raw[offset], str):  # a line Spark could not read: its own text
                    payloads.append(raw[offset])
                else:
                    record = {name: values[name][offset] for name in names}
                    payloads.append(json.dumps(record, default=_json_value, ensure_ascii=False))
        data[MATCH_ID] = _typed(list(result.match_ids) + pad, "VARCHAR")
        data[LATE_REASON] = _typed([None] * n_rows + reasons + [None], "VARCHAR")
        data[LATE_ROW] = _typed([None] * n_rows + payloads + [None], "VARCHAR")
        data[_KIND] = _typed([KIND_MATCH] * n_rows + [KIND_LATE] * n_late + [KIND_STATS], "INTEGER")
        data[_STATS] = _typed([None] * (n_rows + n_late) + [[result.stats.get(name, 0) for name in STAT_NAMES]], "ARRAY")
        return pd.DataFrame(data, copy=False)


def np_datetime_types():
    import numpy as np

    return (np.datetime64, np.timedelta64)


# ------------------------------------------------------------------------------------------ the query


def _watermark_columns(df: "DataFrame") -> list[str]:
    return [field.name for field in df.schema.fields if _WATERMARK_KEY in (field.metadata or {})]


def prepare_input(df: "DataFrame") -> "DataFrame":
    """Columns the matcher has no type for travel as strings; the ``__cep_`` prefix is ours."""
    from pyspark.sql import functions as F

    for name in [field.name for field in df.schema.fields if needs_string_cast(field.dataType)]:
        df = df.withColumn(name, F.col(quote(name)).cast("string"))
    taken = [c for c in df.columns if c.startswith("__cep_")]
    if taken:
        raise CepSemanticError(f"input columns may not start with '__cep_' (found {', '.join(taken)})", code="E0284")
    return df


def mark_bad_rows(df: "DataFrame", time_column: str | None, *, max_future_skew_us: int | None = None,
                  null_time: bool = False) -> "DataFrame":
    """``df`` with the reason each row is bad in ``_REJECT`` (NULL: good), what it was in ``_RAW`` (the
    unreadable line, or the row as read, as JSON),
    the event time set to NULL on bad rows, and without ``CORRUPT_RECORD``.

    It must run before ``withWatermark``: a bad row's time is NULL there, so it never moves the watermark.
    Reasons (checked in this order): ``not_json`` (Spark read nothing from the line), ``bad_event_time``
    (the line was read but its event time was not), ``wrong_type`` (a value did not fit the schema),
    ``future_event_time`` (the event time is more than ``max_future_skew_us`` ahead of the micro-batch's
    processing time, ``current_timestamp()``, which Spark fixes per micro-batch and keeps on a re-run),
    and with ``null_time`` also ``null_event_time`` (else the engine finds those itself).
    """
    from functools import reduce

    from pyspark.sql import functions as F

    data = [c for c in df.columns if c != CORRUPT_RECORD]
    time = F.col(quote(time_column)) if time_column is not None else None
    reason = None
    if CORRUPT_RECORD in df.columns:
        unread = F.col(CORRUPT_RECORD).isNotNull()
        nothing_read = reduce(lambda a, b: a & b, [F.col(quote(c)).isNull() for c in data]) if data else F.lit(True)
        reason = F.when(unread & nothing_read, F.lit(BAD_NOT_JSON))
        if time is not None:
            reason = reason.when(unread & time.isNull(), F.lit(BAD_EVENT_TIME))
        reason = reason.when(unread, F.lit(BAD_WRONG_TYPE))
    if max_future_skew_us is not None and time is not None:
        ahead = F.unix_micros(time) > F.unix_micros(F.current_timestamp()) + F.lit(max_future_skew_us)
        reason = F.when(ahead, F.lit(BAD_FUTURE_TIME)) if reason is None else reason.when(ahead, F.lit(BAD_FUTURE_TIME))
    if null_time and time is not None:
        reason = F.when(time.isNull(), F.lit(BAD_NULL_TIME)) if reason is None else reason.when(time.isNull(), F.lit(BAD_NULL_TIME))
    reason = (reason if reason is not None else F.lit(None)).cast("string")
    # What the rejected row was: the line Spark could not read, else the row as read (its event time too).
    as_read = F.when(reason.isNotNull(), F.to_json(F.struct(*[F.col(quote(c)) for c in data])))
    raw = F.coalesce(F.col(CORRUPT_RECORD), as_read) if CORRUPT_RECORD in df.columns else as_read
    df = df.select(*[F.col(quote(c)) for c in data], reason.alias(_REJECT), raw.alias(_RAW))
    if time is None:
        return df
    return df.withColumn(time_column, F.when(F.col(_REJECT).isNull(), time))


# The fields of a dead-letter record, in order (``dead_letter_columns``).
DEAD_LETTER_NAMES = ("_cep_error", "_cep_error_code", "_cep_input", "_cep_file", "_cep_time")


def dead_letter_columns(file: Any = None) -> list:
    """The dead-letter fields of a ``mark_bad_rows`` row (NULL on a good one): the fields of the batch
    dead letter (``cep.matcher.rows.validate``: ``_cep_error``, ``_cep_error_code``) and ``_cep_input`` (the line,
    or the row as read, as JSON), ``_cep_file`` (the input file: ``file``, default ``input_file_name()``,
    valid only next to the scan), ``_cep_time`` (the micro-batch's time)."""
    from pyspark.sql import functions as F

    from cep.matcher.rows.validate import REASONS

    reason = F.col(_REJECT)
    code = F.lit(None).cast("string")
    for name in reversed(BAD_REASONS):
        code = F.when(reason == name, F.lit(REASONS[name])).otherwise(code)
    where = F.input_file_name() if file is None else file
    values = (reason, code, F.col(_RAW), where, F.current_timestamp())
    return [value.alias(name) for value, name in zip(values, DEAD_LETTER_NAMES)]


def dead_letter_rows(marked: "DataFrame") -> "DataFrame":
    """The bad rows of a ``mark_bad_rows`` frame as dead-letter records (``DEAD_LETTER_NAMES``)."""
    from pyspark.sql import functions as F

    return marked.where(F.col(_REJECT).isNotNull()).select(*dead_letter_columns())


def bad_row_counts(df: "DataFrame", metrics_name: str) -> "DataFrame":
    """``df`` (with ``DEAD_LETTER_NAMES``) observed as one count per reason per micro-batch (``metrics_name``)."""
    from pyspark.sql import functions as F

    return df.observe(metrics_name, *[F.count(F.when(F.col("_cep_error") == name, 1)).alias(name) for name in BAD_REASONS])


def match_stream(
    plan,
    df: "DataFrame",
    *,
    query_text: str | None = None,
    watermark: Any = None,
    session_timeout: Any = None,
    late: str = "output",
    max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS,
    metrics_name: str | None = "cep",
    dedup_key: str | list[str] | None = None,
    max_future_skew: Any = None,
    key_buckets: int = KEY_BUCKETS,
    max_match_rows: int = DEFAULT_MAX_MATCH_ROWS,
) -> "DataFrame":
    """The matches of ``plan`` over the streaming DataFrame ``df``, as a streaming DataFrame (append mode).

    ``watermark``: how far behind the largest event time seen a row may arrive and still be matched
    ("30 seconds", "5m", a timedelta); default: the delay ``df`` already declares on the event-time
    column with ``withWatermark``, else ``DEFAULT_WATERMARK``.
    ``session_timeout``: a key whose consecutive rows are further apart than this (event time) ends a
    session there: its trailing matches are emitted and its state dropped. Default None: never.
    ``late``: "output" (late input rows come out in the result with ``cep_late_reason`` and
    ``cep_late_row`` set) or "count" (only counted in the metrics).
    ``max_pending_rows``: the cap on rows one key may hold while waiting for the watermark.
    ``metrics_name``: the name of the per-micro-batch metrics in ``StreamingQueryProgress.observedMetrics``
    (None: no metrics).
    ``query_text``: the statement's text, hashed into ``match_id`` (default: a rendering of the plan).
    ``dedup_key``: column(s); a row whose key equals that of an earlier row of the same partition key,
    within the watermark delay, is dropped and counted (``duplicates_dropped``). Default: none dropped.
    ``max_future_skew``: a row whose event time is further than this ahead of the micro-batch's
    processing time is rejected (``future_event_time``) before it can move the watermark. Default None: off.
    Bad rows (a ``_corrupt_record`` column in ``df``, NULL or far-future event times) come out like late
    rows, with their reason, and are counted in the metrics (``bad_rows``, and per reason).
    ``key_buckets``: Spark calls Python once per bucket of partition keys (``hash(key) mod key_buckets``)
    per micro-batch instead of once per key (``cep.spark_bridge.engine.key_table``); 0: once per key. Part of the
    checkpoint: a restart must use the same count.
    ``max_match_rows``: the cap on rows one key keeps for its live partial matches; past it the oldest
    partial matches are given up and counted (``match_cap_hits``).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    if not df.isStreaming:
        raise ValueError("match_stream needs a streaming DataFrame (spark.readStream...); use match_dataframe for a static one")
    if late not in LATE_MODES:
        raise ValueError(f"late must be one of {', '.join(LATE_MODES)}, not {late!r}")
    statement = plan.statement
    if statement.order_by or statement.limit is not None:
        raise CepSemanticError(
            "ORDER BY and LIMIT after MATCH_RECOGNIZE cannot run on a stream (the output never ends); "
            "sort or limit where you read the results",
            code="E0285",
        )
    if query_text is None:
        query_text = repr(statement)
    session_us = parse_duration(session_timeout, what="session_timeout") if session_timeout is not None else None
    if session_us == 0:
        raise ValueError("session_timeout must be positive")

    df = prepare_input(df)
    input_columns = tuple(c for c in df.columns if c != CORRUPT_RECORD)
    skew_us = parse_duration(max_future_skew, what="max_future_skew") if max_future_skew is not None else None
    marked = CORRUPT_RECORD in df.columns or skew_us is not None
    partition = resolve_columns(list(plan.partition_columns or []), list(input_columns))
    input_types = {field.name: spark_to_sql(field.dataType) for field in df.schema.fields}
    output_columns = list(plan.output_types(input_types))
    clashes = [n for n, _ in output_columns if n.casefold() in (MATCH_ID, LATE_REASON, LATE_ROW) or n.startswith("__cep_")]
    if clashes:
        raise CepSemanticError(
            f"output column(s) {', '.join(clashes)} clash with the columns streaming adds ({MATCH_ID}, {LATE_REASON}, {LATE_ROW})",
            code="E0284",
            hint="rename them with AS in the SELECT list or MEASURES",
        )

    proctime = bool(getattr(plan, "proctime", False))
    # The engine checks the ORDER BY rules (and raises with the query's positions) on the driver too.
    probe = KeyedStream(plan, input_columns, query_text=query_text, session_timeout_us=session_us, max_pending_rows=max_pending_rows,
                        dedup_key=dedup_key, max_match_rows=max_match_rows)
    time_column = probe.time_column
    if proctime and (session_us is not None or watermark is not None or skew_us is not None):
        raise CepSemanticError("watermark, session_timeout and max_future_skew need event time; ORDER BY PROCTIME() has none",
                               code="E0283")
    if proctime and marked:
        df = mark_bad_rows(df, None)
    delay_ms = 0

    if not proctime:
        from pyspark.sql import types as T

        field = df.schema[time_column]
        if not isinstance(field.dataType, T.TimestampType):
            raise CepSemanticError(
                f"the event-time column {time_column!r} is {field.dataType.simpleString()}, not timestamp; "
                f"cast it first (e.g. df.withColumn({time_column!r}, F.col({time_column!r}).cast('timestamp')))",
                code="E0282",
            )
        declared = _watermark_columns(df)
        others = [c for c in declared if c != time_column]
        if others:
            raise CepSemanticError(
                f"the DataFrame declares its watermark on {', '.join(others)}, but the query's event time is {time_column!r}; "
                f"declare it with withWatermark({time_column!r}, ...) or not at all",
                code="E0283",
            )
        if declared and skew_us is not None:
            raise CepSemanticError(
                f"max_future_skew must act before the watermark, but the DataFrame already declares one on {time_column!r}; "
                "pass the delay as watermark=... instead of calling withWatermark",
                code="E0283",
            )
        if marked and declared:  # unreadable lines: rejected, though their times already reached the watermark
            df = mark_bad_rows(df, time_column)
        if declared:
            delay_ms = int(field.metadata[_WATERMARK_KEY])
            if watermark is not None and parse_duration(watermark, what="watermark") != delay_ms * 1000:
                raise CepSemanticError(
                    f"watermark={watermark!r} differs from the delay already declared on {time_column!r} "
                    f"({delay_ms} ms); pass one or the other",
                    code="E0283",
                )
        else:
            delay_us = parse_duration(watermark if watermark is not None else DEFAULT_WATERMARK, what="watermark")
            delay_ms = delay_us // 1000
            if marked:  # before the watermark: a bad row's time is NULL and cannot move it
                df = mark_bad_rows(df, time_column, max_future_skew_us=skew_us)
            df = df.withWatermark(time_column, f"{delay_ms} milliseconds")
        # Move the watermark marker to an all-NULL column (see the module docstring) and carry time as µs.
        df = df.select(
            *[
                F.col(quote(name)).alias(name, metadata={}) if name == time_column else F.col(quote(name))
                for name in input_columns
            ],
            F.coalesce(F.unix_micros(F.col(quote(time_column))), F.lit(_NULL_TIME)).alias(_EVENT_US),
            F.lit(None).cast("timestamp").alias(_MARKER, metadata={_WATERMARK_KEY: delay_ms}),
            *([F.col(_REJECT), F.col(_RAW)] if marked else []),
        )

    if not isinstance(key_buckets, int) or isinstance(key_buckets, bool) or key_buckets < 0:
        raise ValueError(f"key_buckets must be a whole number >= 0, not {key_buckets!r}")
    buckets = key_buckets if partition else 0  # one group already holds every row
    if buckets:
        grouped = df.withColumn(_BUCKET, bucket_expression(partition, buckets)).groupBy(F.col(_BUCKET))
    elif partition:
        grouped = df.groupBy(*[F.col(quote(c)) for c in partition])
    else:
        grouped = df.withColumn(_ALL_ROWS_KEY, F.lit(0)).groupBy(F.col(_ALL_ROWS_KEY))

    step = _SparkStep(
        plan,
        input_columns,
        partition,
        query_text=query_text,
        session_timeout_us=session_us,
        max_pending_rows=max_pending_rows,
        output_columns=output_columns,
        late_rows=late == "output",
        dedup_key=probe.dedup_columns,
        dedup_horizon_us=delay_ms * 1000,
        marked=marked,
        key_buckets=buckets,
        max_match_rows=max_match_rows,
    )

    def cep_match_stream(key, frames, state):
        return step(key, frames, state)

    from pyspark.sql import types as T

    state_schema = T.StructType([T.StructField("cep_state", T.BinaryType(), False)])
    timeout = GroupStateTimeout.NoTimeout if proctime else GroupStateTimeout.EventTimeTimeout
    out = grouped.applyInPandasWithState(cep_match_stream, output_schema(step.result_columns), state_schema, "append", timeout)

    if metrics_name:
        kind = F.col(_KIND)
        stats = F.col(_STATS)
        metrics = [F.coalesce(F.sum(stats[i]), F.lit(0)).cast("long").alias(name) for i, name in enumerate(STAT_NAMES)]
        metrics.append(F.count(F.when(kind == KIND_STATS, 1)).alias("python_calls"))
        out = out.observe(metrics_name, *metrics)
    out = out.where(F.col(_KIND) != KIND_STATS) if late == "output" else out.where(F.col(_KIND) == KIND_MATCH)
    keep = [name for name, _ in output_columns] + [MATCH_ID]
    if late == "output":
        keep += [LATE_REASON, LATE_ROW]
    return out.select(*[F.col(quote(name)) for name in keep])


def statement_text(query) -> str:
    """The text of ``query``'s own statement (its span within a multi-statement file), for match ids."""
    text = getattr(query, "text", None) or ""
    span = getattr(query.statement, "span", None)
    if span is not None and 0 <= span.start < span.end <= len(text):
        return text[span.start : span.end]
    return text
