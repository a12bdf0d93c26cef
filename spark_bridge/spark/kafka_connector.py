"""Spark's Kafka connector on the classpath: the Spark settings that make ``format("kafka")`` work.

``kafka_spark_conf()`` returns the settings to give a new SparkSession (``{"spark.jars": "a.jar,b.jar,..."}``),
fetching the jars first when they are not cached. It imports nothing from cep and does not start Spark.

Why ``spark.jars`` with jars that Maven copies, rather than ``spark.jars.packages`` (Ivy), the other way a user
would do it (docs/kafka.md, "Spark's Kafka connector"):

- Only the four jars pyspark lacks are fetched and loaded: ``spark-sql-kafka-0-10_2.13``,
  ``spark-token-provider-kafka-0-10_2.13``, ``kafka-clients`` (3.9.x for Spark 4.2) and ``commons-pool2``,
  about 10 MB. Ivy resolves the connector's whole tree, so it also downloads Hadoop's client jars, Scala,
  slf4j, lz4 and snappy (about 70 MB) that pyspark already ships, and puts the older copies on the classpath.
- A warm cache is used without any resolution and without the network. Ivy resolves again at every start
  (a second or more), and its result depends on what is in ``~/.m2``: Spark's Ivy settings look there first.
- A missing connector is reported before Spark starts, naming the artifact, the version and a command to fetch
  it, instead of Spark's ``Failed to find data source: kafka`` at the first query.

``kafka_spark_conf(method="packages")`` gives the Ivy form for those who prefer it (nothing is fetched here).

Where the jars go: ``$CEP_SPARK_KAFKA_JARS`` (a folder, or a comma-separated list of jars, used as given:
the way to run where Maven Central cannot be reached), else
``${XDG_CACHE_HOME:-~/.cache}/cep/spark-sql-kafka-0-10_2.13-<version>/``, shared by every clone and venv of
this user. Fetching needs Maven (``mvn``) and Maven Central; nothing else (``connectors``: how).
"""

from __future__ import annotations

from pathlib import Path

from cep.spark_bridge.spark import connectors
from cep.spark_bridge.spark.connectors import MARKER, SCALA, Connector  # noqa: F401 - MARKER: part of this API

GROUP = "org.apache.spark"
ARTIFACT = f"spark-sql-kafka-0-10_{SCALA}"
MODULE = "cep.spark_bridge.spark.kafka_connector"


class KafkaConnectorError(RuntimeError):
    """Spark's Kafka connector is not available and could not be fetched; the message says how to get it."""


def pyspark_version() -> str:
    """The installed pyspark's version, without importing pyspark."""
    return connectors.pyspark_version(KafkaConnectorError)


def connector(spark_version: str | None = None) -> Connector:
    """The Kafka connector built for this Spark version (it shares Spark's version number)."""
    version = spark_version or pyspark_version()
    return Connector(
        what="Spark's Kafka connector",
        group=GROUP,
        artifact=ARTIFACT,
        version=version,
        env_var="CEP_SPARK_KAFKA_JARS",
        module=MODULE,
        error=KafkaConnectorError,
        not_served_hint=f"Maven Central may not serve {GROUP}:{ARTIFACT}:{version}: pin pyspark to a version whose "
        "connector it serves (pyspark 4.2.0 is)",
        needs=f"{ARTIFACT}-{version}.jar, spark-token-provider-kafka-0-10_{SCALA}-{version}.jar, kafka-clients-*.jar "
        "and commons-pool2-*.jar",
    )


def coordinates(spark_version: str | None = None) -> str:
    """``org.apache.spark:spark-sql-kafka-0-10_2.13:<version>``: the connector for this Spark version."""
    return connector(spark_version).coordinates


def cache_dir(spark_version: str | None = None) -> Path:
    return connectors.cache_dir(ARTIFACT, spark_version or pyspark_version())


def pom_text(spark_version: str) -> str:
    return connectors.pom_text(GROUP, ARTIFACT, spark_version, "Spark's Kafka source and sink")


def connector_jars(spark_version: str | None = None, *, fetch: bool = True) -> list[str]:
    """Paths of the connector's jars, fetched into the cache first when ``fetch`` and not cached yet."""
    return connectors.connector_jars(connector(spark_version), fetch=fetch)


def fetch_connector(spark_version: str | None = None) -> list[str]:
    """Copy the connector and the jars it needs beyond pyspark's from Maven Central into the cache folder."""
    return connectors.fetch_connector(connector(spark_version))


def kafka_spark_conf(spark_version: str | None = None, *, method: str = "jars", fetch: bool = True) -> dict[str, str]:
    """The Spark settings that put the Kafka connector on a new session's classpath.

    ``method="jars"`` (the default): ``{"spark.jars": "<cache>/spark-sql-kafka-0-10_2.13-4.2.0.jar,..."}``,
    fetching into the cache when needed (``fetch=False``: raise instead). ``method="packages"``:
    ``{"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"}``, resolved by Spark's Ivy at
    start-up. Both are static settings: they only act on a session that has not started yet. A caller that
    already has a ``spark.jars`` value appends to it (comma-separated).
    """
    if method == "packages":
        return {"spark.jars.packages": coordinates(spark_version)}
    if method != "jars":
        raise ValueError(f"method must be 'jars' or 'packages', not {method!r}")
    return {"spark.jars": ",".join(connector_jars(spark_version, fetch=fetch))}


if (
    __name__ == "__main__"
):  # python -m cep.spark_bridge.spark.kafka_connector [SPARK_VERSION]: fetch, print the settings
    connectors.main(kafka_spark_conf)
