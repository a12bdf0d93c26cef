"""A streaming cep job run as its own driver against a Spark master URL (used by test_cluster.py).

    python tests/cluster_stream_job.py MASTER_URL INPUT_DIR OUTPUT_DIR CHECKPOINT_DIR [FILES_PER_BATCH]

Streams the JSON event files in INPUT_DIR through the V-shape query with a file sink, then exits.
FILES_PER_BATCH (default: all at once) makes several micro-batches, e.g. to lose an executor mid-stream.
With ``$CEP_TEST_REFUSED_PYTHON`` (an executor Python without pandas) the job first starts a session whose
executors run that Python, prints cep's refusal (``refused: ShippingError: ...``), stops that SparkContext and
starts the stream's on the same driver JVM: one driver process for the two applications test_cluster.py needs.
``$CEP_TEST_EXECUTOR_JVM_OPTIONS`` (set by test_cluster.py: the suite's C1-and-serial-collector flags) goes to the
executors' JVMs, which a worker starts itself, outside the scripts whose variables carry those flags.
"""

from __future__ import annotations

import os
import sys

import cep
from cep.spark_bridge.spark.session import get_spark
from cep.spark_bridge.spark.shipping import ShippingError

REFUSED_PYTHON_ENV = "CEP_TEST_REFUSED_PYTHON"

QUERY = """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, LAST(B.price) AS bottom, LAST(C.ts) AS end_ts, COUNT(*) AS n
  PATTERN (A B+ C+)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))"""


def refused_first(master: str, conf: dict[str, str]) -> None:
    """With ``$CEP_TEST_REFUSED_PYTHON``: a session whose executors run that Python, which cep must refuse at
    start-up; its refusal printed, that SparkContext stopped (the driver JVM stays for the next one)."""
    refused = os.environ.get(REFUSED_PYTHON_ENV)
    if not refused:
        return
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    stream_python = os.environ["PYSPARK_PYTHON"]
    os.environ["PYSPARK_PYTHON"] = refused  # read by each new SparkContext
    try:
        get_spark(master, app_name="cep-cluster-refused", shuffle_partitions=2, conf=conf)
    except ShippingError as error:
        print(f"refused: {type(error).__name__}: {error}", flush=True)
    else:
        sys.exit(f"the executors' Python {refused} was not refused")
    finally:
        session = SparkSession._instantiatedSession
        if session is not None:
            session.stop()
        elif SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        os.environ["PYSPARK_PYTHON"] = stream_python
        # The next get_spark ships cep again although this context's copy of the zip, still on sys.path, went
        # with the context's temporary files (spark_bridge/spark/shipping.py forgets it).


def main(master: str, source: str, output: str, checkpoint: str, files_per_batch: str = "") -> None:
    executor_jvm = os.environ.get("CEP_TEST_EXECUTOR_JVM_OPTIONS", "")
    conf = {"spark.executor.defaultJavaOptions": executor_jvm} if executor_jvm else {}
    refused_first(master, conf)
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
