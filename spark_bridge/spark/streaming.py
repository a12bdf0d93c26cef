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

How (``docs/streaming.md`` has the reasons, ``docs/streaming-measurements.md`` the measurements):

* ``groupBy(PARTITION BY columns).applyInPandasWithState(..., "append", EventTimeTimeout)``; the
  per-key work is ``cep.spark_bridge.engine.keyed.KeyedStream`` (buffer until the watermark or the key's own
  bound passes, sort, feed the matcher, sessions, caps, match ids); its state is one binary column
  (``state_codec``). The key's own bound (its largest event time minus the delay) releases its rows in the
  micro-batch that reads them, one micro-batch before Spark's watermark would; ``early_release_delay``
  says when it cannot (several watermark operators).
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
from collections.abc import Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepSemanticError
from cep.matcher.plan import COLUMN_WISE, Route
from cep.matcher.rows.tables import pandas_to_columns
from cep.matcher.sql.datetimes import query_time
from cep.matcher.sql.types import coerce, narrow_integer_columns
from cep.spark_bridge.engine.column_table import key_codes, series_column
from cep.spark_bridge.engine.columnar import ColumnarStep
from cep.spark_bridge.engine.columnar import step_bucket as columnar_step_bucket
from cep.spark_bridge.engine.durations import parse_duration
from cep.spark_bridge.engine.key_table import gc_paused, step_bucket
from cep.spark_bridge.engine.keyed import (
    DEFAULT_MAX_MATCH_ROWS,
    DEFAULT_MAX_PENDING_ROWS,
    STAT_NAMES,
    KeyedStream,
    spark_timeout_ms,
)
from cep.spark_bridge.spark.buckets import KEY_BUCKETS, bucket_expression
from cep.spark_bridge.spark.columns import (
    ALL_ROWS_KEY,
    CORRUPT_RECORD,
    EVENT_US,
    KIND,
    MARKER,
    NULL_TIME,
    RAW,
    REJECT,
    STATS,
    WATERMARK_KEY,
    quote,
)
from cep.spark_bridge.spark.inputs import mark_bad_rows, prepare_input, unheld_time_columns, with_watermark
from cep.spark_bridge.spark.types import output_schema, spark_to_sql

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

# Imported inside functions: pyspark (optional: the "spark" extra) and pandas (heavy).

LATE_MODES = ("output", "count")

MATCH_ID = "match_id"
LATE_REASON = "cep_late_reason"
LATE_ROW = "cep_late_row"

# The grouping column of ``key_buckets`` (spark/buckets.py); the others are spark/columns.py's.
_BUCKET = "__cep_bucket__"

KIND_MATCH, KIND_LATE, KIND_STATS = 0, 1, 2

# ------------------------------------------------------------------------------------------ durations


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


# The numpy type of each integer column type (pandas' nullable one is its capitalized name, Int32).
_INTEGER_DTYPES = {"BIGINT": "int64", "INTEGER": "int32", "SMALLINT": "int16", "TINYINT": "int8"}


def _typed(values: list, type_name: str):
    """A column of Python values as the array Spark's Arrow conversion expects for ``type_name``."""
    import pandas as pd

    kind = type_name.upper()
    has_null = any(v is None for v in values)
    if kind == "TIMESTAMP":
        return np.array(values, dtype="datetime64[us]").astype("datetime64[ns]")
    if kind in _INTEGER_DTYPES:
        if not has_null:
            return np.array(values, dtype=_INTEGER_DTYPES[kind])
        return pd.array(values, dtype=_INTEGER_DTYPES[kind].capitalize())
    if kind == "DOUBLE":
        return np.array([np.nan if v is None else v for v in values], dtype="float64")
    if kind == "BOOLEAN" and not has_null:
        return np.array(values, dtype=bool)
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


def _text_keys(series) -> np.ndarray | None:
    """A key column of text only (no NULL), as its object array: ``series_values`` would give the same
    strings one by one. None for any other column."""
    if series.dtype != object or series.isna().any():
        return None
    values = series.to_numpy(dtype=object)
    return values if set(map(type, values)) == {str} else None


