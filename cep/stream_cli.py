"""``cep stream``: run a rule set (or one query) over a directory of event files, as a service.

    cep stream --rules rules/ --input events/ --checkpoint ck/ [--output alerts/] [--format json|csv|parquet]
               [--sink console|json|parquet|csv|webhook URL|sqlite PATH|postgres URL]... [--watermark 30s]
               [--trigger 1s] [--suppress 'rule_id=10m']... [--session-timeout 1h] [--once]
               [--dead-letter DIR] [--max-future-skew 1d|off]
               [--webhook-format json|pagerduty|slack|alertmanager|template] [--webhook-template FILE]
               [--pagerduty-routing-key '$KEY'] [--webhook-header 'Name: value $VAR']... [--webhook-secret '$SECRET']
               [--metrics-port [HOST:]PORT] [--health-port [HOST:]PORT] [--log-format text|json] [--status-every 60s]
               [--master URL] [--python-env PACKED.tar.gz]
    cep stream QUERY.sql --input events/ --checkpoint ck/ ...      (one query file: a rule set of one file)
    cep stream --rules rules/ --input kafka://HOST:PORT/TOPIC [--kafka-option KEY=VALUE]... --checkpoint ck/
               [--sink kafka://HOST:PORT/ALERTS | --sink kafka-exactly-once://HOST:PORT/ALERTS]

``cep status`` and ``cep deliver`` are in ``cep/status_cli.py``; the options are declared in
``cep/stream_options.py``. Wiring (``cep/cli.py``): ``build_parser``
calls ``stream_cli.add_commands(sub)``; each command sets ``func`` (returning an exit code). Exit codes
follow ``cep.cli`` (``cli_io.EXIT_*``): 0 ok, also after SIGTERM (a clean stop: the queries stopped, nothing
half-committed, the status ``stopped``; the same command resumes); 1 a query/rule error: nothing could
run, the matching query failed, or (with ``--once``) a rule could not be loaded or a sink not delivered;
2 usage or files; 130 stopped by Ctrl-C (after the same clean stop).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from cep import cli_io
from cep.cli_io import UsageError
from cep.grammar.errors import CepError
from cep.logs import StreamLog
from cep.spark_bridge.alerting.driver_state import SPARK, layout_of
from cep.spark_bridge.alerting.key_buckets import checkpoint_key_buckets, expected_key_buckets
from cep.spark_bridge.alerting.metrics import HealthCheck, ServiceServer, StreamMetrics
from cep.spark_bridge.alerting.status import rule_rows
from cep.spark_bridge.alerting.stream import AlertStream, QueryFailed
from cep.spark_bridge.alerting.suppress import parse_specs
from cep.spark_bridge.engine.durations import is_off, parse_duration
from cep.spark_bridge.sinks.fanout import FILE_SINKS, SINK_ARGUMENTS, SINKS_HELP, make_sink, sink_kind
from cep.spark_bridge.sinks.payloads import FORMATS as WEBHOOK_FORMATS
from cep.spark_bridge.sinks.payloads import BodyFormat
from cep.spark_bridge.sinks.safe_text import expand_env, url_label
from cep.spark_bridge.sinks.webhook import WebhookSink, check_headers
from cep.spark_bridge.spark.delta import (
    CepDeltaError,
    DeltaSnapshot,
    check_snapshot,
    delta_path,
    is_delta,
    parse_delta_options,
    read_delta_stream,
    stream_change_hint,
)
from cep.spark_bridge.spark.kafka import (
    VALUE_FORMATS,
    CepKafkaError,
    encoding_name,
    is_kafka_url,
    kafka_location,
    parse_kafka_options,
    parse_kafka_url,
    read_kafka,
)
from cep.spark_bridge.spark.session import STREAM_JVM_OPTIONS, ignore_sigterm, spark_log_path
from cep.stream_files import input_format, stream_source
from cep.stream_options import add_stream_arguments

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

# /readyz: Spark's last trigger at most this many trigger intervals ago, and never less than the floor
# (Spark reports an idle trigger every 10 s: spark.sql.streaming.noDataProgressEventInterval).
READY_TRIGGERS = 10
READY_FLOOR_S = 60.0
PRIVATE_UMASK = 0o077  # see _private_files
DEFAULT_SERVICE_HOST = "127.0.0.1"  # --metrics-port/--health-port without a host: loopback, never every interface

log = logging.getLogger("cep.stream")


def _usage(message: str) -> UsageError:
    return UsageError(message)


# ------------------------------------------------------------------------------------------ parsing


def add_commands(subparsers) -> None:
    """Add ``stream`` to the ``cep`` command's subparsers."""
    stream = subparsers.add_parser(
        "stream",
        help="run a rule set (a directory of .sql files) or one query over a stream of event files",
        description="Run every rule of --rules DIR (each *.sql file may hold several named statements), or the "
        "query in QUERY_FILE, over the files arriving in --input DIR (or the messages of --input "
        "kafka://HOST:PORT/TOPIC), continuously. Rules added, changed or "
        "removed in DIR are picked up between micro-batches; the others keep running with their state. "
        "Matches are written to --output (exactly once) and sent to the --sink alert sinks, each on its own "
        "delivery lane. Ctrl-C or SIGTERM stops cleanly; the same command resumes from --checkpoint. "
        "docs/operations.md says how to run it as a service.",
        epilog="Examples: cep stream --rules rules/ --input events/ --checkpoint ck/ --output alerts/ "
        "--sink webhook https://alerts.example/hook --suppress 'fraud/*=10m' --metrics-port 9108 --health-port 8080; "
        "cep stream --rules rules/ --input kafka://127.0.0.1:9092/ticks --checkpoint ck/ "
        "--sink kafka-exactly-once://127.0.0.1:9092/alerts",
    )
    add_stream_arguments(stream)
    stream.set_defaults(func=cmd_stream)


