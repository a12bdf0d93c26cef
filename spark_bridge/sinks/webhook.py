"""Where alerts go: files (Spark's exactly-once file sink), the console, an HTTP webhook, a SQL database.

Every alert is one row of ``ALERT_COLUMNS`` (``cep.spark_bridge.alerting.stream`` makes them):

    rule_id, rule_version, match_id, match_status, partition_key, first_event_time, last_event_time,
    measures, emit_time, suppressed

* ``FileSink(path, format)``: JSON lines, Parquet or CSV through Spark's file sink, with a checkpoint:
  each micro-batch is committed exactly once in ``path/_spark_metadata``. Read it back through Spark
  (``FileSink.read(spark)``), which honours that log; a killed batch can leave orphan part files that
  a plain directory listing would show. Every match is written, the suppressed ones too.
* Alert sinks, fed from ``foreachBatch`` (``deliver_batch``) with the alerts that are not suppressed,
  and idempotent by ``match_id`` so that a micro-batch replayed after a crash delivers nothing twice:

  - ``ConsoleSink()``: one readable line per alert.
  - ``WebhookSink(url, dead_letter_dir=...)``: HTTP POST of a JSON body ``{"alerts": [...]}``. By
    default one request per match, with the header ``Idempotency-Key: <match_id>``. With
    ``batch_size=N`` a request carries up to N alerts (sorted by match_id) and its key is
    ``batch-`` + the first 32 hex digits of the SHA-256 of their match ids joined by commas: the same
    alerts give the same key, and every alert in the body still carries its own ``match_id``.
    Failures (connection refused or reset, timeouts, HTTP 5xx, 408, 425, 429) are retried with the
    ``RetryPolicy`` every sink uses (``sink_base``): wait ``RetryPolicy.delay(n)`` = ``backoff`` * 2^n,
    at most ``max_backoff`` (``Retry-After`` is honoured within that), at most ``max_attempts`` times
    per request and within ``budget`` (``retry_budget``) seconds per micro-batch.
    Other 4xx answers are not retried. A request that still failed is written, with its body, every
    error and the attempt count, to ``dead_letter_dir/<key>.json``: never dropped.
    ``WebhookSink.replay_dead_letters()`` sends them again (and removes those that went through).
  - ``SQLiteSink(path)`` (stdlib ``sqlite3``) and ``PostgresSink(url)`` (``psycopg`` 3, or ``psycopg2``):
    ``INSERT ... ON CONFLICT (match_id) DO UPDATE``: one row per match, however often a batch is
    delivered. A locked database (or a lost connection) is retried with backoff within a
    ``RetryPolicy``; then, like any other error, the sink raises ``CepSinkError`` naming itself.

A sink that cannot take a micro-batch raises ``CepSinkError`` (E0470): the micro-batch is then not
committed, and Spark delivers it again when the stream restarts from its checkpoint; upserts and
idempotency keys make that second delivery harmless. A database is not dead-lettered: the input's
offsets in the checkpoint already are a durable queue of what it missed, replayed in order, whereas a
dead-letter file would split the record of alerts in two and need a replay tool. Every file written
here (dead letters) goes to a temporary name, is fsynced, then renamed: a reader never sees half a file.

pyspark is imported only where a Spark object is handled.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import http.client
import json
import math
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from cep.spark_bridge.sinks.base import AlertSink, Delivery, RetryPolicy, CepSinkError, atomic_write, not_committed
from cep.spark_bridge.sinks.sql import PostgresSink, SQLiteSink

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "ALERT_COLUMNS",
    "AlertSink",
    "ConsoleSink",
    "Delivery",
    "FileSink",
    "PostgresSink",
    "RetryPolicy",
    "SQLiteSink",
    "CepSinkError",
    "WebhookSink",
    "alert_payload",
    "alert_schema",
    "deliver_batch",
    "make_sink",
]

ALERT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("rule_id", "string"),
    ("rule_version", "string"),
    ("match_id", "string"),
    ("match_status", "string"),  # MATCHED | TIMEOUT | ABSENCE
    ("partition_key", "string"),  # JSON object of the PARTITION BY values, e.g. {"card": "c1"}
    ("first_event_time", "timestamp"),  # UTC
    ("last_event_time", "timestamp"),
    ("measures", "string"),  # JSON object of the rule's output columns
    ("emit_time", "timestamp"),  # when the match was emitted (processing time, UTC)
    ("suppressed", "boolean"),  # throttled by --suppress / '-- suppress:'
)
ALERT_NAMES = tuple(name for name, _ in ALERT_COLUMNS)
FILE_FORMATS = ("json", "parquet", "csv")


def alert_schema():
    from pyspark.sql import types as T

    kinds = {"string": T.StringType(), "timestamp": T.TimestampType(), "boolean": T.BooleanType()}
    return T.StructType([T.StructField(name, kinds[kind], True) for name, kind in ALERT_COLUMNS])


# ----------------------------------------------------------------------------------------- values


def iso_utc(value: Any) -> str | None:
    """A naive UTC datetime as ISO 8601 with a ``Z`` (what receivers parse without guessing a zone)."""
    if value is None:
        return None
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat() + "Z"
    return str(value)


def jsonable(value: Any) -> Any:
    """A value as JSON can carry it: datetimes ISO 8601, decimals as text (exact), NaN/inf as null."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and type(value).__module__ == "numpy":
        return jsonable(value.item())
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        return [jsonable(v) for v in items] if isinstance(items, list) else jsonable(items)
    return str(value)


