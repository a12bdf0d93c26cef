"""The class-data archive of the suite's JVMs (tests/jvm_options.py): only a cache, never a failure.

Each JVM here is a real ``java`` on a jar of pyspark's (Spark's launcher: a few hundred classes, a fraction of
a CPU-second), so these tests build and map real archives in seconds. What a JVM prints for an archive it
cannot use, and that it still runs, is the JDK's own behaviour, checked here against the JDK the suite runs.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import jvm_options
from tests.conftest import _java_missing_reason
from tests.jvm_options import SILENT_ARCHIVE, TEST_JVM_OPTIONS, _usable, archive_key, archive_options, java_executable

pytestmark = pytest.mark.spark  # needs Java (no SparkSession)

# What the JVM prints on its standard output for an archive it cannot map (JDK 17).
UNUSABLE_ARCHIVE = "Unable to use shared archive"


@pytest.fixture(scope="module")
def java() -> str:
    reason = _java_missing_reason()
    if reason:
        pytest.skip(reason)
    return java_executable()


def _jar(prefix: str) -> str:
    jars = jvm_options._spark_jars()
    return str(next(jars.glob(f"{prefix}*.jar")))


def _java(java: str, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([java, *TEST_JVM_OPTIONS, *arguments], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def launcher_archive(java, tmp_path_factory) -> tuple[Path, str]:
    """A real dynamic archive of Spark's launcher classes (its ``Main`` run without arguments: it refuses and
    exits 1, and the JVM writes the archive at exit all the same); with its classpath."""
    archive = tmp_path_factory.mktemp("archive") / "launcher.jsa"
    classpath = _jar("spark-launcher_")
    ran = _java(
        java, f"-XX:ArchiveClassesAtExit={archive}", SILENT_ARCHIVE, "-cp", classpath, "org.apache.spark.launcher.Main"
    )
    assert "missing class name" in ran.stderr
    assert archive.is_file()
    return archive, classpath


def test_an_archive_for_another_classpath_is_ignored_without_a_word(java, launcher_archive):
    archive, _ = launcher_archive
    other_classpath = _jar("slf4j-api-")
    # The JDK's own behaviour: it runs without the archive and says so on stdout, which tests compare.
    loud = _java(java, f"-XX:SharedArchiveFile={archive}", "-cp", other_classpath, "-version")
    assert loud.returncode == 0
    assert UNUSABLE_ARCHIVE in loud.stdout
    # With the flags the suite gives every JVM, it runs the same and says nothing.
    quiet = _java(java, *archive_options(archive), "-cp", other_classpath, "-version")
    assert quiet.returncode == 0
    assert quiet.stdout == ""
    assert "openjdk version" in quiet.stderr or "java version" in quiet.stderr


def test_a_missing_archive_gives_no_flags_and_a_missing_file_no_failure(java, tmp_path):
    gone = tmp_path / "never-built.jsa"
    assert archive_options(None) == ()
    assert archive_options(gone) == ()
    # A JVM named a file that is not there (removed while the suite runs) runs without it, silently.
    ran = _java(java, f"-XX:SharedArchiveFile={gone}", SILENT_ARCHIVE, "-version")
    assert ran.returncode == 0
    assert ran.stdout == ""


def test_only_a_whole_archive_for_the_classpath_is_published(java, launcher_archive, tmp_path, monkeypatch):
    archive, classpath = launcher_archive
    monkeypatch.chdir(tmp_path)  # where a crashed JVM would leave its hs_err_pid*.log
    assert _usable(java, archive, classpath)
    # A classpath that does not start with the archive's: -Xshare:on refuses it.
    assert not _usable(java, archive, _jar("slf4j-api-"))
    # An archive cut short (a builder killed while writing) crashes a JVM that maps it: the check refuses it.
    cut = tmp_path / "cut.jsa"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 4])
    assert not _usable(java, cut, classpath)
    assert not list(tmp_path.glob("hs_err_pid*.log"))  # its crash report is not left in the working directory


def test_the_key_changes_with_the_jars_and_not_otherwise(java, tmp_path, monkeypatch):  # noqa: ARG001
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"one")
    monkeypatch.setattr(jvm_options, "_spark_jars", lambda: jars)
    first = archive_key()
    assert first == archive_key()
    (jars / "spark-core.jar").write_bytes(b"two!")  # another pyspark: another size
    assert archive_key() != first
    os.utime(jars / "spark-core.jar", ns=(0, 0))
    second = archive_key()
    (jars / "extra.jar").write_bytes(b"")
    assert archive_key() != second
