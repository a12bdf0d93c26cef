"""The options of ``cep stream``, declared: what each says in ``cep stream --help``, its default and its check.

``add_stream_arguments(parser)`` adds them to the ``stream`` subparser (``stream_cli.add_commands``), grouped as
the help prints them: the rules and the input, the outputs and sinks, matching (event time, late and bad rows,
suppression, sessions, the state layout), webhooks, and running as a service. What the options mean together
(an input checked, the sinks built, the timing parsed) is ``stream_cli``'s, which reads the parsed namespace.
"""

from __future__ import annotations

import argparse

from cep import cli_io
from cep.logs import LOG_FORMATS
from cep.spark_bridge.alerting.key_buckets import check_expected_keys, check_key_buckets
from cep.spark_bridge.sinks.payloads import FORMATS as WEBHOOK_FORMATS

__all__ = ["DEFAULT_MAX_FUTURE_SKEW", "add_stream_arguments"]

# An event time a day ahead of the wall clock is a broken clock, not an event: by default `cep stream`
# rejects it before it can move the watermark past every other row. A replay of history is never ahead.
DEFAULT_MAX_FUTURE_SKEW = "1 day"


def add_stream_arguments(stream: argparse.ArgumentParser) -> None:
    """Every option of ``cep stream``, on its subparser."""
    _add_input_arguments(stream)
    _add_output_arguments(stream)
    _add_matching_arguments(stream)
    _add_webhook_arguments(stream)
    _add_service_arguments(stream)


def _add_input_arguments(stream: argparse.ArgumentParser) -> None:
    """The rules and the input: files, Kafka topics or a Delta table, their format and columns."""
    stream.add_argument("query_file", nargs="?", metavar="QUERY_FILE", help="one query file (instead of --rules)")
    stream.add_argument("--rules", "-r", metavar="DIR", help="directory of rule files (*.sql)")
    stream.add_argument(
        "--input",
        "-i",
        required=True,
        metavar="DIR|URL",
        help="directory the event files arrive in, or Kafka topics: kafka://HOST:PORT/TOPIC[,TOPIC] "
        "(or /REGEX); see docs/streaming.md",
    )
    cli_io.add_input_format_option(
        stream,
        cli_io.FORMATS,
        "input format (default: from the files' extension; for Kafka the message value: json (default) or csv)",
    )
    stream.add_argument(
        "--schema",
        metavar="COLUMNS",
        help="input columns, e.g. 'ts TIMESTAMP, card STRING, amount DOUBLE' (default: read from the "
        "files there on the first start, then kept in the checkpoint; or from the last messages of a "
        "Kafka topic)",
    )
    stream.add_argument(
        "--kafka-option",
        action="append",
        metavar="KEY=VALUE",
        help="an option of Spark's Kafka source (startingOffsets=latest, maxOffsetsPerTrigger=10000, "
        "kafka.security.protocol=SASL_SSL, ...); @FILE reads KEY=VALUE lines; repeat for several",
    )
    stream.add_argument(
        "--kafka-encoding",
        metavar="NAME",
        help="the encoding of the Kafka messages' values and keys: utf-8 (default: a message that is not valid "
        "UTF-8 is a not_utf8 bad row, never decoded with U+FFFD) or latin-1 (every byte a character)",
    )
    stream.add_argument(
        "--delta-option",
        action="append",
        metavar="KEY=VALUE",
        help="an option of Delta's streaming source for --input delta:PATH (startingVersion=5, "
        "maxFilesPerTrigger=10, skipChangeCommits=true, ...), passed as given; repeat for several",
    )


def _add_output_arguments(stream: argparse.ArgumentParser) -> None:
    """Where progress and matches are kept, and the alert sinks."""
    stream.add_argument(
        "--checkpoint",
        "-c",
        required=True,
        metavar="DIR",
        help="where progress, state, rule versions, outboxes and status are kept (reuse it to resume)",
    )
    stream.add_argument("--output", "-o", metavar="DIR", help="directory for the matches (default: CHECKPOINT/matches)")
    stream.add_argument(
        "--sink",
        action="append",
        nargs="+",
        metavar="SINK",
        help="console | json | parquet | csv (the --output format; default json) | webhook URL [NAME=VALUE...] "
        "(this webhook's own format=, routing-key=, header=, secret=, template=, batch=, in place of the "
        "--webhook-* options) | "
        "sqlite PATH | postgres URL | delta:PATH (a Delta table, once per micro-batch) | "
        "kafka://HOST:PORT/TOPIC (at least once) | "
        "kafka-exactly-once://HOST:PORT/TOPIC (a transaction per micro-batch); repeat for several",
    )