class _SparkStep:
    """The function ``applyInPandasWithState`` calls for each key; holds the engine per worker process.

    Per call it costs: the input columns the engine needs (no copy of the frame), the engine, one
    output frame (matches, late rows, and one statistics row whose counts are an array column).
    """

    def __init__(
        self,
        plan,
        input_columns,
        partition_columns,
        *,
        query_text,
        session_timeout_us,
        max_pending_rows,
        output_columns,
        late_rows: bool,
        dedup_key=(),
        dedup_horizon_us: int = 0,
        marked: bool = False,
        key_buckets: int = 0,
        max_match_rows: int = DEFAULT_MAX_MATCH_ROWS,
        column_wise: bool = True,
        release_delay_ms: int | None = None,
        integer_columns: dict[str, str] | None = None,
    ) -> None:
        self.plan = plan
        self.input_columns = tuple(input_columns)
        self.integer_columns = dict(integer_columns or {})
        self.partition_columns = tuple(partition_columns)
        self.query_text = query_text
        self.session_timeout_us = session_timeout_us
        self.max_pending_rows = max_pending_rows
        self.max_match_rows = max_match_rows
        self.output_columns = list(output_columns)  # (name, SQL type) of the statement's output
        self.late_rows = late_rows
        self.dedup_key = tuple(dedup_key)
        self.dedup_horizon_us = dedup_horizon_us
        self.marked = marked  # the frames carry REJECT and RAW (mark_bad_rows)
        self.key_buckets = key_buckets  # > 0: Spark groups by a bucket of keys (cep.spark_bridge.engine.key_table)
        self.column_wise = column_wise  # False: per key even where the route could be column-wise (to compare them)
        self.release_delay_ms = release_delay_ms  # the watermark delay: keys release up to their own bound (keyed.py)
        self.result_columns = self.output_columns + [
            (MATCH_ID, "VARCHAR"),
            (LATE_REASON, "VARCHAR"),
            (LATE_ROW, "VARCHAR"),
            (KIND, "INTEGER"),
            (STATS, "ARRAY<BIGINT>"),
        ]
        self._engine: KeyedStream | None = None
        self._columnar: ColumnarStep | None = None  # built in each worker when the route is column-wise

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_engine"] = None  # built again in each worker
        state["_columnar"] = None
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
                release_delay_ms=self.release_delay_ms,
                integer_columns=self.integer_columns,
            )
        return self._engine

    def route(self) -> Route:
        """How this stream runs the query (``plan.choose_route``): with ``key_buckets=0`` a call holds one key."""
        one_key = None if self.key_buckets else "key_buckets=0: Spark calls once per key"
        if not self.column_wise:
            one_key = "column_wise=False"
        return self.engine().route(one_key_per_call=one_key)

    def columnar(self) -> ColumnarStep:
        """The column-wise step for a bucket of keys (``engine/columnar/``), built once per worker."""
        if self._columnar is None:
            self._columnar = ColumnarStep(self.engine())
        return self._columnar

    def _key(self, key, pdf) -> tuple:
        """The partition key as the batch path sees it (``pandas_to_columns`` values)."""
        if not self.partition_columns:
            return ()
        values = []
        for value in key:
            if (
                hasattr(value, "item")
                and type(value).__module__ == "numpy"
                and not isinstance(value, (np.datetime64, np.timedelta64))
            ):
                value = value.item()
            if value is None or isinstance(value, (str, bool, int, float)):
                values.append(None if isinstance(value, float) and value != value else value)
            else:  # timestamps, dates, decimals: take the first row's values the batch way
                first = pandas_to_columns(pdf.iloc[:1], self.partition_columns)
                return tuple(first[name][0] for name in self.partition_columns)
        return tuple(values)

    def inputs(self, pdf) -> tuple[dict, list | None, list | None]:
        """What the engine reads of a frame: its columns, event times (µs, None for NULL) and reject reasons."""
        engine = self.engine()
        columns = pandas_to_columns(pdf, engine.read_columns)
        times = rejected = None
        if engine.time_column is not None:
            times = [None if us == NULL_TIME else us for us in pdf[EVENT_US].tolist()]
        if self.marked:
            reasons = pdf[REJECT]
            rejected = reasons.where(reasons.notna(), None).tolist() if reasons.notna().any() else None
        return columns, times, rejected

    def bucket_inputs(self, pdf) -> tuple[list[tuple], np.ndarray, dict, np.ndarray, np.ndarray, list | None]:
        """What the column-wise path reads of a bucket's frame, as numpy where pandas holds numpy: the keys
        (in order of first appearance), each row's key code, the columns (``series_column``: the values
        ``inputs`` gives, typed), event times (µs; 0 where NULL), the NULL-time mask and reject reasons."""
        engine = self.engine()
        names = self.partition_columns
        raw = _text_keys(pdf[names[0]]) if len(names) == 1 else None
        if raw is None:
            values = pandas_to_columns(pdf, names)
            raw = values[names[0]] if len(names) == 1 else list(zip(*[values[name] for name in names]))
        codes, keys = key_codes(raw)
        if len(names) == 1:
            keys = [(key,) for key in keys]
        columns = {name: series_column(pdf[name]) for name in engine.read_columns}
        times = pdf[EVENT_US].to_numpy(dtype=np.int64)
        null_time = times == NULL_TIME
        rejected = None
        if self.marked:
            reasons = pdf[REJECT]
            rejected = reasons.where(reasons.notna(), None).tolist() if reasons.notna().any() else None
        return keys, codes, columns, np.where(null_time, 0, times), null_time, rejected

    def row_keys(self, pdf) -> list[tuple]:
        """Each row's partition key, as the batch path sees it (``pandas_to_columns`` values)."""
        values = pandas_to_columns(pdf, self.partition_columns)
        return list(zip(*[values[name] for name in self.partition_columns]))

    def __call__(self, key, frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        import pandas as pd

        engine = self.engine()
        watermark_ms = 0 if engine.proctime else state.getCurrentWatermarkMs()
        parts = [frame for frame in frames if len(frame)]
        pdf = None
        if parts:
            pdf = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
        if self.key_buckets or self.route().stream == COLUMN_WISE:
            with gc_paused():  # a bucket's table is an object per key (key_table.gc_paused says why)
                if self.route().stream == COLUMN_WISE:
                    result, table = columnar_step_bucket(self, self.columnar(), pdf, state, watermark_ms * 1000)
                else:
                    result, table = step_bucket(self, engine, pdf, state, watermark_ms * 1000)
                new_state, timer_us = (table.encode() if table else None), table.next_timer()
        else:
            columns = times = key_values = rejected = None
            if pdf is not None:
                columns, times, rejected = self.inputs(pdf)
                key_values = self._key(key, pdf)
            blob = state.get[0] if state.exists else None
            # CURRENT_TIMESTAMP is the micro-batch's processing time, as Spark's current_timestamp() is.
            with query_time(_dt.datetime(1970, 1, 1) + _dt.timedelta(milliseconds=state.getCurrentProcessingTimeMs())):
                result = engine.process(
                    blob,
                    key_values,
                    columns,
                    times,
                    watermark_ms * 1000,
                    timed_out=state.hasTimedOut,
                    rejected=rejected,
                )
            new_state, timer_us = result.state, result.timer_us

        if new_state is None:
            if state.exists:
                state.remove()
        else:
            state.update((new_state,))
            if timer_us is not None and not engine.proctime:
                state.setTimeoutTimestamp(spark_timeout_ms(timer_us, watermark_ms))
        yield self._frame(result, pdf)

    def _frame(self, result, pdf) -> pd.DataFrame:
        import pandas as pd

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
            raw = picked[RAW].tolist() if self.marked else [None] * n_late
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
        data[KIND] = _typed([KIND_MATCH] * n_rows + [KIND_LATE] * n_late + [KIND_STATS], "INTEGER")
        data[STATS] = _typed([None] * (n_rows + n_late) + [[result.stats.get(name, 0) for name in STAT_NAMES]], "ARRAY")
        return pd.DataFrame(data, copy=False)


# ------------------------------------------------------------------------------------------ the query


def match_stream(
    plan,
    df: DataFrame,
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
) -> DataFrame:
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
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout

    if not df.isStreaming:
        raise ValueError(
            "match_stream needs a streaming DataFrame (spark.readStream...); use match_dataframe for a static one"
        )
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
    if not isinstance(key_buckets, int) or isinstance(key_buckets, bool) or key_buckets < 0:
        raise ValueError(f"key_buckets must be a whole number >= 0, not {key_buckets!r}")

    df = prepare_input(df)
    input_columns = tuple(c for c in df.columns if c != CORRUPT_RECORD)
    skew_us = parse_duration(max_future_skew, what="max_future_skew") if max_future_skew is not None else None
    # A time column may hold a time the stateful operator cannot take (inputs.bad_row_reason): such rows
    # are marked bad too, whatever the reader.
    marked = CORRUPT_RECORD in df.columns or skew_us is not None or bool(unheld_time_columns(df))
    partition = list(plan.partition_names(input_columns))
    input_types = {field.name: spark_to_sql(field.dataType) for field in df.schema.fields}
    output_columns = _output_columns(plan, input_types)
    integers = narrow_integer_columns(input_types)
    # The engine checks the ORDER BY rules (and raises with the query's positions) on the driver too.
    probe = KeyedStream(
        plan,
        input_columns,
        query_text=query_text,
        session_timeout_us=session_us,
        max_pending_rows=max_pending_rows,
        dedup_key=dedup_key,
        max_match_rows=max_match_rows,
        integer_columns=integers,
    )
    df, delay_ms = _with_event_time(
        df, probe, input_columns, watermark=watermark, session_us=session_us, skew_us=skew_us, marked=marked
    )
    buckets = key_buckets if partition else 0  # one group already holds every row
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
        release_delay_ms=None if probe.proctime else early_release_delay(df, delay_ms),
        integer_columns=integers,
    )

    def cep_match_stream(key, frames, state):
        return step(key, frames, state)

    state_schema = T.StructType([T.StructField("cep_state", T.BinaryType(), False)])
    timeout = GroupStateTimeout.NoTimeout if probe.proctime else GroupStateTimeout.EventTimeTimeout
    out = _grouped(df, partition, buckets).applyInPandasWithState(
        cep_match_stream, output_schema(step.result_columns), state_schema, "append", timeout
    )
    return _observed_results(out, metrics_name=metrics_name, late=late, output_columns=output_columns)


