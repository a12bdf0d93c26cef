"""How a micro-batch's rows come to the driver in the driver layout (``driver_state.DriverState.run``): read in
as many Spark tasks as the driver has cores, and handed to the rules in Kafka's own order.

Why fewer tasks: a Kafka micro-batch is one Spark task per topic partition (4 on the bench's topic), and every task
pays a fixed cost before its first row (its deserialization, the parse's projection generating and loading its
code, since ``from_json`` has none of its own: about 14 % of the read's task CPU at 20,000 ticks/s). The driver's
``local[N]`` master runs N tasks at a time, so a read in N tasks (``coalesce``, no shuffle: each task reads its
partitions one after another) keeps every core busy and pays that cost N times instead of once per partition.

Why the order is restored: with ``coalesce``, which partitions a task reads, and so the order in which the
partitions' rows reach the driver, is Spark's choice (it groups partitions by where their consumers are cached).
The rules order each key's rows by event time and breaks ties by every column the matcher reads
(``KeyedStream.release_order``), so the matches do not depend on the order the rows come in; what does is what
takes rows "in the order they come": which of two repeats of a ``dedup_key`` is kept (they may differ in columns
the key does not name, the Kafka offset at least), the row ids that count a late row once, and the order of the
late-row file's lines. Sorted by (topic, partition, offset), the micro-batch's rows are in one order whatever the
tasks were, the order of the read with one task per partition in partition order (tests/test_driver_read.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame

__all__ = ["KAFKA_ORDER", "in_kafka_order", "read_tasks", "rows_on_driver"]

# A Kafka message's place: the columns ``kafka.kafka_events`` gives every message (``KAFKA_COLUMNS``), in the
# order that sorts a micro-batch's rows as Kafka holds them.
KAFKA_ORDER = ("kafka_topic", "kafka_partition", "kafka_offset")


def read_tasks(spark) -> int:
    """The tasks a micro-batch is read in: the cores Spark runs tasks on (``local[N]``: N)."""
    return max(1, int(spark.sparkContext.defaultParallelism))


def rows_on_driver(batch: DataFrame, tasks: int) -> pd.DataFrame:
    """The micro-batch's rows as pandas (``toPandas``, Arrow). A Kafka micro-batch (every ``KAFKA_ORDER`` column
    present) is read in at most ``tasks`` tasks and its rows put in Kafka's order; any other source is read as
    Spark plans it, in its own order, as before."""
    if not set(KAFKA_ORDER) <= set(batch.columns):
        return batch.toPandas()
    return in_kafka_order(batch.coalesce(tasks).toPandas())


def in_kafka_order(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``'s rows by topic, partition and offset (stable; rows without a place, such as
    ``--idle-watermark``'s clock rows, last), on a fresh index; ``frame`` itself when already in that order."""
    import numpy as np
    import pandas as pd

    if len(frame) < 2:
        return frame
    topic, partition, offset = (frame[name] for name in KAFKA_ORDER)
    keys = [_ranks(offset), _ranks(partition)]
    if topic.nunique(dropna=False) > 1:  # codes in the topics' sorted order, a missing topic last
        codes, _ = pd.factorize(topic, sort=True, use_na_sentinel=True)
        keys.append(np.where(codes < 0, np.iinfo(np.int64).max, codes))
    order = np.lexsort(keys)
    if (order[1:] > order[:-1]).all():
        return frame
    return frame.take(order).reset_index(drop=True)


def _ranks(column: pd.Series):
    """A partition's or offset's column as numbers that sort it, a missing value last. Without one, Arrow hands
    the integers over as integers; with one (a clock row), as floats, exact below 2**53."""
    import numpy as np

    if column.dtype.kind in "iu":
        return column.to_numpy()
    return column.to_numpy(dtype="float64", na_value=np.inf)
