"""Many keys per Python call: the partition keys of a stream grouped into a fixed number of buckets.

``applyInPandasWithState`` calls Python once per group per micro-batch, and each call costs pandas
work (a frame in, a frame out, the state column) that does not depend on how many rows it carries:
about 0.6 ms, against about 0.1 ms for the engine's own work on a key with a few rows
(``bench/streaming_overhead.py``). With 10,000 keys a micro-batch costs 10,000 of those calls. So the
Spark bridge groups by ``hash(partition key) mod KEY_BUCKETS`` instead, and one call handles every key
of a bucket: the frame is converted once, split by key in Python, each key goes through
``KeyedStream.process`` exactly as it would alone, and the outputs are joined into one frame.

A bucket's state is a ``KeyTable`` (``engine/key_table.py``): each key's own state bytes (``KeyedStream``'s,
untouched) and its timer. A key is called when it has rows, or when the watermark has reached its timer; the bucket asks
Spark for the earliest timer of its keys. Per key the calls are the ones ``LocalStream`` makes, which
is also built on a ``KeyTable``: the engine cannot tell the two apart, so the output is the same.

The bucket count is part of the checkpoint (a key's bucket must not change across a restart): a
checkpoint written with one count refuses to run with another (E0482).
"""

from __future__ import annotations

from collections.abc import Sequence

from cep.spark_bridge.spark.columns import quote

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.


# The number of buckets keys are hashed into. Each bucket costs one Python call per micro-batch in which
# it has rows or a due timer (about 1-2 ms of pandas work), and a bucket is the unit of parallelism:
# 64 keeps the fixed cost near 0.1 s a micro-batch on two cores while still spreading over 64 tasks.
# A stream with few keys gains nothing from buckets and loses nothing either (empty buckets cost nothing).
KEY_BUCKETS = 64


def bucket_expression(columns: Sequence[str], buckets: int):
    """The Spark column ``pmod(hash(columns), buckets)``: Murmur3, the hash Spark buckets tables with,
    stable across Spark versions, so a key keeps its bucket across restarts and upgrades."""
    from pyspark.sql import functions as F

    return F.pmod(F.hash(*[F.col(quote(c)) for c in columns]), F.lit(buckets))
