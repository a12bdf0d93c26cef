"""Alerts to a Kafka topic: ``KafkaSink`` (``--sink kafka://HOST:PORT/TOPIC``, at least once) and
``KafkaExactlyOnceSink`` (``--sink kafka-exactly-once://HOST:PORT/TOPIC``, one transaction per micro-batch).

**The message** (both sinks, ``alert_message``): one per alert; key = ``match_id`` (UTF-8); value = the alert as
the JSON object every sink sends (``alerts.alert_payload``: rule id and version, match id and status,
partition key and measures as objects, event times and emit time ISO 8601 with ``Z``, compact, UTF-8);
headers ``cep-rule-id``, ``cep-rule-version``, ``cep-match-status``, ``content-type: application/json``;
timestamp = the alert's ``emit_time`` (so a redelivered alert carries the same one). A micro-batch's messages
are made column by column, and two Kafka sinks of one process share them (``kafka_messages.py``: made once, not
once per sink). Keys are placed with
``murmur2_random``, the partitioner of Kafka's Java clients, so one ``match_id`` always lands on one
partition whoever writes it.

**At least once** (``KafkaSink``): an idempotent producer (``acks=all``) sends the micro-batch and waits until
the brokers acknowledged every message; if any is not acknowledged within ``timeout``, the sink raises
``CepSinkError`` and the micro-batch is not committed: it is delivered again when the delivery restarts.
A micro-batch replayed after a crash is sent again too. Duplicates are harmless by construction: a
replayed alert comes from the same committed row of the alert files, so its key, value, headers and
timestamp are byte for byte the same; a compacted topic keeps one, and a consumer keyed on ``match_id``
sees each alert once.

**Exactly once** (``KafkaExactlyOnceSink``): each micro-batch's alerts go in one Kafka transaction together
with a record of the micro-batch id in a control topic (key = the transactional id, value
``{"batch_id": N, ...}``). Before its first delivery the sink calls ``init_transactions`` with its
``transactional.id``, which fences an older producer with the same id (a killed ``cep stream``) and aborts
its open transaction, then reads the control topic (``read_committed``) for the last committed batch id.
A micro-batch whose id is not above it was committed before a crash and is skipped. So a
``read_committed`` consumer of the alert topic sees every alert exactly once across ``kill -9``s.
The transactional id must be the same after a restart: it is created once and kept in the stream's
checkpoint (``state_dir``: ``<checkpoint>/sinks/``), so a new checkpoint is a new producer identity (and
its micro-batch ids, which start again at 0, are not compared with the old one's). It relies on the
stream's micro-batch ids, the ids of the one query that matches and hands the alerts over in the same
``foreachBatch`` (``alerting/stream.py``): increasing, and a micro-batch Spark runs again after a crash is
handed to the sink's outbox once under its id (``lanes.DeliveryLanes.spool``), so the transaction of a
batch id carries the alerts that the file sink committed under it. A checkpoint of the older two-query
layout, whose ids came from a second query reading the alert files, is migrated so that the new ids are
above every id that query used (``alerting.layouts.retire_delivery_query``).

Client settings: ``bootstrap.servers`` from the address; librdkafka settings (confluent-kafka, e.g.
``security.protocol``, ``sasl.mechanism``, ``sasl.username``) from the address's query string
(``kafka://h:9093/alerts?security.protocol=SASL_SSL&sasl.mechanism=PLAIN``) or ``settings=``; ``config=PATH``
in the query string reads ``key=value`` lines from a file (secrets stay off the command line). The
exactly-once sink's ``control_topic=NAME`` names its control topic (default ``cep-sink-batches``,
created compacted when missing).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from cep.spark_bridge.sinks.base import AlertSink, CepSinkError, Delivery, not_committed
from cep.spark_bridge.sinks.kafka_messages import SHARED_MESSAGES, SharedMessages, alert_message
from cep.spark_bridge.spark.kafka_addresses import CepKafkaError, KafkaAddress, parse_kafka_url

# Imported inside functions: confluent_kafka, an optional dependency (the "kafka" extra: librdkafka in a wheel).

__all__ = [
    "EXACTLY_ONCE_SCHEME",
    "SCHEME",
    "KafkaExactlyOnceSink",
    "KafkaSink",
    "SharedMessages",
    "alert_message",
    "is_kafka_sink",
]

SCHEME = "kafka"
EXACTLY_ONCE_SCHEME = "kafka-exactly-once"
DEFAULT_CONTROL_TOPIC = "cep-sink-batches"
# How long a micro-batch may wait for the brokers' acknowledgements (librdkafka retries inside it): past it the
# micro-batch is not committed and comes again. Under the 60 s retry budget of the other sinks' RetryPolicy.
DEFAULT_TIMEOUT_S = 45.0
# How long the start-up checks (topic lookups, init_transactions) wait for the brokers.
CHECK_TIMEOUT_S = 15.0
# Messages produced between two polls of the delivery reports: a poll per message cost as much as the produce;
# librdkafka's queue holds 100,000 messages, and a full queue is drained by a poll where it happens.
POLL_EVERY = 1_000

log = logging.getLogger("cep.kafka")
# librdkafka's own log lines (a broker that refuses connections logs one per second) go to this logger: to the
# application's log handlers when it has some, never to the console by Python's last-resort handler.
log.addHandler(logging.NullHandler())


class BrokerLog:
    """librdkafka's log lines of one sink's clients (the ``logger`` setting): while the brokers do not answer
    it logs every second, so the console gets one warning when an outage starts and one line when the
    brokers answer again (``answered``, after a delivery); the lines between go to the debug level.
    Each error line counts as a failed attempt (``cep_sink_failures_total``)."""

    def __init__(self, describe: str) -> None:
        self.describe = describe
        self.lock = threading.Lock()
        self.failures = 0
        self.outage_since: float | None = None
        self.quiet = 0  # error lines not shown in the current outage

    def log(self, level: int, fmt: str, *args) -> None:
        message = fmt % args if args else fmt
        if level < logging.ERROR:  # notices and warnings (a coordinator loading: retrying); quiet in an outage
            log.log(logging.DEBUG if self.outage_since is not None else level, message)
            return
        with self.lock:
            self.failures += 1
            first = self.outage_since is None
            if first:
                self.outage_since = time.monotonic()
            else:
                self.quiet += 1
        if first:
            log.warning(
                "kafka sink %s: the brokers do not answer (%s); its alerts wait in its outbox; "
                "one line when they answer again",
                self.describe,
                message,
            )
        else:
            log.debug(message)

    def answered(self) -> None:
        with self.lock:
            since, quiet = self.outage_since, self.quiet
            self.outage_since, self.quiet = None, 0
        if since is not None:
            log.warning(
                "kafka sink %s: the brokers answer again after %ds (%d more error lines at debug level)",
                self.describe,
                int(time.monotonic() - since),
                quiet,
            )


def is_kafka_sink(spec: str) -> bool:
    lowered = spec.lower()
    return lowered.startswith((f"{SCHEME}://", f"{EXACTLY_ONCE_SCHEME}://"))


def _kafka():
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401 - a submodule the package does not import itself
    except ImportError as exc:  # the "kafka" extra is not installed
        raise ValueError(f"a Kafka sink needs confluent-kafka ({exc}): pip install 'cep-spark[kafka]'") from None
    return confluent_kafka


def _settings(address: KafkaAddress, extra: Mapping[str, str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(librdkafka settings, cep's own parameters) from the address's query string and ``extra``."""
    given: dict[str, str] = {}
    for key, value in address.params:
        if key == "config":
            try:
                with open(value, encoding="utf-8") as fh:
                    lines = fh.read().splitlines()
            except OSError as exc:
                raise ValueError(f"cannot read the Kafka settings file {value}: {exc.strerror or exc}") from None
            for line in lines:
                name, sep, setting = line.partition("=")
                if sep and name.strip() and not name.lstrip().startswith("#"):
                    given[name.strip()] = setting.strip()
        else:
            given[key] = value
    given.update(extra or {})
    ours = {k: given.pop(k) for k in ("control_topic",) if k in given}
    return given, ours


