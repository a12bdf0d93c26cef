"""The Spark side of a rule set: one stateful operator that runs every rule of the micro-batch's set.

``match_rules`` builds it (see ``cep.spark_bridge.alerting.stream`` for how it maps onto Spark); the functions
Spark calls on executors are in ``cep.spark_bridge.alerting.worker``; ``AlertStream`` drives it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cep.spark_bridge.alerting.key_tags import spark_taggable, tag_rows
from cep.spark_bridge.alerting.rule_set import (
    BAD_ROWS_METRICS,
    BUCKET,
    DEFAULT_HOUSEKEEPING,
    FILE,
    KIND_BAD,
    KIND_MATCH,
    KIND_STATS,
    METRICS_NAME,
    PKEY,
    ROW_ID,
    SPEC,
)
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.alerting.worker import AlertStep, Explode
from cep.spark_bridge.engine.durations import parse_duration
from cep.spark_bridge.sinks.alerts import ALERT_COLUMNS, ALERT_NAMES
from cep.spark_bridge.spark.buckets import KEY_BUCKETS, bucket_expression
from cep.spark_bridge.spark.columns import EVENT_US, KIND, MARKER, NULL_TIME, RAW, REJECT, STATS, WATERMARK_KEY, quote
from cep.spark_bridge.spark.inputs import CLOCK_ROW, bad_row_counts, dead_letter_columns, prepare_input, with_watermark
from cep.spark_bridge.spark.streaming import early_release_delay
from cep.spark_bridge.spark.types import needs_string_cast, spark_to_sql

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["input_types_of", "match_rules"]

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.


def input_types_of(df: DataFrame) -> dict[str, str]:
    """``{column: SQL type}`` of a DataFrame as the rules see it (types the matcher cannot take are text)."""
    return {
        f.name: ("VARCHAR" if needs_string_cast(f.dataType) else spark_to_sql(f.dataType)) for f in df.schema.fields
    }


def _step_output_schema(passthrough: Sequence[str]):
    """What ``AlertStep`` yields: the alert columns, ``KIND`` and ``STATS``, then the bad rows' fields."""
    from pyspark.sql import types as T

    types = {"string": T.StringType(), "timestamp": T.TimestampType(), "boolean": T.BooleanType()}
    return T.StructType(
        [T.StructField(name, types[kind], True) for name, kind in ALERT_COLUMNS]
        + [T.StructField(KIND, T.IntegerType(), False), T.StructField(STATS, T.ArrayType(T.LongType()), True)]
        + [T.StructField(name, T.StringType(), True) for name in passthrough]
    )


