"""The test run's SparkSession: one with Spark's Kafka and Delta connectors, whatever started Spark before it.

A worker process of the suite runs many files in an order that changes with the file list (tests/conftest.py
orders them, xdist hands them out). A test that reaches Spark without the ``spark`` fixture (a doctest's
``get_spark()``, an in-process ``cep run --engine spark``) starts a session without the connectors; the
classpath is fixed when the JVM starts, so ``get_spark(kafka=True, delta=True)`` would then refuse, and every
Kafka or Delta test after it on that worker would fail. Here such a session, and its JVM, are stopped first.
"""

from __future__ import annotations

# The JVM ends when PySpark closes its standard input (PythonGatewayServer exits on EOF); a minute is ample.
GATEWAY_EXIT_SECONDS = 60


def has_connectors(session) -> bool:
    """Whether ``session`` resolves both connectors' data sources (Spark's own lookup)."""
    from cep.spark_bridge.spark.session import has_data_source, has_kafka_connector

    return has_kafka_connector(session) and has_data_source(session, "delta")


def stop_spark_and_its_jvm() -> None:
    """Stop the running SparkSession and the JVM behind it, so that the next session starts a JVM of its own
    (with that session's ``spark.jars``): PySpark's ``stop()`` alone keeps the JVM, and with it its classpath."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        (SparkSession._instantiatedSession or SparkSession.builder.getOrCreate()).stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    process = getattr(gateway, "proc", None)
    if process is not None:
        process.stdin.close()
        process.wait(GATEWAY_EXIT_SECONDS)
    SparkContext._gateway = None
    SparkContext._jvm = None


def session_with_connectors(master: str = "local[2]", app_name: str = "cep-tests"):
    """``get_spark(master, kafka=True, delta=True)``, after stopping a JVM whose classpath lacks either connector
    (a running session without them, or one already stopped, whose JVM the next session would reuse).
    Raises ``KafkaConnectorError``/``DeltaConnectorError`` only when a connector cannot be had."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from cep.spark_bridge.spark.session import get_spark

    if SparkContext._active_spark_context is not None:
        if not has_connectors(SparkSession._instantiatedSession or SparkSession.builder.getOrCreate()):
            stop_spark_and_its_jvm()
    elif SparkContext._gateway is not None:
        stop_spark_and_its_jvm()
    return get_spark(master, app_name=app_name, kafka=True, delta=True)
