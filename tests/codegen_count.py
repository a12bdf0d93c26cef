"""Spark's compilations of generated code, micro-batch by micro-batch: a stream whose generated code differs
between micro-batches (a number Spark writes into it) is compiled again at each one, on the stream's thread."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def compilations_per_micro_batch(spark, df, checkpoint: Path, read: Callable) -> list[int]:
    """Run the stream ``df`` over its input (``availableNow``), calling ``read(batch)`` on each micro-batch's
    DataFrame; Spark's compilations (its own counter, ``CodegenMetrics``) during each ``read``, in order."""
    compilations = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    compiled: list[int] = []

    def each(batch, batch_id):
        before = compilations.getCount()
        read(batch)
        compiled.append(compilations.getCount() - before)

    query = (
        df.writeStream.foreachBatch(each)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return compiled
