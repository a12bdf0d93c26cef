"""Spark's call on the column-wise path: one ``applyInPandasWithState`` call for a bucket of keys, every
key at once, its state one ``ColumnarTable``."""

from __future__ import annotations

import numpy as np

from cep.spark_bridge.engine.column_table import ColumnarTable
from cep.spark_bridge.engine.columnar.step import ColumnarStep
from cep.spark_bridge.engine.keyed import StepResult


def step_bucket(spark_step, cstep: ColumnarStep, pdf, state, watermark_us: int):
    """``key_table.step_bucket`` on the column-wise path: one Spark call for a bucket of keys, every key
    at once. Returns (the call's ``StepResult``, rows and late rows in the per-key path's order; the table)."""
    engine = cstep.engine
    table = ColumnarTable.decode(state.get[0] if state.exists else None, cstep.columns, spark_step.key_buckets, engine)
    keys: list[tuple] = []
    codes = np.zeros(0, dtype=np.int64)
    columns: dict = {name: [] for name in cstep.columns}
    event_us, null_time, rejected = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), None
    if pdf is not None:
        keys, codes, columns, event_us, null_time, rejected = spark_step.bucket_inputs(pdf)
    found = cstep.step(table, keys, codes, columns, event_us, null_time, watermark_us, rejected)
    merged = StepResult(state=None, timer_us=None, stats=found.stats)
    merged.rows, merged.match_ids = found.in_call_order()
    merged.late = sorted(found.late, key=lambda item: (codes[item[0]], item[0]))
    return merged, table
