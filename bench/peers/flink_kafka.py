"""Flink's Kafka SQL connector for the Kafka peer of bench/kafka_e2e.py: fetched by Maven once, then cached.

``connector_jar()`` returns the jar's path, or a sentence saying what was tried and what Maven answered.
The jar goes into ``${XDG_CACHE_HOME:-~/.cache}/cep/flink-sql-connector-kafka-<version>/`` (as the broker's
jars do, tests/kafka_broker.py) through ``bench/peers/flink_kafka_pom.xml``.

The version: Maven Central serves ``org.apache.flink:flink-sql-connector-kafka`` up to 5.0.0-2.2 (built for
Flink 2.2) and none for Flink 2.3, the PyFlink of bench/.venv-flink (``flink.FLINK_PACKAGE``); Flink's
connector API is stable across a minor version, and the bench reports whether the job runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "flink_kafka_pom.xml"
CONNECTOR = "org.apache.flink:flink-sql-connector-kafka"
CONNECTOR_VERSION = "5.0.0-2.2"
FETCH_TIMEOUT_S = 600  # one 10 MB jar, plus Maven's own plugins on a fresh ~/.m2


def cache_dir(version: str = CONNECTOR_VERSION) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cep" / f"flink-sql-connector-kafka-{version}"


def connector_jar(version: str = CONNECTOR_VERSION) -> tuple[Path | None, str]:
    """(the jar, "") when it is cached or fetched now; (None, why not) otherwise."""
    folder = cache_dir(version)
    jar = folder / f"flink-sql-connector-kafka-{version}.jar"
    if jar.is_file():
        return jar, ""
    mvn = shutil.which("mvn")
    if not mvn:
        return None, "Maven ('mvn') is not on PATH"
    command = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(POM),
        f"-Dflink.kafka.connector.version={version}",
        "dependency:copy",
        f"-DoutputDirectory={folder}",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"`mvn dependency:copy` of {CONNECTOR}:{version} took over {FETCH_TIMEOUT_S} s"
    if done.returncode != 0 or not jar.is_file():
        answer = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line][:2]
        return None, f"`mvn dependency:copy` of {CONNECTOR}:{version} failed: {' '.join(answer) or done.returncode}"
    return jar, ""


if __name__ == "__main__":
    found, why = connector_jar()
    print(found or why)
