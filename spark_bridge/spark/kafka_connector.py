"""Spark's Kafka connector on the classpath: the Spark settings that make ``format("kafka")`` work.

``kafka_spark_conf()`` returns the settings to give a new SparkSession (``{"spark.jars": "a.jar,b.jar,..."}``),
fetching the jars first when they are not cached. It imports nothing from cep and does not start Spark.

Why ``spark.jars`` with jars that Maven copies, rather than ``spark.jars.packages`` (Ivy), the other way a user
would do it (measured on a 2-core machine, see docs/kafka.md, "Spark's Kafka connector"):

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
this user. Fetching needs Maven (``mvn``) and Maven Central; nothing else.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from importlib import metadata
from pathlib import Path

GROUP = "org.apache.spark"
SCALA = "2.13"
ARTIFACT = f"spark-sql-kafka-0-10_{SCALA}"
MARKER = ".cep-jars"  # written last: the list of jars of a complete copy, one file name a line

# Artifacts that pyspark's own jars/ folder already has: excluded from the copy, so the connector's classpath
# holds no second (older) Hadoop, Scala, slf4j, lz4 or snappy.
_PROVIDED_BY_PYSPARK = [
    ("org.apache.hadoop", "*"),
    ("org.scala-lang", "*"),
    ("org.scala-lang.modules", "*"),
    ("org.slf4j", "*"),
    ("org.lz4", "*"),
    ("at.yawk.lz4", "*"),
    ("org.xerial.snappy", "*"),
    ("com.github.luben", "*"),
    ("com.google.code.findbugs", "*"),
    ("org.apache.spark", f"spark-tags_{SCALA}"),
]

_POM = """\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by cep (spark_bridge/spark/kafka_connector.py): the jars Spark's Kafka source and sink need beyond pyspark's. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cep.local</groupId>
  <artifactId>spark-kafka-connector-jars</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
      <exclusions>
{exclusions}
      </exclusions>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.8.1</version>
        <configuration>
          <includeScope>runtime</includeScope>
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>
"""


class KafkaConnectorError(RuntimeError):
    """Spark's Kafka connector is not available and could not be fetched; the message says how to get it."""


def pyspark_version() -> str:
    """The installed pyspark's version, without importing pyspark."""
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError as exc:
        raise KafkaConnectorError("pyspark is not installed: pip install 'cep[spark]'") from exc


def coordinates(spark_version: str | None = None) -> str:
    """``org.apache.spark:spark-sql-kafka-0-10_2.13:<version>``: the connector for this Spark version."""
    return f"{GROUP}:{ARTIFACT}:{spark_version or pyspark_version()}"


def cache_dir(spark_version: str | None = None) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cep" / f"{ARTIFACT}-{spark_version or pyspark_version()}"


def pom_text(spark_version: str) -> str:
    exclusions = "\n".join(
        f"        <exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
        for g, a in _PROVIDED_BY_PYSPARK
    )
    return _POM.format(group=GROUP, artifact=ARTIFACT, version=spark_version, exclusions=exclusions)


def fetch_command(folder: Path, mvn: str = "mvn") -> list[str]:
    return [mvn, "-B", "-q", "-f", str(folder / "pom.xml"), "dependency:copy-dependencies",
            f"-DoutputDirectory={folder}"]


def _cached_jars(folder: Path) -> list[str] | None:
    try:
        names = (folder / MARKER).read_text().split()
    except OSError:
        return None
    jars = [str(folder / name) for name in names]
    if not names or not all(os.path.isfile(j) for j in jars):
        return None
    return jars


def _user_jars(value: str, version: str) -> list[str]:
    path = Path(value).expanduser()
    jars = sorted(str(p) for p in path.glob("*.jar")) if path.is_dir() else [p for p in value.split(",") if p]
    missing = [j for j in jars if not os.path.isfile(j)]
    if not jars or missing:
        raise KafkaConnectorError(
            f"$CEP_SPARK_KAFKA_JARS={value!r} does not name existing jars"
            + (f" (missing: {', '.join(missing)})" if missing else "")
            + f"; it should hold {ARTIFACT}-{version}.jar and its dependencies (or unset it to fetch them)"
        )
    if not any(Path(j).name.startswith(f"{ARTIFACT}-") for j in jars):
        raise KafkaConnectorError(f"$CEP_SPARK_KAFKA_JARS={value!r} has no {ARTIFACT}-*.jar")
    return jars


