"""The flags of every JVM the suite starts through Spark's scripts, and the class-data archive they share.

**Quick JVMs.** The C1 compiler only and the serial collector (``TEST_JVM_OPTIONS``): the suite's JVMs live
seconds to minutes on tiny data, where C2's compile threads and a parallel collector's threads cost more CPU
than they save; on a shared 2-core machine that CPU is wall time (docs/testing.md, "What keeps it short").

**Application class-data sharing (AppCDS).** A Spark driver loads and verifies 15-20k classes from Spark's
jars at every start, the same classes each time. ``python -m tests.jvm_options`` (``make test`` runs it first)
runs one driver of the suite's kind to its end with ``-XX:ArchiveClassesAtExit``: the JVM writes the classes
it loaded, parsed and verified, into an archive that later JVMs map instead of loading those classes again
(JDK 12+ dynamic archive, on top of the JDK's own). The archive is cached like the connectors' jars, under
``${XDG_CACHE_HOME:-~/.cache}/cep/jvm-archive/``, named by a key of the JDK and Spark's jars (``archive_path``):
a new JDK or pyspark gives a new name, so a stale archive is never picked up, and is built again on the next
``make test``.

A JVM given an archive it cannot use (another JDK, a classpath that does not start with the archive's, a
file removed) runs without it: the archive is only a cache. The JVM would say so on its standard output
(``[warning][cds,dynamic] Unable to use shared archive``), which some tests compare, so ``-Xlog:cds*=off``
silences the ``cds`` logging. A file cut short would crash the JVM as it maps it, so the archive is written
under a temporary name, checked with ``-Xshare:on`` (which fails instead of running without it) against the
classpath its driver had, and only then renamed into place. Without the archive (a run of pytest alone on a
fresh machine) every test runs as before, each JVM loading its classes itself.

One archive serves the drivers (``SPARK_SUBMIT_OPTS``), the test cluster's master and worker
(``SPARK_DAEMON_JAVA_OPTS``) and its executors: Spark's launcher gives them one classpath (Spark's conf
directory, the slf4j jar, ``jars/*``). Not the launcher JVM before each (``jars/*`` alone, and a few hundred
classes: 0.3 CPU-seconds) nor the Kafka broker (Kafka's own jars: its own archive, ``tests/kafka_broker.py``
``build_archive``, which ``main`` builds too).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# SPARK_SUBMIT_OPTS reaches the driver JVM (spark-submit), SPARK_LAUNCHER_OPTS the launcher that runs before
# it, SPARK_DAEMON_JAVA_OPTS the standalone master and worker of tests/test_cluster.py.
TEST_JVM_VARIABLES = ("SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS", "SPARK_DAEMON_JAVA_OPTS")
# The variables whose JVMs have the drivers' classpath, and so can map the archive.
ARCHIVE_JVM_VARIABLES = ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS")
# The JVM's messages about the archive (chiefly "Unable to use shared archive" when it cannot) go to its
# standard output, which tests compare: off. Errors that stop the JVM are not logging and still show.
SILENT_ARCHIVE = "-Xlog:cds*=off"
# An archive is valid for one JDK and one install of pyspark (its jars' paths, sizes and times), so each
# fresh virtualenv needs its own; each is about 170 MB. Writing a new one keeps this many of the others, the
# most recently used (several worktrees of the same machine each use their own).
OTHER_ARCHIVES_KEPT = 3
# Writing the archive at the builder driver's exit took 2-3 minutes at a load average of 10 (it walks every
# loaded class); PySpark's own wait for its JVM is far shorter.
ARCHIVE_WRITE_SECONDS = 900


def java_executable() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    return java if java and os.path.exists(java) else None


def _spark_jars() -> Path | None:
    spec = importlib.util.find_spec("pyspark")  # not imported: conftest computes the key at every start
    return None if spec is None or spec.origin is None else Path(spec.origin).resolve().parent / "jars"


def archive_key() -> str | None:
    """A digest of what the archive is only valid for: the JDK (its files), Spark's jars (names, sizes,
    times; their directory too, which the classpath names) and the flags it is built with. None without Java
    or pyspark."""
    java, jars = java_executable(), _spark_jars()
    if java is None or jars is None or not jars.is_dir():
        return None
    java_home = Path(os.path.realpath(java)).parent.parent
    digest = hashlib.sha256()
    for part in (str(java_home), *TEST_JVM_OPTIONS):
        digest.update(part.encode() + b"\0")
    for path in [java_home / "release", *sorted(java_home.glob("lib/server/*"))]:
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    digest.update(str(jars).encode() + b"\0")
    for jar in sorted(jars.iterdir()):
        stat = jar.stat()
        digest.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def archive_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cep" / "jvm-archive"


def archive_path() -> Path | None:
    key = archive_key()
    return None if key is None else archive_dir() / f"spark-driver-{key}.jsa"


def archive_options(path: Path | None) -> tuple[str, ...]:
    """The flags that map ``path``, or none when there is no archive there (yet)."""
    if path is None or not path.is_file():
        return ()
    return (f"-XX:SharedArchiveFile={path}", SILENT_ARCHIVE)


def _classpath_of(pid: int) -> str:
    """The ``-cp`` of the running JVM ``pid`` (what Spark's launcher gave the driver)."""
    arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return arguments[arguments.index(b"-cp") + 1].decode()


_WORKLOAD_SAMPLE = ("patterns/v_shape.sql", "patterns/data/ticks.csv")


def _run_archived_driver(archive: Path, scratch: Path) -> str:
    """In this process: a local[2] driver, started with ``-XX:ArchiveClassesAtExit=archive``, runs the shipped
    sample through ``cep run --engine spark`` and a ``cep stream --once`` over it (batch and streaming classes),
    then stops; returns its classpath once the JVM has exited, the archive written."""
    from cep.cli import main
    from cep.spark_bridge.spark.session import get_spark

    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        [*TEST_JVM_OPTIONS, f"-XX:ArchiveClassesAtExit={archive}", SILENT_ARCHIVE]
    )
    session = get_spark("local[2]", app_name="cep-jvm-archive")
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    classpath = _classpath_of(gateway.proc.pid)
    repo = Path(__file__).resolve().parent.parent
    query, sample = (str(repo / name) for name in _WORKLOAD_SAMPLE)
    main(["run", query, "--input", sample, "--engine", "spark", "--output", str(scratch / "run.csv")])
    inbox = scratch / "inbox"
    inbox.mkdir()
    shutil.copy(sample, inbox / "ticks.csv")
    main(
        [
            "stream",
            query,
            "--input",
            str(inbox),
            "--checkpoint",
            str(scratch / "checkpoint"),
            "--output",
            str(scratch / "out"),
            "--once",
        ]
    )
    session.stop()
    gateway.shutdown()
    gateway.proc.stdin.close()  # the JVM exits on EOF, writing the archive first
    gateway.proc.wait(ARCHIVE_WRITE_SECONDS)
    return classpath


