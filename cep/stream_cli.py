"""``cep stream`` and ``cep status``: run a rule set (or one query) over a directory of event files.

    cep stream --rules rules/ --input events/ --checkpoint ck/ [--output alerts/] [--format json|csv|parquet]
               [--sink console|json|parquet|csv|webhook URL|sqlite PATH|postgres URL]... [--watermark 30s]
               [--trigger 1s] [--suppress 'rule_id=10m']... [--session-timeout 1h] [--once]
               [--dead-letter DIR] [--max-future-skew 1d|off]
    cep stream QUERY.sql --input events/ --checkpoint ck/ ...      (one query file: a rule set of one file)
    cep stream --rules rules/ --input kafka://HOST:PORT/TOPIC [--kafka-option KEY=VALUE]... --checkpoint ck/
               [--sink kafka://HOST:PORT/ALERTS | --sink kafka-exactly-once://HOST:PORT/ALERTS]
    cep status --checkpoint ck/ [--json]

Wiring (``cep/cli.py``): ``build_parser`` calls ``stream_cli.add_commands(sub)`` with its subparsers
object; each command sets ``func`` (returning an exit code) like the others, so ``main`` needs nothing
else. Exit codes follow ``cep.cli`` (``cli_io.EXIT_*``): 0 ok (also after SIGTERM); 1 a query/rule error: nothing could run,
the matching query failed, or (with ``--once``) a rule could not be loaded; 2 usage or files; 130
stopped by Ctrl-C (after a clean stop: the queries stopped and the status written; the same command
resumes from the checkpoint).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import signal
import sys
import threading
import time
from functools import reduce
from typing import Any, Sequence

from cep import cli_io
from cep.cli_io import UsageError
from cep.grammar.errors import CepError
from cep.grammar.parser import parse_schema
from cep.spark_bridge.alerting.stream import AlertStream, read_status, rule_rows
from cep.spark_bridge.alerting.suppress import parse_specs
from cep.spark_bridge.engine.durations import is_off, parse_duration
from cep.spark_bridge.sinks.fanout import make_sink
from cep.spark_bridge.spark.columns import CORRUPT_RECORD, quote
from cep.spark_bridge.spark.files import CSV_OPTIONS, apply_text_types
from cep.spark_bridge.spark.inputs import blank_misshapen_csv_lines
from cep.spark_bridge.spark.kafka import (
    VALUE_FORMATS, CepKafkaError, is_kafka_url, kafka_location, parse_kafka_options, parse_kafka_url, read_kafka,
)
from cep.spark_bridge.spark.types import spark_to_sql, sql_to_spark

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

FORMATS = ("json", "csv", "parquet")
FILE_SINKS = ("json", "parquet", "csv")
ALERT_SINKS = ("console", "webhook", "sqlite", "postgres")
# An event time a day ahead of the wall clock is a broken clock, not an event: by default `cep stream`
# rejects it before it can move the watermark past every other row. A replay of history is never ahead.
DEFAULT_MAX_FUTURE_SKEW = "1 day"
_EXTENSIONS = {".json": "json", ".jsonl": "json", ".ndjson": "json", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def _usage(message: str) -> UsageError:
    return UsageError(message)


# ------------------------------------------------------------------------------------------ parsing


def add_commands(subparsers) -> None:
    """Add ``stream`` and ``status`` to the ``cep`` command's subparsers."""
    stream = subparsers.add_parser(
        "stream",
        help="run a rule set (a directory of .sql files) or one query over a stream of event files",
        description="Run every rule of --rules DIR (each *.sql file may hold several named statements), or the "
        "query in QUERY_FILE, over the files arriving in --input DIR (or the messages of --input kafka://HOST:PORT/TOPIC), continuously. Rules added, changed or "
        "removed in DIR are picked up between micro-batches; the others keep running with their state. "
        "Matches are written to --output (exactly once) and sent to the --sink alert sinks. Ctrl-C stops "
        "cleanly; the same command resumes from --checkpoint.",
        epilog="Examples: cep stream --rules rules/ --input events/ --checkpoint ck/ --output alerts/ "
        "--sink webhook https://alerts.example/hook --suppress 'fraud/*=10m'; "
        "cep stream --rules rules/ --input kafka://127.0.0.1:9092/ticks --checkpoint ck/ "
        "--sink kafka-exactly-once://127.0.0.1:9092/alerts",
    )
    stream.add_argument("query_file", nargs="?", metavar="QUERY_FILE", help="one query file (instead of --rules)")
    stream.add_argument("--rules", "-r", metavar="DIR", help="directory of rule files (*.sql)")
    stream.add_argument("--input", "-i", required=True, metavar="DIR|URL",
                        help="directory the event files arrive in, or Kafka topics: kafka://HOST:PORT/TOPIC[,TOPIC] "
                        "(or /REGEX); see docs/streaming.md")
    stream.add_argument("--format", choices=FORMATS,
                        help="input format (default: from the files' extension; for Kafka the message value: json "
                        "(default) or csv)")
    stream.add_argument("--schema", metavar="COLUMNS",
                        help="input columns, e.g. 'ts TIMESTAMP, card STRING, amount DOUBLE' (default: read from the files "
                        "there, or from the last messages of a Kafka topic)")
    stream.add_argument("--kafka-option", action="append", metavar="KEY=VALUE",
                        help="an option of Spark's Kafka source (startingOffsets=latest, maxOffsetsPerTrigger=10000, "
                        "kafka.security.protocol=SASL_SSL, ...); @FILE reads KEY=VALUE lines; repeat for several")
    stream.add_argument("--checkpoint", "-c", required=True, metavar="DIR",
                        help="where progress, state, rule versions and status are kept (reuse it to resume)")
    stream.add_argument("--output", "-o", metavar="DIR", help="directory for the matches (default: CHECKPOINT/matches)")
    stream.add_argument("--sink", action="append", nargs="+", metavar="SINK",
                        help="console | json | parquet | csv (the --output format; default json) | webhook URL | "
                        "sqlite PATH | postgres URL | kafka://HOST:PORT/TOPIC (at least once) | "
                        "kafka-exactly-once://HOST:PORT/TOPIC (a transaction per micro-batch); repeat for several")
    stream.add_argument("--watermark", metavar="DELAY", help="how late an event may arrive and still match (default 10s)")
    stream.add_argument("--trigger", default="1s", metavar="INTERVAL", help="micro-batch interval (default: %(default)s)")
    stream.add_argument("--suppress", action="append", metavar="RULE=DURATION",
                        help="at most one alert per partition key per DURATION for RULE (an id or a pattern like 'fraud/*')")
    stream.add_argument("--session-timeout", metavar="GAP", help="end a key's session after this event-time gap (default: never)")
    stream.add_argument("--time-column", metavar="NAME", help="the event-time column (default: the rules' first ORDER BY column)")
    stream.add_argument("--dead-letter", metavar="DIR",
                        help="bad input rows go to DIR/bad-rows/ (JSON lines with the reason), failed webhook deliveries "
                        "to DIR/<key>.json (default: CHECKPOINT/dead-letter)")
    stream.add_argument("--dedup-key", action="append", metavar="COLUMN",
                        help="drop repeats of this column's value (an event id) within a partition key and the watermark "
                        "delay; repeat for a key of several columns (default: every row counts, as in SQL)")
    stream.add_argument("--max-future-skew", default=DEFAULT_MAX_FUTURE_SKEW, metavar="DURATION",
                        help="a row whose event time is further ahead of the clock than this is a bad row "
                        "(future_event_time) and cannot move the watermark; 'off' to accept any (default: %(default)s)")
    stream.add_argument("--webhook-attempts", type=int, default=5, metavar="N", help="attempts per webhook request (default: %(default)s)")
    stream.add_argument("--webhook-timeout", type=float, default=10.0, metavar="SECONDS", help="per request (default: %(default)s)")
    stream.add_argument("--webhook-batch", type=int, default=1, metavar="N",
                        help="alerts per webhook request (default 1: Idempotency-Key = match_id)")
    stream.add_argument("--once", action="store_true", help="process the files there now, deliver, and stop")
    stream.add_argument("--master", default="local[*]", help="Spark master URL (default: %(default)s)")
    stream.set_defaults(func=cmd_stream)

    status = subparsers.add_parser(
        "status",
        help="show a stream's rules: versions, matches, live partial matches, late rows, errors",
        description="Print what the stream using --checkpoint DIR last reported, per rule: version, matches so far, "
        "suppressed, live partial matches, late rows, last micro-batch time, errors.",
    )
    status.add_argument("--checkpoint", "-c", required=True, metavar="DIR", help="the stream's checkpoint directory")
    status.add_argument("--json", action="store_true", help="print the status file as JSON")
    status.set_defaults(func=cmd_status)