def connector_jars(spark_version: str | None = None, *, fetch: bool = True) -> list[str]:
    """Paths of the connector's jars, fetched into the cache first when ``fetch`` and not cached yet."""
    version = spark_version or pyspark_version()
    override = os.environ.get("CEP_SPARK_KAFKA_JARS")
    if override:
        return _user_jars(override, version)
    folder = cache_dir(version)
    jars = _cached_jars(folder)
    if jars:
        return jars
    if not fetch:
        raise KafkaConnectorError(
            f"Spark's Kafka connector {coordinates(version)} is not in {folder}; fetch it with "
            f"`python -m cep.spark_bridge.spark.kafka_connector` (needs Maven and Maven Central), or run Spark with "
            f"--packages {coordinates(version)}, or point $CEP_SPARK_KAFKA_JARS at a folder holding "
            f"{ARTIFACT}-{version}.jar, spark-token-provider-kafka-0-10_{SCALA}-{version}.jar, kafka-clients-*.jar "
            "and commons-pool2-*.jar"
        )
    return fetch_connector(version)


def fetch_connector(spark_version: str | None = None) -> list[str]:
    """Copy the connector and the jars it needs beyond pyspark's from Maven Central into the cache folder."""
    version = spark_version or pyspark_version()
    folder = cache_dir(version)
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaConnectorError(
            f"Spark's Kafka connector {coordinates(version)} is not cached in {folder}, and fetching it needs Maven "
            f"('mvn' is not on PATH): apt-get install maven (or run Spark with --packages {coordinates(version)}, "
            "or set $CEP_SPARK_KAFKA_JARS to a folder holding the connector's jars)"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two processes fetching at once: the second waits, then finds it
        jars = _cached_jars(folder)
        if jars:
            return jars
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            (tmp / "pom.xml").write_text(pom_text(version))
            started = time.monotonic()
            done = subprocess.run(fetch_command(tmp, mvn), capture_output=True, text=True)
            names = sorted(p.name for p in tmp.glob("*.jar"))
            if done.returncode != 0 or not any(n.startswith(f"{ARTIFACT}-{version}") for n in names):
                output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr).strip().splitlines()
                not_served = any(marker in line for line in output
                                 for marker in ("Could not find artifact", "Failure to find", "was not found in"))
                hint = (f"Maven Central may not serve {coordinates(version)}: pin pyspark to a version whose "
                        f"connector it serves (pyspark 4.2.0 is)" if not_served else
                        "is Maven Central reachable")
                raise KafkaConnectorError(
                    f"could not fetch Spark's Kafka connector {coordinates(version)} with Maven (exit "
                    f"{done.returncode}): {hint}. Try again with `python -m cep.spark_bridge.spark.kafka_connector {version}`; "
                    "Maven said:\n" + "\n".join(line for line in output if line.startswith("[ERROR] Failed")
                                               or not line.startswith("[ERROR]"))[-1500:]
                )
            (tmp / MARKER).write_text("\n".join(names) + "\n")
            (tmp / "fetched.txt").write_text(f"{coordinates(version)} in {time.monotonic() - started:.1f} s\n")
            if folder.exists():
                shutil.rmtree(folder)
            tmp.rename(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    jars = _cached_jars(folder)
    assert jars, folder
    return jars


def kafka_spark_conf(spark_version: str | None = None, *, method: str = "jars", fetch: bool = True) -> dict[str, str]:
    """The Spark settings that put the Kafka connector on a new session's classpath.

    ``method="jars"`` (the default): ``{"spark.jars": "<cache>/spark-sql-kafka-0-10_2.13-4.2.0.jar,..."}``,
    fetching into the cache when needed (``fetch=False``: raise instead). ``method="packages"``:
    ``{"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"}``, resolved by Spark's Ivy at
    start-up. Both are static settings: they only act on a session that has not started yet. A caller that
    already has a ``spark.jars`` value appends to it (comma-separated).
    """
    version = spark_version or pyspark_version()
    if method == "packages":
        return {"spark.jars.packages": coordinates(version)}
    if method != "jars":
        raise ValueError(f"method must be 'jars' or 'packages', not {method!r}")
    return {"spark.jars": ",".join(connector_jars(version, fetch=fetch))}


if __name__ == "__main__":  # python -m cep.spark_bridge.spark.kafka_connector [SPARK_VERSION]: fetch, print the settings
    import sys

    try:
        conf = kafka_spark_conf(sys.argv[1] if len(sys.argv) > 1 else None)
    except KafkaConnectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    for key, value in conf.items():
        print(f"{key}={value}")