def _key_buckets_arg(text: str) -> int:
    try:
        return check_key_buckets(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _expected_keys_arg(text: str) -> int:
    try:
        return check_expected_keys(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_matching_arguments(stream: argparse.ArgumentParser) -> None:
    """Event time, late and bad rows, suppression and sessions."""
    stream.add_argument(
        "--watermark", metavar="DELAY", help="how late an event may arrive and still match (default 10s)"
    )
    stream.add_argument(
        "--trigger", default="1s", metavar="INTERVAL", help="micro-batch interval (default: %(default)s)"
    )
    stream.add_argument(
        "--state",
        choices=("spark", "driver"),
        help="where the rules run and keep their state: spark (Spark's keyed state, in its workers: a cluster, "
        "or more keys than the driver's memory holds) or driver (in the driver, saved in the checkpoint: one "
        "machine, about one micro-batch less latency; docs/streaming.md) (default: the checkpoint's; for a new "
        "one, driver on a local master, spark on any other)",
    )
    stream.add_argument(
        "--idle-watermark",
        metavar="LAG",
        help="event time never lags the wall clock by more than LAG: absence and timeout alerts fire "
        "on a quiet input, and a row more than LAG + --watermark behind the clock is late (default: off)",
    )
    buckets = stream.add_mutually_exclusive_group()
    buckets.add_argument(
        "--key-buckets",
        type=_key_buckets_arg,
        metavar="N",
        help="with --state spark: hash the partition keys into N buckets, one state value each (default 64; fixed "
        "by the checkpoint at its first start): a micro-batch reads and writes every bucket it touches whole",
    )
    buckets.add_argument(
        "--expected-keys",
        type=_expected_keys_arg,
        metavar="N",
        help="with --state spark: the partition keys the stream will hold (e.g. 10M): a new checkpoint takes enough "
        "key buckets for about 64 keys each, so what a micro-batch moves does not grow with the keys (an existing "
        "one keeps its own)",
    )
    stream.add_argument(
        "--suppress",
        action="append",
        metavar="RULE=DURATION",
        help="at most one alert per partition key per DURATION for RULE (an id or a pattern like 'fraud/*')",
    )
    stream.add_argument(
        "--session-timeout", metavar="GAP", help="end a key's session after this event-time gap (default: never)"
    )
    stream.add_argument(
        "--time-column", metavar="NAME", help="the event-time column (default: the rules' first ORDER BY column)"
    )
    stream.add_argument(
        "--dead-letter",
        metavar="DIR",
        help="bad input rows go to DIR/bad-rows/, late rows to DIR/late/, a webhook's failed deliveries "
        "to DIR/<sink>/ (default: CHECKPOINT/dead-letter)",
    )
    stream.add_argument(
        "--dedup-key",
        action="append",
        metavar="COLUMN",
        help="drop repeats of this column's value (an event id) within a partition key and the watermark "
        "delay; repeat for a key of several columns (default: every row counts, as in SQL)",
    )
    stream.add_argument(
        "--max-future-skew",
        default=DEFAULT_MAX_FUTURE_SKEW,
        metavar="DURATION",
        help="a row whose event time is further ahead of the clock than this is a bad row "
        "(future_event_time) and cannot move the watermark; 'off' to accept any (default: %(default)s)",
    )


# The word after a webhook's URL that sets, for that webhook alone, what each of these options sets for all.
ONE_WEBHOOK_WORDS = {
    "webhook_format": "format",
    "webhook_template": "template",
    "pagerduty_routing_key": "routing-key",
    "webhook_secret": "secret",
}


class _OnceForEveryWebhook(argparse.Action):
    """A ``--webhook-*`` option that sets every ``--sink webhook``: argparse keeps the last of two values, so
    ``--sink webhook PD --webhook-format pagerduty --sink webhook AM --webhook-format alertmanager`` would send
    Alertmanager's body to PagerDuty without a word. A second, different value is refused instead, saying
    how to give one webhook its own (the words after its URL, ``stream_cli.webhook_sink_args``)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        seen = getattr(namespace, self.dest, None)
        if seen is not None and seen != values:
            word = ONE_WEBHOOK_WORDS[self.dest]
            parser.error(
                f"{option_string} is given twice, with two values: it sets every --sink webhook of the stream. "
                f"To give one webhook its own, write it after that webhook's URL: "
                f"--sink webhook URL {word}=VALUE (docs/alerting.md, Sinks)"
            )
        setattr(namespace, self.dest, values)


def _add_webhook_arguments(stream: argparse.ArgumentParser) -> None:
    """What a --sink webhook sends, and how it retries."""
    hooks = stream.add_argument_group("webhooks", "what a --sink webhook sends (docs/alerting.md, Sinks)")
    hooks.add_argument(
        "--webhook-format",
        action=_OnceForEveryWebhook,
        choices=WEBHOOK_FORMATS,
        default=None,
        help='the body: json ({"alerts": [...]}, the default), pagerduty (Events API v2), slack '
        "(incoming webhook), alertmanager (POST /api/v2/alerts), template (--webhook-template)",
    )
    hooks.add_argument(
        "--webhook-template",
        action=_OnceForEveryWebhook,
        metavar="FILE",
        help="a Jinja2 template of the body; every {{ expression }} is written as JSON "
        "(implies --webhook-format template)",
    )
    hooks.add_argument(
        "--pagerduty-routing-key",
        action=_OnceForEveryWebhook,
        metavar="KEY",
        help="the PagerDuty integration key; write it as '$NAME' to read it from the environment",
    )
    hooks.add_argument(
        "--webhook-header",
        action="append",
        metavar="'NAME: VALUE'",
        help="a header on every request, e.g. 'Authorization: Bearer $TOKEN' ($NAME and ${NAME} are read "
        "from the environment; never written to logs or files); repeatable",
    )
    hooks.add_argument(
        "--webhook-secret",
        action=_OnceForEveryWebhook,
        metavar="SECRET",
        help="sign every request (X-Cep-Signature: t=..., v1=HMAC-SHA256); write it as '$NAME' to read "
        "it from the environment",
    )
    hooks.add_argument(
        "--webhook-attempts",
        type=int,
        default=5,
        metavar="N",
        help="attempts per webhook request (default: %(default)s)",
    )
    hooks.add_argument(
        "--webhook-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="deadline of one request, answer included (default: %(default)s)",
    )
    hooks.add_argument(
        "--webhook-batch",
        type=int,
        default=None,
        metavar="N",
        help="alerts per webhook request (default: 64 for --webhook-format alertmanager, whose API takes a list; "
        "else 1: Idempotency-Key = match_id)",
    )


def _add_service_arguments(stream: argparse.ArgumentParser) -> None:
    """Metrics, health, logs and Spark: running as a service."""
    service = stream.add_argument_group("running as a service", "docs/operations.md")
    service.add_argument("--metrics-port", metavar="[HOST:]PORT", help="serve Prometheus metrics on /metrics")
    service.add_argument(
        "--health-port", metavar="[HOST:]PORT", help="serve /healthz and /readyz (may equal --metrics-port)"
    )
    service.add_argument(
        "--ready-after",
        metavar="DURATION",
        help="/readyz fails when Spark's last trigger ended longer ago than this (default: 10 triggers, at least 60s)",
    )
    service.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text: '[cep] TIME message' lines; json: one JSON object per line (default: %(default)s)",
    )
    service.add_argument(
        "--status-every",
        default="60s",
        metavar="DURATION",
        help="off a terminal, the status line is written after each micro-batch with data and at least "
        "this often (default: %(default)s)",
    )
    service.add_argument("--once", action="store_true", help="process the files there now, deliver, and stop")
    service.add_argument(
        "--master",
        default="local[*]",
        help="Spark master URL: local[N], spark://HOST:PORT, yarn, k8s://... (default: %(default)s); "
        "on a cluster cep ships itself to the executors and checks they can import it",
    )
    service.add_argument(
        "--python-env",
        metavar="PACKED.tar.gz",
        help="a virtual environment packed with venv-pack, for executors without pandas and pyarrow "
        "(spark.archives; docs/operations.md)",
    )
