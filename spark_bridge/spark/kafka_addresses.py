"""Kafka addresses and source options, checked before Spark sees them (no Spark here): ``kafka://`` URLs
(``KafkaAddress``), the ``--kafka-option`` names Spark's Kafka source knows, and the source's full option set.

- **Addresses**: ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC[,TOPIC...]``; a topic part holding a character no
  topic name can have (anything but letters, digits, ``.``, ``_``, ``-``) is a regular expression, read with
  Spark's ``subscribePattern`` (``kafka://h:9092/ticks-.*``). Without a port, 9092.
- **Options** are Spark's Kafka source options (``startingOffsets``, ``maxOffsetsPerTrigger``,
  ``kafka.security.protocol``, ``kafka.sasl.jaas.config``, ...), checked by name first: Spark ignores an
  option it does not know, so ``startingOffset=latest`` (a typo) would silently read from the start.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from difflib import get_close_matches

from cep.grammar.errors import CepRuntimeError

__all__ = [
    "CepKafkaError",
    "KafkaAddress",
    "SCHEME",
    "bad_address",
    "canonical_option",
    "is_kafka_url",
    "parse_kafka_options",
    "parse_kafka_url",
    "source_options",
]

SCHEME = "kafka"
DEFAULT_PORT = 9092
# A topic name: letters, digits, '.', '_', '-' (Kafka's own rule; at most 249 characters).
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
# Spark 4.2's Kafka source options (docs: structured-streaming-kafka-integration), lower-cased: Spark reads
# option names case-insensitively. Any ``kafka.*`` name goes to the Kafka consumer as is.
SOURCE_OPTIONS = {
    name.lower(): name
    for name in (
        "assign",
        "subscribe",
        "subscribePattern",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "failOnDataLoss",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "minPartitions",
        "maxRecordsPerPartition",
        "groupIdPrefix",
        "includeHeaders",
    )
}
_SUBSCRIPTIONS = ("assign", "subscribe", "subscribepattern")
_STATIC_ONLY = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")


class CepKafkaError(CepRuntimeError):
    """Kafka cannot be used as asked: E0490 a topic that does not exist, E0491 brokers that cannot be reached
    (or refuse us), E0492 an address or option that is not valid. Rendered with the address in front."""

    code = "E0490"


# ------------------------------------------------------------------------------------------ addresses


@dataclass(frozen=True)
class KafkaAddress:
    """Where a topic is: the bootstrap servers, the topics (or one pattern), and the query parameters
    (sinks read their client settings from them)."""

    servers: tuple[str, ...]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    params: tuple[tuple[str, str], ...] = ()
    scheme: str = SCHEME

    @property
    def bootstrap(self) -> str:
        return ",".join(self.servers)

    @property
    def what(self) -> str:
        """The topics in words: ``topic 'ticks'``, ``topics 'a', 'b'``, ``topics matching 'ticks-.*'``."""
        if self.pattern is not None:
            return f"topics matching {self.pattern!r}"
        names = ", ".join(repr(t) for t in self.topics)
        return f"topic{'s' if len(self.topics) > 1 else ''} {names}"

    def __str__(self) -> str:
        path = self.pattern if self.pattern is not None else ",".join(self.topics)
        return f"{self.scheme}://{self.bootstrap}/{path}"

    def subscription(self) -> dict[str, str]:
        """Spark's option naming the topics: ``subscribe`` or ``subscribePattern``."""
        if self.pattern is not None:
            return {"subscribePattern": self.pattern}
        return {"subscribe": ",".join(self.topics)} if self.topics else {}


def is_kafka_url(text: object, scheme: str = SCHEME) -> bool:
    return isinstance(text, str) and text.lower().startswith(f"{scheme}://")


def bad_address(message: str, where: object) -> CepKafkaError:
    """An address or option that is not valid (E0492), reported at ``where`` (the address or the option's origin)."""
    return CepKafkaError(message, code="E0492", filename=str(where))


