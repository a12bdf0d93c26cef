"""Flink SQL MATCH_RECOGNIZE in streaming mode, Kafka topic in, Kafka topic out (inside bench/.venv-flink).

    bench/.venv-flink/bin/python bench/peers/flink_kafka_runner.py SPEC.json

SPEC.json: ``{"jar": path of flink-sql-connector-kafka, "bootstrap": "host:port", "source_topic": name,
"sink_topic": name, "sql": a MATCH_RECOGNIZE over ``ticks``, "watermark_ms": n, "parallelism": n,
"checkpoint_dir": dir, "checkpoint_interval": "10s"}``. The source table ``ticks`` has the columns of
bench/kafka_e2e.py's messages (symbol, ts, price), ``ts`` an event-time attribute with the watermark
``ts - watermark_ms``; the matches go to ``sink_topic`` as JSON (Kafka connector, at least once), one
message per match, as soon as the operator emits it. Prints ``running <job id>`` once the job is
submitted, then runs until SIGTERM (the job is cancelled) or until the job fails (exit 1, cause on stderr).
bench/kafka_e2e.py starts it beside ``cep stream`` on the same topic.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

SOURCE_DDL = """CREATE TEMPORARY TABLE ticks (
  symbol STRING, ts TIMESTAMP_LTZ(3), price DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '{watermark_s:.3f}' SECOND
) WITH (
  'connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{bootstrap}',
  'properties.group.id' = 'flink-bench', 'scan.startup.mode' = 'earliest-offset',
  'format' = 'json', 'json.timestamp-format.standard' = 'ISO-8601', 'json.fail-on-missing-field' = 'true'
)"""
# CREATE TABLE AS: the sink's columns are the query's, whatever the measures' types.
SINK_CTAS = """CREATE TABLE flink_alerts WITH (
  'connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{bootstrap}',
  'format' = 'json', 'json.timestamp-format.standard' = 'ISO-8601', 'sink.delivery-guarantee' = 'at-least-once'
) AS {select}"""


def main() -> int:
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("pipeline.jars", f"file://{spec['jar']}")
    conf.set("parallelism.default", str(spec["parallelism"]))
    # Checkpoints as a production job has them (the Kafka source's offsets, the operator's state); the
    # at-least-once sink flushes at each one but sends every record as it comes, so they do not add latency.
    conf.set("execution.checkpointing.interval", spec["checkpoint_interval"])
    conf.set("execution.checkpointing.dir", f"file://{spec['checkpoint_dir']}")
    env.execute_sql(
        SOURCE_DDL.format(
            watermark_s=spec["watermark_ms"] / 1000, topic=spec["source_topic"], bootstrap=spec["bootstrap"]
        )
    )
    result = env.execute_sql(
        SINK_CTAS.format(topic=spec["sink_topic"], bootstrap=spec["bootstrap"], select=spec["sql"])
    )
    client = result.get_job_client()
    print(f"running {client.get_job_id()}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(1.0):
        state = str(client.get_job_status().result())
        if state in ("FAILED", "CANCELED", "FINISHED"):
            try:
                client.get_job_execution_result().result()
            except Exception as error:  # noqa: BLE001 - the job's cause, for the bench's report
                print(f"job {state}: {str(error).strip().splitlines()[0][:500]}", file=sys.stderr, flush=True)
            return 1
    client.cancel().result()
    time.sleep(1.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