def match_rules(
    df: DataFrame,
    store: RuleStore | str,
    *,
    time_column: str,
    watermark: Any = None,
    housekeeping: Any = DEFAULT_HOUSEKEEPING,
    metrics_name: str | None = METRICS_NAME,
    bad_rows_metrics: str = BAD_ROWS_METRICS,
    source_location: Column | None = None,
    with_stats: bool = False,
    key_buckets: int = KEY_BUCKETS,
    tag_partitions: Mapping[str, Sequence[str]] | None = None,
) -> DataFrame:
    """The alerts of the rule sets published in ``store`` over the streaming DataFrame ``df``.

    Returns a streaming DataFrame (append mode) with ``sinks.alerts.ALERT_COLUMNS``. The rule set a micro-batch
    runs with is the one current in ``store`` when the micro-batch starts (``RuleStore``); publish a
    first one before starting the query. ``watermark``: the allowed lateness (default: the delay ``df``
    declares on ``time_column``, else ``inputs.DEFAULT_WATERMARK``).

    When ``df`` is a ``inputs.mark_bad_rows`` frame, its bad rows come out of the same query too, so
    that one read of the input feeds both: the result then has the dead-letter fields after the alert
    columns (``inputs.DEAD_LETTER_NAMES``; ``_cep_error`` is NULL on an alert, set on a bad row,
    whose alert columns are NULL), and the bad rows are counted per reason (``bad_rows_metrics``). They
    reach no rule: they cross the shuffle in a group of their own (``rule_set.BAD_SPEC``).
    ``source_location``: where a bad row came from, an expression over ``df``'s columns (default: the input
    file, ``input_file_name()``; for Kafka, ``kafka.kafka_location()``: topic, partition and offset).

    ``key_buckets``: partition keys hashed into that many buckets, one state value each (``spark/buckets.py``).

    ``with_stats`` (what ``AlertStream`` reads in its ``foreachBatch``): nothing is observed; the result
    keeps every row the operator gives, with ``KIND`` and ``STATS`` last: alerts, bad rows, one
    statistics row per rule and bucket call (KIND_STATS), and each rule's late rows (KIND_LATE, see
    ``worker.AlertStep._frame``).

    ``tag_partitions`` (``{spec id: PARTITION BY columns}``, ``key_tags.planned_partitions``): every spec any
    micro-batch of this query will run with. Given, and all STRING columns, rows are tagged by Spark
    expressions (``key_tags.tag_rows``) instead of a Python ``mapInPandas`` (``worker.Explode``, which reads
    each micro-batch's rule set itself); the caller must then re-plan before a set with another spec runs.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout

    if not df.isStreaming:
        raise ValueError("match_rules needs a streaming DataFrame (spark.readStream...)")
    store_dir = store.directory if isinstance(store, RuleStore) else os.path.abspath(store)
    marked = REJECT in df.columns  # mark_bad_rows ran prepare_input already
    if not marked:
        df = prepare_input(df)
    passthrough = [REJECT, RAW, FILE] if marked else []
    columns = [c for c in df.columns if c not in passthrough]
    if time_column not in columns:
        raise ValueError(f"time column {time_column!r} is not in the input (columns: {', '.join(columns)})")
    df, delay_ms = with_watermark(df, time_column, watermark)
    release_delay_ms = early_release_delay(df, delay_ms)  # keys release rows up to their own bound (keyed.py)
    if marked:  # clock rows (--idle-watermark) have moved the watermark: no rule sees them, no count has them.
        # The condition reads the event time, so Spark's optimizer cannot push it below the watermark (it pushes
        # a filter that does not), where the clock rows would be gone before they moved it.
        time = F.col(quote(time_column))
        df = df.where(F.col(REJECT).isNull() | (F.col(REJECT) != F.lit(CLOCK_ROW)) | time.isNull())
    housekeeping_us = parse_duration(housekeeping, what="housekeeping")
    if housekeeping_us <= 0:
        raise ValueError("housekeeping must be positive")

    location = F.input_file_name() if source_location is None else source_location
    bad_columns = [F.col(REJECT), F.col(RAW), F.when(F.col(REJECT).isNotNull(), location).alias(FILE)]
    df = df.select(
        *[F.col(quote(c)) for c in columns],
        F.coalesce(F.unix_micros(F.col(quote(time_column))), F.lit(NULL_TIME)).alias(EVENT_US),
        *(bad_columns if marked else []),
    )
    # The watermark marker (metadata) does not survive mapInPandas: the stateful operator finds it on
    # an all-NULL column added after it, so Spark's own late-row filter drops nothing (streaming.py).
    in_fields = [T.StructField(f.name, f.dataType, True) for f in df.schema.fields]
    if with_stats:  # Explode numbers the rows, so that a row late for several rules counts once
        in_fields.append(T.StructField(ROW_ID, T.StringType(), True))
    exploded_schema = T.StructType(
        [T.StructField(SPEC, T.StringType(), False), T.StructField(PKEY, T.StringType(), False)] + in_fields
    )
    carried = columns + [EVENT_US] + passthrough
    reject = REJECT if marked else None
    if tag_partitions is not None and spark_taggable(tag_partitions, df):
        exploded = tag_rows(df, tag_partitions, carried, reject, row_ids=with_stats)
    else:
        exploded = df.mapInPandas(Explode(store_dir, carried, reject, row_ids=with_stats), exploded_schema)
    exploded = exploded.select("*", F.lit(None).cast("timestamp").alias(MARKER, metadata={WATERMARK_KEY: delay_ms}))

    out_schema = _step_output_schema(passthrough)
    state_schema = T.StructType([T.StructField("cep_rules_state", T.BinaryType(), False)])
    step = AlertStep(
        store_dir, housekeeping_us, key_buckets, passthrough, late_rows=with_stats, release_delay_ms=release_delay_ms
    )

    def cep_alert_rules(key, frames, state):
        return step(key, frames, state)

    exploded = exploded.withColumn(BUCKET, bucket_expression([PKEY], key_buckets))
    out = exploded.groupBy(F.col(SPEC), F.col(BUCKET)).applyInPandasWithState(
        cep_alert_rules, out_schema, state_schema, "append", GroupStateTimeout.EventTimeTimeout
    )
    if with_stats:
        dead = dead_letter_columns(file=F.col(FILE)) if marked else []
        return out.select(*[F.col(name) for name in ALERT_NAMES], *dead, F.col(KIND), F.col(STATS))
    if metrics_name:
        calls = F.when(
            F.col(KIND) == KIND_STATS, F.struct(F.col("rule_id"), F.col("rule_version"), F.col(STATS).alias("stats"))
        )
        out = out.observe(metrics_name, F.collect_list(calls).alias("calls"))
    if marked:
        out = out.where(F.col(KIND).isin(KIND_MATCH, KIND_BAD)).select(
            *[F.col(name) for name in ALERT_NAMES], *dead_letter_columns(file=F.col(FILE))
        )
        return bad_row_counts(out, bad_rows_metrics)
    return out.where(F.col(KIND) == KIND_MATCH).select(*[F.col(name) for name in ALERT_NAMES])


# ----------------------------------------------------------------------------------- the driver