def alert_payload(alert: dict) -> dict:
    """One alert as the JSON object sinks send: measures and partition key as objects, times ISO 8601 Z."""
    out: dict[str, Any] = {}
    for name in ALERT_NAMES:
        value = alert.get(name)
        if name in ("measures", "partition_key"):
            try:
                value = json.loads(value) if isinstance(value, str) else value
            except ValueError:
                pass
        elif name in ("first_event_time", "last_event_time", "emit_time"):
            value = iso_utc(value)
        out[name] = jsonable(value)
    return out


def rows_to_alerts(rows: Iterable[Any]) -> list[dict]:
    """Spark Rows (or dicts) -> alert dicts, sorted by rule, event time and match id (a stable order)."""
    alerts = [row.asDict() if hasattr(row, "asDict") else dict(row) for row in rows]
    far = _dt.datetime.max
    alerts.sort(key=lambda a: (a.get("rule_id") or "", a.get("last_event_time") or far, a.get("match_id") or ""))
    return alerts


# -------------------------------------------------------------------------------------- file sink


@dataclass
class FileSink:
    """Spark's file sink (exactly once with a checkpoint): JSON lines, Parquet or CSV files under ``path``."""

    path: str
    format: str = "json"

    def __post_init__(self) -> None:
        if self.format not in FILE_FORMATS:
            raise ValueError(f"file sink format must be one of {', '.join(FILE_FORMATS)}, not {self.format!r}")

    def prepare(self) -> None:
        """Create ``path/_spark_metadata`` before anything runs, so that a stream reading ``path`` (the
        delivery query) knows from its first look that only committed files count."""
        os.makedirs(os.path.join(self.path, "_spark_metadata"), exist_ok=True)

    def start(self, df: "DataFrame", *, checkpoint: str, trigger: str | None = None, available_now: bool = False,
              query_name: str | None = None):
        self.prepare()
        writer = df.writeStream.format(self.format).outputMode("append").option("path", self.path)
        writer = writer.option("checkpointLocation", checkpoint)
        if self.format == "csv":
            writer = writer.option("header", True)
        if query_name:
            writer = writer.queryName(query_name)
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif trigger:
            writer = writer.trigger(processingTime=trigger)
        return writer.start()

    def commit(self, batch_id: int, df: "DataFrame") -> None:
        """Write ``df`` as micro-batch ``batch_id`` of a query that hands its batches to ``foreachBatch``,
        with the guarantee of ``start``: this is Spark's own file sink (``FileStreamSink``, through the
        JVM), which writes the files, then records the batch in ``path/_spark_metadata``, and skips a
        batch id already recorded there. So a micro-batch re-run after a crash is written once, and
        several of these sinks fed from one ``foreachBatch`` each commit it once, whichever had
        committed it before the crash (``AlertStream`` writes alerts and bad rows so, from one query).
        """
        spark = df.sparkSession  # the session foreachBatch hands over
        jvm = spark._jvm
        formats = jvm.org.apache.spark.sql.execution.datasources
        file_format = {"json": formats.json.JsonFileFormat, "parquet": formats.parquet.ParquetFileFormat,
                       "csv": formats.csv.CSVFileFormat}[self.format]()
        options = {"header": "true"} if self.format == "csv" else {}
        sink = jvm.org.apache.spark.sql.execution.streaming.sinks.FileStreamSink(
            spark._jsparkSession, self.path, file_format, jvm.PythonUtils.toSeq([]), jvm.PythonUtils.toScalaMap(options))
        sink.addBatch(batch_id, df._jdf)  # reads the log from disk: skips batch_id if committed

    def _reader(self, reader):
        reader = reader.schema(alert_schema())
        if self.format == "csv":
            reader = reader.option("header", True)
        return reader.format(self.format)

    def read(self, spark: "SparkSession") -> "DataFrame":
        """Everything committed so far (through ``_spark_metadata``: no orphan files of a killed batch)."""
        return self._reader(spark.read).load(self.path)

    def read_stream(self, spark: "SparkSession") -> "DataFrame":
        """The committed alerts as a stream (what the delivery query reads)."""
        return self._reader(spark.readStream).load(self.path)


