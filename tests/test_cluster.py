"""The streaming job on a real multi-process Spark cluster: a standalone master and a worker on 127.0.0.1.

The pip package has no sbin/ scripts; ``bin/spark-class`` starts the master and the worker (see
../shared/design/spark-notes.md). The job runs as its own driver process (tests/cluster_stream_job.py)
and its output, read back through Spark, must equal the pure-Python replay of the same events.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cep
from tests.cluster_stream_job import QUERY

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.spark
def test_stream_on_a_standalone_cluster(spark, tmp_path):
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(tmp_path / "work"), PYTHONPATH=str(ROOT))
    port, ui = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    logs = tmp_path / "logs"
    logs.mkdir()
    master = subprocess.Popen([str(_spark_class()), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(ui)], env=env,
                              stdout=open(logs / "master.log", "w"), stderr=subprocess.STDOUT)
    worker = None
    try:
        _wait_for(lambda: "Starting Spark master" in (logs / "master.log").read_text()
                  or "I have been elected leader" in (logs / "master.log").read_text(), 60, "the master")
        worker = subprocess.Popen([str(_spark_class()), "org.apache.spark.deploy.worker.Worker", master_url,
                                   "--host", "127.0.0.1", "--cores", "2", "--memory", "1G", "--webui-port", str(_free_port())],
                                  env=env, stdout=open(logs / "worker.log", "w"), stderr=subprocess.STDOUT)
        _wait_for(lambda: "Successfully registered with master" in (logs / "worker.log").read_text(), 90, "the worker")

        rnd = random.Random(7)
        start = dt.datetime(2024, 1, 2, 9, 30)
        events = [dict(symbol=s, ts=(start + dt.timedelta(minutes=i)).isoformat(), price=round(100 + rnd.uniform(-3, 3), 2))
                  for i in range(60) for s in ("ACME", "BOLT")]
        events.append(dict(symbol="ZZZ", ts=(start + dt.timedelta(days=1)).isoformat(), price=1.0))  # moves the watermark past all
        source = tmp_path / "in"
        source.mkdir()
        (source / "events.json").write_text("\n".join(json.dumps(e) for e in events))
        output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
        job = subprocess.run([sys.executable, str(ROOT / "tests" / "cluster_stream_job.py"), master_url, str(source),
                              str(output), str(checkpoint)], env=env, capture_output=True, text=True, timeout=600)
        assert job.returncode == 0, job.stderr[-3000:]

        got = sorted((r.symbol, r.start_ts, r.bottom, r.end_ts, r.n) for r in spark.read.parquet(str(output)).collect())
        rows = [dict(e, ts=dt.datetime.fromisoformat(e["ts"])) for e in events]
        expected = sorted(tuple(m.values()) for m in cep.compile(QUERY).run(rows))
        assert got == expected and len(expected) > 5
        assert "ExecutorAdded" in (logs / "master.log").read_text() or "Launching executor" in (logs / "master.log").read_text() \
            or "Asked to launch executor" in (logs / "worker.log").read_text()
    finally:
        for process in (worker, master):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
