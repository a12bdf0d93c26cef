"""An alert stream with its rules on the driver (``state="driver"``) that SIGKILLs its driver at a chosen point of a
micro-batch (run by tests/crash_points_driver.py for test_crash_points.py).

One file of INPUT per micro-batch; alerts to OUTPUT (Spark's file sink) and a SQLite sink.
``kill="POINT:BATCH"`` (``make_stream``'s argument) says where, in micro-batch ``BATCH``, the driver kills its own
process group (the Python driver and its JVM; ``crash_driver.kill_process_group``, which first waits for the
driver's other streams to reach their own points):

* ``after_state``: the rules ran and the micro-batch's state is saved (``driver-state/m-<id>.json``); nothing of
  the micro-batch is written;
* ``after_write``: the alerts, bad rows, outboxes and journal are written; Spark has not committed the batch;
* ``after_commit``: Spark has committed the batch; nothing of the next one has run.

The hook lives here, in the test's own driver, not in spark_bridge.
"""

from __future__ import annotations

from tests.crash_driver import kill_plan, kill_process_group

KILL_POINTS = ("after_state", "after_write", "after_commit")
WATERMARK = "5 seconds"


def make_stream(
    spark, rules: str, source: str, output: str, checkpoint: str, database: str, *, kill: str | None = None
):
    """The stream, with the kill point ``kill`` wrapped around its micro-batch (none without it)."""
    from pyspark.sql import types as T

    from cep.spark_bridge.alerting.stream import AlertStream
    from cep.spark_bridge.sinks.sql import SQLiteSink

    point, kill_batch = kill_plan(kill, KILL_POINTS)

    def die_at(here: str, batch_id: int) -> None:
        if here == point and batch_id == kill_batch:
            kill_process_group()

    schema = T.StructType(
        [
            T.StructField("symbol", T.StringType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("price", T.DoubleType()),
            T.StructField("_corrupt_record", T.StringType()),
        ]
    )
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(source)
    stream = AlertStream(
        spark,
        rules,
        df,
        checkpoint=checkpoint,
        output=output,
        sinks=[SQLiteSink(database)],
        watermark=WATERMARK,
        state="driver",
    )
    if point is not None:
        write_batch = stream._write_batch

        def write(batch, batch_id):
            die_at("after_commit", batch_id - 1)  # the previous batch is committed; this one has not started
            driver = stream.driver  # this stream's DriverState (made when the query started): its own kill point
            if "run" not in vars(driver):
                run_rules = driver.run

                def run(batch, batch_id):
                    out = run_rules(batch, batch_id)
                    die_at("after_state", batch_id)
                    return out

                driver.run = run
            write_batch(batch, batch_id)
            stream.lanes.drain()
            die_at("after_write", batch_id)

        stream._write_batch = write
    return stream