def parse_headers(values: Sequence[str]) -> dict[str, str]:
    """``--webhook-header 'Name: value'`` options, values read from the environment where they say ``$NAME``."""
    headers: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition(":")
        if not sep or not name.strip():
            raise ValueError("--webhook-header expects 'Name: value' (got a value without a name and a colon)")
        headers[name.strip()] = expand_env(text.strip(), what=f"--webhook-header {name.strip()}")
    return check_headers(headers)


# The words after `--sink webhook URL` that set that webhook's own options, and the `--webhook-*` option each
# stands for there: the `--webhook-*` options set every webhook of the stream, so one stream that pages
# PagerDuty, posts to Slack and feeds Alertmanager needs a format (and a key, a token) per webhook.
WEBHOOK_WORDS = {
    "format": "webhook_format",
    "template": "webhook_template",
    "routing-key": "pagerduty_routing_key",
    "header": "webhook_header",
    "secret": "webhook_secret",
    "batch": "webhook_batch",
}


def webhook_sink_args(args: argparse.Namespace, url: str, words: Sequence[str]) -> argparse.Namespace:
    """``args`` for one ``--sink webhook URL WORD...``: each ``NAME=VALUE`` word (``format=slack``,
    ``routing-key='$PD_KEY'``, ``header='Authorization: Bearer $TOKEN'``, repeatable) replaces that option of
    the ``--webhook-*`` ones for this webhook only."""
    own = dict(vars(args))
    headers: list[str] = []
    for word in words:
        name, sep, value = word.partition("=")
        if not sep or name not in WEBHOOK_WORDS:
            raise _usage(
                f"--sink webhook {url_label(url)}: {word!r} is not an option of the webhook; after the URL, give "
                f"NAME=VALUE with NAME one of {', '.join(WEBHOOK_WORDS)} (e.g. format=pagerduty)"
            )
        if name == "header":
            headers.append(value)
        elif name == "batch":
            try:
                own["webhook_batch"] = int(value)
            except ValueError:
                raise _usage(f"--sink webhook {url_label(url)}: batch={value!r} is not a whole number") from None
        elif name == "format" and value not in WEBHOOK_FORMATS:
            raise _usage(
                f"--sink webhook {url_label(url)}: format={value!r} is not a webhook format "
                f"({', '.join(WEBHOOK_FORMATS)})"
            )
        else:
            own[WEBHOOK_WORDS[name]] = value
    given = {word.partition("=")[0] for word in words}
    if headers:
        own["webhook_header"] = headers
    if "format" in given and "template" not in given and own["webhook_format"] != "template":
        own["webhook_template"] = None  # the stream's --webhook-template is another webhook's body
    if "template" in given and "format" not in given:
        own["webhook_format"] = "template"
    return argparse.Namespace(**own)


