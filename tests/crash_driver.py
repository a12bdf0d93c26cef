"""A streaming cep query whose ``foreachBatch`` SIGKILLs its driver at a chosen point of a micro-batch (run by
tests/crash_points_driver.py for test_crash_points.py).

The query's output goes through ``foreachBatch`` to one Parquet file per micro-batch,
``OUTPUT_DIR/batch-<id>.parquet``, written to a hidden temporary name and renamed: a micro-batch
delivered again after a crash replaces its own file, so the sink is idempotent by batch id, as
Spark's exactly-once contract for ``foreachBatch`` asks. ``kill="POINT:BATCH"`` (``start_query``'s argument) says
where, in micro-batch ``BATCH``, the driver kills its own process group (the Python driver and its JVM, as a crash
does):

* ``after_state``: the stateful operator has run and committed its state (``state/0/<p>/<id+1>.delta``),
  the sink has written nothing, Spark has not committed the batch (no ``commits/<id>``);
* ``after_sink``: the sink has written the batch's file, Spark has not committed the batch;
* ``after_commit``: Spark has committed the batch (``commits/<id>``) and logged the next one's
  offsets; nothing of the next batch has run.

A driver may run several streams, each with its own kill point (``$CEP_TEST_KILL_PARTIES`` of them): each one
that reaches its point waits there until all have, then ``kill_process_group`` kills them all at once, so one
SIGKILL crashes each stream at its own point. The hook lives here, in the test's own driver, not in spark_bridge.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

KILL_POINTS = ("after_state", "after_sink", "after_commit")
KILL_PARTIES_ENV = "CEP_TEST_KILL_PARTIES"
# From the first stream's arrival; shorter than the test's deadline for a whole driver (DRIVER_DEADLINE_S), and
# far longer than a micro-batch: a stream that never reaches its point ends the driver with RENDEZVOUS_MISSED
# and a line saying so, not with the SIGKILL the test waits for.
RENDEZVOUS_TIMEOUT_S = 200.0
RENDEZVOUS_MISSED = 3
WATERMARK, SESSION_TIMEOUT = "20 seconds", "60 seconds"

_rendezvous = threading.Barrier(int(os.environ.get(KILL_PARTIES_ENV, "1")))


def kill_process_group() -> None:
    """SIGKILL this driver's process group (the Python driver and its JVM) once every stream with a kill point in
    this driver has reached its own; a stream's thread that gets here first waits for the others."""
    try:
        _rendezvous.wait(RENDEZVOUS_TIMEOUT_S)
    except threading.BrokenBarrierError:
        print(f"not every stream reached its kill point within {RENDEZVOUS_TIMEOUT_S:g}s", file=sys.stderr, flush=True)
        os._exit(RENDEZVOUS_MISSED)
    os.killpg(os.getpgid(0), signal.SIGKILL)


def kill_plan(spec: str | None, points: tuple[str, ...]) -> tuple[str | None, int]:
    """``"POINT:BATCH"`` as (point, batch); (None, -1) for no kill."""
    if not spec:
        return None, -1
    point, batch = spec.split(":")
    if point not in points:
        raise ValueError(f"kill point {point!r} unknown (one of {', '.join(points)})")
    return point, int(batch)


def batch_path(output: str, batch_id: int) -> str:
    return os.path.join(output, f"batch-{batch_id:05d}.parquet")


def make_writer(output: str, kill: str | None):
    """The ``foreachBatch`` function: one file per micro-batch, killing the driver where ``kill`` says."""
    point, kill_batch = kill_plan(kill, KILL_POINTS)

    def die_at(here: str, batch_id: int) -> None:
        if here == point and batch_id == kill_batch:
            kill_process_group()

    def write(batch_df, batch_id: int) -> None:
        die_at("after_commit", batch_id - 1)  # the previous batch is committed; this one has not started
        frame = batch_df.toPandas()  # runs the stateful operator, which commits its state store
        die_at("after_state", batch_id)
        os.makedirs(output, exist_ok=True)
        tmp = os.path.join(output, f".batch-{batch_id:05d}.parquet.tmp")
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, batch_path(output, batch_id))
        die_at("after_sink", batch_id)

    return write


def start_query(
    spark, source: str, output: str, checkpoint: str, text: str, *, available_now: bool, kill: str | None = None
):
    from pyspark.sql import types as T

    import cep

    schema = T.StructType(
        [
            T.StructField("symbol", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("price", T.DoubleType()),
        ]
    )
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(source)
    out = cep.compile(text).on_spark(df, watermark=WATERMARK, session_timeout=SESSION_TIMEOUT)
    writer = out.writeStream.foreachBatch(make_writer(output, kill)).option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="0 seconds")
    return writer.start()
