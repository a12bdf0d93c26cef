"""Delta Lake's Spark connector on the classpath: the Spark settings that make ``format("delta")`` work.

``delta_spark_conf()`` returns the settings to give a new SparkSession (``{"spark.jars": "...", ...}``),
fetching ``io.delta:delta-spark_2.13`` and the jars it needs beyond pyspark's from Maven Central first when
they are not cached (``connectors``: where and how, the same way as Kafka's connector). It imports nothing from
cep and does not start Spark.

Which Delta: each Delta Lake release is built against one Spark minor version (delta-spark 4.4.0's pom
names spark-sql 4.2.0), so the version follows the installed pyspark (``DELTA_FOR_SPARK``); a pyspark
without an entry is refused with the way out rather than failing at the first query with a
``NoSuchMethodError``. ``$CEP_SPARK_DELTA_JARS`` (a folder or a list of jars) is used as given.

Besides the jars, Delta's SQL extension and its catalog: Delta 4 refuses even a plain read of a path
without them (DELTA_CONFIGURE_SPARK_SESSION_WITH_EXTENSION_AND_CATALOG). Its catalog hands every table that is
not a Delta table to Spark's own, so the session's other tables and views resolve through Spark's own catalog.
"""

from __future__ import annotations

from cep.spark_bridge.spark import connectors
from cep.spark_bridge.spark.connectors import SCALA, Connector

GROUP = "io.delta"
ARTIFACT = f"delta-spark_{SCALA}"
MODULE = "cep.spark_bridge.spark.delta_connector"
# Spark minor version -> the Delta Lake release built for it (checked against the poms on Maven Central).
DELTA_FOR_SPARK = {"4.2": "4.4.0"}


class DeltaConnectorError(RuntimeError):
    """Delta Lake's Spark connector is not available and could not be fetched; the message says how to get it."""


def delta_version(spark_version: str | None = None) -> str:
    """The delta-spark release for this Spark version (the installed pyspark's by default)."""
    spark_version = spark_version or connectors.pyspark_version(DeltaConnectorError)
    minor = ".".join(spark_version.split(".")[:2])
    if minor not in DELTA_FOR_SPARK:
        known = ", ".join(f"Spark {s} -> Delta {d}" for s, d in DELTA_FOR_SPARK.items())
        raise DeltaConnectorError(
            f"cep knows no Delta Lake release built for Spark {spark_version} ({known}); install a pyspark it "
            "knows, or point $CEP_SPARK_DELTA_JARS at the delta-spark and delta-storage jars built for yours"
        )
    return DELTA_FOR_SPARK[minor]


def connector(spark_version: str | None = None) -> Connector:
    version = delta_version(spark_version)
    return Connector(
        what="Delta Lake's Spark connector",
        group=GROUP,
        artifact=ARTIFACT,
        version=version,
        env_var="CEP_SPARK_DELTA_JARS",
        module=MODULE,
        error=DeltaConnectorError,
        needs=f"{ARTIFACT}-{version}.jar and delta-storage-{version}.jar (with the delta-kernel jars of its pom)",
    )


def coordinates(spark_version: str | None = None) -> str:
    """``io.delta:delta-spark_2.13:<version>``: Delta's connector for this Spark version."""
    return connector(spark_version).coordinates


def delta_spark_conf(spark_version: str | None = None, *, fetch: bool = True) -> dict[str, str]:
    """The Spark settings that put Delta's connector on a new session's classpath (static: they only act on a
    session that has not started yet; a caller with its own ``spark.jars`` appends to it, comma-separated)."""
    return {
        "spark.jars": ",".join(connectors.connector_jars(connector(spark_version), fetch=fetch)),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }


if __name__ == "__main__":  # python -m cep.spark_bridge.spark.delta_connector [SPARK_VERSION]: fetch, print settings
    connectors.main(delta_spark_conf)