def parse_sinks(specs: Sequence[Sequence[str]] | None, *, dead_letter_dir: str, webhook_options: dict | None = None,
                state_dir: str | None = None):
    """``--sink`` values -> (file format, alert sinks). ``state_dir``: where sinks keep what must outlive a
    restart (the exactly-once Kafka sink's transactional id)."""

    file_format = None
    sinks = []
    for spec in specs or []:
        kind, *rest = spec
        if is_kafka_url(kind) or is_kafka_url(kind, "kafka-exactly-once"):
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
        if kind == "postgresql":
            kind = "postgres"
        if kind not in ALERT_SINKS:
            raise _usage(f"--sink {kind}: unknown sink (console, json, parquet, csv, webhook URL, sqlite PATH, postgres URL, "
                         "kafka://HOST:PORT/TOPIC, kafka-exactly-once://HOST:PORT/TOPIC)")
        if kind == "console" and rest:
            raise _usage("--sink console takes no argument")
        if kind != "console" and len(rest) != 1:
            raise _usage(f"--sink {kind} needs exactly one {'URL' if kind in ('webhook', 'postgres') else 'PATH'}")
        options = dict(webhook_options or {}) if kind == "webhook" else {}
        try:
            sinks.append(make_sink(kind, rest[0] if rest else None, dead_letter_dir=dead_letter_dir, **options))
        except (ValueError, RuntimeError) as exc:
            raise _usage(f"--sink {kind}: {exc}") from None
    return file_format or "json", sinks


