"""A streaming cep job run as its own driver against a Spark master URL (used by test_cluster.py).

    python tests/cluster_stream_job.py MASTER_URL INPUT_DIR OUTPUT_DIR CHECKPOINT_DIR [FILES_PER_BATCH]

Streams the JSON event files in INPUT_DIR through the V-shape query with a file sink, then exits.
FILES_PER_BATCH (default: all at once) makes several micro-batches, e.g. to lose an executor mid-stream.
``$CEP_TEST_EXECUTOR_JVM_OPTIONS`` (set by test_cluster.py: the suite's C1-and-serial-collector flags) goes to the
executors' JVMs, which a worker starts itself, outside the scripts whose variables carry those flags.
"""

from __future__ import annotations

import os
import sys

import cep
from cep.spark_bridge.spark.session import get_spark

QUERY = """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, LAST(B.price) AS bottom, LAST(C.ts) AS end_ts, COUNT(*) AS n
  PATTERN (A B+ C+)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))"""


def main(master: str, source: str, output: str, checkpoint: str, files_per_batch: str = "") -> None:
    executor_jvm = os.environ.get("CEP_TEST_EXECUTOR_JVM_OPTIONS", "")
    conf = {"spark.executor.defaultJavaOptions": executor_jvm} if executor_jvm else {}
    # Two shuffle partitions: the cluster's two cores run a micro-batch's stateful tasks in one round.
    spark = get_spark(master, app_name="cep-cluster-test", shuffle_partitions=2, conf=conf)
    reader = spark.readStream.schema("symbol string, ts timestamp, price double")
    if files_per_batch:
        reader = reader.option("maxFilesPerTrigger", int(files_per_batch))
    events = reader.json(source)
    # The session timeout ends each symbol once the far-future row moves the watermark a day on, so
    # trailing matches (a greedy C+ at the end of the data) are final, as at the end of a replay.
    matches = cep.compile(QUERY).on_spark(events, watermark="1 minute", session_timeout="1 hour")
    query = (
        matches.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    finished = query.awaitTermination(540)  # raises if the query failed
    spark.stop()
    if not finished:
        sys.exit("the streaming query did not finish within 540 s")


if __name__ == "__main__":
    main(*sys.argv[1:6])