def parse_kafka_url(text: str, *, scheme: str = SCHEME, topic_required: bool = True) -> KafkaAddress:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC[,TOPIC]`` (or ``/REGEX``) ``[?key=value&...]`` -> KafkaAddress."""
    if not is_kafka_url(text, scheme):
        raise bad_address(f"a Kafka address starts with {scheme}://, e.g. {scheme}://127.0.0.1:9092/events", text)
    rest = text[len(scheme) + 3 :]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    servers = []
    for server in (s.strip() for s in netloc.split(",")):
        if not server:
            continue
        host, colon, port = server.rpartition(":")
        if not colon:
            host, port = server, str(DEFAULT_PORT)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise bad_address(f"{server!r} is not HOST:PORT (e.g. 127.0.0.1:9092)", text)
        servers.append(f"{host}:{int(port)}")
    if not servers:
        raise bad_address(f"no bootstrap server: write {scheme}://HOST:PORT/TOPIC", text)
    path = urllib.parse.unquote(path)
    topics: tuple[str, ...] = ()
    pattern = None
    if path:
        names = tuple(t.strip() for t in path.split(","))
        if all(_TOPIC_NAME.match(t) for t in names):
            topics = names
        else:
            try:
                re.compile(path)
            except re.error as exc:
                raise bad_address(
                    f"{path!r} is neither topic names (letters, digits, '.', '_', '-') nor a regular "
                    f"expression ({exc})",
                    text,
                ) from None
            pattern = path
    if topic_required and not topics and pattern is None:
        raise bad_address(f"no topic: write {scheme}://{','.join(servers)}/TOPIC", text)
    params = tuple(urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=False)) if query else ()
    return KafkaAddress(tuple(servers), topics, pattern, params, scheme)


# -------------------------------------------------------------------------------------------- options


def parse_kafka_options(items: Iterable[str] | None, *, where: str = "--kafka-option") -> dict[str, str]:
    """``KEY=VALUE`` items (``@FILE`` reads such lines from a file: secrets stay out of the process list)
    -> an options dict, each name checked against Spark's Kafka source options."""
    options: dict[str, str] = {}

    def add(item: str, origin: str) -> None:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise bad_address(f"{origin}: expected KEY=VALUE, e.g. startingOffsets=latest; got {item!r}", where)
        options[canonical_option(key, where=origin)] = value.strip()

    for item in items or []:
        if item.startswith("@"):
            path = item[1:]
            try:
                with open(path, encoding="utf-8") as fh:
                    lines = fh.read().splitlines()
            except OSError as exc:
                raise bad_address(f"cannot read the options file {path}: {exc.strerror or exc}", where) from None
            for number, line in enumerate(lines, 1):
                if line.strip() and not line.lstrip().startswith("#"):
                    add(line, f"{path}:{number}")
        else:
            add(item, where)
    return options


def canonical_option(name: str, *, where: str = "--kafka-option") -> str:
    """Spark's spelling of a source option; an unknown name is an error with the nearest known one."""
    if name.lower().startswith("kafka."):
        if name.lower() == "kafka.bootstrap.servers":
            raise bad_address("the bootstrap servers come from the kafka:// address, not from an option", where)
        return name
    known = SOURCE_OPTIONS.get(name.lower())
    if known is None:
        near = get_close_matches(name.lower(), list(SOURCE_OPTIONS), n=1)
        hint = f" (did you mean {SOURCE_OPTIONS[near[0]]}?)" if near else ""
        raise bad_address(
            f"{name!r} is not an option of Spark's Kafka source{hint}; Kafka client settings start with "
            "'kafka.' (kafka.security.protocol=SASL_SSL)",
            where,
        )
    return known


def source_options(address: KafkaAddress, options: Mapping[str, str], *, streaming: bool) -> dict[str, str]:
    """Every option of the Spark read: servers, topics, and the user's, with cep's defaults (from the
    earliest offsets; a static read up to the latest)."""
    lowered = {k.lower() for k in options}
    given = [k for k in options if k.lower() in _SUBSCRIPTIONS]
    if given and (address.topics or address.pattern):
        raise bad_address(f"the topics are in the address; drop --kafka-option {given[0]}", address)
    if not given and not (address.topics or address.pattern):
        raise bad_address(
            "no topic: put it in the address (kafka://HOST:PORT/TOPIC) or give subscribe/subscribePattern/assign",
            address,
        )
    if streaming:
        static = [k for k in options if k.lower() in _STATIC_ONLY]
        if static:
            raise bad_address(f"{static[0]} is for a static read (cep run); a stream reads on", address)
    out = {"kafka.bootstrap.servers": address.bootstrap, **address.subscription()}
    if not lowered & {"startingoffsets", "startingtimestamp", "startingoffsetsbytimestamp"}:
        out["startingOffsets"] = "earliest"
    if not streaming and not lowered & set(_STATIC_ONLY):
        out["endingOffsets"] = "latest"
    out.update(options)
    return out