class KafkaSink(AlertSink):
    """One JSON message per alert, keyed by ``match_id``; at least once, duplicates byte-identical."""

    name = "kafka"
    scheme = SCHEME

    def __init__(
        self,
        url: str,
        *,
        settings: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        check: bool = True,
        check_timeout: float = CHECK_TIMEOUT_S,
    ) -> None:
        self.url = url
        self.check_timeout = check_timeout
        address = parse_kafka_url(url, scheme=self.scheme)
        if address.pattern is not None or len(address.topics) != 1:
            raise ValueError(f"{url}: a Kafka sink writes to one topic (kafka://HOST:PORT/TOPIC)")
        self.address = address
        self.topic = address.topics[0]
        client, self.options = _settings(address, settings)
        self.timeout = timeout
        self.config = {
            "bootstrap.servers": address.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "message.timeout.ms": int(timeout * 1000),
            **client,
        }
        self.broker_log = BrokerLog(self.describe())
        self.config["logger"] = self.broker_log
        self._producer = None
        SHARED_MESSAGES.sinks.add(self)
        if check:
            self.check()

    def describe(self) -> str:
        return f"{self.scheme}://{self.address.bootstrap}/{self.topic}"

    # -- start-up

    def _client_config(self) -> dict:
        """The settings a metadata client or consumer takes (no producer-only ones)."""
        producer_only = {
            "acks",
            "enable.idempotence",
            "partitioner",
            "linger.ms",
            "message.timeout.ms",
            "transactional.id",
            "transaction.timeout.ms",
        }
        return {k: v for k, v in self.config.items() if k not in producer_only}

    def _topics(self, names: Sequence[str]) -> dict[str, Any]:
        """Metadata of ``names`` (``TopicMetadata`` or None when missing); raises E0491 when unreachable."""
        kafka = _kafka()
        admin = kafka.admin.AdminClient({**self._client_config(), "socket.timeout.ms": int(self.check_timeout * 1000)})
        try:
            meta = admin.list_topics(timeout=self.check_timeout)
        except kafka.KafkaException as exc:
            raise CepKafkaError(
                f"cannot reach the Kafka brokers at {self.address.bootstrap} within {self.check_timeout:g} s "
                f"({exc.args[0].str() if exc.args else exc}); is the broker running, and is the address right?",
                code="E0491",
                filename=self.describe(),
            ) from None
        found = {}
        for name in names:
            topic = meta.topics.get(name)
            found[name] = topic if topic is not None and topic.error is None else None
        return found

    def check(self) -> None:
        """The alert topic exists (auto-creation is off on most clusters, and a producer would wait 60 s)."""
        if self._topics([self.topic])[self.topic] is None:
            raise CepKafkaError(
                f"topic {self.topic!r} does not exist on {self.address.bootstrap}; create it first "
                "(kafka-topics.sh --create, or make kafka TOPICS=...)",
                code="E0490",
                filename=self.describe(),
            )

    def producer(self):
        if self._producer is None:
            self._producer = _kafka().Producer(self.config)
        return self._producer

    # -- delivery

    def _send(self, producer, topic: str, message: dict, failures: list[str]) -> None:
        def report(err, _msg) -> None:
            if err is not None:
                failures.append(err.str())

        kwargs = {
            "key": message["key"],
            "value": message["value"],
            "headers": message["headers"],
            "on_delivery": report,
        }
        if message["timestamp"] is not None:
            kwargs["timestamp"] = message["timestamp"]
        while True:
            try:
                producer.produce(topic, **kwargs)
                return
            except BufferError:  # librdkafka's local queue is full: let deliveries drain
                producer.poll(0.1)

    def _send_all(self, producer, alerts: Sequence[dict], failures: list[str]) -> None:
        """Every alert's message to the alert topic (made at once: ``SharedMessages.messages``), serving delivery
        reports every ``POLL_EVERY`` messages; ``flush`` or the transaction's commit waits for the rest."""

        def report(err, _msg) -> None:
            if err is not None:
                failures.append(err.str())

        produce, topic = producer.produce, self.topic
        for index, message in enumerate(SHARED_MESSAGES.messages(alerts)):
            key, value, headers = message["key"], message["value"], message["headers"]
            timestamp = message["timestamp"] or 0  # 0: librdkafka's "now", as when none is given
            while True:
                try:
                    produce(topic, value, key, headers=headers, timestamp=timestamp, on_delivery=report)
                    break
                except BufferError:  # librdkafka's local queue is full: let deliveries drain
                    producer.poll(0.1)
            if index % POLL_EVERY == POLL_EVERY - 1:
                producer.poll(0)

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        producer = self.producer()
        failures: list[str] = []
        self._send_all(producer, alerts, failures)
        left = producer.flush(self.timeout)
        if left or failures:
            missing = left + len(failures)
            raise CepSinkError(
                f"{missing} of {len(alerts)} alerts not acknowledged by {self.address.bootstrap} "
                f"within {self.timeout:g} s"
                + (f" ({failures[0]})" if failures else "")
                + f"; {not_committed(batch_id)}",
                filename=self.describe(),
            )
        report.delivered.update(alert["rule_id"] for alert in alerts)
        self.broker_log.answered()
        return report

    def transient_failures(self) -> int:
        return self.broker_log.failures

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout)
            self._producer = None


