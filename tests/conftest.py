"""Shared pytest setup: one SparkSession for the whole run (starting one costs 5-12 s here).

Tests that need Spark take the ``spark`` fixture and carry ``@pytest.mark.spark`` (so ``-m "not spark"``
gives the fast pure-Python run). The fixture skips, with the reason, only when Java is missing;
any other failure to start Spark is an error, not a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import settings

from cep.spark_bridge.spark.session import jvm_options_in_front
from tests.file_order import DurationRecorder, file_order, recorded_durations
from tests.jvm_options import (
    ARCHIVE_JVM_VARIABLES,
    TEST_JVM_OPTIONS,
    TEST_JVM_VARIABLES,
    archive_options,
    archive_path,
)

REPO = Path(__file__).resolve().parent.parent
# The flags that map tests/jvm_options.py's archive; none when it has not been built for this JDK and pyspark.
ARCHIVE_OPTIONS = archive_options(archive_path())

# Hypothesis's default 200 ms wall-clock deadline per example measures the neighbours on a shared 2-core
# machine (Spark workers, other test runs), not the code: off for every property test. Hangs are caught by
# pytest-timeout and by the CPU-time guards of the hostile-input tests.
settings.register_profile("cep", deadline=None)
settings.load_profile("cep")

# Every JVM the suite starts through Spark's scripts (its own SparkSession, each `cep run --engine spark` or
# `cep stream` subprocess, the small launcher JVM that builds each one's command line, a test cluster's
# master and worker) runs the C1 compiler only and the serial collector, and the drivers and daemons map the
# class-data archive that `make test` builds first, when it is there (tests/jvm_options.py says why and how).
# Users' JVMs keep Java's defaults (long streams want C2). The Kafka broker (tests/kafka_broker.py) sets the
# same compiler and collector flags itself.
for _variable in TEST_JVM_VARIABLES:  # the test flags in front: a developer's own flags, later on the line, win
    _options = TEST_JVM_OPTIONS + (ARCHIVE_OPTIONS if _variable in ARCHIVE_JVM_VARIABLES else ())
    os.environ[_variable] = jvm_options_in_front(_options, os.environ.get(_variable, ""))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        help="write each test file's seconds to tests/durations.json (the order make test's workers get files in)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "spark: needs a local SparkSession (Java 17+); deselect with -m 'not spark'")
    config.addinivalue_line("markers", "long: an end-to-end test of minutes (processes killed and restarted)")
    if config.getoption("record_durations") and not hasattr(config, "workerinput"):  # where every report arrives
        config.pluginmanager.register(DurationRecorder(config), "cep-duration-recorder")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:  # noqa: ARG001
    """Order files for ``make test``'s two workers: the longest first, by tests/durations.json
    (tests/file_order.py). Tests in a file keep their order."""
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    order = file_order(files, recorded_durations())
    items[:] = [item for path in order for item in files[path]]


def _java_missing_reason() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return "Spark tests need Java 17+ (no java on PATH or JAVA_HOME); e.g. apt-get install openjdk-17-jre-headless"
    try:
        subprocess.run([java, "-version"], capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"Spark tests need a working Java 17+ ({java} -version failed: {exc})"
    return None


@pytest.fixture(scope="session")
def spark():
    reason = _java_missing_reason()
    if reason:
        pytest.skip(reason)
    # Spark's Python workers must run this interpreter (the one with pandas/pyarrow and cep installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from cep.spark_bridge.spark.delta_connector import DeltaConnectorError
    from cep.spark_bridge.spark.kafka_connector import KafkaConnectorError
    from cep.spark_bridge.spark.session import get_spark
    from tests.spark_session import session_with_connectors

    # With Spark's Kafka connector (cached jars: about +0.5 s), so that the Kafka tests can read and write the
    # real broker in this session; the classpath is fixed when the JVM starts. Without Maven (and no cached
    # copy) the session starts without it, and only the tests that use Kafka on Spark fail, saying why.
    # Delta Lake's connector likewise (test_delta_spark.py reads and writes Delta tables in this session).
    # A session that an earlier test of this worker started without them (a doctest's get_spark()) is
    # replaced, JVM and all: whatever order the files run in, the connectors are there.
    try:
        session = session_with_connectors("local[2]", app_name="cep-tests")
    except (KafkaConnectorError, DeltaConnectorError) as exc:
        warnings.warn(f"the test SparkSession runs without Spark's Kafka or Delta connector: {exc}", stacklevel=1)
        session = get_spark("local[2]", app_name="cep-tests")
    yield session
    session.stop()
