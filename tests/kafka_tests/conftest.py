"""Fixtures of the Kafka tests: one real broker for the whole session, and fresh topics per test.

The broker (tests/kafka_broker.py) starts at the first test that asks for it, in about 4 s once its jars are
cached (the first run on a machine copies them from Maven Central, about 10 s), and stops at the end of the
session. Its logs stay under pytest's basetemp (the last three runs are kept); when a test failed, the summary
names the folder. Java missing is a skip with the reason, as for Spark; any other failure to start is an error.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid

import pytest

from tests.kafka_broker import KafkaBroker

_STARTED: list[KafkaBroker] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka: talks to the real Kafka broker of the session (tests/kafka_broker.py)")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> KafkaBroker:
    java_home = os.environ.get("JAVA_HOME")
    if not (os.path.exists(os.path.join(java_home, "bin", "java")) if java_home else shutil.which("java")):
        pytest.skip(
            "the Kafka broker needs Java 17+ (no java on PATH or JAVA_HOME); "
            "e.g. apt-get install openjdk-17-jre-headless"
        )
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
    _STARTED.append(broker)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def kafka_topic(kafka_broker: KafkaBroker, request: pytest.FixtureRequest):
    """``kafka_topic(partitions=1, config=None, create=True) -> name``: a new topic named after the test."""

    def make(partitions: int = 1, *, config: dict | None = None, create: bool = True, suffix: str = "") -> str:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80]
        name = f"{base}{'-' + suffix if suffix else ''}-{uuid.uuid4().hex[:8]}"
        if create:
            kafka_broker.create_topics({name: partitions}, config=config)
        return name

    return make


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if _STARTED and exitstatus != 0:
        for broker in _STARTED:
            terminalreporter.write_line(f"Kafka broker logs ({broker.describe()}): {broker.logs}")
