"""The streaming job on a real multi-process Spark cluster: a standalone master and a worker on 127.0.0.1.

The pip package has no sbin/ scripts; ``bin/spark-class`` starts the master and the worker. The job runs as
its own driver process (tests/cluster_stream_job.py) and its output, read back through Spark, must equal the
pure-Python replay of the same events.
One master serves the module; a test may kill the worker (and its executor) and start another.
Every JVM here (master, worker, each job's driver, each executor) runs with the suite's quick-JVM flags
(tests/conftest.py); the executors get them through the job (``spark.executor.defaultJavaOptions``).

The executors run a Python **without cep**: a virtual environment that sees this one's libraries
(numpy, pandas, pyarrow, lark) but not its editable install of cep, and no ``PYTHONPATH``. cep ships
itself to them (``get_spark`` on a cluster master: ``spark_bridge/spark/shipping.py``); an executor
Python without pandas is refused at start-up with a message naming what is missing. That refusal is the job's
first application, in the same driver process as its stream (a driver JVM started once for both).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cep
from tests.cluster_stream_job import QUERY, REFUSED_PYTHON_ENV
from tests.conftest import ARCHIVE_OPTIONS, TEST_JVM_OPTIONS

ROOT = Path(__file__).resolve().parents[1]
REGISTERED = "Successfully registered with master"
LAUNCHED = "Asked to launch executor"  # a worker's log line for each executor it starts


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_for(predicate, seconds: float, what: str, interval: float = 0.5) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)  # polling a condition, with a deadline
    raise AssertionError(f"timed out waiting for {what}")


def _stop(process: subprocess.Popen) -> None:
    """End a process started here and everything in its process group (a worker's executors)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass


def _bare_python(folder: Path, *, libraries: bool) -> str:
    """A virtual environment's python without cep; with ``libraries``, it sees this environment's
    site-packages (a path in a .pth file: the editable install's own .pth hook is not run from there)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    if libraries:
        ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
        site = subprocess.run(
            [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        Path(site, "cep_test_libraries.pth").write_text(ours + "\n")
    return str(python)


def _imports(python: str, module: str, cwd: Path) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return (
        subprocess.run([python, "-c", f"import {module}"], cwd=str(cwd), env=env, capture_output=True).returncode == 0
    )


class Cluster:
    """A standalone master and its workers, each a process group of its own (the worker and its executors)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.logs.mkdir(parents=True)
        # Executors get the Python of a virtual environment without cep (see the module doc).
        self.worker_python = _bare_python(root / "worker-venv", libraries=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.env = dict(
            env,
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=self.worker_python,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            SPARK_WORKER_DIR=str(root / "work"),
            CEP_CACHE=str(root / "cache"),
            CEP_TEST_EXECUTOR_JVM_OPTIONS=" ".join(TEST_JVM_OPTIONS + ARCHIVE_OPTIONS),
        )
        port = _free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        self.master = self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(_free_port()),
        )
        self.workers: list[subprocess.Popen] = []
        _wait_for(
            lambda: "Starting Spark master" in self.log("master") or "I have been elected leader" in self.log("master"),
            60,
            "the master",
        )

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        with (self.logs / f"{name}.log").open("w") as log:
            return subprocess.Popen(
                [str(_spark_class()), *args], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_worker(self) -> str:
        name = f"worker-{len(self.workers)}"
        self.workers.append(
            self._spawn(
                name,
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "1G",
                "--webui-port",
                str(_free_port()),
            )
        )
        _wait_for(lambda: REGISTERED in self.log(name), 90, f"{name} to register")
        return name

    def kill_worker(self, index: int) -> None:
        """SIGKILL a worker and its executors at once, as a lost machine."""
        worker = self.workers[index]
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()

    def stop(self) -> None:
        for process in [*self.workers, self.master]:
            _stop(process)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        running.start_worker()
        yield running
    finally:
        running.stop()


def _events() -> list[dict]:
    rnd = random.Random(7)
    start = dt.datetime(2024, 1, 2, 9, 30)
    events = [
        dict(symbol=s, ts=(start + dt.timedelta(minutes=i)).isoformat(), price=round(100 + rnd.uniform(-3, 3), 2))
        for i in range(60)
        for s in ("ACME", "BOLT")
    ]
    events.append(
        dict(symbol="ZZZ", ts=(start + dt.timedelta(days=1)).isoformat(), price=1.0)
    )  # moves the watermark past all
    return events


def _write_files(source: Path, events: list[dict], files: int) -> None:
    """The events in ``files`` JSON files in time order (modification times fix the order they are read)."""
    source.mkdir()
    size = -(-len(events) // files)
    for index in range(files):
        path = source / f"events-{index:03d}.json"
        path.write_text("\n".join(json.dumps(e) for e in events[index * size : (index + 1) * size]))
        stamp = 1_700_000_000 + 10 * index
        os.utime(path, (stamp, stamp))


def _job(cluster: Cluster, source: Path, output: Path, checkpoint: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "tests" / "cluster_stream_job.py"),
        cluster.master_url,
        str(source),
        str(output),
        str(checkpoint),
        *extra,
    ]


def _expected(events: list[dict]) -> list[tuple]:
    rows = [dict(e, ts=dt.datetime.fromisoformat(e["ts"])) for e in events]
    return sorted(tuple(m.values()) for m in cep.compile(QUERY).run(rows))


def _output(spark, output: Path) -> list[tuple]:
    """The job's matches, read through Spark (committed files only)."""
    return sorted((r.symbol, r.start_ts, r.bottom, r.end_ts, r.n) for r in spark.read.parquet(str(output)).collect())


def _batch_in_flight(checkpoint: Path) -> int | None:
    """The id of a micro-batch whose offsets are logged and that is not committed, after a committed one."""
    offsets, commits = checkpoint / "offsets", checkpoint / "commits"
    if not offsets.exists():
        return None
    logged = sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    if not logged or logged[-1] < 1 or (commits / str(logged[-1])).exists():
        return None
    return logged[-1]


@pytest.mark.long
@pytest.mark.spark
def test_worker_lost_mid_batch_then_a_new_worker_and_the_output_is_complete(spark, cluster, tmp_path):
    """First, executors whose Python lacks pandas are refused at start-up, naming what is missing (an application of
    its own, in the job's driver process). Then the stream runs on the cluster's executors, which import cep from the
    zip the driver ships (their Python has no cep); a micro-batch after a committed one loses its worker and
    executor; a new worker's executor redoes it; the output, read through Spark, equals the replay, each match
    once."""
    assert not _imports(cluster.worker_python, "cep", tmp_path) and _imports(cluster.worker_python, "pandas", tmp_path)
    empty = _bare_python(tmp_path / "empty-venv", libraries=False)
    events = _events()
    source, output, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    # Two files, one a micro-batch: batch 0 commits state, batch 1 (or the no-data batch after it, which the
    # far-future row's watermark brings) is the one in flight when the worker goes.
    _write_files(source, events, 2)
    lost = len(cluster.workers) - 1  # the worker this job's first executor runs on
    launched_before = cluster.log(f"worker-{lost}").count(LAUNCHED)  # an earlier test's jobs ran there too
    log_path = tmp_path / "job.log"
    with log_path.open("w") as log:
        job = subprocess.Popen(
            _job(cluster, source, output, checkpoint, "1"),
            env=dict(cluster.env, **{REFUSED_PYTHON_ENV: empty}),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for(
            lambda: _batch_in_flight(checkpoint) is not None or job.poll() is not None,
            300,
            "a micro-batch in flight after a committed one",
            interval=0.05,
        )
        batch = _batch_in_flight(checkpoint)
        assert batch is not None, "the job ended before a worker could be lost:\n" + log_path.read_text()[-3000:]
        cluster.kill_worker(lost)  # the worker and its executor, in the middle of micro-batch `batch`
        assert not (checkpoint / "commits" / str(batch)).exists()  # it was still running when they went
        cluster.start_worker()
        job.wait(timeout=600)
    finally:
        _stop(job)
    assert job.returncode == 0, log_path.read_text()[-3000:]
    refusal = log_path.read_text().partition("refused: ")[2]  # what the job printed of its first application
    assert refusal.startswith("ShippingError: ") and "error[E0495]" in refusal, log_path.read_text()[-3000:]
    assert f"the executors' Python ({empty}" in refusal and "pandas missing" in refusal and "--python-env" in refusal
    assert (checkpoint / "commits" / str(batch)).exists()
    expected = _expected(events)
    got = _output(spark, output)
    assert got == expected and len(set(got)) == len(got) and len(expected) > 5
    # The stream ran on two executors in turn: the lost one and one on the new worker (the lost worker also
    # launched the refused application's executor, before the stream's).
    assert cluster.log(f"worker-{lost}").count(LAUNCHED) == launched_before + 2
    app_logs = cluster.log(f"worker-{lost + 1}")
    assert LAUNCHED in app_logs, app_logs[-2000:]
    assert list((Path(cluster.env["CEP_CACHE"]) / "ship").glob("cep-*.zip"))  # what the executors imported cep from
