"""The Spark side of a rule set: one stateful operator that runs every rule of the micro-batch's set.

``match_rules`` builds it (see ``cep.spark_bridge.alerting.stream`` for how it maps onto Spark); the functions
Spark calls on executors are in ``cep.spark_bridge.alerting.worker``; ``AlertStream`` drives it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.alerting.worker import (
    _BUCKET,
    _EVENT_US,
    _FILE,
    _KIND,
    _MARKER,
    _NULL_TIME,
    _PKEY,
    _SPEC,
    _STATS,
    _WATERMARK_KEY,
    BAD_ROWS_METRICS,
    DEFAULT_HOUSEKEEPING,
    KIND_MATCH,
    KIND_STATS,
    METRICS_NAME,
    RuleStore,
    _AlertStep,
    _Explode,
)
from cep.spark_bridge.engine.key_table import KEY_BUCKETS, bucket_expression
from cep.spark_bridge.sinks.webhook import ALERT_COLUMNS, ALERT_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["duration_us", "input_types_of", "match_rules"]


def duration_us(value: Any, what: str) -> int:
    """``value`` ("30 seconds", "5m", a timedelta) in microseconds; ``what`` names it in errors."""
    from cep.spark_bridge.spark.streaming import parse_duration

    return parse_duration(value, what=what)


def input_types_of(df: "DataFrame") -> dict[str, str]:
    """``{column: SQL type}`` of a DataFrame as the rules see it (types the matcher cannot take are text)."""
    from cep.spark_bridge.spark.types import needs_string_cast, spark_to_sql

    return {f.name: ("VARCHAR" if needs_string_cast(f.dataType) else spark_to_sql(f.dataType)) for f in df.schema.fields}


def match_rules(
    df: "DataFrame",
    store: RuleStore | str,
    *,
    time_column: str,
    watermark: Any = None,
    housekeeping: Any = DEFAULT_HOUSEKEEPING,
    metrics_name: str | None = METRICS_NAME,
    bad_rows_metrics: str = BAD_ROWS_METRICS,
) -> "DataFrame":
    """The alerts of the rule sets published in ``store`` over the streaming DataFrame ``df``.

    Returns a streaming DataFrame (append mode) with ``sinks.ALERT_COLUMNS``. The rule set a micro-batch
    runs with is the one current in ``store`` when the micro-batch starts (``RuleStore``); publish a
    first one before starting the query. ``watermark``: the allowed lateness (default: the delay ``df``
    declares on ``time_column``, else ``streaming.DEFAULT_WATERMARK``).

    When ``df`` is a ``streaming.mark_bad_rows`` frame, its bad rows come out of the same query too, so
    that one read of the input feeds both: the result then has the dead-letter fields after the alert
    columns (``streaming.DEAD_LETTER_NAMES``; ``_cep_error`` is NULL on an alert, set on a bad row,
    whose alert columns are NULL), and the bad rows are counted per reason (``bad_rows_metrics``). They
    reach no rule: they cross the shuffle in a group of their own (``alert_rules.BAD_SPEC``).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout

    from cep.spark_bridge.spark.batch import quote
    from cep.spark_bridge.spark.streaming import DEFAULT_WATERMARK

    if not df.isStreaming:
        raise ValueError("match_rules needs a streaming DataFrame (spark.readStream...)")
    store_dir = store.directory if isinstance(store, RuleStore) else os.path.abspath(store)
    from cep.spark_bridge.spark.streaming import _RAW, _REJECT, bad_row_counts, dead_letter_columns, prepare_input

    marked = _REJECT in df.columns  # mark_bad_rows ran prepare_input already
    if not marked:
        df = prepare_input(df)
    passthrough = [_REJECT, _RAW, _FILE] if marked else []
    columns = [c for c in df.columns if c not in passthrough]
    if time_column not in columns:
        raise ValueError(f"time column {time_column!r} is not in the input (columns: {', '.join(columns)})")
    field = df.schema[time_column]
    if not isinstance(field.dataType, T.TimestampType):
        raise CepSemanticError(f"the event-time column {time_column!r} is {field.dataType.simpleString()}, not timestamp; cast it first",
                               code="E0282")
    declared = [f.name for f in df.schema.fields if _WATERMARK_KEY in (f.metadata or {})]
    if declared and declared != [time_column]:
        raise CepSemanticError(f"the DataFrame declares its watermark on {', '.join(declared)}, not on the event time {time_column!r}",
                               code="E0283")
    if declared:
        delay_ms = int(field.metadata[_WATERMARK_KEY])
        if watermark is not None and duration_us(watermark, "watermark") != delay_ms * 1000:
            raise CepSemanticError(f"watermark={watermark!r} differs from the delay declared on {time_column!r} ({delay_ms} ms)",
                                   code="E0283")
    else:
        delay_ms = duration_us(watermark if watermark is not None else DEFAULT_WATERMARK, "watermark") // 1000
        df = df.withWatermark(time_column, f"{delay_ms} milliseconds")
    housekeeping_us = duration_us(housekeeping, "housekeeping")
    if housekeeping_us <= 0:
        raise ValueError("housekeeping must be positive")

    bad_columns = [F.col(_REJECT), F.col(_RAW), F.when(F.col(_REJECT).isNotNull(), F.input_file_name()).alias(_FILE)]
    df = df.select(*[F.col(quote(c)) for c in columns],
                   F.coalesce(F.unix_micros(F.col(quote(time_column))), F.lit(_NULL_TIME)).alias(_EVENT_US),
                   *(bad_columns if marked else []))
    # The watermark marker (metadata) does not survive mapInPandas: the stateful operator finds it on
    # an all-NULL column added after it, so Spark's own late-row filter drops nothing (streaming.py).
    in_fields = [T.StructField(f.name, f.dataType, True) for f in df.schema.fields]
    exploded_schema = T.StructType([T.StructField(_SPEC, T.StringType(), False), T.StructField(_PKEY, T.StringType(), False)] + in_fields)
    exploded = df.mapInPandas(_Explode(store_dir, columns + [_EVENT_US] + passthrough, _REJECT if marked else None), exploded_schema)
    exploded = exploded.select("*", F.lit(None).cast("timestamp").alias(_MARKER, metadata={_WATERMARK_KEY: delay_ms}))

    out_fields = [T.StructField(name, {"string": T.StringType(), "timestamp": T.TimestampType(), "boolean": T.BooleanType()}[kind], True)
                  for name, kind in ALERT_COLUMNS]
    out_schema = T.StructType(out_fields + [T.StructField(_KIND, T.IntegerType(), False),
                                            T.StructField(_STATS, T.ArrayType(T.LongType()), True)]
                              + [T.StructField(name, T.StringType(), True) for name in passthrough])
    state_schema = T.StructType([T.StructField("cep_rules_state", T.BinaryType(), False)])
    step = _AlertStep(store_dir, housekeeping_us, KEY_BUCKETS, passthrough)

    def cep_alert_rules(key, frames, state):
        return step(key, frames, state)

    exploded = exploded.withColumn(_BUCKET, bucket_expression([_PKEY], KEY_BUCKETS))
    out = exploded.groupBy(F.col(_SPEC), F.col(_BUCKET)).applyInPandasWithState(
        cep_alert_rules, out_schema, state_schema, "append", GroupStateTimeout.EventTimeTimeout
    )
    if metrics_name:
        calls = F.when(F.col(_KIND) == KIND_STATS, F.struct(F.col("rule_id"), F.col("rule_version"), F.col(_STATS).alias("stats")))
        out = out.observe(metrics_name, F.collect_list(calls).alias("calls"))
    if marked:
        out = out.where(F.col(_KIND) != KIND_STATS).select(*[F.col(name) for name in ALERT_NAMES],
                                                           *dead_letter_columns(file=F.col(_FILE)))
        return bad_row_counts(out, bad_rows_metrics)
    return out.where(F.col(_KIND) == KIND_MATCH).select(*[F.col(name) for name in ALERT_NAMES])


# ----------------------------------------------------------------------------------- the driver