# ------------------------------------------------------------------------------------- alert sinks
class ConsoleSink(AlertSink):
    """One line per alert: time, rule, status, partition key, measures, match id."""

    name = "console"

    def __init__(self, stream=None, *, width: int = 160) -> None:
        self.stream = stream
        self.width = width

    @staticmethod
    def line(alert: dict) -> str:
        payload = alert_payload(alert)
        key = payload.get("partition_key") or {}
        key_text = " ".join(f"{k}={_short(v)}" for k, v in key.items()) if isinstance(key, dict) else str(key)
        measures = payload.get("measures") or {}
        measure_text = ", ".join(f"{k}={_short(v)}" for k, v in measures.items()) if isinstance(measures, dict) else str(measures)
        first = _clock(alert.get("first_event_time"))
        last = _clock(alert.get("last_event_time"))
        span = first if first == last else f"{first} .. {last}"
        parts = [f"ALERT {payload['rule_id']}", payload.get("match_status") or "", key_text, span, measure_text,
                 f"[{(payload.get('match_id') or '')[:12]}]"]
        return "  ".join(p for p in parts if p)

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        stream = self.stream or sys.stdout
        for alert in alerts:
            stream.write(self.line(alert) + "\n")
            report.delivered[alert["rule_id"]] += 1
        stream.flush()
        return report


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clock(value: Any) -> str:
    if value is None:
        return "?"
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, _dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "") + "Z"
    return str(value)


# ----------------------------------------------------------------------------------------- webhook

_RETRY_STATUS = {408, 425, 429}


class _Permanent(Exception):
    """An answer that retrying cannot fix (a 4xx other than 408/425/429)."""


def _safe_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)[:120]


