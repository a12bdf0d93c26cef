"""Spark connectors that pyspark lacks (Kafka's, Delta Lake's): their jars fetched from Maven Central once, cached.

A ``Connector`` names one artifact and what a user is told when it is missing; ``connector_jars(connector)``
returns the paths of its jars, fetching them into ``${XDG_CACHE_HOME:-~/.cache}/cep/<artifact>-<version>/``
first when they are not there (shared by every clone and venv of this user). ``$<env_var>`` (a folder, or a
comma-separated list of jars) is used as given instead: the way to run where Maven Central cannot be reached.
Fetching needs Maven (``mvn``) and Maven Central; nothing else. It imports nothing from cep and does not start
Spark. Why ``spark.jars`` with jars that Maven copies rather than Ivy's ``spark.jars.packages``: see
``kafka_connector`` (only the jars pyspark lacks, no resolution and no network once cached, a missing connector
reported before Spark starts).

Which jars are kept: the pom excludes the groups pyspark certainly ships (Hadoop, Scala, slf4j, ...), and of
what Maven copies, a jar whose artifact pyspark's own ``jars/`` folder already holds (in any version) is
dropped, so that the classpath holds no second, older Jackson or Parquet beside Spark's.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata, util
from pathlib import Path

SCALA = "2.13"
MARKER = ".cep-jars"  # written last: the list of jars of a complete copy, one file name a line

# Artifacts that pyspark's own jars/ folder has: excluded in the pom, so that Maven does not even fetch them.
PROVIDED_BY_PYSPARK = (
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
)

_POM = """\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by cep (spark_bridge/spark/connectors.py): the jars {what} needs beyond pyspark's. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cep.local</groupId>
  <artifactId>{artifact}-jars</artifactId>
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

# name-1.2.3.jar, name_2.13-4.2.0.jar, zstd-jni-1.5.7-3.jar: the artifact is what precedes a dotted version.
_JAR_NAME = re.compile(r"(?P<artifact>.+)-(?P<version>\d+\.\d+[^/]*)\.jar")


@dataclasses.dataclass(frozen=True)
class Connector:
    """One Spark connector: its Maven coordinates and what a user is told when it is missing."""

    what: str  # "Spark's Kafka connector"
    group: str
    artifact: str
    version: str
    env_var: str  # a folder or a list of jars given by the user, used instead of the cache
    module: str  # python -m MODULE fetches it
    needs: str  # the jars a user-given folder must hold, for the message
    error: type[Exception] = RuntimeError
    not_served_hint: str = ""  # what to do when Maven Central does not serve this version

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def pyspark_version(error: type[Exception] = RuntimeError) -> str:
    """The installed pyspark's version, without importing pyspark."""
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError as exc:
        raise error("pyspark is not installed: pip install 'cep[spark]'") from exc