def _duration_text(value: str | None, option: str) -> str | None:
    """Check a duration option; returns Spark's spelling ('1500 milliseconds')."""
    if value is None:
        return None

    try:
        us = parse_duration(value, what=option)
    except (TypeError, ValueError) as exc:
        raise _usage(f"{option}: {exc}") from None
    return f"{us // 1000} milliseconds"


def _input_format(path: str, explicit: str | None) -> str:
    if explicit:
        return explicit
    names = sorted(n for n in os.listdir(path) if not n.startswith(("_", "."))) if os.path.isdir(path) else [path]
    for name in names:
        ext = os.path.splitext(name)[1].lower()
        if ext in _EXTENSIONS:
            return _EXTENSIONS[ext]
    raise _usage(f"cannot tell the format of the files in {path}; use --format {{{','.join(FORMATS)}}}")


def stream_source(spark, path: str, fmt: str, schema_text: str | None = None):
    """A streaming DataFrame over the files in ``path``; the schema from ``schema_text`` or from the
    files already there (ISO 8601 text columns of JSON become timestamps, as in ``cep run``; a CSV is read
    as text, RFC 4180, and typed by the rule of ``cep run``, ``cep.spark_bridge.spark.files``).

    JSON and CSV are read in Spark's PERMISSIVE mode with a ``_corrupt_record`` column: a line that is
    not JSON, or holds a value the schema's type cannot take (``abc`` in a DOUBLE column, ``yesterday``
    in a TIMESTAMP one), keeps its text there (the streaming bridge rejects it with a reason), and so
    does a JSON line whose ISO 8601 time column does not parse. Extra JSON fields are ignored. A CSV line
    with the wrong number of fields keeps its text too, and all its columns are NULL: which value
    belongs to which column is unknown, so it is rejected as a line not read at all (``not_json``).
    Parquet is read as it is."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T


    if schema_text:

        try:
            columns = parse_schema(schema_text)
        except Exception as exc:  # CepError
            raise _usage(f"invalid --schema:\n{exc}") from None
        schema = T.StructType([T.StructField(name, sql_to_spark(kind, column=name), True) for name, kind in columns.items()])
        to_time: list[str] = []
    else:
        files = [n for n in os.listdir(path) if not n.startswith(("_", "."))] if os.path.isdir(path) else []
        if not files:
            raise _usage(f"{path} has no files yet to take the columns from; give them with --schema "
                         "'ts TIMESTAMP, key STRING, value DOUBLE'")
        static = cli_io.read_spark(spark, [path], fmt)
        if fmt == "csv":  # every field as text; typed after the read, by the rule cep run follows
            text_types = {f.name: spark_to_sql(f.dataType) for f in static.schema.fields if f.name != CORRUPT_RECORD}
            schema = T.StructType([T.StructField(name, T.StringType(), True) for name in text_types])
            to_time = []
        elif fmt == "json":
            raw = spark.read.json(path).schema
            to_time = [f.name for f in static.schema.fields if isinstance(f.dataType, T.TimestampType)
                       and not isinstance(raw[f.name].dataType, T.TimestampType)]
            schema = raw
        else:
            schema, to_time = static.schema, []
    if fmt in ("json", "csv") and CORRUPT_RECORD not in schema.fieldNames():
        schema = T.StructType(list(schema.fields) + [T.StructField(CORRUPT_RECORD, T.StringType(), True)])
    reader = spark.readStream.schema(schema)
    if fmt == "csv":
        reader = reader.options(**{k: v for k, v in CSV_OPTIONS.items() if k != "inferSchema"})
    if fmt in ("json", "csv"):
        reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_RECORD)
    df = reader.format(fmt).load(path)
    if fmt == "csv":
        df = blank_misshapen_csv_lines(df)
        if not schema_text:
            df = apply_text_types(df, text_types, mark_unread=True)
    if to_time:  # a time that does not parse makes the row unreadable, as a wrong type does
        data = [F.col(quote(f.name)) for f in schema.fields if f.name != CORRUPT_RECORD]
        unparsed = reduce(lambda a, b: a | b, [F.col(quote(n)).isNotNull() & F.try_to_timestamp(F.col(quote(n))).isNull()
                                               for n in to_time])
        df = df.withColumn(CORRUPT_RECORD, F.when(F.col(CORRUPT_RECORD).isNull() & unparsed, F.to_json(F.struct(*data)))
                           .otherwise(F.col(CORRUPT_RECORD)))
    for name in to_time:
        df = df.withColumn(name, F.try_to_timestamp(F.col(quote(name))))
    return df


# -------------------------------------------------------------------------------------- cep stream


def _status_line(status: dict, started: float) -> str:
    rows = rule_rows(status)
    active = sum(1 for r in rows if r["state"] == "active")
    errors = len(status.get("errors", []))
    last = status.get("last_batch") or {}
    alerts = sum(r["matches"] + r["earlier_matches"] for r in rows)
    suppressed = sum(r["suppressed"] for r in rows)
    sinks = status.get("sinks", {})
    delivered = sum(s.get("delivered", 0) for s in sinks.values())
    dead = sum(s.get("dead_lettered", 0) for s in sinks.values())
    parts = [
        f"{_dt.datetime.now().strftime('%H:%M:%S')}",
        f"batch {last.get('id', '-')}",
        f"rules {active}" + (f" ({errors} with errors)" if errors else ""),
        f"alerts {alerts}" + (f" ({suppressed} suppressed)" if suppressed else ""),
        f"live {sum(r['live'] for r in rows)}",
        f"late {sum(r['late'] for r in rows)}",
    ]
    bad = sum((status.get("bad_rows") or {}).values())
    if bad:
        parts.append(f"bad rows {bad}")
    duplicates = max((r["duplicates_dropped"] for r in rows), default=0)
    if duplicates:
        parts.append(f"duplicates {duplicates}")
    if sinks:
        parts.append(f"delivered {delivered}" + (f", dead letters {dead}" if dead else ""))
    parts.append(f"up {int(time.monotonic() - started)}s")
    return " | ".join(parts)


class _Console:
    """Events on their own lines; the status line rewritten in place on a terminal, else printed when it changes."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last = ""
        self.shown = False

    def event(self, message: str) -> None:
        self.clear()
        self.stream.write(f"[cep] {message}\n")
        self.stream.flush()

    def status(self, line: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self.shown = True
        elif line.split(" | ")[1:-1] != self.last.split(" | ")[1:-1]:  # not the clock, not the uptime
            self.stream.write(line + "\n")
        self.last = line
        self.stream.flush()

    def clear(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\r\033[K")
            self.shown = False


def cmd_stream(args: argparse.Namespace) -> int:
    if bool(args.query_file) == bool(args.rules):
        raise _usage("give either a QUERY_FILE or --rules DIR (not both)")
    rules_path = args.query_file or args.rules
    if not os.path.exists(rules_path):
        raise _usage(f"{'query file' if args.query_file else 'rules directory'} not found: {rules_path}")
    if args.rules and not os.path.isdir(args.rules):
        raise _usage(f"--rules expects a directory of .sql files, not a file: {args.rules} (give one query file without --rules)")
    kafka = is_kafka_url(args.input)
    try:
        if kafka:
            address = parse_kafka_url(args.input, topic_required=False)
            kafka_options = parse_kafka_options(args.kafka_option)
            if args.format not in (None, *VALUE_FORMATS):
                raise _usage(f"--format {args.format}: a Kafka message value is read as {' or '.join(VALUE_FORMATS)}")
            fmt = args.format or "json"
        elif args.kafka_option:
            raise _usage("--kafka-option is for a Kafka input (--input kafka://HOST:PORT/TOPIC)")
        elif not os.path.isdir(args.input):
            raise _usage(f"--input expects a directory (the files of the stream arrive there) or kafka://HOST:PORT/TOPIC: {args.input}")
        else:
            fmt = _input_format(args.input, args.format)
    except CepKafkaError as err:
        cli_io.print_error(str(err))
        return cli_io.EXIT_USAGE
    checkpoint = os.path.abspath(args.checkpoint)
    dead_letter = os.path.abspath(args.dead_letter or os.path.join(checkpoint, "dead-letter"))
    webhook_options = {"max_attempts": args.webhook_attempts, "timeout": args.webhook_timeout, "batch_size": args.webhook_batch}
    if args.webhook_attempts < 1 or args.webhook_batch < 1:
        raise _usage("--webhook-attempts and --webhook-batch must be at least 1")
    try:
        output_format, sinks = parse_sinks(args.sink, dead_letter_dir=dead_letter, webhook_options=webhook_options,
                                           state_dir=os.path.join(checkpoint, "sinks"))
    except CepKafkaError as err:
        cli_io.print_error(str(err))
        return cli_io.EXIT_USAGE
    try:
        specs = parse_specs(args.suppress)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    watermark = _duration_text(args.watermark, "--watermark")
    trigger = _duration_text(args.trigger, "--trigger")
    session = _duration_text(args.session_timeout, "--session-timeout")
    skew = None if is_off(str(args.max_future_skew)) else _duration_text(args.max_future_skew, "--max-future-skew")

    spark = cli_io.start_spark(args.master, kafka=kafka)
    console = _Console()
    try:
        if kafka:
            source = read_kafka(spark, address, schema=args.schema, format=fmt, options=kafka_options)
        else:
            source = stream_source(spark, args.input, fmt, args.schema)
        stream = AlertStream(
            spark, rules_path, source, checkpoint=checkpoint, output=args.output, output_format=output_format,
            sinks=sinks, suppress=specs, watermark=watermark, session_timeout=session, time_column=args.time_column,
            trigger=trigger, on_event=console.event, dead_letter=dead_letter, max_future_skew=skew,
            dedup_key=args.dedup_key, source_location=kafka_location() if kafka else None,
        )
        stream.refresh_rules(force=True)
    except CepKafkaError as err:
        cli_io.print_error(str(err))
        return cli_io.EXIT_USAGE
    except CepError as err:
        cli_io.print_error(str(err))
        return cli_io.EXIT_QUERY_ERROR
    ruleset = stream.ruleset
    if not len(ruleset) and (args.once or not args.rules):
        cli_io.print_error(f"cep stream: no rule could be loaded from {rules_path}")
        return cli_io.EXIT_QUERY_ERROR
    where = stream.file_sink.path
    console.event(f"{len(ruleset)} rule(s) over {args.input} (event time: {stream.time_column}); matches -> {where} "
                  f"({output_format})" + "".join(f"; {s.describe()}" for s in sinks) + f"; checkpoint {checkpoint}")

    if args.once:
        try:
            status = stream.run_available_now()
        except Exception as exc:
            message = cli_io.spark_error(exc)
            if message is None:
                raise
            cli_io.print_error(f"cep stream: {message}")
            return cli_io.EXIT_QUERY_ERROR
        started = time.monotonic()
        console.event(_status_line(status, started))
        return cli_io.EXIT_QUERY_ERROR if ruleset.errors else cli_io.EXIT_OK

    # Ctrl-C and SIGTERM end the loop between two polls; the queries are then stopped and the status
    # written. (pyspark's own SIGINT handler would raise inside a Py4J call; a second Ctrl-C still does.)
    stop = threading.Event()
    interrupted: list[int] = []
    saved: dict[int, Any] = {}

    def request_stop(signum, _frame) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        interrupted.append(signum)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            saved[signum] = signal.signal(signum, request_stop)
    started = time.monotonic()
    try:
        stream.start()
        console.event("running; Ctrl-C stops cleanly (the same command resumes)")
        stream.run(poll_interval=1.0, stop=stop, on_tick=lambda status: console.status(_status_line(status, started)))
    except RuntimeError as exc:
        console.event(str(exc))
        if kafka and "TimeoutException" in str(exc):
            console.event(f"the Kafka brokers at {address.bootstrap} did not answer for longer than the Kafka client's "
                          "timeout (kafka.default.api.timeout.ms, 60 s by default); once they are back, the same command "
                          "resumes from the checkpoint without losing an event")
        return cli_io.EXIT_QUERY_ERROR
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    console.event(f"stopped cleanly; status in {os.path.join(checkpoint, 'status.json')} (cep status --checkpoint {args.checkpoint}); "
                  "the same command resumes")
    return cli_io.EXIT_INTERRUPTED if signal.SIGINT in interrupted else cli_io.EXIT_OK


# -------------------------------------------------------------------------------------- cep status


def _ago(text: str | None) -> str:
    if not text:
        return "never"
    try:
        moment = _dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return str(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    seconds = int((_dt.datetime.now(_dt.timezone.utc) - moment).total_seconds())
    if seconds < 120:
        return f"{moment.strftime('%Y-%m-%d %H:%M:%S')}Z ({seconds}s ago)"
    if seconds < 7200:
        return f"{moment.strftime('%Y-%m-%d %H:%M:%S')}Z ({seconds // 60} min ago)"
    return f"{moment.strftime('%Y-%m-%d %H:%M:%S')}Z ({seconds // 3600} h ago)"


def render_status(status: dict) -> str:
    lines = []
    last = status.get("last_batch") or {}
    state = status.get("state", "?")
    lines.append(f"stream: {state}, status written {_ago(status.get('updated_at'))}")
    if last:
        duration = f", {last['duration_ms']} ms" if last.get("duration_ms") is not None else ""
        lines.append(f"last micro-batch: {last.get('id')} at {_ago(last.get('time'))}, {last.get('input_rows', 0)} input rows"
                     f"{duration}; watermark {last.get('watermark') or '-'}")
    lines.append(f"event time: {status.get('time_column') or '-'}; matches: {status.get('output', '-')} ({status.get('output_format', '-')})")
    for name, sink in sorted((status.get("sinks") or {}).items()):
        extra = f", last error: {sink['errors'][-1]['error']}" if sink.get("errors") else ""
        lines.append(f"sink {name}: delivered {sink.get('delivered', 0)}, dead letters {sink.get('dead_lettered', 0)}, "
                     f"retries {sink.get('retries', 0)}{extra}")
    bad = status.get("bad_rows") or {}
    if sum(bad.values()):
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(bad.items()) if count)
        lines.append(f"bad rows: {sum(bad.values())} ({reasons}) -> {status.get('bad_rows_path', '-')}")
    duplicates = max((r["duplicates_dropped"] for r in rule_rows(status)), default=0)
    if duplicates:
        lines.append(f"duplicates dropped: {duplicates} (each rule drops the repeats it sees; the largest count)")
    rows = rule_rows(status)
    lines.append("")
    header = ("RULE", "STATE", "VERSION", "MATCHES", "SUPPRESSED", "LIVE", "LATE", "LAST MICRO-BATCH", "ERRORS")
    table = [header]
    for r in rows:
        live = str(r["live"]) + (f" (+{r['stale_live']} old)" if r["stale_live"] else "")
        matches = str(r["matches"]) + (f" (+{r['earlier_matches']} earlier versions)" if r["earlier_matches"] else "")
        table.append((r["rule"], r["state"], r["version"], matches, str(r["suppressed"]), live, str(r["late"]),
                      _ago(r["last_batch_time"]).split(" (")[0] if r["last_batch_time"] else "-", str(len(r["errors"])) if r["errors"] else "-"))
    if len(table) == 1:
        lines.append("(no rules)")
    else:
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        numeric = {4, 6}
        for row in table:
            lines.append("  ".join(cell.rjust(w) if i in numeric and row is not header else cell.ljust(w)
                                   for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
    problems = [(r["rule"], e) for r in rows for e in r["errors"]]
    loose = [e.get("rendered", "") for e in status.get("errors", []) if not e.get("rule_id")]
    if problems or loose:
        lines.append("")
        lines.append("errors:")
        for rule, error in problems:
            lines.append(f"  {rule}: " + str(error).replace("\n", "\n    "))
        for error in loose:
            lines.append("  " + error.replace("\n", "\n    "))
    events = status.get("events") or []
    if events:
        lines.append("")
        lines.append("recent events:")
        for event in events[-8:]:
            lines.append(f"  {event.get('time', '')}  {event.get('message', '')}".replace("\n", "\n    "))
    for error in (status.get("query_errors") or [])[-3:]:
        lines.append(f"query error at {error.get('time')}: {str(error.get('error', '')).splitlines()[0] if error.get('error') else ''}")
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    path = os.path.join(args.checkpoint, "status.json")
    if not os.path.exists(path):
        raise _usage(f"no status in {args.checkpoint} (no cep stream has run with this --checkpoint): {path} not found")
    try:
        status = read_status(args.checkpoint)
    except (OSError, ValueError) as exc:
        raise _usage(f"cannot read {path}: {exc}") from None
    if args.json:
        print(json.dumps(status, indent=1, sort_keys=True))
    else:
        print(render_status(status))
    return cli_io.EXIT_OK


__all__ = ["add_commands", "cmd_status", "cmd_stream", "parse_sinks", "render_status", "stream_source"]
