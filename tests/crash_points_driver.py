"""A Spark driver running the two streams of test_crash_points.py's SIGKILL tests, one kill for both.

    CEP_TEST_KILL_PARTIES=2 CEP_TEST_KILL_AT=POINT:BATCH CEP_TEST_DRIVER_STATE_KILL_AT=POINT:BATCH \\
        python tests/crash_points_driver.py IN OUT CHECKPOINT QUERY_TEXT \\
            RULES ALERT_IN ALERT_OUT ALERT_CHECKPOINT DATABASE

The V-shape query's ``foreachBatch`` stream (tests/crash_driver.py: its first four arguments) and the alert stream
with its rules on the driver (tests/driver_state_crash_driver.py: the last five), each on its own input and
checkpoint, in one SparkSession. Each stream stops at its own kill point and waits for the other; then the driver
kills its whole process group. One JVM start crashes both streams where their tests ask.
"""

from __future__ import annotations

import sys


def main(source: str, output: str, checkpoint: str, text: str, *alert_args: str) -> None:
    from cep.spark_bridge.spark.session import get_spark
    from tests import crash_driver, driver_state_crash_driver

    spark = get_spark("local[2]", shuffle_partitions=2)
    crash_driver.start_query(spark, source, output, checkpoint, text, available_now=False)
    alerts = driver_state_crash_driver.make_stream(spark, *alert_args)
    alerts.refresh_rules(force=True)
    alerts.start()
    spark.streams.awaitAnyTermination()  # a query that fails ends the driver, with its error in the log


if __name__ == "__main__":
    main(*sys.argv[1:10])
