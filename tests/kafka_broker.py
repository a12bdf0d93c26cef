"""A real one-node Apache Kafka 4.x broker (KRaft: broker and controller in one JVM) on 127.0.0.1.

Used by the Kafka tests (the session fixture in ``tests/kafka_tests/conftest.py``) and by ``make kafka``
(``python tests/kafka_broker.py``), so a person can try cep against a broker. Nothing is mocked: clients
talk to it over TCP.

- **Jars**: ``fetch_jars()`` copies ``org.apache.kafka:kafka_2.13`` and its runtime dependencies from Maven
  Central with ``mvn dependency:copy-dependencies`` (``tests/kafka_broker_pom.xml``) into
  ``${XDG_CACHE_HOME:-~/.cache}/cep/kafka-<version>/`` once; later runs, and other clones, reuse that folder
  (``$CEP_KAFKA_JARS`` points at another folder, ``$CEP_KAFKA_VERSION`` picks another 4.x version).
- **Start**: random free ports (a PLAINTEXT listener for clients, a CONTROLLER listener for KRaft), storage
  formatted with ``kafka.tools.StorageTool format`` and a random cluster id, then
  ``java -cp 'jars/*' kafka.Kafka server.properties``, settings for a 2-core test box (small heap, 1
  partition, replication factor 1 everywhere, transactions with one replica, no group rebalance delay, no
  auto-created topics: a test creates its topics, and a missing topic stays missing).
- **Ready** means a real client (confluent-kafka's AdminClient) got the cluster's metadata with this broker in
  it. **Stop** is SIGTERM (a clean shutdown), then SIGKILL after a grace period. ``stop()`` keeps the data,
  so ``start()`` again brings the same broker back on the same ports (a broker outage in a test).
- **Logs** stay in ``<workdir>/logs`` (``server.log`` from log4j, ``console.log`` the JVM's own output);
  every error raised here names that folder and quotes its last lines.

This file imports nothing from cep and only the standard library at module level, so ``make kafka`` can run
it as a script.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "kafka_broker_pom.xml"
DEFAULT_VERSION = "4.4.0"
MARKER = ".cep-complete"  # written last into a jar folder: its presence means the copy finished

BROKER_MAIN = "kafka.Kafka"
STORAGE_MAIN = "kafka.tools.StorageTool"

# Small and quick on a 2-core machine shared with Spark: the broker needs little heap for test traffic.
DEFAULT_HEAP = "384m"
JVM_FLAGS = [
    "-XX:+UseSerialGC",
    # C1 only: start-up and short runs are faster, and the broker is never the bottleneck here
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
]

# Kafka's own classes from a class-data archive (AppCDS, JDK 12+ dynamic archive), as tests/jvm_options.py
# does for Spark's drivers: the broker JVM and the storage format JVM before it load, parse and verify the
# same classes from Kafka's jars at every start. ``build_archive()`` (``make test`` runs it through
# ``python -m tests.jvm_options``) runs one broker with ``-XX:ArchiveClassesAtExit`` through a topic, a
# record in and out, and a clean stop, checks the file with ``-Xshare:on`` and renames it into place; later
# JVMs map it. Named by a digest of the JDK, the jars and the flags (``archive_path``): a new JDK or Kafka
# looks for another name, so a stale archive is never used; a missing one is simply not used.
ARCHIVE_PREFIX = "kafka-broker-"
# Writing the archive walks every loaded class at the broker's exit: 20 s at a load average of 18.
ARCHIVE_STOP_GRACE_S = 600
ARCHIVES_KEPT = 3  # others (other JDKs, Kafka versions, worktrees), the most recently used

_LOG4J2 = """\
status = warn
shutdownHook = disable
appender.file.type = File
appender.file.name = file
appender.file.fileName = {logs}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
# The request log and the state-change log are noisy at INFO and tell nothing a test needs.
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
"""


class KafkaBrokerError(RuntimeError):
    """The broker could not be fetched, formatted, started or reached; the message says where its logs are."""


def kafka_version() -> str:
    return os.environ.get("CEP_KAFKA_VERSION") or DEFAULT_VERSION


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cep"


def jars_dir(version: str | None = None) -> Path:
    """Where the broker's jars are (or will be): ``$CEP_KAFKA_JARS``, else the per-user cache folder."""
    override = os.environ.get("CEP_KAFKA_JARS")
    if override:
        return Path(override).expanduser()
    return cache_root() / f"kafka-{version or kafka_version()}"