def stable_transactional_id(state_dir: str, describe: str, *, kind: str = "kafka-exactly-once") -> str:
    """The sink's ``transactional.id``: made once per checkpoint and sink, kept in ``state_dir``, so a restarted
    stream uses the same id (and fences its predecessor) even when the checkpoint moved. ``kind`` names the
    sink's file (the Delta sink keeps its application id the same way)."""
    os.makedirs(state_dir, exist_ok=True)
    digest = hashlib.sha256(describe.encode("utf-8")).hexdigest()[:12]
    path = os.path.join(state_dir, f"{kind}-{digest}.json")
    record = {
        "transactional_id": f"cep-{uuid.uuid4().hex[:20]}",
        "sink": describe,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(),
    }
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        pass
    else:  # created once; a reader racing us finds the complete file (written and fsynced before we return)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(record))
            fh.flush()
            os.fsync(fh.fileno())
    for _ in range(50):
        try:
            with open(path, encoding="utf-8") as fh:
                return json.load(fh)["transactional_id"]
        except (ValueError, KeyError):  # another process is writing it this instant
            time.sleep(0.02)
    raise ValueError(f"{path} holds no transactional id: remove it to start a new producer identity")


class KafkaExactlyOnceSink(KafkaSink):
    """Each micro-batch's alerts in one Kafka transaction with its batch id in a control topic; replays skipped."""

    name = "kafka-exactly-once"
    scheme = EXACTLY_ONCE_SCHEME

    def __init__(
        self,
        url: str,
        *,
        transactional_id: str | None = None,
        state_dir: str | None = None,
        settings: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        check: bool = True,
        check_timeout: float = CHECK_TIMEOUT_S,
    ) -> None:
        super().__init__(url, settings=settings, timeout=timeout, check=False, check_timeout=check_timeout)
        if transactional_id is None:
            if state_dir is None:
                raise ValueError(
                    f"{url}: the exactly-once Kafka sink needs a transactional_id or a state_dir to keep one in"
                )
            transactional_id = stable_transactional_id(state_dir, self.describe())
        self.transactional_id = transactional_id
        self.control_topic = self.options.get("control_topic", DEFAULT_CONTROL_TOPIC)
        self.config.update({"transactional.id": transactional_id, "transaction.timeout.ms": 60_000})
        self.last_batch: int | None = None
        self.skipped: list[int] = []
        if check:
            self.check()

    def check(self) -> None:
        """The alert topic exists; the control topic too (created compacted, one partition, when missing)."""
        found = self._topics([self.topic, self.control_topic])
        if found[self.topic] is None:
            super().check()
        if found[self.control_topic] is None:
            self._create_control_topic()

    def _create_control_topic(self) -> None:
        kafka = _kafka()
        admin = kafka.admin.AdminClient(self._client_config())
        topic = kafka.admin.NewTopic(
            self.control_topic, num_partitions=1, replication_factor=-1, config={"cleanup.policy": "compact"}
        )
        try:
            admin.create_topics([topic], request_timeout=CHECK_TIMEOUT_S)[self.control_topic].result(CHECK_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - KafkaException, or a timeout
            error = exc.args[0] if exc.args else exc
            if getattr(error, "code", lambda: None)() == kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                return
            raise CepKafkaError(
                f"the control topic {self.control_topic!r} (the record of committed micro-batches) does not exist on "
                f"{self.address.bootstrap} and could not be created "
                f"({getattr(error, 'str', lambda: str(error))()}); create "
                "it (one partition, cleanup.policy=compact) or name another with ?control_topic=NAME",
                code="E0490",
                filename=self.describe(),
            ) from None

    def _start(self) -> None:
        """Fence any older producer with this id (aborting its open transaction), then find the last batch."""
        kafka = _kafka()
        producer = kafka.Producer(self.config)
        try:
            producer.init_transactions(CHECK_TIMEOUT_S * 2)
        except kafka.KafkaException as exc:
            raise CepSinkError(
                f"cannot start transactions on {self.address.bootstrap} "
                f"({exc.args[0].str() if exc.args else exc}); the micro-batch is not committed and comes again",
                filename=self.describe(),
            ) from None
        self._producer = producer
        self.last_batch = self.last_committed_batch()

    def last_committed_batch(self) -> int | None:
        """The highest micro-batch id this sink committed (the control topic, ``read_committed``), or None."""
        kafka = _kafka()
        consumer = kafka.Consumer(
            {
                **self._client_config(),
                "group.id": f"{self.transactional_id}-control-reader",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
        key = self.transactional_id.encode("utf-8")
        last: int | None = None
        try:
            meta = consumer.list_topics(self.control_topic, timeout=CHECK_TIMEOUT_S).topics[self.control_topic]
            partitions = sorted(meta.partitions)
            consumer.assign([kafka.TopicPartition(self.control_topic, p, kafka.OFFSET_BEGINNING) for p in partitions])
            done: set[int] = set()
            deadline = time.monotonic() + CHECK_TIMEOUT_S * 2
            while len(done) < len(partitions):
                if time.monotonic() > deadline:
                    raise CepSinkError(
                        f"could not read the control topic {self.control_topic!r} to its end in "
                        f"{CHECK_TIMEOUT_S * 2:g} s; the micro-batch is not committed and comes again",
                        filename=self.describe(),
                    )
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == kafka.KafkaError._PARTITION_EOF:
                        done.add(msg.partition())
                        continue
                    raise CepSinkError(
                        f"reading the control topic {self.control_topic!r}: {msg.error().str()}",
                        filename=self.describe(),
                    )
                done.discard(msg.partition())
                if msg.key() == key and msg.value():
                    batch = json.loads(msg.value())["batch_id"]
                    last = batch if last is None else max(last, batch)
        finally:
            consumer.close()
        return last

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        if self._producer is None:
            self._start()
        if self.last_batch is not None and batch_id <= self.last_batch:
            self.skipped.append(batch_id)
            log.info(
                "%s: micro-batch %s was committed before (last %s): skipped", self.describe(), batch_id, self.last_batch
            )
            # Its alerts are on the topic, committed by a run whose record of it a crash lost: they count as
            # delivered now (the status counts each micro-batch's record once, by its name, so never twice).
            for alert in alerts:
                report.delivered[alert["rule_id"]] += 1
            return report
        kafka = _kafka()
        producer = self._producer
        failures: list[str] = []
        try:
            producer.begin_transaction()
            self._send_all(producer, alerts, failures)
            control = {
                "batch_id": batch_id,
                "alerts": len(alerts),
                "topic": self.topic,
                "committed_at": _dt.datetime.now(_dt.UTC).isoformat(),
            }
            self._send(
                producer,
                self.control_topic,
                {
                    "key": self.transactional_id.encode("utf-8"),
                    "value": json.dumps(control).encode("utf-8"),
                    "headers": [],
                    "timestamp": None,
                },
                failures,
            )
            producer.commit_transaction(self.timeout)
        except kafka.KafkaException as exc:
            error = exc.args[0] if exc.args else None
            self._abandon(producer, error)
            raise CepSinkError(
                f"the transaction of micro-batch {batch_id} ({len(alerts)} alerts) failed: "
                f"{error.str() if error is not None else exc}; nothing of it is visible to read_committed "
                f"consumers, and {not_committed(batch_id)}",
                filename=self.describe(),
            ) from None
        if failures:  # commit_transaction succeeds only when every message was delivered; kept as a guard
            raise CepSinkError(
                f"{len(failures)} messages of micro-batch {batch_id} failed ({failures[0]})", filename=self.describe()
            )
        self.last_batch = batch_id
        report.delivered.update(alert["rule_id"] for alert in alerts)
        self.broker_log.answered()
        return report

    def _abandon(self, producer, error) -> None:
        """After a failed transaction: abort it when Kafka allows; in any case start again from init_transactions
        (which also learns whether a commit whose answer was lost did go through)."""
        if error is not None and error.txn_requires_abort():
            try:
                producer.abort_transaction(self.timeout)
            except Exception:  # noqa: BLE001 - the next init_transactions aborts it anyway
                pass
        self._producer = None
        self.last_batch = None

    def close(self) -> None:
        self._producer = None  # nothing is left open between micro-batches: each ends with its commit
