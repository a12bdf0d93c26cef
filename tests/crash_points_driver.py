"""A Spark driver running the streams of test_crash_points.py's SIGKILL tests, one kill for all.

    CEP_TEST_KILL_PARTIES=N python tests/crash_points_driver.py STREAMS_JSON

``STREAMS_JSON`` lists N streams, each ``{"kind": "vshape" | "alerts", "args": [...], "kill": "POINT:BATCH"}``:
the V-shape query's ``foreachBatch`` stream (tests/crash_driver.py; args: IN OUT CHECKPOINT QUERY_TEXT) and the
alert stream with its rules on the driver (tests/driver_state_crash_driver.py; args: RULES IN OUT CHECKPOINT
DATABASE), each on its own input and checkpoint, in one SparkSession. Each stream stops at its own kill point and
waits for the others; then the driver kills its whole process group. One JVM start crashes every stream where its
test asks.
"""

from __future__ import annotations

import json
import sys


def main(streams: str) -> None:
    from cep.spark_bridge.spark.session import get_spark
    from tests import crash_driver, driver_state_crash_driver

    spark = get_spark("local[2]", shuffle_partitions=2)
    for stream in json.loads(streams):
        if stream["kind"] == "vshape":
            crash_driver.start_query(spark, *stream["args"], available_now=False, kill=stream["kill"])
        else:
            alerts = driver_state_crash_driver.make_stream(spark, *stream["args"], kill=stream["kill"])
            alerts.refresh_rules(force=True)
            alerts.start()
    spark.streams.awaitAnyTermination()  # a query that fails ends the driver, with its error in the log


if __name__ == "__main__":
    main(sys.argv[1])