def _usable(java: str, archive: Path, classpath: str) -> bool:
    """Whether a JVM with the drivers' flags and classpath maps ``archive`` (``-Xshare:on`` fails otherwise).
    A file cut short crashes it (SIGBUS, JDK 17): its crash report goes nowhere, not into the working directory."""
    check = subprocess.run(
        [
            java,
            *TEST_JVM_OPTIONS,
            "-Xshare:on",
            f"-XX:SharedArchiveFile={archive}",
            "-XX:ErrorFile=/dev/null",
            "-cp",
            classpath,
            "-version",
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    return check.returncode == 0


def _remove_stale(keep: Path) -> None:
    others = [old for old in keep.parent.glob("spark-driver-*.jsa") if old != keep]
    others.sort(key=lambda old: old.stat().st_mtime, reverse=True)  # touched at each use (build_archive)
    for old in others[OTHER_ARCHIVES_KEPT:]:
        old.unlink(missing_ok=True)


def build_archive() -> str:
    """Build the archive for this JDK and pyspark unless it is there; returns what happened, in a sentence."""
    java, path = java_executable(), archive_path()
    if java is None or path is None:
        return "no Java: no class-data archive"
    if path.is_file():
        os.utime(path)  # in use: not stale
        return f"class-data archive: {path}"
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cep-jvm-archive-") as scratch:
        partial = path.parent / f".{path.name}.{os.getpid()}.partial"
        try:
            classpath = _run_archived_driver(partial, Path(scratch))
            if not partial.is_file() or not _usable(java, partial, classpath):
                return "class-data archive not built (the JVM wrote none it can use): tests run without it"
            os.replace(partial, path)  # whole or not at all: a JVM never maps a file cut short
        finally:
            partial.unlink(missing_ok=True)
    _remove_stale(path)
    return f"class-data archive built in {time.monotonic() - started:.0f} s: {path}"


def main() -> int:
    """Build the archive if it is missing; any failure is a sentence and exit status 0: the tests then run
    without it, as they do on a machine where it was never built."""
    try:
        print(build_archive(), file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - a cache that cannot be made is not an error of the suite
        print(f"class-data archive not built ({type(exc).__name__}: {exc}): tests run without it", file=sys.stderr)
    from tests import kafka_broker  # the Kafka brokers' own archive (Kafka's jars: another classpath)

    try:
        print(kafka_broker.build_archive(), file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - likewise
        print(
            f"Kafka class-data archive not built ({type(exc).__name__}: {exc}): brokers start without it",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    # In a process of its own: the driver it starts must be the only one, with the archiving flags.
    sys.exit(main())
