"""The check before a Kafka query starts: the topics looked up with Kafka's own ``AdminClient`` inside Spark's
JVM (the connector brings ``kafka-clients``), with the same ``kafka.*`` settings Spark will use (security
included). Spark's own error for a missing topic names neither the topic nor the servers
(``UnknownTopicOrPartitionException: This server does not host this topic-partition``), and for a missing
sink topic it waits 60 s first; here a missing topic is ``CepKafkaError`` E0490 naming both, unreachable
brokers E0491, a bad address or option E0492. The Java stack trace goes to the Spark log file
(``session.spark_log_path()``), never to the console. The same client reads partition offsets for the
schema's sample (``JvmAdmin.offsets``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cep.spark_bridge.spark.kafka_addresses import CepKafkaError, KafkaAddress, bad_address
from cep.spark_bridge.spark.session import spark_log_path

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

# Imported inside functions: py4j, with pyspark an optional dependency (the "spark" extra).

__all__ = ["CHECK_TIMEOUT_S", "JvmAdmin", "admin_for", "check_topics", "client_settings"]

# How long the check before a query waits for the brokers: long enough for a cluster under load, short enough
# that a wrong address is reported while the person is still looking at the terminal.
CHECK_TIMEOUT_S = 15


def client_settings(address: KafkaAddress, options: Mapping[str, str]) -> dict[str, str]:
    """The Kafka client settings of the source (``kafka.*`` options without the prefix), for the check."""
    settings = {
        "request.timeout.ms": str(CHECK_TIMEOUT_S * 1000),
        "default.api.timeout.ms": str(CHECK_TIMEOUT_S * 1000),
    }
    settings.update({k[len("kafka.") :]: v for k, v in options.items() if k.lower().startswith("kafka.")})
    settings["bootstrap.servers"] = address.bootstrap
    return settings


@dataclass
class JvmAdmin:
    """Kafka's AdminClient in Spark's JVM (py4j), with the source's own client settings."""

    spark: Any
    address: KafkaAddress
    settings: dict[str, str]
    admin: Any = field(default=None, init=False)

    def __enter__(self) -> JvmAdmin:
        jvm = self.spark._jvm
        props = jvm.java.util.Properties()
        for key, value in self.settings.items():
            props.put(key, value)
        self.admin = self._call(lambda: jvm.org.apache.kafka.clients.admin.Admin.create(props), "connecting")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.admin is not None:
            try:
                self.admin.close(self.spark._jvm.java.time.Duration.ofSeconds(2))
            except Exception:  # noqa: BLE001 - closing never hides the error being raised
                pass

    def _get(self, future: Any) -> Any:
        return future.get(CHECK_TIMEOUT_S + 5, self.spark._jvm.java.util.concurrent.TimeUnit.SECONDS)

    def _call(self, action, doing: str) -> Any:
        from py4j.protocol import Py4JJavaError

        try:
            return action()
        except Py4JJavaError as exc:
            raise _java_error(exc, self.address, doing) from None

    def topics(self) -> set[str]:
        return set(self._call(lambda: self._get(self.admin.listTopics().names()), "listing topics"))

    def partitions(self, topics: Sequence[str]) -> dict[str, int]:
        jvm = self.spark._jvm
        names = jvm.java.util.ArrayList()
        for topic in topics:
            names.add(topic)
        found = self._call(lambda: self._get(self.admin.describeTopics(names).allTopicNames()), "describing topics")
        return {str(name): int(found.get(name).partitions().size()) for name in topics}

    def offsets(self, partitions: dict[str, int]) -> dict[tuple[str, int], tuple[int, int]]:
        """(earliest, latest) offset of every partition."""
        jvm = self.spark._jvm
        admin_pkg = jvm.org.apache.kafka.clients.admin

        def ask(spec) -> dict[tuple[str, int], int]:
            wanted = jvm.java.util.HashMap()
            for topic, count in partitions.items():
                for p in range(count):
                    wanted.put(jvm.org.apache.kafka.common.TopicPartition(topic, p), spec)
            answer = self._call(lambda: self._get(self.admin.listOffsets(wanted).all()), "reading offsets")
            return {(str(tp.topic()), int(tp.partition())): int(answer.get(tp).offset()) for tp in answer.keySet()}

        first, last = ask(admin_pkg.OffsetSpec.earliest()), ask(admin_pkg.OffsetSpec.latest())
        return {tp: (first[tp], last[tp]) for tp in first}


