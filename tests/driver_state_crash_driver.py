"""An alert stream with its rules on the driver (``state="driver"``) that SIGKILLs itself at a chosen point of a
micro-batch (used by test_driver_state_crash.py).

    CEP_TEST_KILL_AT=POINT:BATCH python tests/driver_state_crash_driver.py RULES INPUT OUTPUT CHECKPOINT DATABASE

One file of INPUT per micro-batch; alerts to OUTPUT (Spark's file sink) and a SQLite sink. ``POINT``, in
micro-batch ``BATCH``, where the driver kills its own process group (the Python driver and its JVM):

* ``after_state``: the rules ran and the micro-batch's state is saved (``driver-state/m-<id>.json``); nothing of
  the micro-batch is written;
* ``after_write``: the alerts, bad rows, outboxes and journal are written; Spark has not committed the batch;
* ``after_commit``: Spark has committed the batch; nothing of the next one has run.

The hook lives here, in the test's own driver, not in spark_bridge.
"""

from __future__ import annotations

import os
import signal
import sys

WATERMARK = "5 seconds"


def _kill_plan() -> tuple[str | None, int]:
    spec = os.environ.get("CEP_TEST_KILL_AT", "")
    if not spec:
        return None, -1
    point, batch = spec.split(":")
    return point, int(batch)


def make_stream(spark, rules: str, source: str, output: str, checkpoint: str, database: str):
    """The stream, with the kill points wrapped around its micro-batch (none without ``CEP_TEST_KILL_AT``)."""
    from pyspark.sql import types as T

    from cep.spark_bridge.alerting.driver_state import DriverState
    from cep.spark_bridge.alerting.stream import AlertStream
    from cep.spark_bridge.sinks.sql import SQLiteSink

    point, kill_batch = _kill_plan()

    def die_at(here: str, batch_id: int) -> None:
        if here == point and batch_id == kill_batch:
            os.killpg(os.getpgid(0), signal.SIGKILL)

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
        run_rules = DriverState.run

        def run(self, batch, batch_id):
            out = run_rules(self, batch, batch_id)
            die_at("after_state", batch_id)
            return out

        DriverState.run = run
        write_batch = stream._write_batch

        def write(batch, batch_id):
            die_at("after_commit", batch_id - 1)  # the previous batch is committed; this one has not started
            write_batch(batch, batch_id)
            stream.lanes.drain()
            die_at("after_write", batch_id)

        stream._write_batch = write
    return stream


def main(rules: str, source: str, output: str, checkpoint: str, database: str) -> None:
    from cep.spark_bridge.spark.session import get_spark

    spark = get_spark("local[2]", shuffle_partitions=2)
    stream = make_stream(spark, rules, source, output, checkpoint, database)
    stream.refresh_rules(force=True)
    stream.start()
    stream.match_query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:6])