def webhook_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of every ``--sink webhook`` (usage errors name the option, never a secret)."""
    if args.webhook_attempts < 1 or (args.webhook_batch is not None and args.webhook_batch < 1):
        raise _usage("--webhook-attempts and --webhook-batch must be at least 1")
    if args.webhook_timeout <= 0:
        raise _usage("--webhook-timeout must be positive")
    fmt = args.webhook_format or ("template" if args.webhook_template else "json")
    template = None
    if args.webhook_template:
        if fmt != "template":
            raise _usage(f"--webhook-template goes with --webhook-format template, not {fmt}")
        template = cli_io.read_text(args.webhook_template)
    try:
        routing_key = (
            expand_env(args.pagerduty_routing_key, what="--pagerduty-routing-key")
            if args.pagerduty_routing_key
            else None
        )
        body = BodyFormat(fmt, routing_key=routing_key, template=template)
        headers = parse_headers(args.webhook_header or [])
        secret = expand_env(args.webhook_secret, what="--webhook-secret") if args.webhook_secret else None
    except ValueError as exc:
        raise _usage(str(exc)) from None
    return {
        "max_attempts": args.webhook_attempts,
        "timeout": args.webhook_timeout,
        "batch_size": args.webhook_batch,
        "body_format": body,
        "headers": headers,
        "secret": secret,
    }


def parse_sinks(
    specs: Sequence[Sequence[str]] | None,
    *,
    dead_letter_dir: str,
    webhook_args: argparse.Namespace | None = None,
    state_dir: str | None = None,
):
    """``--sink`` values -> (file format, alert sinks). ``webhook_args``: the parsed ``--webhook-*`` options
    (None: the defaults), which the words after a ``--sink webhook URL`` override for that webhook
    (``webhook_sink_args``). ``state_dir``: where sinks keep what must outlive a restart (the exactly-once
    Kafka sink's transactional id)."""

    file_format = None
    sinks = []
    for spec in specs or []:
        kind, *rest = spec
        if is_kafka_url(kind) or is_kafka_url(kind, "kafka-exactly-once") or is_delta(kind):
            if rest:
                raise _usage(f"--sink {kind} takes no further argument")
            try:
                sinks.append(make_sink(kind, dead_letter_dir=dead_letter_dir, state_dir=state_dir))
            except CepKafkaError:
                raise
            except (ValueError, RuntimeError) as exc:
                raise _usage(f"--sink {kind}: {exc}") from None
            continue
        kind = kind.lower()
        if kind in FILE_SINKS:
            if rest:
                raise _usage(f"--sink {kind} takes no argument (the directory is --output)")
            if file_format is not None and file_format != kind:
                raise _usage(f"--sink {file_format} and --sink {kind}: the --output directory has one format")
            file_format = kind
            continue
        if sink_kind(kind) is None:
            raise _usage(f"--sink {kind}: unknown sink ({SINKS_HELP})")
        kind = sink_kind(kind)
        argument = SINK_ARGUMENTS[kind]
        if argument is None and rest:
            raise _usage(f"--sink {kind} takes no argument")
        if argument is not None and (not rest or (len(rest) > 1 and kind != "webhook")):
            raise _usage(f"--sink {kind} needs exactly one {argument}")
        options = {}
        if (
            kind == "webhook" and rest
        ):  # the URL is a credential (Slack's carries its token): '$NAME' keeps it out of ps
            try:
                rest = [expand_env(rest[0], what="--sink webhook URL"), *rest[1:]]
            except ValueError as exc:
                raise _usage(str(exc)) from None
        if kind == "webhook" and (webhook_args is not None or len(rest) > 1):
            base = webhook_args if webhook_args is not None else _default_webhook_args()
            options = webhook_options(webhook_sink_args(base, rest[0], rest[1:]))
            rest = rest[:1]
        try:
            sink = make_sink(kind, rest[0] if rest else None, dead_letter_dir=dead_letter_dir, **options)
            if isinstance(sink, WebhookSink):  # a template that fails shows now, not at the first alert
                sink.body_format.check(sink.sample_payload())
        except (ValueError, RuntimeError) as exc:
            raise _usage(f"--sink {kind}: {exc}") from None
        if any(s.key() == sink.key() for s in sinks):
            raise _usage(f"--sink {kind} {sink.describe()} is given twice")
        sinks.append(sink)
    return file_format or "json", sinks


def _default_webhook_args() -> argparse.Namespace:
    """The ``--webhook-*`` options as ``cep stream`` parses them when none is given."""
    parser = argparse.ArgumentParser(add_help=False)
    add_stream_arguments(parser)
    return parser.parse_args(["--checkpoint", "-", "--input", "-"])


def parse_address(value: str | None, option: str) -> tuple[str, int] | None:
    """``PORT`` or ``HOST:PORT`` (``[::1]:PORT``, ``0.0.0.0:PORT`` for every interface); the host defaults to
    127.0.0.1: the metrics and probes are for this machine unless the option says otherwise."""
    if value is None:
        return None
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    try:
        number = int(port)
    except ValueError:
        raise _usage(f"{option} expects PORT or HOST:PORT, not {value!r}") from None
    if not 0 <= number < 65536:
        raise _usage(f"{option}: {number} is not a port")
    return host or DEFAULT_SERVICE_HOST, number


def _duration_text(value: str | None, option: str) -> str | None:
    """Check a duration option; returns Spark's spelling ('1500 milliseconds')."""
    if value is None:
        return None

    try:
        us = parse_duration(value, what=option)
    except (TypeError, ValueError) as exc:
        raise _usage(f"{option}: {exc}") from None
    return f"{us // 1000} milliseconds"


# -------------------------------------------------------------------------------------- cep stream


def status_line(status: dict, started: float) -> tuple[str, dict]:
    """The one-line summary (and its fields, for JSON logs): micro-batch, rules, alerts, live partial
    matches, late and bad input rows, and each sink's deliveries, queue and dead letters."""
    rows = rule_rows(status)
    last = status.get("last_batch") or {}
    fields: dict[str, Any] = {
        "batch": last.get("id"),
        "rules": sum(1 for r in rows if r["state"] == "active"),
        "rule_errors": len(status.get("errors", [])),
        "alerts": sum(r["matches"] + r["earlier_matches"] for r in rows),
        "suppressed": sum(r["suppressed"] for r in rows),
        "live": sum(max(0, r["live"]) for r in rows),
        "late_rows": status.get("late_rows", 0),
        "bad_rows": sum((status.get("bad_rows") or {}).values()),
        "duplicates": max((r["duplicates_dropped"] for r in rows), default=0),
        "up_s": int(time.monotonic() - started),
        "sinks": {
            key: {
                "delivered": s.get("delivered", 0),
                "waiting": s.get("queue_alerts", 0),
                "dead_letters": s.get("dead_letters_waiting", 0),
                "failing": bool(s.get("failing_since")),
            }
            for key, s in sorted((status.get("sinks") or {}).items())
        },
    }
    parts = [
        f"batch {fields['batch'] if fields['batch'] is not None else '-'}",
        f"rules {fields['rules']}" + (f" ({fields['rule_errors']} with errors)" if fields["rule_errors"] else ""),
        f"alerts {fields['alerts']}" + (f" ({fields['suppressed']} suppressed)" if fields["suppressed"] else ""),
        f"live {fields['live']}",
        f"late {fields['late_rows']}",
    ]
    if fields["bad_rows"]:
        parts.append(f"bad rows {fields['bad_rows']}")
    if fields["duplicates"]:
        parts.append(f"duplicates {fields['duplicates']}")
    if status.get("rules_outage"):
        parts.append("RULES UNREADABLE")
    kinds = [key.split("-")[0] for key in fields["sinks"]]
    for key, sink in fields["sinks"].items():
        # A sink's kind alone, unless two sinks share it: three webhooks are told apart by their keys (those
        # of the metrics' `sink` label and the dead-letter folders), never by their URLs (credentials).
        kind = key.split("-")[0]
        label = kind if kinds.count(kind) == 1 else key
        extra = [f"{sink['waiting']} waiting"] if sink["waiting"] else []
        letters = sink["dead_letters"]
        extra += [f"{letters} dead letter{'' if letters == 1 else 's'}"] if letters else []
        extra += ["FAILING"] if sink["failing"] else []
        parts.append(f"{label} {sink['delivered']}" + (f" ({', '.join(extra)})" if extra else ""))
    parts.append(f"up {fields['up_s']}s")
    return " | ".join(parts), fields


class _Services:
    """The HTTP endpoints of ``--metrics-port`` and ``--health-port`` (one server when they are equal)."""

    def __init__(
        self, metrics_at: tuple[str, int] | None, health_at: tuple[str, int] | None, ready_window: float
    ) -> None:
        self.health = HealthCheck(None, ready_window=ready_window)
        self.servers: list[ServiceServer] = []
        self.metrics_server: ServiceServer | None = None
        self.health_server: ServiceServer | None = None
        try:
            if health_at is not None:
                self.health_server = ServiceServer(*health_at, health=self.health)
                self.servers.append(self.health_server)
            if metrics_at is not None:
                if health_at is not None and metrics_at[1] == health_at[1]:
                    self.metrics_server = self.servers[0]
                else:
                    self.metrics_server = ServiceServer(*metrics_at)
                    self.servers.append(self.metrics_server)
        except OSError as exc:
            self.stop()
            raise _usage(f"cannot serve --metrics-port/--health-port: {exc.strerror or exc}") from None
        self.wants_metrics = metrics_at is not None

    def attach(self, stream: AlertStream) -> None:
        self.health.stream = stream
        if self.metrics_server is not None:
            try:
                self.metrics_server.metrics = StreamMetrics(stream)
            except ImportError:
                raise _usage("--metrics-port needs prometheus-client: pip install 'cep-spark[service]'") from None

    def describe(self) -> str:
        def what(server: ServiceServer) -> str:
            both = server is self.metrics_server and self.health_server is server
            return "metrics and health" if both else "metrics" if server is self.metrics_server else "health"

        return ", ".join(f"{what(s)} on {s.host}:{s.port}" for s in self.servers)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
        self.servers = []


@dataclasses.dataclass(frozen=True)
class _Input:
    """Where ``cep stream`` reads: a directory of files, or Kafka (``address`` and its options)."""

    path: str
    format: str
    address: Any = None
    kafka_options: dict = dataclasses.field(default_factory=dict)
    delta_options: dict | None = None  # a Delta table's streaming source options; None: not Delta

    @property
    def kafka(self) -> bool:
        return self.address is not None

    @property
    def delta(self) -> bool:
        return self.delta_options is not None


@dataclasses.dataclass(frozen=True)
class _Timing:
    """The durations, checked, in Spark's spelling."""

    watermark: str | None
    idle_watermark: str | None
    trigger: str | None
    trigger_s: float
    session_timeout: str | None
    max_future_skew: str | None
    status_every_s: float


def _rules_path(args: argparse.Namespace) -> str:
    if bool(args.query_file) == bool(args.rules):
        raise _usage("give either a QUERY_FILE or --rules DIR (not both)")
    rules_path = args.query_file or args.rules
    if not os.path.exists(rules_path):
        raise _usage(f"{'query file' if args.query_file else 'rules directory'} not found: {rules_path}")
    if args.rules and not os.path.isdir(args.rules):
        raise _usage(
            f"--rules expects a directory of .sql files, not a file: {args.rules} (give one query file without --rules)"
        )
    return rules_path


def _input_of(args: argparse.Namespace) -> _Input:
    """The input, checked (``CepKafkaError`` for a bad Kafka address or option, ``CepDeltaError`` for a folder
    that is not a Delta table: refused before Spark starts)."""
    delta = is_delta(args.input) or args.input_format == "delta"
    if args.delta_option and not delta:
        raise _usage("--delta-option is for a Delta input (--input delta:PATH)")
    if delta:
        check_snapshot(DeltaSnapshot(delta_path(args.input)))
        return _Input(args.input, "delta", delta_options=parse_delta_options(args.delta_option))
    if is_kafka_url(args.input):
        address = parse_kafka_url(args.input, topic_required=False)
        options = parse_kafka_options(args.kafka_option)
        encoding_name(args.kafka_encoding)  # a name it does not know: E0492 before anything starts
        if args.input_format not in (None, *VALUE_FORMATS):
            read_as = " or ".join(VALUE_FORMATS)
            raise _usage(f"--input-format {args.input_format}: a Kafka message value is read as {read_as}")
        return _Input(args.input, args.input_format or "json", address, options)
    if args.kafka_option or args.kafka_encoding:
        flag = "--kafka-option" if args.kafka_option else "--kafka-encoding"
        raise _usage(f"{flag} is for a Kafka input (--input kafka://HOST:PORT/TOPIC)")
    if not os.path.isdir(args.input):
        raise _usage(
            "--input expects a directory (the files of the stream arrive there) or kafka://HOST:PORT/TOPIC: "
            f"{args.input}"
        )
    return _Input(args.input, input_format(args.input, args.input_format))


def _timing_of(args: argparse.Namespace) -> _Timing:
    return _Timing(
        watermark=_duration_text(args.watermark, "--watermark"),
        trigger=_duration_text(args.trigger, "--trigger"),
        idle_watermark=_duration_text(args.idle_watermark, "--idle-watermark"),
        trigger_s=parse_duration(args.trigger, what="--trigger") / 1e6,
        session_timeout=_duration_text(args.session_timeout, "--session-timeout"),
        max_future_skew=None
        if is_off(str(args.max_future_skew))
        else _duration_text(args.max_future_skew, "--max-future-skew"),
        status_every_s=parse_duration(args.status_every, what="--status-every") / 1e6
        if not is_off(args.status_every)
        else float("inf"),
    )


@contextlib.contextmanager
def _stop_on_signals(enabled: bool) -> Iterator[tuple[threading.Event, list[int]]]:
    """Ctrl-C and SIGTERM (systemd's stop, to the whole process group) set the event: the loop ends between two
    polls, then the queries stop cleanly. Installed before Spark starts (pyspark's SIGINT handler would raise
    inside a Py4J call); a second Ctrl-C still raises."""
    stop = threading.Event()
    interrupted: list[int] = []
    saved: dict[int, Any] = {}

    def request_stop(signum, _frame) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        interrupted.append(signum)
        stop.set()

    if enabled and threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            saved[signum] = signal.signal(signum, request_stop)
    try:
        yield stop, interrupted
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def _private_files() -> Iterator[None]:
    """What the stream writes (whole events in outboxes, dead letters, bad rows; Spark's files too: its JVM
    inherits the umask) is its user's alone: files 0600, folders 0700 (docs/operations.md)."""
    saved = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(saved)


def cmd_stream(args: argparse.Namespace) -> int:
    rules_path = _rules_path(args)
    checkpoint = os.path.abspath(args.checkpoint)
    dead_letter = os.path.abspath(args.dead_letter or os.path.join(checkpoint, "dead-letter"))
    try:
        source = _input_of(args)
        output_format, sinks = parse_sinks(
            args.sink,
            dead_letter_dir=dead_letter,
            webhook_args=args,
            state_dir=os.path.join(checkpoint, "sinks"),
        )
    except (CepKafkaError, CepDeltaError) as err:
        cli_io.print_error(str(err))
        return cli_io.EXIT_USAGE
    try:
        specs = parse_specs(args.suppress)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    timing = _timing_of(args)
    kept = ""
    try:  # a layout or bucket count the checkpoint cannot take is refused before Spark starts (again by AlertStream)
        layout = layout_of(args.master, checkpoint, args.state, args.key_buckets)
        if args.expected_keys is not None:
            args.key_buckets, chosen = expected_key_buckets(checkpoint, args.expected_keys)
            if args.key_buckets is None:
                kept = f"--expected-keys: the checkpoint keeps its key buckets (a new one would take {chosen:,})"
            elif layout.layout != SPARK:  # the count is Spark's keyed state's: refused as --key-buckets is
                layout_of(args.master, checkpoint, args.state, args.key_buckets)
        if layout.layout == SPARK:
            checkpoint_key_buckets(checkpoint, args.key_buckets)
    except CepError as err:
        cli_io.print_error(f"cep stream: {err}")
        return cli_io.EXIT_QUERY_ERROR
    metrics_at = parse_address(args.metrics_port, "--metrics-port")
    health_at = parse_address(args.health_port, "--health-port")
    if args.python_env and not os.path.isfile(args.python_env):
        raise _usage(f"--python-env: no such file {args.python_env} (a venv-pack archive)")
    ready_window = (
        parse_duration(args.ready_after, what="--ready-after") / 1e6
        if args.ready_after
        else max(READY_FLOOR_S, READY_TRIGGERS * timing.trigger_s)
    )
    logbook = StreamLog(fmt=args.log_format, status_every=timing.status_every_s).install()
    services = _Services(metrics_at, health_at, ready_window)
    if kept:
        log.info(kept)
    try:
        with _stop_on_signals(not args.once) as (stop, interrupted), _private_files():
            started = time.monotonic()
            spark = cli_io.start_spark(
                args.master,
                kafka=source.kafka,
                delta=source.delta,
                python_env=args.python_env,
                jvm_options=STREAM_JVM_OPTIONS,
            )
            ignore_sigterm(spark)  # the JVM must outlive the clean stop the driver makes on SIGTERM
            log.info(f"Spark's own log: {spark_log_path()}")
            try:
                stream = _make_stream(spark, args, rules_path, source, timing, sinks, specs, output_format)
            except (CepKafkaError, CepDeltaError) as err:
                cli_io.print_error(str(err))
                return cli_io.EXIT_USAGE
            except CepError as err:
                cli_io.print_error(str(err))
                return cli_io.EXIT_QUERY_ERROR
            services.attach(stream)
            rules = stream.ruleset
            if not len(rules) and (args.once or not args.rules):
                cli_io.print_error(f"cep stream: no rule could be loaded from {rules_path}")
                return cli_io.EXIT_QUERY_ERROR
            log.info(
                f"{len(rules)} rule(s) over {args.input} (event time: {stream.time_column}); matches -> "
                f"{stream.file_sink.path} ({output_format})"
                + "".join(f"; {s.describe()}" for s in sinks)
                + f"; checkpoint {checkpoint} ("
                + (f"{stream.key_buckets} key buckets, " if stream.layout == SPARK else "")
                + f"{stream.choice.describe()})"
                + (f"; {services.describe()}" if services.servers else "")
            )
            if args.once:
                return _once(stream, rules, started, delta_path(source.path) if source.delta else None)
            return _run_until_stopped(stream, args, source, logbook, stop, interrupted, started)
    finally:
        services.stop()
        logbook.uninstall()


def _make_stream(
    spark, args: argparse.Namespace, rules_path: str, source: _Input, timing: _Timing, sinks, specs, output_format: str
) -> AlertStream:
    checkpoint = os.path.abspath(args.checkpoint)
    if source.delta:
        events = read_delta_stream(spark, delta_path(source.path), source.delta_options)
    elif source.kafka:
        events = read_kafka(
            spark,
            source.address,
            schema=args.schema,
            format=source.format,
            options=source.kafka_options,
            encoding=args.kafka_encoding or "utf-8",
        )
    else:
        events = stream_source(
            spark, source.path, source.format, args.schema, cache=os.path.join(checkpoint, "source-schema.json")
        )
    stream = AlertStream(
        spark,
        rules_path,
        events,
        checkpoint=checkpoint,
        output=args.output,
        output_format=output_format,
        sinks=sinks,
        suppress=specs,
        watermark=timing.watermark,
        session_timeout=timing.session_timeout,
        idle_watermark=timing.idle_watermark,
        time_column=args.time_column,
        trigger=timing.trigger,
        dead_letter=os.path.abspath(args.dead_letter or os.path.join(checkpoint, "dead-letter")),
        max_future_skew=timing.max_future_skew,
        dedup_key=args.dedup_key,
        source_location=kafka_location() if source.kafka else None,
        state=args.state,
        key_buckets=args.key_buckets,
    )
    stream.refresh_rules(force=True)
    return stream


def _run_until_stopped(
    stream: AlertStream,
    args: argparse.Namespace,
    source: _Input,
    logbook: StreamLog,
    stop: threading.Event,
    interrupted: list[int],
    started: float,
) -> int:
    """Start the queries and run until a signal; the exit code of a clean stop or of a failed query."""
    try:
        stream.start()
        log.info("running; Ctrl-C or SIGTERM stops cleanly (the same command resumes)")
        stream.run(
            poll_interval=1.0,
            stop=stop,
            on_tick=lambda status: logbook.status(*status_line(status, started), batches=status.get("data_batches", 0)),
        )
    except QueryFailed as exc:
        logbook.clear()
        log.error(str(exc))
        if source.kafka and "TimeoutException" in str(exc):
            log.error(
                f"the Kafka brokers at {source.address.bootstrap} did not answer for longer than the Kafka "
                "client's timeout (kafka.default.api.timeout.ms, 60 s by default); once they are back, the same "
                "command resumes from the checkpoint without losing an event"
            )
        if source.delta and (hint := stream_change_hint(str(exc), delta_path(source.path))):
            log.error(hint)
        return cli_io.EXIT_QUERY_ERROR
    except CepError as err:  # a checkpoint it cannot start as it is (E0283, E0288): what to do, no traceback
        logbook.clear()
        cli_io.print_error(f"cep stream: {err}")
        return cli_io.EXIT_QUERY_ERROR
    logbook.clear()
    log.info(
        f"stopped cleanly; status in {os.path.join(os.path.abspath(args.checkpoint), 'status.json')} (cep status "
        f"--checkpoint {args.checkpoint}); the same command resumes"
    )
    return cli_io.EXIT_INTERRUPTED if signal.SIGINT in interrupted else cli_io.EXIT_OK


def _once(stream: AlertStream, ruleset, started: float, delta_table: str | None = None) -> int:
    """``--once``; ``delta_table``: the Delta table followed (a change it cannot follow is explained)."""
    try:
        status = stream.run_available_now()
    except CepError as err:  # a sink that could not deliver (its outbox keeps the alerts)
        cli_io.print_error(f"cep stream: {err}")
        return cli_io.EXIT_QUERY_ERROR
    except Exception as exc:
        message = cli_io.spark_error(exc)
        if message is None:
            raise
        cli_io.print_error(f"cep stream: {message}")
        if delta_table and (hint := stream_change_hint(str(exc), delta_table)):
            cli_io.print_error(f"cep stream: {hint}")
        return cli_io.EXIT_QUERY_ERROR
    log.info(status_line(status, started)[0])
    return cli_io.EXIT_QUERY_ERROR if ruleset.errors else cli_io.EXIT_OK


__all__ = [
    "add_commands",
    "cmd_stream",
    "parse_headers",
    "parse_sinks",
    "status_line",
    "stream_source",
    "webhook_options",
]