class WebhookSink(AlertSink):
    """POST alerts as JSON with an ``Idempotency-Key``; retries with backoff; dead letters, never drops."""

    name = "webhook"

    def __init__(
        self,
        url: str,
        *,
        dead_letter_dir: str,
        timeout: float = 10.0,
        max_attempts: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        retry_budget: float = 120.0,
        batch_size: int = 1,
        headers: dict[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not re.match(r"^https?://", url):
            raise ValueError(f"webhook URL must start with http:// or https://, not {url!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        # One retry policy for every sink (sink_base.RetryPolicy): the keyword arguments are its fields,
        # spelled as before; ``retry`` replaces them all. Per request: max_attempts; per micro-batch: budget.
        try:
            self.retry = retry or RetryPolicy(max_attempts=max_attempts, backoff=backoff, max_backoff=max_backoff,
                                              budget=retry_budget)
        except ValueError as exc:
            raise ValueError(f"webhook retries: {exc}") from None
        self.url = url
        self.dead_letter_dir = dead_letter_dir
        self.timeout = timeout
        self.batch_size = batch_size
        self.headers = dict(headers or {})
        self.sleep = sleep
        self.clock = clock

    @property
    def max_attempts(self) -> int:
        return self.retry.max_attempts

    @property
    def retry_budget(self) -> float:
        return self.retry.budget

    def describe(self) -> str:
        return f"webhook {self.url}"

    # -- keys and bodies

    @staticmethod
    def batch_key(match_ids: Sequence[str]) -> str:
        if len(match_ids) == 1:
            return match_ids[0]
        digest = hashlib.sha256(",".join(sorted(match_ids)).encode("utf-8")).hexdigest()[:32]
        return f"batch-{digest}"

    def requests(self, alerts: Sequence[dict]) -> list[tuple[str, list[dict]]]:
        """(idempotency key, alerts) per request: one per match, or chunks of ``batch_size`` by match id."""
        ordered = sorted(alerts, key=lambda a: a["match_id"] or "")
        chunks = [ordered[i : i + self.batch_size] for i in range(0, len(ordered), self.batch_size)]
        return [(self.batch_key([a["match_id"] for a in chunk]), chunk) for chunk in chunks]

    # -- sending

    def _post(self, key: str, body: bytes) -> None:
        request = urllib.request.Request(self.url, data=body, method="POST")
        request.add_header("Content-Type", "application/json")
        request.add_header("Idempotency-Key", key)
        for name, value in self.headers.items():
            request.add_header(name, value)
        with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - http(s) only, checked
            response.read()

    def _attempt(self, key: str, body: bytes) -> tuple[bool, str, float | None]:
        """(ok, error text, Retry-After seconds); raises _Permanent for an answer not worth retrying."""
        try:
            self._post(key, body)
            return True, "", None
        except urllib.error.HTTPError as exc:
            retry_after = None
            try:
                retry_after = float(exc.headers.get("Retry-After")) if exc.headers and exc.headers.get("Retry-After") else None
            except (TypeError, ValueError):
                retry_after = None
            text = f"HTTP {exc.code} {exc.reason}"
            if exc.code >= 500 or exc.code in _RETRY_STATUS:
                return False, text, retry_after
            raise _Permanent(text) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (TimeoutError, socket.timeout)):
                return False, f"timed out after {self.timeout:g}s", None
            return False, f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason), None
        except (TimeoutError, socket.timeout):
            return False, f"timed out after {self.timeout:g}s", None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            return False, f"{type(exc).__name__}: {exc}", None

    def send(self, key: str, alerts: Sequence[dict], *, deadline: float, batch_id: int | None = None) -> tuple[bool, list[str], int]:
        """POST one request with retries; (delivered, errors, retries)."""
        body = json.dumps({"alerts": [alert_payload(a) for a in alerts]}, ensure_ascii=False).encode("utf-8")
        errors: list[str] = []
        for attempt in range(self.max_attempts):
            if attempt > 0 and self.clock() >= deadline:
                errors.append(f"retry budget of {self.retry_budget:g}s for this micro-batch used up")
                return False, errors, attempt - 1
            try:
                ok, error, retry_after = self._attempt(key, body)
            except _Permanent as exc:
                errors.append(f"{exc} (not retried)")
                return False, errors, attempt
            if ok:
                return True, errors, attempt
            errors.append(error)
            if attempt + 1 == self.max_attempts:
                break
            wait = self.retry.delay(attempt)
            if retry_after is not None:  # the server's wish, within the policy's longest wait
                wait = min(self.retry.max_backoff, max(wait, retry_after))
            wait = min(wait, max(0.0, deadline - self.clock()))
            if wait > 0:
                self.sleep(wait)
        return False, errors, self.max_attempts - 1

    def dead_letter(self, key: str, alerts: Sequence[dict], errors: list[str], batch_id: int | None) -> str:
        os.makedirs(self.dead_letter_dir, exist_ok=True)
        record = {
            "sink": self.name,
            "url": self.url,
            "idempotency_key": key,
            "batch_id": batch_id,
            "attempts": sum(1 for e in errors if "budget" not in e),
            "error": errors[-1] if errors else "unknown",
            "errors": errors,
            "failed_at": iso_utc(_dt.datetime.now(_dt.timezone.utc)),
            "body": {"alerts": [alert_payload(a) for a in alerts]},
        }
        path = os.path.join(self.dead_letter_dir, f"{_safe_name(key)}.json")
        atomic_write(path, json.dumps(record, ensure_ascii=False, indent=1))
        return path

    def deliver(self, alerts: Sequence[dict], batch_id: int) -> Delivery:
        report = Delivery(self.name)
        deadline = self.clock() + self.retry.budget
        exhausted: str | None = None
        for key, chunk in self.requests(alerts):
            if exhausted is not None:
                errors = [exhausted, f"retry budget of {self.retry_budget:g}s for this micro-batch used up: not attempted"]
                ok, retries = False, 0
            else:
                ok, errors, retries = self.send(key, chunk, deadline=deadline, batch_id=batch_id)
                report.retries += retries
            if ok:
                for alert in chunk:
                    report.delivered[alert["rule_id"]] += 1
                continue
            try:
                self.dead_letter(key, chunk, errors, batch_id)
            except OSError as exc:  # a full disk: dropping the alert is not an option, so stop the batch
                raise CepSinkError(f"{errors[-1] if errors else 'delivery failed'}, and the dead letter for {key} could not "
                                f"be written to {self.dead_letter_dir}: {exc}; {not_committed(batch_id)}",
                                filename=self.describe()) from exc
            for alert in chunk:
                report.dead_lettered[alert["rule_id"]] += 1
            report.errors.append(f"{key}: {errors[-1] if errors else 'failed'}")
            if self.clock() >= deadline and exhausted is None:
                exhausted = f"earlier requests failed: {errors[-1] if errors else 'failed'}"
        return report

    def replay_dead_letters(self) -> tuple[int, int]:
        """Send the dead letters again; remove those delivered. Returns (delivered, still failing)."""
        if not os.path.isdir(self.dead_letter_dir):
            return 0, 0
        delivered = failing = 0
        for name in sorted(os.listdir(self.dead_letter_dir)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(self.dead_letter_dir, name)
            with open(path, encoding="utf-8") as fh:
                record = json.load(fh)
            body = json.dumps(record["body"], ensure_ascii=False).encode("utf-8")
            ok, error, _ = self._attempt_safely(record["idempotency_key"], body)
            if ok:
                os.remove(path)
                delivered += 1
            else:
                record["errors"].append(error)
                record["error"] = error
                atomic_write(path, json.dumps(record, ensure_ascii=False, indent=1))
                failing += 1
        return delivered, failing

    def _attempt_safely(self, key: str, body: bytes):
        try:
            return self._attempt(key, body)
        except _Permanent as exc:
            return False, f"{exc} (not retried)", None


# ------------------------------------------------------------------------------------- fan-out


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
            report.errors.append(f"{sink.describe()}: {type(exc).__name__}: {exc}")
            reports.append(report)
            failure = failure or exc
    if failure is not None:
        raise failure
    return reports


def make_sink(kind: str, argument: str | None = None, *, dead_letter_dir: str | None = None, **options) -> AlertSink:
    """An alert sink from its command-line spelling: console | webhook URL | sqlite PATH | postgres URL."""
    kind = kind.lower()
    if kind == "console":
        return ConsoleSink()
    if argument is None:
        raise ValueError(f"--sink {kind} needs an argument ({'URL' if kind in ('webhook', 'postgres') else 'PATH'})")
    if kind == "webhook":
        if dead_letter_dir is None:
            raise ValueError("a webhook sink needs a dead-letter directory")
        return WebhookSink(argument, dead_letter_dir=dead_letter_dir, **options)
    if kind == "sqlite":
        return SQLiteSink(argument, **options)
    if kind in ("postgres", "postgresql"):
        return PostgresSink(argument, **options)
    raise ValueError(f"unknown sink {kind!r} (console, json, parquet, csv, webhook URL, sqlite PATH, postgres URL)")
