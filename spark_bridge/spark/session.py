"""One quiet, UTC, Arrow-enabled SparkSession for cep (the CLI, the tests and user code share it).

Why each setting:

- ``spark.sql.session.timeZone=UTC``: pandas UDFs see naive timestamps in the *session* time zone and
  ``collect()`` gives them in the *process* time zone; pinning UTC makes both the same wall-clock value.
- ``spark.sql.shuffle.partitions`` small: the default 200 costs seconds per job on 2 cores.
- Arrow on: ``toPandas`` / ``createDataFrame(pandas)`` move columns, not Python rows.
- UI and console progress bar off, log level ERROR, a log4j2 file that silences the start-up banner:
  the CLI prints a table and one summary line, nothing else.
- ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` default to this interpreter on a local master, else the
  workers run whatever ``python3`` is on PATH and fail with "No module named 'pyarrow'". On a cluster the
  executors run their own ``python3`` (this interpreter's path means nothing there), or the packed
  environment given as ``python_env``; cep ships itself to them (``shipping.py``).
- ``SPARK_LOCAL_IP=127.0.0.1``: every port binds to loopback, and the "hostname resolves to a loopback
  address" warning goes away.
- The streaming state store (``state_store``, ``$CEP_STATE_STORE``): Spark's HDFS-backed store (state on the
  JVM heap) by default, since RocksDB was neither faster nor smaller at 20k-100k keys here
  (bench/state_scale.py); ``"rocksdb"`` (with changelog checkpointing) keeps the state off the heap, for
  millions of keys. Spark keeps the store a checkpoint was started with (``checkpoint_state_store`` reads
  it): see docs/operations.md. RocksDB's native memory is capped (``boundedMemoryUsage``,
  ``$CEP_ROCKSDB_MEMORY_MB``) unless Spark's own settings say otherwise.
- On a local master, Delta rebuilds a table's state (its log replayed into the list of files) in as many
  partitions as the master has cores (``delta_snapshot_conf``), not Delta's 50, unless a Spark setting gives
  a number: Spark does that for every read of a Delta table, and 50 tasks on 2 cores made a read of a
  three-commit table take 7 times as long (docs/alerting.md, "What the Delta input does").

pyspark is imported inside ``get_spark`` only, so importing this module costs nothing without Java.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cep.spark_bridge.spark.delta_connector import DeltaConnectorError, delta_spark_conf
from cep.spark_bridge.spark.kafka_connector import KafkaConnectorError, coordinates, kafka_spark_conf
from cep.spark_bridge.spark.shipping import archive_conf, cep_zip, check_executors, is_local

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

# Imported inside functions: pyspark and py4j, an optional dependency (the "spark" extra) that takes seconds to import.

DEFAULT_SHUFFLE_PARTITIONS = 4

# The driver JVM of a long-running stream (``cep stream`` and Spark's floor in the Kafka bench ask for these): the
# JIT's full tiers, C1 then C2 (named, so that the command line shows it; a user's own flag in $SPARK_SUBMIT_OPTS,
# later on it, wins). Measured side by side at 1,000, 5,000 and 20,000 events a second (docs/operations.md, "The
# driver JVM's compiler"): with C1 only, a micro-batch at 1,000 a second cost about half the CPU, but the stream
# finished fewer events at 5,000 and fell behind at 20,000 where C2 caught up; a service runs for days, so C2's
# minutes of compiling after a start weigh less than keeping up at the peak. No collector flag: a second one from
# the user (or the test suite's -XX:+UseSerialGC) would stop the JVM from starting. Batch jobs keep Java's defaults.
STREAM_JVM_OPTIONS = ("-XX:TieredStopAtLevel=4",)
# Read by Spark's launcher for the driver JVM's command line, before spark.driver.*JavaOptions.
SUBMIT_OPTS_ENV = "SPARK_SUBMIT_OPTS"

# Spark's two state store providers, by the name cep's options use.
STATE_STORE_PROVIDERS: dict[str, str] = {
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}
STATE_STORE_ENV = "CEP_STATE_STORE"
# RocksDB measured no faster and with a larger JVM resident set at 20k-100k keys (bench/state_scale.py); it pays
# off where the heap cannot hold every key's state, which a team chooses with $CEP_STATE_STORE=rocksdb.
DEFAULT_STATE_STORE = "hdfs"
_PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
_CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
# RocksDB's block cache, memtables and index and filter blocks are native memory, outside the JVM's heap and its
# Native Memory Tracking, and Spark gives each store instance its own unless boundedMemoryUsage puts every
# instance of a JVM under one cap. Index and filter blocks follow the keys held, and at 1 million keys RocksDB
# filled whatever cap it had (bench/state_scale.py), so cep caps it by default; a smaller cache is still correct,
# it reads its files more. $CEP_ROCKSDB_MEMORY_MB changes the cap, a Spark setting of either key (spark-defaults.conf,
# get_spark(conf=)) wins over cep's, and the settings apply whichever store a checkpoint started with.
ROCKSDB_MEMORY_ENV = "CEP_ROCKSDB_MEMORY_MB"
DEFAULT_ROCKSDB_MEMORY_MB = 256
# Spark's default memtable is 64 MB: a cap below a few of them flushes RocksDB's memtables all the time.
MIN_ROCKSDB_MEMORY_MB = 32
_BOUNDED_CONF = "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage"
_MEMORY_CONF = "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB"

# log4j2 configuration handed to the driver JVM: errors only, and nothing from the noisy start-up loggers.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = off
logger.sparkenv.name = org.apache.spark.SparkEnv
logger.sparkenv.level = error
# The shell's logger: when it is configured, Spark does not print "Setting default log level to WARN".
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def _user_tag() -> str:
    return str(os.getuid()) if hasattr(os, "getuid") else "user"


# This process's own files in the temp folder: a directory made fresh (mkdtemp: mode 0700, a new name), never a
# name another local user could have planted. "config" holds the log4j2 file (removed at exit); "log" the
# JVM's log when the shared per-user name cannot be trusted.
_PRIVATE: dict[str, str] = {}


def _private_dir(kind: str) -> str:
    if kind not in _PRIVATE:
        _PRIVATE[kind] = tempfile.mkdtemp(prefix=f"cep-{kind}-{_user_tag()}-")
        if kind == "config":
            atexit.register(shutil.rmtree, _PRIVATE[kind], True)
    return _PRIVATE[kind]


def _own_regular_file(path: str) -> bool:
    """``path`` is absent, or a regular file of this user (not a link another user planted)."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return True
    return stat.S_ISREG(found.st_mode) and (not hasattr(os, "getuid") or found.st_uid == os.getuid())