def _java_error(exc: Any, address: KafkaAddress, doing: str) -> CepKafkaError:
    """A Java failure of the check as a CepKafkaError; the Java stack trace goes to the Spark log file."""
    log = spark_log_path()
    try:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"\n[cep] Kafka check of {address} failed while {doing}:\n{exc}\n")
    except OSError:
        log = "(the Spark log could not be written)"
    chain = []
    cause = getattr(exc, "java_exception", None)
    while cause is not None and len(chain) < 8:
        chain.append((str(cause.getClass().getSimpleName()), str(cause.getMessage() or "")))
        cause = cause.getCause()
    names = {name for name, _ in chain}
    detail = next((f"{name}: {message}" for name, message in reversed(chain) if message), chain[-1][0] if chain else "")
    servers = address.bootstrap
    if names & {"UnknownTopicOrPartitionException"}:
        return CepKafkaError(
            f"{address.what} does not exist on {servers} ({detail})", code="E0490", filename=str(address)
        )
    if names & {"SaslAuthenticationException", "AuthenticationException", "SslAuthenticationException"}:
        why = (
            f"the Kafka brokers at {servers} refused to authenticate us ({detail}); "
            "check the kafka.security.* and kafka.sasl.* options"
        )
    elif names & {"TopicAuthorizationException", "ClusterAuthorizationException", "GroupAuthorizationException"}:
        why = f"the Kafka brokers at {servers} do not allow us to read {address.what} ({detail})"
    elif names & {"TimeoutException"}:
        why = (
            f"cannot reach the Kafka brokers at {servers}: no answer while {doing} within {CHECK_TIMEOUT_S} s; "
            "is the broker running, and is the address (host and port of a listener) right?"
        )
    elif names & {"ConfigException"}:
        why = f"cannot connect to {servers}: {detail}"
    else:
        why = f"the Kafka check of {address.what} on {servers} failed while {doing}: {detail}"
    return CepKafkaError(f"{why} (Java stack trace in {log})", code="E0491", filename=str(address))


@contextmanager
def admin_for(
    spark: SparkSession, address: KafkaAddress, options: Mapping[str, str], admin: JvmAdmin | None
) -> Iterator[JvmAdmin]:
    """``admin`` if open, else a new one closed at the end (``read_kafka`` asks all on one client)."""
    if admin is not None:
        yield admin
        return
    with JvmAdmin(spark, address, client_settings(address, options)) as opened:
        yield opened


def check_topics(
    spark: SparkSession,
    address: KafkaAddress,
    options: Mapping[str, str] | None = None,
    *,
    allow_none: bool = True,
    admin: JvmAdmin | None = None,
) -> dict[str, int]:
    """The topics the address names (or its pattern matches now) and their partition counts; raises
    CepKafkaError when a named topic does not exist (E0490, listing the topics there) or the brokers cannot be
    asked (E0491). A pattern that matches nothing yet is fine for a stream (``allow_none``), which picks
    the topics up when they appear. ``admin``: an open client to ask (else one is opened here)."""
    options = dict(options or {})
    with admin_for(spark, address, options, admin) as admin:
        existing = admin.topics()
        if address.pattern is not None:
            regex = re.compile(address.pattern)
            wanted = sorted(t for t in existing if regex.fullmatch(t))
            if not wanted and not allow_none:
                raise CepKafkaError(
                    f"no topic on {address.bootstrap} matches {address.pattern!r}{_listing(existing)}",
                    code="E0490",
                    filename=str(address),
                )
        else:
            wanted = list(address.topics) or _subscribed(options)
            missing = [t for t in wanted if t not in existing]
            if missing:
                raise CepKafkaError(
                    f"topic {missing[0]!r} does not exist on {address.bootstrap}{_listing(existing)}; create it first "
                    "(kafka-topics.sh --create, or make kafka TOPICS=...), or fix the name",
                    code="E0490",
                    filename=str(address),
                )
        return admin.partitions(wanted) if wanted else {}


def _subscribed(options: Mapping[str, str]) -> list[str]:
    for key, value in options.items():
        if key.lower() == "subscribe":
            return [t.strip() for t in value.split(",") if t.strip()]
        if key.lower() == "assign":
            try:
                return list(json.loads(value))
            except (ValueError, TypeError):
                raise bad_address(
                    f'assign must be JSON like {{"ticks": [0, 1]}}, not {value!r}', "--kafka-option"
                ) from None
    return []


def _listing(existing: Iterable[str], limit: int = 12) -> str:
    names = sorted(t for t in existing if not t.startswith("__"))
    if not names:
        return " (it has no topics)"
    shown = ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
    return f" (topics there: {shown})"