def cache_dir(artifact: str, version: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cep" / f"{artifact}-{version}"


def pom_text(group: str, artifact: str, version: str, what: str = "a Spark connector") -> str:
    exclusions = "\n".join(
        f"        <exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
        for g, a in PROVIDED_BY_PYSPARK
    )
    return _POM.format(group=group, artifact=artifact, version=version, exclusions=exclusions, what=what)


def fetch_command(folder: Path, mvn: str = "mvn") -> list[str]:
    return [
        mvn,
        "-B",
        "-q",
        "-f",
        str(folder / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={folder}",
    ]


def pyspark_artifacts() -> set[str]:
    """The artifacts of the jars pyspark ships (its ``jars/`` folder), without their versions."""
    spec = util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return set()
    folder = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return {found.group("artifact") for p in folder.glob("*.jar") if (found := _JAR_NAME.fullmatch(p.name))}


def cached_jars(folder: Path) -> list[str] | None:
    """The jars of a complete copy in ``folder`` (its marker lists them), or None."""
    try:
        names = (folder / MARKER).read_text().split()
    except OSError:
        return None
    jars = [str(folder / name) for name in names]
    if not names or not all(os.path.isfile(j) for j in jars):
        return None
    return jars


def _user_jars(connector: Connector, value: str) -> list[str]:
    path = Path(value).expanduser()
    jars = sorted(str(p) for p in path.glob("*.jar")) if path.is_dir() else [p for p in value.split(",") if p]
    missing = [j for j in jars if not os.path.isfile(j)]
    if not jars or missing:
        raise connector.error(
            f"${connector.env_var}={value!r} does not name existing jars"
            + (f" (missing: {', '.join(missing)})" if missing else "")
            + f"; it should hold {connector.artifact}-{connector.version}.jar and its dependencies "
            "(or unset it to fetch them)"
        )
    if not any(Path(j).name.startswith(f"{connector.artifact}-") for j in jars):
        raise connector.error(f"${connector.env_var}={value!r} has no {connector.artifact}-*.jar")
    return jars


def connector_jars(connector: Connector, *, fetch: bool = True) -> list[str]:
    """Paths of the connector's jars, fetched into the cache first when ``fetch`` and not cached yet."""
    override = os.environ.get(connector.env_var)
    if override:
        return _user_jars(connector, override)
    folder = cache_dir(connector.artifact, connector.version)
    jars = cached_jars(folder)
    if jars:
        return jars
    if not fetch:
        raise connector.error(
            f"{connector.what} {connector.coordinates} is not in {folder}; fetch it with "
            f"`python -m {connector.module}` (needs Maven and Maven Central), or run Spark with "
            f"--packages {connector.coordinates}, or point ${connector.env_var} at a folder holding {connector.needs}"
        )
    return fetch_connector(connector)


def fetch_connector(connector: Connector) -> list[str]:
    """Copy the connector and the jars it needs beyond pyspark's from Maven Central into the cache folder."""
    folder = cache_dir(connector.artifact, connector.version)
    mvn = shutil.which("mvn")
    if not mvn:
        raise connector.error(
            f"{connector.what} {connector.coordinates} is not cached in {folder}, and fetching it needs Maven "
            f"('mvn' is not on PATH): apt-get install maven (or run Spark with --packages {connector.coordinates}, "
            f"or set ${connector.env_var} to a folder holding the connector's jars)"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two processes fetching at once: the second waits, then finds it
        jars = cached_jars(folder)
        if jars:
            return jars
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            _fetch_into(connector, tmp, mvn)
            if folder.exists():
                shutil.rmtree(folder)
            tmp.rename(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    jars = cached_jars(folder)
    assert jars, folder
    return jars


def _fetch_into(connector: Connector, tmp: Path, mvn: str) -> None:
    (tmp / "pom.xml").write_text(pom_text(connector.group, connector.artifact, connector.version, connector.what))
    started = time.monotonic()
    done = subprocess.run(fetch_command(tmp, mvn), capture_output=True, text=True)
    main_jar = f"{connector.artifact}-{connector.version}"
    if done.returncode != 0 or not any(p.name.startswith(main_jar) for p in tmp.glob("*.jar")):
        output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr).strip().splitlines()
        not_served = any(
            marker in line
            for line in output
            for marker in ("Could not find artifact", "Failure to find", "was not found in")
        )
        served = connector.not_served_hint or f"Maven Central may not serve {connector.coordinates}"
        hint = served if not_served else "is Maven Central reachable"
        raise connector.error(
            f"could not fetch {connector.what} {connector.coordinates} with Maven (exit {done.returncode}): "
            f"{hint}. Try again with `python -m {connector.module}`; Maven said:\n"
            + "\n".join(line for line in output if line.startswith("[ERROR] Failed") or not line.startswith("[ERROR]"))[
                -1500:
            ]
        )
    provided = pyspark_artifacts()
    names = []
    for jar in sorted(tmp.glob("*.jar")):
        found = _JAR_NAME.fullmatch(jar.name)
        if found and found.group("artifact") in provided and not jar.name.startswith(main_jar):
            jar.unlink()  # pyspark has this artifact already (another version): keep Spark's own
        else:
            names.append(jar.name)
    (tmp / MARKER).write_text("\n".join(names) + "\n")
    (tmp / "fetched.txt").write_text(f"{connector.coordinates} in {time.monotonic() - started:.1f} s\n")


def main(conf) -> None:
    """``python -m MODULE``: fetch, print the settings (``conf``: the module's ``*_spark_conf``)."""
    try:
        settings = conf(sys.argv[1] if len(sys.argv) > 1 else None)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    for key, value in settings.items():
        print(f"{key}={value}")