def _jars_complete(folder: Path) -> bool:
    return (folder / MARKER).is_file() and any(folder.glob("kafka_2.13-*.jar"))


def fetch_jars(version: str | None = None, *, quiet: bool = True) -> Path:
    """Return the folder holding the broker's jars, copying them from Maven Central first if it is not complete.

    Several processes (pytest-xdist workers, two clones) may ask at once: a lock file serialises the copy and
    the marker file makes a half-finished copy count as missing.
    """
    version = version or kafka_version()
    dest = jars_dir(version)
    if _jars_complete(dest):
        return dest
    if os.environ.get("CEP_KAFKA_JARS"):
        raise KafkaBrokerError(
            f"$CEP_KAFKA_JARS={dest} has no complete set of Kafka jars (no {MARKER} marker or no kafka_2.13 jar); "
            f"unset it to fetch Kafka {version} into {cache_root() / f'kafka-{version}'}"
        )
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaBrokerError(
            f"the Kafka broker's jars (org.apache.kafka:kafka_2.13:{version}) are not in {dest}, "
            "and fetching them needs Maven ('mvn' is not on PATH): apt-get install maven, then run again"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".kafka-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _jars_complete(dest):  # another process finished it while we waited
            return dest
        tmp = Path(tempfile.mkdtemp(prefix=f".kafka-{version}-", dir=dest.parent))
        cmd = [
            mvn,
            "-B",
            "-f",
            str(POM),
            f"-Dkafka.version={version}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={tmp}",
        ]
        if quiet:
            cmd.insert(2, "-q")
        else:
            print(f"fetching Kafka {version} jars from Maven Central into {dest} ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 or not any(tmp.glob("kafka_2.13-*.jar")):
            shutil.rmtree(tmp, ignore_errors=True)
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
            raise KafkaBrokerError(
                f"could not fetch org.apache.kafka:kafka_2.13:{version} with Maven (exit {done.returncode}).\n"
                f"Command: {' '.join(cmd)}\n{tail}"
            )
        (tmp / MARKER).write_text(f"kafka {version}, fetched in {time.monotonic() - started:.1f} s\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    return dest


def _java_home(java: str) -> Path | None:
    found = shutil.which(java)
    return Path(os.path.realpath(found)).parent.parent if found else None


def archive_key(jars: Path, java: str) -> str | None:
    """A digest of what a class-data archive is valid for: the JDK (its files), Kafka's jars (their folder,
    names, sizes and times) and the JVM flags. None without Java or jars."""
    java_home = _java_home(java)
    if java_home is None or not jars.is_dir():
        return None
    digest = hashlib.sha256()
    for part in (str(java_home), *JVM_FLAGS, str(jars)):
        digest.update(part.encode() + b"\0")
    for path in [java_home / "release", *sorted(java_home.glob("lib/server/*")), *sorted(jars.glob("*.jar"))]:
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def archive_path(jars: Path, java: str) -> Path | None:
    key = archive_key(jars, java)
    return None if key is None else cache_root() / "jvm-archive" / f"{ARCHIVE_PREFIX}{key}.jsa"


def archive_options(jars: Path, java: str) -> list[str]:
    """The flags that map the archive of these jars and this JDK, or none when it is not there (yet). Its
    messages (chiefly "Unable to use shared archive") are off: the JVM then runs without it."""
    path = archive_path(jars, java)
    if path is None or not path.is_file():
        return []
    return [f"-XX:SharedArchiveFile={path}", "-Xlog:cds*=off"]


def _archive_usable(java: str, archive: Path, jars: Path) -> bool:
    """Whether a JVM with the broker's flags and classpath maps ``archive`` (``-Xshare:on`` fails otherwise)."""
    check = subprocess.run(
        [java, *JVM_FLAGS, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-XX:ErrorFile=/dev/null"]
        + ["-cp", f"{jars}/*", "-version"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    return check.returncode == 0


def build_archive(version: str | None = None) -> str:
    """Build the broker's class-data archive for this JDK and Kafka unless it is there; returns what
    happened, in a sentence."""
    jars = fetch_jars(version)
    broker = KafkaBroker(version=version)
    path = archive_path(jars, broker.java)
    if path is None:
        return "no Java: no Kafka class-data archive"
    if path.is_file():
        os.utime(path)  # in use: not stale
        return f"Kafka class-data archive: {path}"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.parent / f".{path.name}.{os.getpid()}.partial"
    started = time.monotonic()
    try:
        broker.archive_to = partial
        broker.start()
        broker.create_topics({"archive": 1})
        produce(broker.bootstrap, "archive", [{"key": "k", "value": {"n": 1}}])
        consume(broker.bootstrap, "archive")
        broker.stop(grace=ARCHIVE_STOP_GRACE_S)  # a clean exit writes the archive
        if not partial.is_file() or not _archive_usable(broker.java, partial, jars):
            return "Kafka class-data archive not built (the JVM wrote none it can use): brokers start without it"
        os.replace(partial, path)  # whole or not at all: a JVM never maps a file cut short
    finally:
        partial.unlink(missing_ok=True)
        broker.cleanup()
    others = sorted(
        (old for old in path.parent.glob(f"{ARCHIVE_PREFIX}*.jsa") if old != path),
        key=lambda old: old.stat().st_mtime,
        reverse=True,
    )
    for old in others[ARCHIVES_KEPT:]:
        old.unlink(missing_ok=True)
    return f"Kafka class-data archive built in {time.monotonic() - started:.0f} s: {path}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def random_cluster_id() -> str:
    """A Kafka cluster id: a random UUID in URL-safe base64 without padding (22 characters), as kafka-storage
    random-uuid prints; like Kafka's own, never starting with '-' (a command line would take it for an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path} is missing)"
    return "\n".join(text[-lines:])


class KafkaBroker:
    """One KRaft broker+controller JVM; ``with KafkaBroker() as broker: broker.bootstrap`` or start()/stop()."""

    def __init__(
        self,
        workdir: str | os.PathLike | None = None,
        *,
        version: str | None = None,
        heap: str = DEFAULT_HEAP,
        overrides: Mapping[str, object] | None = None,
        java: str | None = None,
    ) -> None:
        self.version = version or kafka_version()
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="cep-kafka-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs = self.workdir / "logs"
        self.data = self.workdir / "data"
        self.config = self.workdir / "server.properties"
        self.heap = heap
        self.overrides = dict(overrides or {})
        self.java = java or (
            os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
        )
        self.port: int | None = None
        self.controller_port: int | None = None
        self.cluster_id: str | None = None
        self.process: subprocess.Popen | None = None
        self._console = None
        self.timings: dict[str, float] = {}
        # Where the broker JVM writes a class-data archive at its exit (build_archive); None: it maps one if
        # there is one.
        self.archive_to: Path | None = None

    # -- addresses ---------------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise KafkaBrokerError("the broker has not been started")
        return f"127.0.0.1:{self.port}"

    def client_config(self, **extra: object) -> dict:
        return {"bootstrap.servers": self.bootstrap, **extra}

    # -- configuration -----------------------------------------------------------------------------------
    def properties(self) -> dict[str, object]:
        props: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data),
            # one node: one replica of everything, and internal topics with one partition (50 by default:
            # creating __consumer_offsets then costs seconds on 2 cores)
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            # a topic exists because a test or a person created it: a typo in a topic name fails as it would on
            # a production cluster instead of silently creating a topic
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "num.network.threads": 2,
            "num.io.threads": 2,
            "background.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            "log.cleaner.threads": 1,
            # Keep every record: retention goes by the records' own timestamps, and tests (and replays of history)
            # produce events stamped months ago, which the default 168 h deletes at the first retention check,
            # 30 s after start, active segment included (seen: Spark's "Some data may have been lost").
            "log.retention.ms": -1,
        }
        props.update(self.overrides)
        return props

    def _write_config(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.workdir / "log4j2.properties").write_text(_LOG4J2.format(logs=self.logs))

    def _jvm(self, jars: Path, main: str, *args: str, heap: str) -> list[str]:
        log4j = self.workdir / "log4j2.properties"
        if self.archive_to is None:
            archive = archive_options(jars, self.java)
        else:  # the broker writes it; the format JVM before it maps none
            archive = [f"-XX:ArchiveClassesAtExit={self.archive_to}"] if main == BROKER_MAIN else []
        return [
            self.java,
            f"-Xmx{heap}",
            "-Xms64m",
            *JVM_FLAGS,
            *archive,
            f"-Dlog4j2.configurationFile=file:{log4j}",
            f"-Dkafka.logs.dir={self.logs}",
            "-cp",
            f"{jars}/*",
            main,
            *args,
        ]

    def _format(self, jars: Path) -> None:
        self.cluster_id = random_cluster_id()
        cmd = self._jvm(jars, STORAGE_MAIN, "format", "-t", self.cluster_id, "-c", str(self.config), heap="128m")
        done = subprocess.run(cmd, capture_output=True, text=True)
        (self.logs / "format.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            raise KafkaBrokerError(
                f"formatting Kafka storage failed (exit {done.returncode}); see {self.logs / 'format.log'}:\n"
                f"{(done.stdout + done.stderr).strip()[-2000:]}"
            )

    # -- life cycle --------------------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> KafkaBroker:
        """Fetch the jars if needed, format storage on the first start, start the JVM and wait until ready."""
        if self.running:
            return self
        t0 = time.monotonic()
        jars = fetch_jars(self.version)
        self.timings["fetch_s"] = time.monotonic() - t0
        first = self.port is None
        if first:
            self.port, self.controller_port = free_port(), free_port()
            while self.controller_port == self.port:
                self.controller_port = free_port()
        self._write_config()
        if not (self.data / "meta.properties").exists():
            t1 = time.monotonic()
            self._format(jars)
            self.timings["format_s"] = time.monotonic() - t1
        t2 = time.monotonic()
        self._console = open(self.logs / "console.log", "ab")
        self.process = subprocess.Popen(
            self._jvm(jars, BROKER_MAIN, str(self.config), heap=self.heap),
            stdout=self._console,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop the broker cleanly
        )
        _LIVE.add(self)
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop(grace=5)
            raise
        self.timings["start_s"] = time.monotonic() - t2
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Return once an AdminClient gets metadata listing this broker; raise with the log's tail otherwise."""
        admin_cls = _admin_client_class()
        deadline = time.monotonic() + timeout
        last_error: object = None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise KafkaBrokerError(self._explain(f"the Kafka broker exited during start-up (exit {code})"))
            if _port_open(self.port):
                try:
                    admin = admin_cls(
                        {
                            "bootstrap.servers": self.bootstrap,
                            "socket.timeout.ms": 2000,
                            "log_level": 0,
                            "logger": _QUIET_LOGGER,
                        }
                    )
                    meta = admin.list_topics(timeout=2)
                    if meta.brokers:
                        return
                except Exception as exc:  # KafkaException while the broker is still coming up
                    last_error = exc
            time.sleep(0.1)
        raise KafkaBrokerError(
            self._explain(f"the Kafka broker did not become ready in {timeout:.0f} s (last client error: {last_error})")
        )

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL after ``grace`` seconds. Data and logs stay."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(10)
        if self._console is not None:
            self._console.close()
            self._console = None
        _LIVE.discard(self)

    def kill(self) -> None:
        """SIGKILL: the broker dies as in a crash (for fault tests)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.stop(grace=0)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- topics ------------------------------------------------------------------------------------------
    def admin(self):
        return _admin_client_class()({"bootstrap.servers": self.bootstrap})

    def create_topics(
        self,
        topics: Iterable[str] | Mapping[str, int],
        *,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        exist_ok: bool = False,
        timeout: float = 30.0,
    ) -> None:
        """Create topics (a list, or a mapping name -> partitions) and wait until each has a leader."""
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import NewTopic

        wanted = dict(topics) if isinstance(topics, Mapping) else {name: partitions for name in topics}
        admin = self.admin()
        new = [
            NewTopic(name, num_partitions=n, replication_factor=1, config=dict(config or {}))
            for name, n in wanted.items()
        ]
        for name, future in admin.create_topics(new, operation_timeout=timeout, request_timeout=timeout).items():
            try:
                future.result(timeout)
            except Exception as exc:
                err = exc.args[0] if exc.args else None
                if exist_ok and getattr(err, "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise KafkaBrokerError(f"could not create topic {name!r} on {self.bootstrap}: {exc}") from exc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            meta = admin.list_topics(timeout=5)
            if all(
                name in meta.topics
                and len(meta.topics[name].partitions) == n
                and all(p.leader >= 0 for p in meta.topics[name].partitions.values())
                for name, n in wanted.items()
            ):
                return
            time.sleep(0.05)
        raise KafkaBrokerError(f"topics {sorted(wanted)} have no leader after {timeout:.0f} s on {self.bootstrap}")

    def delete_topics(self, names: Iterable[str], timeout: float = 30.0) -> None:
        admin = self.admin()
        for future in admin.delete_topics(list(names), operation_timeout=timeout).values():
            future.result(timeout)

    def topics(self) -> set[str]:
        return {t for t in self.admin().list_topics(timeout=10).topics if not t.startswith("__")}

    # -- diagnostics -------------------------------------------------------------------------------------
    def _explain(self, what: str) -> str:
        return (
            f"{what}.\nBroker logs: {self.logs}\n--- console.log (tail) ---\n{_tail(self.logs / 'console.log')}\n"
            f"--- server.log (tail) ---\n{_tail(self.logs / 'server.log')}"
        )

    def describe(self) -> str:
        return f"Kafka {self.version} on {self.bootstrap} (workdir {self.workdir}, logs {self.logs})"


def produce(
    bootstrap: str,
    topic: str,
    messages: Iterable[Mapping[str, object]],
    **config: object,
) -> int:
    """Produce ``{"key":..., "value":..., "headers":..., "timestamp": ms, "partition":...}`` dicts (only ``value``
    is required; a str is UTF-8 encoded, a dict or list becomes JSON) and wait until all are acknowledged."""
    import json

    from confluent_kafka import Producer

    def encode(v: object) -> bytes | None:
        if v is None or isinstance(v, bytes):
            return v
        return (v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))).encode()

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", **config})
    errors: list[str] = []

    def report(err, msg) -> None:  # noqa: ARG001
        if err is not None:
            errors.append(str(err))

    count = 0
    for message in messages:
        kwargs: dict = {"value": encode(message.get("value")), "key": encode(message.get("key")), "on_delivery": report}
        if message.get("headers"):
            kwargs["headers"] = [(k, encode(v)) for k, v in dict(message["headers"]).items()]
        if message.get("timestamp") is not None:
            kwargs["timestamp"] = int(message["timestamp"])
        if message.get("partition") is not None:
            kwargs["partition"] = int(message["partition"])
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
        count += 1
    left = producer.flush(60)
    if left or errors:
        raise KafkaBrokerError(f"producing to {topic} on {bootstrap}: {left} not delivered, errors: {errors[:5]}")
    return count


def consume(
    bootstrap: str,
    topic: str,
    *,
    isolation: str = "read_committed",
    timeout: float = 30.0,
    **config: object,
) -> list[dict]:
    """Every record of ``topic`` from its start to its end (the last stable offset for ``read_committed``), as
    dicts with topic, partition, offset, key, value (bytes), headers (dict of bytes), timestamp (ms) and
    timestamp_type; read with assign() and no consumer group offsets, so a call never changes what the next sees."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"cep-tests-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            **config,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10)
        if topic not in meta.topics or meta.topics[topic].error is not None:
            raise KafkaBrokerError(f"topic {topic!r} does not exist on {bootstrap}")
        partitions = sorted(meta.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        at_end: set[int] = set()
        records: list[dict] = []
        deadline = time.monotonic() + timeout
        while len(at_end) < len(partitions):
            if time.monotonic() > deadline:
                raise KafkaBrokerError(
                    f"reading {topic} on {bootstrap}: partitions {sorted(set(partitions) - at_end)} "
                    f"did not reach their end in {timeout:.0f} s ({len(records)} records read)"
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise KafkaBrokerError(f"reading {topic} on {bootstrap}: {msg.error()}")
            at_end.discard(msg.partition())
            ts_type, ts = msg.timestamp()
            records.append(
                {
                    "topic": msg.topic(),
                    "partition": msg.partition(),
                    "offset": msg.offset(),
                    "key": msg.key(),
                    "value": msg.value(),
                    "headers": dict(msg.headers() or []),
                    "timestamp": ts,
                    "timestamp_type": ts_type,
                }
            )
        return records
    finally:
        consumer.close()


def _port_open(port: int | None) -> bool:
    if port is None:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _admin_client_class():
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise KafkaBrokerError("the Kafka tests need confluent-kafka: pip install -e '.[kafka]'") from exc
    return AdminClient


class _QuietLogger:
    """librdkafka logs connection refusals while the broker starts; they are expected then."""

    def log(self, *args: object, **kwargs: object) -> None:
        pass

    def __getattr__(self, name: str):
        return lambda *a, **k: None


_QUIET_LOGGER = _QuietLogger()

# Brokers this process started: stopped at exit, so an interrupted run leaves no JVM behind.
_LIVE: set[KafkaBroker] = set()


@atexit.register
def _stop_all() -> None:
    for broker in list(_LIVE):
        with contextlib.suppress(Exception):
            broker.stop(grace=10)


def _typed(text: str) -> object:
    """A CSV field as JSON would carry it: a number when it reads as one, else the text (empty: null)."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_events(path: str) -> list[dict]:
    """The rows of a CSV file (a header line) or a JSON-lines file, as dicts."""
    import csv
    import json

    with open(path, encoding="utf-8", newline="") as fh:
        if path.lower().endswith(".csv"):
            return [{k: _typed(v) for k, v in row.items()} for row in csv.DictReader(fh)]
        return [json.loads(line) for line in fh if line.strip()]


def produce_main(argv: list[str]) -> int:
    """``produce BOOTSTRAP TOPIC FILE...``: each row of the files as one JSON message."""
    parser = argparse.ArgumentParser(
        prog="kafka_broker.py produce",
        description="Send each row of CSV or JSON-lines files to a topic as one JSON message.",
    )
    parser.add_argument("bootstrap", help="HOST:PORT of a broker")
    parser.add_argument("topic")
    parser.add_argument("files", nargs="+", metavar="FILE", help=".csv (with a header) or JSON lines")
    parser.add_argument("--key", metavar="COLUMN", help="the message key: this column's value (default: none)")
    parser.add_argument(
        "--rate", type=float, metavar="N", help="at most N messages a second (default: as fast as it can)"
    )
    args = parser.parse_args(argv)
    rows = [row for path in args.files for row in read_events(path)]

    def messages():
        started = time.monotonic()
        for i, row in enumerate(rows):
            if args.rate:
                time.sleep(max(0.0, started + i / args.rate - time.monotonic()))
            yield {"key": None if args.key is None else str(row.get(args.key)), "value": row}

    count = produce(args.bootstrap, args.topic, messages())
    print(f"sent {count} messages to {args.topic}")
    return 0


def consume_main(argv: list[str]) -> int:
    """``consume BOOTSTRAP TOPIC``: print the topic's messages (key, then value) until --count or --timeout."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    parser = argparse.ArgumentParser(
        prog="kafka_broker.py consume",
        description="Print a topic's messages from its start: the key, a tab, the value.",
    )
    parser.add_argument("bootstrap", help="HOST:PORT of a broker")
    parser.add_argument("topic")
    parser.add_argument(
        "--count", type=int, metavar="N", help="stop after N messages (exit 1 if fewer came before --timeout)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="stop after this long without --count messages (default: %(default)s)",
    )
    parser.add_argument(
        "--isolation",
        choices=("read_committed", "read_uncommitted"),
        default="read_committed",
        help="read_committed (default) skips aborted and open transactions",
    )
    parser.add_argument("--headers", action="store_true", help="print the headers too")
    args = parser.parse_args(argv)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"cep-console-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": args.isolation,
            "logger": _QUIET_LOGGER,
        }
    )
    seen = 0
    try:
        meta = consumer.list_topics(args.topic, timeout=10)
        if args.topic not in meta.topics or meta.topics[args.topic].error is not None:
            print(f"error: topic {args.topic!r} does not exist on {args.bootstrap}", file=sys.stderr)
            return 1
        consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in meta.topics[args.topic].partitions])
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline and (args.count is None or seen < args.count):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    print(f"error: {msg.error()}", file=sys.stderr)
                    return 1
                continue
            seen += 1
            key = msg.key().decode("utf-8", "replace") if msg.key() is not None else ""
            value = msg.value().decode("utf-8", "replace") if msg.value() is not None else ""
            headers = (
                "\t" + " ".join(f"{k}={v.decode('utf-8', 'replace')}" for k, v in (msg.headers() or []))
                if args.headers
                else ""
            )
            print(f"{key}\t{value}{headers}", flush=True)
    finally:
        consumer.close()
    if args.count is not None and seen < args.count:
        print(f"error: {seen} of {args.count} messages in {args.timeout:g} s", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("produce", "consume"):
        return (produce_main if argv[0] == "produce" else consume_main)(argv[1:])
    parser = argparse.ArgumentParser(
        description="Run a one-node Kafka broker on 127.0.0.1 until Ctrl-C (make kafka). Also: "
        "'produce BOOTSTRAP TOPIC FILE...' sends rows of CSV/JSON-lines files as JSON messages, "
        "'consume BOOTSTRAP TOPIC' prints a topic (each has --help)."
    )
    parser.add_argument("--dir", help="working folder (config, data, logs); default: a new temporary folder")
    parser.add_argument("--port", type=int, help="client port (default: a free one)")
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="create this topic once the broker is up (repeatable)",
    )
    parser.add_argument("--fetch-only", action="store_true", help="fetch the jars into the cache and exit")
    args = parser.parse_args(argv)

    if args.fetch_only:
        t0 = time.monotonic()
        folder = fetch_jars(quiet=False)
        print(f"Kafka {kafka_version()} jars in {folder} ({time.monotonic() - t0:.1f} s)")
        return 0
    broker = KafkaBroker(args.dir)
    if args.port:
        if _port_open(args.port):
            print(
                f"error: port {args.port} on 127.0.0.1 is taken (another broker?); pick another, e.g. "
                f"make kafka KAFKA_PORT={args.port + 1}",
                file=sys.stderr,
            )
            return 1
        broker.port = args.port
        broker.controller_port = free_port()
    if not _jars_complete(jars_dir(broker.version)):
        fetch_jars(broker.version, quiet=False)
    stop = {"now": False}

    def on_signal(signum, frame):  # noqa: ARG001
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    t0 = time.monotonic()
    broker.start()
    print(f"Kafka {broker.version} (KRaft, one node) is ready in {time.monotonic() - t0:.1f} s")
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        broker.create_topics({name: int(parts or 1)}, exist_ok=True)
        print(f"topic {name} ({parts or 1} partition{'s' if int(parts or 1) > 1 else ''})")
    print(f"bootstrap servers: {broker.bootstrap}")
    print(f"logs: {broker.logs}")
    print("Ctrl-C stops it.", flush=True)
    try:
        while not stop["now"]:
            if not broker.running:
                print(broker._explain("the broker stopped by itself"), file=sys.stderr)
                return 1
            time.sleep(0.5)
    finally:
        print("stopping the broker ...", flush=True)
        broker.stop()
    print(f"stopped; its data and logs stay in {broker.workdir}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KafkaBrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