def _observed_results(
    out: DataFrame, *, metrics_name: str | None, late: str, output_columns: list[tuple[str, str]]
) -> DataFrame:
    """The stateful operator's output with its per-micro-batch metrics observed (``metrics_name``), cut to
    the matches (and, with ``late="output"``, the late and bad rows) and the output columns."""
    from pyspark.sql import functions as F

    if metrics_name:
        kind = F.col(KIND)
        stats = F.col(STATS)
        metrics = [F.coalesce(F.sum(stats[i]), F.lit(0)).cast("long").alias(name) for i, name in enumerate(STAT_NAMES)]
        metrics.append(F.count(F.when(kind == KIND_STATS, 1)).alias("python_calls"))
        out = out.observe(metrics_name, *metrics)
    out = out.where(F.col(KIND) != KIND_STATS) if late == "output" else out.where(F.col(KIND) == KIND_MATCH)
    keep = [name for name, _ in output_columns] + [MATCH_ID]
    if late == "output":
        keep += [LATE_REASON, LATE_ROW]
    return out.select(*[F.col(quote(name)) for name in keep])


def _output_columns(plan, input_types: dict[str, str]) -> list[tuple[str, str]]:
    """The statement's output columns (name, SQL type), none of them named as a column streaming adds."""
    output_columns = list(plan.output_types(input_types))
    added = ColumnNames((MATCH_ID, LATE_REASON, LATE_ROW))
    clashes = [n for n, _ in output_columns if added.has_name_ignoring_case(n) or n.startswith("__cep_")]
    if clashes:
        raise CepSemanticError(
            f"output column(s) {', '.join(clashes)} clash with the columns streaming adds ({', '.join(added.names)})",
            code="E0284",
            hint="rename them with AS in the SELECT list or MEASURES",
        )
    return output_columns


