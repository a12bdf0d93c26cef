"""kafka_spark_conf(): the settings that put Spark's Kafka connector on a session's classpath, and its errors.

No broker here (test_spark_kafka.py proves the jars work); these check what a user is told, and one Spark
process of its own checks the refusal of a session already running without the connector.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cep.spark_bridge.spark import kafka_connector as kc


def test_packages_form_names_the_connector_of_the_installed_pyspark():
    from importlib import metadata

    version = metadata.version("pyspark")
    assert kc.kafka_spark_conf(method="packages") == {
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"
    }
    with pytest.raises(ValueError):
        kc.kafka_spark_conf(method="ivy")


def test_the_generated_pom_excludes_what_pyspark_ships():
    pom = kc.pom_text("4.2.0")
    assert "<artifactId>spark-sql-kafka-0-10_2.13</artifactId>" in pom and "<version>4.2.0</version>" in pom
    for group in ("org.apache.hadoop", "org.scala-lang", "org.slf4j"):
        assert f"<exclusion><groupId>{group}</groupId><artifactId>*</artifactId></exclusion>" in pom


def test_a_folder_of_jars_given_by_the_user_is_used_as_is(tmp_path, monkeypatch):
    for name in ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar"):
        (tmp_path / name).write_bytes(b"PK")
    monkeypatch.setenv("CEP_SPARK_KAFKA_JARS", str(tmp_path))
    jars = kc.kafka_spark_conf("4.2.0")["spark.jars"].split(",")
    assert sorted(Path(j).name for j in jars) == ["kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar"]


def test_a_user_folder_without_the_connector_is_refused(tmp_path, monkeypatch):
    (tmp_path / "kafka-clients-3.9.2.jar").write_bytes(b"PK")
    monkeypatch.setenv("CEP_SPARK_KAFKA_JARS", str(tmp_path))
    with pytest.raises(kc.KafkaConnectorError, match="spark-sql-kafka-0-10_2.13"):
        kc.kafka_spark_conf("4.2.0")


def test_not_cached_and_fetch_off_says_what_to_fetch_and_how(tmp_path, monkeypatch):
    monkeypatch.delenv("CEP_SPARK_KAFKA_JARS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(kc.KafkaConnectorError) as info:
        kc.kafka_spark_conf("4.2.0", fetch=False)
    message = str(info.value)
    assert "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0" in message
    assert str(tmp_path / "cep" / "spark-sql-kafka-0-10_2.13-4.2.0") in message
    assert "python -m cep.spark_bridge.spark.kafka_connector" in message and "--packages" in message


def test_without_maven_the_error_says_to_install_it(tmp_path, monkeypatch):
    monkeypatch.delenv("CEP_SPARK_KAFKA_JARS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(kc.KafkaConnectorError, match=r"'mvn' is not on PATH\): apt-get install maven") as info:
        kc.kafka_spark_conf("4.2.0")
    assert "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0" in str(info.value)


def test_a_complete_cache_is_used_without_maven(tmp_path, monkeypatch):
    monkeypatch.delenv("CEP_SPARK_KAFKA_JARS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no mvn: the cache alone must do
    folder = tmp_path / "cep" / "spark-sql-kafka-0-10_2.13-4.2.0"
    folder.mkdir(parents=True)
    names = ["commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar"]
    for name in names:
        (folder / name).write_bytes(b"PK")
    (folder / "stray-old.jar").write_bytes(b"PK")  # not in the marker's list: not used
    (folder / kc.MARKER).write_text("\n".join(names) + "\n")
    assert kc.kafka_spark_conf("4.2.0") == {"spark.jars": ",".join(str(folder / n) for n in names)}


def test_a_session_already_running_without_the_connector_is_refused_and_the_tests_session_replaces_it():
    """get_spark(kafka=True) after a session started without the connector: the lookup of the "kafka" data
    source fails inside Spark, which PySpark raises as an AnalysisException; cep must say what to do instead
    of passing that on. The suite's own session (tests/spark_session.py, behind the ``spark`` fixture) then
    replaces that session, JVM and all, with one that has both connectors: a doctest's get_spark() run
    before the first Kafka or Delta test of a worker cannot leave them without. In a process of its own
    (one JVM start for both): the test session of this run has the connectors."""
    import os
    import subprocess
    import sys

    script = (
        "from cep.spark_bridge.spark.session import get_spark\n"
        "from cep.spark_bridge.spark.kafka_connector import KafkaConnectorError\n"
        "from tests.spark_session import has_connectors, session_with_connectors\n"
        "get_spark('local[1]', app_name='no-kafka')\n"
        "try:\n"
        "    get_spark('local[1]', app_name='no-kafka', kafka=True)\n"
        "except KafkaConnectorError as exc:\n"
        "    print('refused:', exc)\n"
        "replaced = session_with_connectors('local[1]', app_name='with-connectors')\n"
        "print('replaced:', has_connectors(replaced), replaced.range(3).count())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=str(Path(__file__).resolve().parents[2])),
    )
    assert "refused: a SparkSession is already running without Spark's Kafka connector" in done.stdout, done.stderr[
        -2000:
    ]
    assert "replaced: True 3" in done.stdout, done.stderr[-2000:]
