"""One micro-batch's alerts to every sink (``deliver_batch``), and the sinks ``cep stream --sink`` names."""

from __future__ import annotations

import os
from collections.abc import Sequence

from cep.spark_bridge.sinks.alerts import FILE_FORMATS
from cep.spark_bridge.sinks.base import AlertSink, Delivery, DeliveryError
from cep.spark_bridge.sinks.console import ConsoleSink
from cep.spark_bridge.sinks.delta import DeltaSink
from cep.spark_bridge.sinks.kafka import EXACTLY_ONCE_SCHEME, KafkaExactlyOnceSink, KafkaSink, is_kafka_sink
from cep.spark_bridge.sinks.safe_text import check_url, url_key
from cep.spark_bridge.sinks.sql import PostgresSink, SQLiteSink
from cep.spark_bridge.sinks.webhook import WebhookSink
from cep.spark_bridge.spark.delta import is_delta

# The sinks ``cep stream --sink KIND ARG`` names, and what ARG is (None: the sink takes none). A new sink
# is a line here and its branch in ``make_sink``; the command reads its choices and messages from here.
SINK_ARGUMENTS: dict[str, str | None] = {"console": None, "webhook": "URL", "sqlite": "PATH", "postgres": "URL"}
SINK_SYNONYMS = {"postgresql": "postgres"}
# ``--sink json|parquet|csv``: the format of the files of alerts in --output (sinks/file.py), no argument.
FILE_SINKS = FILE_FORMATS
SINKS_HELP = ", ".join(
    [
        *(f"{kind} {arg}" if arg else kind for kind, arg in SINK_ARGUMENTS.items()),
        *FILE_SINKS,
        "delta:PATH",
        "kafka://HOST:PORT/TOPIC",
        f"{EXACTLY_ONCE_SCHEME}://HOST:PORT/TOPIC",
    ]
)


def sink_kind(kind: str) -> str | None:
    """A ``--sink`` word as ``SINK_ARGUMENTS`` names it (any case, a synonym); None when it names no sink."""
    lowered = kind.lower()
    lowered = SINK_SYNONYMS.get(lowered, lowered)
    return lowered if lowered in SINK_ARGUMENTS else None


def deliver_batch(alerts: Sequence[dict], batch_id: int, sinks: Sequence[AlertSink]) -> list[Delivery]:
    """Give every sink its alerts (the suppressed ones only to sinks that ask for them).

    Every sink is tried even if one fails; then the first failure is raised again, so that the
    micro-batch is retried (every sink is idempotent by match_id, so the retry delivers nothing twice).
    The webhook sink does not raise for a failed delivery: it dead-letters it.
    """
    reports: list[Delivery] = []
    failure: BaseException | None = None
    for sink in sinks:
        chosen = [a for a in alerts if sink.include_suppressed or not a.get("suppressed")]
        if not chosen:
            reports.append(Delivery(sink.name))
            continue
        try:
            reports.append(sink.deliver(chosen, batch_id))
        except Exception as exc:  # noqa: BLE001 - reported, then raised again below
            report = Delivery(sink.name)
            rules = tuple(sorted({str(a.get("rule_id")) for a in chosen}))
            report.errors.append(DeliveryError(sink.redact(f"{sink.describe()}: {type(exc).__name__}: {exc}"), rules))
            reports.append(report)
            failure = failure or exc
    if failure is not None:
        raise failure
    return reports


def make_sink(
    kind: str,
    argument: str | None = None,
    *,
    dead_letter_dir: str | None = None,
    state_dir: str | None = None,
    **options,
) -> AlertSink:
    """An alert sink from its command-line spelling: console | webhook URL | sqlite PATH | postgres URL |
    kafka://HOST:PORT/TOPIC | kafka-exactly-once://HOST:PORT/TOPIC (its transactional id kept in ``state_dir``) |
    delta:PATH (its application id kept in ``state_dir``).

    A webhook keeps its dead letters in its own folder of ``dead_letter_dir``, named by its key
    (``webhook-<host>-<hash>``): two webhooks never mix theirs, and a letter says which URL it was for."""
    if is_kafka_sink(kind):
        if argument is not None:
            raise ValueError(f"--sink {kind} takes no further argument")
        if kind.lower().startswith(f"{EXACTLY_ONCE_SCHEME}://"):
            return KafkaExactlyOnceSink(kind, state_dir=state_dir, **options)
        return KafkaSink(kind, **options)
    if is_delta(kind):
        if argument is not None:
            raise ValueError(f"--sink {kind} takes no further argument")
        return DeltaSink(kind, state_dir=state_dir)
    named = sink_kind(kind)
    if named is None:
        raise ValueError(f"unknown sink {kind!r} ({SINKS_HELP})")
    kind = named
    if SINK_ARGUMENTS[kind] is None:
        return ConsoleSink()
    if argument is None:
        raise ValueError(f"--sink {kind} needs an argument ({SINK_ARGUMENTS[kind]})")
    if kind == "webhook":
        if dead_letter_dir is None:
            raise ValueError("a webhook sink needs a dead-letter directory")
        check_url(argument)
        sink = WebhookSink(
            argument, dead_letter_dir=os.path.join(dead_letter_dir, url_key("webhook", argument)), **options
        )
        sink.dead_letters.adopt(dead_letter_dir, argument)  # letters of the first format, at the top
        return sink
    if kind == "sqlite":
        return SQLiteSink(argument, **options)
    return PostgresSink(argument, **options)