def spark_log_path() -> str:
    """Where the JVM's own output goes when ``get_spark(quiet=True)`` starts it (``$CEP_SPARK_LOG`` overrides):
    ``$TMPDIR/cep-spark-<uid>.log`` when that name is this user's regular file or free, else a file in a
    private directory of this process (the log is never written through a link)."""
    if os.environ.get("CEP_SPARK_LOG"):
        return os.environ["CEP_SPARK_LOG"]
    if "log_path" not in _PRIVATE:
        shared = os.path.join(tempfile.gettempdir(), f"cep-spark-{_user_tag()}.log")
        private = os.path.join(_private_dir("log"), "cep-spark.log") if not _own_regular_file(shared) else None
        _PRIVATE["log_path"] = private or shared
    return _PRIVATE["log_path"]


def _open_log(path: str) -> int:
    """Open the log for appending, refusing links and files of another user (then: a private file)."""
    try:
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError:  # ELOOP: a link was planted after the look
        target = -1
    if target >= 0 and _own_regular_file(path) and stat.S_ISREG(os.fstat(target).st_mode):
        return target
    if target >= 0:
        os.close(target)
    _PRIVATE["log_path"] = os.path.join(_private_dir("log"), "cep-spark.log")
    return os.open(_PRIVATE["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)


def _log4j2_file() -> str:
    """Write the log4j2 configuration into this process's private directory and return its path: created
    fresh (O_EXCL, mode 0600), never reused because its text matches (the JVM would run another user's)."""
    path = os.path.join(_private_dir("config"), "log4j2.properties")
    if "log4j2" in _PRIVATE:
        return path
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with open(descriptor, "w", encoding="utf-8") as fh:
        fh.write(_LOG4J2)
    _PRIVATE["log4j2"] = path
    return path


@contextmanager
def _stderr_to(path: str) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` for the duration, so a child process started inside keeps it.

    The JVM prints a few lines at start-up that no log4j setting reaches ("Using incubator modules",
    "Setting default log level"); starting it with its stderr in a log file keeps the CLI's output
    clean, and everything the JVM logs later (task failures included) lands in that file too.
    Errors still reach Python as exceptions.
    """
    try:
        sys.stderr.flush()
    except Exception:  # pragma: no cover - a closed or odd stderr
        pass
    saved = os.dup(2)
    target = _open_log(path)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def jvm_options_in_front(options: Sequence[str], existing: str) -> str:
    """``existing`` (a JVM command line's flags) with ``options`` in front, those already there left out: the
    flags a user wrote, later on the line, win."""
    missing = [option for option in options if option not in existing.split()]
    return " ".join([*missing, existing]).strip()


@contextmanager
def _submit_options(options: Sequence[str]) -> Iterator[None]:
    """``$SPARK_SUBMIT_OPTS`` with ``options`` in front while a driver JVM starts, then as it was."""
    before = os.environ.get(SUBMIT_OPTS_ENV)
    if options:
        os.environ[SUBMIT_OPTS_ENV] = jvm_options_in_front(options, before or "")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SUBMIT_OPTS_ENV, None)
        else:
            os.environ[SUBMIT_OPTS_ENV] = before


def _jvm_running() -> bool:
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def _prepare_environment(master: str) -> None:
    if is_local(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def ignore_sigterm(spark: SparkSession) -> bool:
    """Make the driver's JVM ignore SIGTERM (True when done).

    systemd stops a service by sending SIGTERM to every process of its group at once: the Python
    driver, its JVM and the Python workers. The JVM's own handler would stop the SparkContext under the
    driver, which then fails in the middle of its clean stop ("Cannot call methods on a stopped
    SparkContext"). Ignoring it there lets the driver stop the queries and the JVM itself; the JVM
    still ends when the driver does (and SIGKILL still kills it)."""
    try:
        jvm = spark.sparkContext._jvm
        jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("TERM"), jvm.sun.misc.SignalHandler.SIG_IGN)
    except Exception:  # noqa: BLE001 - a JVM without sun.misc.Signal: SIGTERM then stops it at once
        return False
    return True


class StateStoreError(ValueError):
    """A state store name cep does not know (``state_store=`` or ``$CEP_STATE_STORE``)."""


# Hadoop's local file system (FileContext's ``file:``, ``ChecksumFs``) writes a checksum file, ``.<name>.crc``, beside
# every file and renames both: each entry of a checkpoint's logs (the offsets before a micro-batch runs, the commit
# after it, a file sink's log) is two files created and two renamed, on the micro-batch's path. On a local disk a
# stream writes its checkpoint through the raw local file system, one file each (docs/latency.md, "The fixed part:
# the logs a micro-batch writes", has what it saves). A checksum guards against a disk that returns other bytes than
# it was given, which the local disk's own checks and the file system's journal do already; the logs are JSON that
# Spark parses whole on reading.
LOCAL_CHECKPOINT_CONF = {"fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs"}


def on_local_disk(spark: SparkSession, path: str) -> bool:
    """Is ``path`` on this machine's file system (a bare path is on Hadoop's default file system)."""
    default_fs = spark._jsparkSession.sessionState().newHadoopConf().get("fs.defaultFS") or "file:///"
    return "://" not in str(path) and default_fs.startswith("file:")


@contextmanager
def starting_with(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Around the start of a streaming query: ``settings`` on ``spark`` (SQL settings, and Hadoop ones, which a
    session copies into every Hadoop configuration it makes), which the query's own session copies as it starts;
    then ``spark``'s own given back, so that other queries of the session keep Spark's defaults. A setting the
    session has already is kept."""
    new = {key: value for key, value in settings.items() if spark.conf.get(key, None) is None}
    for key, value in new.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in new:
            spark.conf.unset(key)


def state_store_conf(name: str | None = None) -> dict[str, str]:
    """Spark's settings for the state store called ``name`` ("rocksdb" or "hdfs"; None: ``$CEP_STATE_STORE``,
    else ``DEFAULT_STATE_STORE``). RocksDB comes with changelog checkpointing: a micro-batch appends the rows it
    changed instead of uploading a snapshot of the whole store (snapshots are made in the background)."""
    chosen = (name or os.environ.get(STATE_STORE_ENV) or DEFAULT_STATE_STORE).strip().lower()
    if chosen not in STATE_STORE_PROVIDERS:
        source = f"${STATE_STORE_ENV}" if name is None else "state_store"
        raise StateStoreError(
            f"{source} is {chosen!r}, not a state store cep knows: use one of {', '.join(STATE_STORE_PROVIDERS)}"
        )
    conf = {_PROVIDER_CONF: STATE_STORE_PROVIDERS[chosen]}
    if chosen == "rocksdb":
        conf[_CHANGELOG_CONF] = "true"
    return conf


def rocksdb_memory_conf() -> dict[str, str]:
    """The RocksDB cap cep asks for where Spark's settings do not give one: every store instance of a JVM under
    one cap of ``$CEP_ROCKSDB_MEMORY_MB`` (else ``DEFAULT_ROCKSDB_MEMORY_MB``) MB. A value that is not a whole
    number of at least ``MIN_ROCKSDB_MEMORY_MB`` raises ``StateStoreError``."""
    text = os.environ.get(ROCKSDB_MEMORY_ENV, "").strip().replace("_", "")
    if not text:
        return {_BOUNDED_CONF: "true", _MEMORY_CONF: str(DEFAULT_ROCKSDB_MEMORY_MB)}
    if not text.isdigit() or int(text) < MIN_ROCKSDB_MEMORY_MB:
        raise StateStoreError(
            f"${ROCKSDB_MEMORY_ENV} is {os.environ[ROCKSDB_MEMORY_ENV]!r}: give RocksDB's memory cap as a whole "
            f"number of MB, at least {MIN_ROCKSDB_MEMORY_MB} (the default is {DEFAULT_ROCKSDB_MEMORY_MB})"
        )
    return {_BOUNDED_CONF: "true", _MEMORY_CONF: str(int(text))}


# Delta's setting for the partitions of a snapshot's state reconstruction (its default, 50, is for clusters).
DELTA_SNAPSHOT_PARTITIONS_CONF = "spark.databricks.delta.snapshotPartitions"


def local_cores(master: str) -> int | None:
    """The cores of a local master (``local``: 1, ``local[N]``/``local[N,F]``: N, ``local[*]``: this machine's);
    None for any other master."""
    if master == "local":
        return 1
    found = re.fullmatch(r"local\[(\*|\d+)(?:,\s*\d+)?\]", master.strip())
    if not found:
        return None
    return (os.cpu_count() or 1) if found.group(1) == "*" else max(1, int(found.group(1)))


def delta_snapshot_conf(master: str) -> dict[str, str]:
    """The partitions Delta rebuilds a table's state in, on a local master: one per core. Delta's default of 50
    partitions is 50 tasks for each read of a table; on a few local cores those tasks take most of the time of
    a small table's read (measured: 7 times as long at 50 as at 2 on 2 cores, a table of three commits). On a
    cluster Delta's default stands."""
    cores = local_cores(master)
    return {} if cores is None else {DELTA_SNAPSHOT_PARTITIONS_CONF: str(cores)}


def checkpoint_state_store(checkpoint: str | os.PathLike[str]) -> str | None:
    """The state store a streaming checkpoint was started with ("rocksdb", "hdfs", or the provider's class
    name for another one); None when the checkpoint has no micro-batch yet.

    Spark records the provider in every entry of the checkpoint's offset log and, on a restart, uses that one
    whatever the session asks for: a checkpoint keeps its store for life (its state files are the provider's
    own format). This reads the newest entry, so a caller can say which store a restarted stream really uses."""
    offsets = os.path.join(os.fspath(checkpoint), "offsets")
    try:
        batches = sorted((int(n) for n in os.listdir(offsets) if n.isdigit()), reverse=True)
    except OSError:
        return None
    for batch in batches:
        try:
            with open(os.path.join(offsets, str(batch)), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
            provider = json.loads(lines[1]).get("conf", {}).get(_PROVIDER_CONF)
        except (OSError, ValueError, IndexError, AttributeError):
            continue  # an entry cut short by a crash: Spark ignores it too and reads the one before
        if provider:
            names = {cls: name for name, cls in STATE_STORE_PROVIDERS.items()}
            return names.get(provider, provider)
    return None


def get_spark(
    master: str = "local[*]",
    app_name: str = "cep",
    *,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    state_store: str | None = None,
    conf: Mapping[str, str] | None = None,
    quiet: bool = True,
    kafka: bool = False,
    delta: bool = False,
    ship: bool = True,
    python_env: str | None = None,
    jvm_options: Sequence[str] = (),
) -> SparkSession:
    """Create (or reuse) the SparkSession configured for cep.

    If a session is already running, it is reused as is except for the runtime SQL settings
    (time zone, shuffle partitions, Arrow; the state store when asked for by name), which are set again;
    ``master`` only matters for a new one.
    ``state_store``: "hdfs" (the default) or "rocksdb" (None: ``$CEP_STATE_STORE``, else the default); it applies
    to streams started on a new checkpoint (an existing checkpoint keeps its own, see ``checkpoint_state_store``).
    RocksDB's memory is capped (``rocksdb_memory_conf``) unless a Spark setting says otherwise.
    ``conf`` adds or overrides settings (e.g. ``{"spark.driver.memory": "4g"}``).
    With ``quiet`` (the default) a JVM started here writes its console output to ``spark_log_path()``
    instead of this process's stderr.
    ``kafka``: put Spark's Kafka connector on the classpath (``kafka_connector.kafka_spark_conf``: its jars,
    fetched once into a cache, appended to any ``spark.jars`` given); a session already running without it
    raises ``KafkaConnectorError`` (the classpath is fixed when the JVM starts), as does a connector that
    cannot be fetched (the message names the artifact, the version and the command that fetches it).
    ``delta``: Delta Lake's connector likewise (``delta_connector.delta_spark_conf``; ``DeltaConnectorError``).

    On a cluster master (not ``local[...]``) and with ``ship`` (the default), cep ships itself to the
    executors (``shipping.cep_zip``, ``addPyFile``) and checks with one tiny job that an executor can
    import it (``shipping.ShippingError`` otherwise); ``python_env`` (a ``venv-pack`` archive) gives the
    executors a whole Python environment (``spark.archives``).
    ``jvm_options``: flags for the driver JVM if it starts here (``STREAM_JVM_OPTIONS`` for a long-running
    stream), in front of ``$SPARK_SUBMIT_OPTS`` so that a user's own flags there win.
    """
    _prepare_environment(master)
    rocksdb_memory = rocksdb_memory_conf()  # checked before Spark starts: a bad value costs no JVM
    from pyspark.sql import SparkSession

    log4j = _log4j2_file()
    java_opts = f"-Dlog4j.configurationFile=file:{log4j} -Dlog4j2.configurationFile=file:{log4j}"
    settings: dict[str, str] = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        **state_store_conf(state_store),
    }
    if master.startswith("local"):
        # Everything on this machine: keep the driver on loopback too (a cluster must reach the driver).
        settings["spark.driver.host"] = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    if python_env:
        settings.update(archive_conf(python_env))
    settings.update(conf or {})
    running = _jvm_running()
    if kafka and not running:
        jars = kafka_spark_conf()["spark.jars"]
        settings["spark.jars"] = ",".join(j for j in (settings.get("spark.jars", ""), jars) if j)
    if delta and not running:
        delta_conf = delta_spark_conf()
        jars = delta_conf.pop("spark.jars")
        settings["spark.jars"] = ",".join(j for j in (settings.get("spark.jars", ""), jars) if j)
        settings.update(delta_conf)

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _submit_options(() if running else jvm_options):
        if quiet and not running:
            with _stderr_to(spark_log_path()):
                spark = builder.getOrCreate()
        else:
            spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # getOrCreate on a running session ignores static settings; the SQL ones can still be set.
    for key in (
        "spark.sql.session.timeZone",
        "spark.sql.shuffle.partitions",
        "spark.sql.execution.arrow.pyspark.enabled",
    ):
        spark.conf.set(key, settings[key])
    # A running session keeps a store its owner set on it, unless a store is asked for by name here.
    if not running or state_store is not None or os.environ.get(STATE_STORE_ENV) or _PROVIDER_CONF in (conf or {}):
        for key in (_PROVIDER_CONF, _CHANGELOG_CONF):
            if key in settings:
                spark.conf.set(key, settings[key])
    # Where no Spark setting (spark-defaults.conf, conf=) gave one; Delta's by the running session's own master.
    for key, value in {**rocksdb_memory, **delta_snapshot_conf(spark.sparkContext.master)}.items():
        if spark.conf.get(key, None) is None:
            spark.conf.set(key, value)
    if kafka and running and not has_kafka_connector(spark):
        raise KafkaConnectorError(
            f"a SparkSession is already running without Spark's Kafka connector ({coordinates()}), and the classpath "
            "is fixed when Spark starts: ask for it before the first session (get_spark(kafka=True), or "
            "SparkSession.builder.config(**kafka_spark_conf()) from cep.spark_bridge.spark.kafka_connector), or stop "
            "this session first (spark.stop())"
        )
    if delta and running and not has_data_source(spark, "delta"):
        raise DeltaConnectorError(
            "a SparkSession is already running without Delta Lake's Spark connector, and the classpath is fixed "
            "when Spark starts: ask for it before the first session (get_spark(delta=True)), or stop this "
            "session first (spark.stop())"
        )
    if ship and not is_local(master):
        spark.sparkContext.addPyFile(cep_zip())
        check_executors(spark)
    return spark


def has_kafka_connector(spark: SparkSession) -> bool:
    """Whether ``spark.readStream.format("kafka")`` resolves."""
    return has_data_source(spark, "kafka")


def has_data_source(spark: SparkSession, name: str) -> bool:
    """Whether ``spark.read.format(name)`` resolves: Spark's own data-source lookup, so a connector put there
    any way (``spark.jars``, ``--packages``, a jar in Spark's own folder) counts."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import AnalysisException

    jvm = spark._jvm
    try:
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            name, spark._jsparkSession.sessionState().conf()
        )
    except (Py4JJavaError, AnalysisException):  # PySpark turns Spark's "Failed to find data source" into the latter
        return False
    return True