def _with_event_time(
    df: DataFrame, probe: KeyedStream, input_columns: tuple[str, ...], *, watermark, session_us, skew_us, marked: bool
) -> tuple[DataFrame, int]:
    """``df`` with its bad rows marked, its watermark declared and moved to an all-NULL column, and its event
    time as µs (the module docstring says why); and the watermark delay in ms (0 on processing time)."""
    from pyspark.sql import functions as F

    if probe.proctime:
        if session_us is not None or watermark is not None or skew_us is not None:
            raise CepSemanticError(
                "watermark, session_timeout and max_future_skew need event time; ORDER BY PROCTIME() has none",
                code="E0283",
            )
        return (mark_bad_rows(df, None) if marked else df), 0
    time_column = probe.time_column
    df, delay_ms = with_watermark(df, time_column, watermark, mark_bad=marked, max_future_skew_us=skew_us)
    df = df.select(
        *[
            F.col(quote(name)).alias(name, metadata={}) if name == time_column else F.col(quote(name))
            for name in input_columns
        ],
        F.coalesce(F.unix_micros(F.col(quote(time_column))), F.lit(NULL_TIME)).alias(EVENT_US),
        F.lit(None).cast("timestamp").alias(MARKER, metadata={WATERMARK_KEY: delay_ms}),
        *([F.col(REJECT), F.col(RAW)] if marked else []),
    )
    return df, delay_ms


def early_release_delay(df: DataFrame, delay_ms: int) -> int | None:
    """The delay a key's own release bound is computed with (``keyed.own_bound_us``), or None where that bound
    could pass Spark's watermark: with several watermark operators (inputs declared their watermarks before a
    union or a join) Spark's watermark is the smallest of theirs by default, below a key's largest event time
    minus the delay."""
    plan = df._jdf.queryExecution().logical().toString()  # the plan Spark plans the stream from
    return delay_ms if len(re.findall(r"\bEventTimeWatermark\b", plan)) <= 1 else None


def _grouped(df: DataFrame, partition: list[str], buckets: int):
    """``df`` grouped as the stateful operator calls Python: by a bucket of keys, by key, or all in one."""
    from pyspark.sql import functions as F

    if buckets:
        return df.withColumn(_BUCKET, bucket_expression(partition, buckets)).groupBy(F.col(_BUCKET))
    if partition:
        return df.groupBy(*[F.col(quote(c)) for c in partition])
    return df.withColumn(ALL_ROWS_KEY, F.lit(0)).groupBy(F.col(ALL_ROWS_KEY))
