"""Many rules over one input stream; rules added, changed and removed while the stream runs.

    stream = AlertStream(spark, "rules/", events_df, checkpoint="ck/", output="alerts/", output_format="json",
                         sinks=[WebhookSink(url, dead_letter_dir="ck/dead-letter")], suppress=["fraud/*=10m"])
    stream.start()
    stream.run()                      # until Ctrl-C: picks up rule changes, writes ck/status.json
    # or, step by step (tests):  stream.refresh_rules(); stream.process_all_available(); stream.stop()

How it maps onto Spark (``docs/alerting.md`` has the measurements behind the choice):

* **One stateful operator for all rules** (built by ``query.match_rules``), not one streaming query per rule. Every input row is
  tagged, once per distinct PARTITION BY of the active rules (``mapInPandas``), with that partition
  key (a JSON object of its values); then ``groupBy(partition spec, bucket of keys).applyInPandasWithState(...)``
  runs, for each key of the bucket (``cep.spark_bridge.engine.key_table``: one Python call per bucket, not per key),
  every rule with that PARTITION BY, each with its own ``keyed.KeyedStream``
  engine: the same buffering, watermark, timers, sessions and match ids as ``cep.spark_bridge.spark.streaming``.
  Logically the state is keyed by (rule, partition key); physically the rules sharing a PARTITION BY
  share one Spark key, whose state holds one entry per rule, so a key costs one Python call per
  micro-batch however many rules read it. One query, one checkpoint, one watermark, one shuffle.
* **Rule changes between micro-batches, without stopping anything.** The driver publishes each new rule
  set (rules compiled, with their versions) as an immutable file under ``<checkpoint>/rules/sets/`` and
  points ``<checkpoint>/rules/current`` at it. Inside Spark, the first task of micro-batch *n* to ask
  fixes the set for that batch by creating ``<checkpoint>/rules/batches/<n>`` (an atomic, create-once
  link), and every task of the batch reads it from there (the batch id is the task's
  ``streaming.sql.batchId`` property). So a batch sees one rule set, and a batch re-run after a crash
  sees the same one. Workers cache compiled rules by version.
* **Versions and state.** Each rule's entry in a key's state records the rule version that built it.
  A key, when next called (new rows or a timer), drops the entries of changed rules (partial matches and waiting rows,
  counted per old version as ``dropped_live``/``dropped_pending``) and starts fresh; a removed rule's
  keys drop theirs. A key with no deadline of its own sets a housekeeping timer (``housekeeping``, event
  time) so that stale state is reclaimed even for keys that never get another row. An unchanged rule's
  keys keep their state across changes of other rules and across restarts (Spark's state store and
  checkpoint).
* **Output**: ``sinks.alerts.ALERT_COLUMNS``: rule_id, rule_version, match_id, match_status ('MATCHED' |
  'TIMEOUT' | 'ABSENCE'), partition_key (JSON), first_event_time, last_event_time, measures (JSON of the
  rule's output columns), emit_time, suppressed. ``match_status``, the first and last event time come from
  measures added to each rule internally (``MATCH_STATUS()`` where the rule can time out or has an
  absence, ``FIRST(ts)``, ``LAST(ts)``); the user's own columns are unchanged.
* **One read of the input**: bad input rows (``inputs.mark_bad_rows``) travel through the same
  query in a group of their own (``rule_set.BAD_SPEC``), reaching no rule, so the files are
  parsed once for matching and for the dead letter. The query's ``foreachBatch`` (``_write_batch``)
  writes each micro-batch's alerts to ``output`` and its bad rows to ``<dead_letter>/bad-rows/``,
  each through Spark's own file sink (``sinks.FileSink.commit``: exactly once, ``_spark_metadata``,
  a batch id already committed is skipped), so one checkpoint's offsets cover both outputs.
* **Delivery**: when alert sinks are given, a second query reads the ``output`` directory as a stream
  and hands each micro-batch to them in ``foreachBatch`` (``sinks.deliver_batch``; idempotent by match_id).
* **Metrics and status**: each key call emits one statistics row per rule it ran, collected per micro-batch with
  ``DataFrame.observe`` and summed per rule and version by the driver into ``<checkpoint>/status.json``
  (``cep status`` prints it).

Rules must share the stream's event-time column (the first ORDER BY column; ``time_column`` or the first
rule's). Rules a stream cannot run, or that do not fit the input, are reported with file:line:col and
skipped; the others run. A running rule whose file is edited into one that does not compile keeps
running its last good version (and says so in the status) until the file compiles again. A rule's ``FROM`` name is not read: every rule runs over the one input stream.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from cep.grammar.errors import CepError, CepSemanticError
from cep.spark_bridge.alerting import rules as rules_mod
from cep.spark_bridge.alerting import suppress as suppress_mod
from cep.spark_bridge.alerting.query import input_types_of, match_rules
from cep.spark_bridge.alerting.rule_set import (
    BAD_ROWS_METRICS, DEFAULT_HOUSEKEEPING, GAUGES, METRICS_NAME, STAT_NAMES, STATUS_FORMAT, build_rule_set,
)
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.engine.durations import parse_duration
from cep.spark_bridge.engine.keyed import DEFAULT_MAX_PENDING_ROWS
from cep.spark_bridge.sinks.alerts import ALERT_NAMES, rows_to_alerts
from cep.spark_bridge.sinks.base import AlertSink, Delivery, atomic_write
from cep.spark_bridge.sinks.fanout import deliver_batch
from cep.spark_bridge.sinks.file import FileSink
from cep.spark_bridge.spark.columns import CORRUPT_RECORD
from cep.spark_bridge.spark.inputs import DEAD_LETTER_NAMES, DEFAULT_WATERMARK, mark_bad_rows, prepare_input

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["AlertStream", "read_status", "rule_rows"]

log = logging.getLogger("cep.alerting")

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

# ------------------------------------------------------------------------------------ the query


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _progress_get(progress: Any, name: str, default=None):
    if isinstance(progress, dict):
        return progress.get(name, default)
    value = getattr(progress, name, None)
    if value is None and hasattr(progress, "get"):
        try:
            value = progress.get(name)
        except Exception:  # noqa: BLE001
            value = None
    return default if value is None else value


def _row_dict(row: Any) -> dict:
    if row is None:
        return {}
    if hasattr(row, "asDict"):
        return row.asDict(recursive=True)
    if isinstance(row, dict):
        return row
    return dict(row)


class AlertStream:
    """A rule set running over one input stream, with its sinks, status file and rule reloading.

    ``rules``: a directory of ``*.sql`` files, or one ``.sql`` file. ``source``: a streaming DataFrame.
    ``checkpoint``: the directory for everything that must survive a restart:

        <checkpoint>/match/        Spark checkpoint of the matching query (alerts and bad rows)
        <checkpoint>/deliver/      Spark checkpoint of the delivery query (when there are alert sinks)
        <checkpoint>/rules/        rule sets and the set of each micro-batch (RuleStore)
        <checkpoint>/status.json   per rule: version, counts, gauges, errors (``cep status``)

    ``dead_letter`` (default ``<checkpoint>/dead-letter``): bad input rows (``inputs.mark_bad_rows``:
    unreadable lines, wrong types, bad, NULL or far-future event times) never reach the rules; the
    matching query writes them, with their reasons, as JSON lines to ``<dead_letter>/bad-rows/``
    (Spark's file sink: exactly once, in the same micro-batch as the alerts from the same read of the
    input) and counts them per reason in the status (``bad_rows``). Webhook deliveries
    that fail go to ``<dead_letter>/<key>.json`` (``sinks.WebhookSink``). ``max_future_skew``: see
    ``streaming.match_stream``. ``dedup_key``: column(s); each rule drops the repeats of a key within
    its partition key and the watermark delay (``keyed.KeyedStream``), counted as ``duplicates_dropped``.
    ``source_location``: where a bad row came from, for its dead-letter record (``query.match_rules``;
    default the input file).

    ``output``: the file sink's directory (default ``<checkpoint>/matches``), ``output_format`` json |
    parquet | csv. ``sinks``: alert sinks (``cep.spark_bridge.sinks.webhook``). ``suppress``: ``'rule=10m'`` specs.
    """

    def __init__(
        self,
        spark: "SparkSession",
        rules: str,
        source: "DataFrame",
        *,
        checkpoint: str,
        output: str | None = None,
        output_format: str = "json",
        sinks: Sequence[AlertSink] = (),
        suppress: Iterable[str | suppress_mod.SuppressSpec] = (),
        watermark: Any = None,
        session_timeout: Any = None,
        time_column: str | None = None,
        trigger: str | None = None,
        max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS,
        housekeeping: Any = DEFAULT_HOUSEKEEPING,
        name: str = "cep",
        on_event: Callable[[str], None] | None = None,
        dead_letter: str | None = None,
        max_future_skew: Any = None,
        dedup_key: str | Sequence[str] | None = None,
        source_location: "Column | None" = None,
    ) -> None:
        self.spark = spark
        self.rules_path = rules
        self.source = source
        self.checkpoint = os.path.abspath(checkpoint)
        self.file_sink = FileSink(output or os.path.join(self.checkpoint, "matches"), output_format)
        self.dead_letter_dir = os.path.abspath(dead_letter or os.path.join(self.checkpoint, "dead-letter"))
        self.bad_rows_sink = FileSink(os.path.join(self.dead_letter_dir, "bad-rows"), "json")
        self.sinks = list(sinks)
        self.specs = [s if isinstance(s, suppress_mod.SuppressSpec) else suppress_mod.parse_spec(s) for s in suppress]
        self.watermark = watermark
        self.session_timeout_us = parse_duration(session_timeout, what="session_timeout") if session_timeout is not None else None
        self.time_column = time_column
        self.trigger = trigger
        self.max_pending_rows = max_pending_rows
        self.housekeeping = housekeeping
        self.name = name
        self.on_event = on_event
        self.store = RuleStore(os.path.join(self.checkpoint, "rules"))
        self.status_path = os.path.join(self.checkpoint, "status.json")
        self.max_future_skew_us = parse_duration(max_future_skew, what="max_future_skew") if max_future_skew is not None else None
        self.dedup_key = [dedup_key] if isinstance(dedup_key, str) else list(dedup_key or [])
        self.source_location = source_location
        self.match_query = None
        self.deliver_query = None
        self.ruleset: rules_mod.RuleSet | None = None
        self.payload: dict | None = None
        self._signature: tuple | None = None
        self._lock = threading.Lock()
        self._seen_batches: set[int] = set()
        self._deliver_failures = 0
        self._deliver_restart_at = 0.0
        self.status = self._load_status()
        if self.time_column is None:  # a restarted stream keeps the event time it ran with
            self.time_column = self.status.get("time_column")
            current = self.store.current_id()
            if self.time_column is None and current is not None:
                try:
                    self.time_column = self.store.load(current).get("time_column")
                except (OSError, ValueError):
                    pass
        # The rules see the input's columns; Spark's unreadable-line column only marks bad rows (mark_bad_rows).
        self.input_types = {n: t for n, t in input_types_of(source).items() if n != CORRUPT_RECORD}
        unknown = [name for name in self.dedup_key if name not in self.input_types]
        if unknown:
            raise CepSemanticError(f"unknown column {unknown[0]!r} (dedup_key); the input has {', '.join(self.input_types)}",
                                   code="E0220")

    # ----------------------------------------------------------------------------- events, status

    def _event(self, message: str) -> None:
        log.info(message)
        with self._lock:
            events = self.status.setdefault("events", [])
            events.append({"time": _now_iso(), "message": message})
            del events[:-50]
        if self.on_event is not None:
            self.on_event(message)

    def _load_status(self) -> dict:
        try:
            with open(self.status_path, encoding="utf-8") as fh:
                status = json.load(fh)
            if status.get("format") == STATUS_FORMAT:
                status["seen_batches"] = status.get("seen_batches", [])
                return status
        except (OSError, ValueError):
            pass
        return {"format": STATUS_FORMAT, "rules": {}, "errors": [], "events": [], "sinks": {}}

    def write_status(self) -> None:
        os.makedirs(self.checkpoint, exist_ok=True)
        with self._lock:
            self.status["updated_at"] = _now_iso()
            text = json.dumps(self.status, indent=1, sort_keys=True, default=str)
        atomic_write(self.status_path, text)

    def _rule_status(self, rule_id: str) -> dict:
        return self.status["rules"].setdefault(rule_id, {"versions": {}, "errors": [], "active": False})

    @staticmethod
    def _version_status(rule: dict, version: str) -> dict:
        found = rule["versions"].get(version)
        if found is None:
            found = rule["versions"][version] = {name: 0 for name in STAT_NAMES if not name.startswith("d_")}
            found.update({"live_partial_matches": 0, "pending_rows": 0, "keys": 0, "since": _now_iso(),
                          "last_batch_time": None, "delivered": 0, "dead_lettered": 0})
        return found

    # ------------------------------------------------------------------------------------ rules

    def _files_signature(self) -> tuple:
        files = rules_mod.rule_files(self.rules_path) if os.path.exists(self.rules_path) else []
        signature = []
        for path in files:
            try:
                st = os.stat(path)
                signature.append((path, st.st_mtime_ns, st.st_size))
            except FileNotFoundError:
                continue
        return tuple(signature)

    def refresh_rules(self, *, force: bool = False) -> rules_mod.RuleChanges:
        """Reload the rules if their files changed; publish the new set for the next micro-batches."""
        signature = self._files_signature()
        if not force and signature == self._signature and self.payload is not None:
            return rules_mod.RuleChanges()
        payload, ruleset = build_rule_set(
            self.rules_path, input_types=self.input_types, time_column=self.time_column, suppress=self.specs,
            session_timeout_us=self.session_timeout_us, max_pending_rows=self.max_pending_rows,
        )
        if self.time_column is None:
            self.time_column = payload["time_column"]
        if payload["time_column"] is None:
            raise CepSemanticError("cannot tell the stream's event-time column: no rule orders by an input column; "
                                   "give it explicitly (--time-column)", code="E0604")
        if self.dedup_key:  # repeats are remembered for the watermark delay (keyed.KeyedStream)
            payload["dedup_key"] = self.dedup_key
            payload["dedup_horizon_us"] = parse_duration(self.watermark or DEFAULT_WATERMARK, what="watermark")
        # Compare with what ran last, also across a restart (the status file remembers it).
        old_versions = dict(self.status.get("active_versions") or {}) if self.ruleset is None else self.ruleset.versions()
        kept = self._keep_last_good(payload, ruleset)
        previous = rules_mod.RuleSet()
        previous.rules = {r: _VersionOnly(v) for r, v in old_versions.items()}  # type: ignore[assignment]
        changes = previous.diff(ruleset)
        self._signature = signature
        self.ruleset, self.payload = ruleset, payload
        set_id = self.store.publish(payload)
        self._record_rules(ruleset, changes, set_id, old_versions)
        for rule_id in kept:
            self._event(f"rule {rule_id}: its file has errors (see cep status); version {ruleset[rule_id].version} keeps running")
        self.write_status()
        return changes

    def _keep_last_good(self, payload: dict, ruleset: rules_mod.RuleSet) -> list[str]:
        """A rule that ran and whose file now fails to compile keeps running its last good version
        (a typo must not silently switch an alert off). Returns the ids kept."""
        previous = self.payload
        if previous is None:
            current = self.store.current_id()
            if current is None:
                return []
            try:
                previous = self.store.load(current)
            except (OSError, ValueError):
                return []
        if previous.get("input_columns") != payload["input_columns"] or previous.get("time_column") != payload["time_column"]:
            return []
        broken_ids = {e.rule_id for e in ruleset.errors if e.rule_id}
        broken_files = {os.path.abspath(e.path) for e in ruleset.errors if not e.rule_id}
        kept = []
        for entry in previous.get("rules", []):
            rule_id = entry["rule_id"]
            if rule_id in ruleset.rules:
                continue
            if rule_id in broken_ids or os.path.abspath(entry["path"]) in broken_files:
                payload["rules"].append(entry)
                ruleset.rules[rule_id] = _KeptRule(rule_id, entry["version"], entry["path"], entry["line"])  # type: ignore[assignment]
                kept.append(rule_id)
        return kept

    def _record_rules(self, ruleset: rules_mod.RuleSet, changes: rules_mod.RuleChanges, set_id: str,
                      old_versions: dict[str, str]) -> None:
        old_errors = {e["rendered"] for e in self.status.get("errors", [])}
        with self._lock:
            for rule_status in self.status["rules"].values():
                rule_status["active"] = False
            for rule in ruleset:
                entry = self._rule_status(rule.rule_id)
                entry.update({"active": True, "version": rule.version, "path": rule.path, "line": rule.line,
                              "suppress_us": next((r["suppress_us"] for r in self.payload["rules"] if r["rule_id"] == rule.rule_id), None)})
                entry["errors"] = []
                self._version_status(entry, rule.version)
                _prune_versions(entry, rule.version)
            for error in ruleset.errors:
                if error.rule_id:
                    entry = self._rule_status(error.rule_id)
                    entry["errors"] = [error.rendered]
                    if error.rule_id in ruleset.rules:
                        entry["errors"][0] += "\n  (the last good version keeps running)"
            self.status["errors"] = [e.as_dict() for e in ruleset.errors]
            self.status["rule_set"] = set_id
            self.status["active_versions"] = ruleset.versions()
            self.status["time_column"] = self.time_column
        for rule_id in changes.added:
            self._event(f"rule {rule_id} added (version {ruleset[rule_id].version})")
        for rule_id in changes.changed:
            old_version = old_versions.get(rule_id)
            gauges = self.status["rules"][rule_id]["versions"].get(old_version or "", {})
            self._event(
                f"rule {rule_id} changed ({old_version} -> {ruleset[rule_id].version}): it starts with fresh state; "
                f"its {gauges.get('live_partial_matches', 0)} live partial matches and {gauges.get('pending_rows', 0)} "
                f"waiting rows on {gauges.get('keys', 0)} keys are dropped"
            )
        for rule_id in changes.removed:
            self._event(f"rule {rule_id} removed; its state is dropped")
        for error in ruleset.errors:
            if error.rendered not in old_errors:
                self._event(f"rule skipped: {error.rendered}")

    # ----------------------------------------------------------------------------------- queries

    def build(self) -> "DataFrame":
        """The alerts and the bad input rows, from one read of the input (publishes the rule set first
        if needed): ``sinks.alerts.ALERT_NAMES`` then ``inputs.DEAD_LETTER_NAMES``; a bad row has
        ``_cep_error`` set and NULL alert columns, an alert the reverse."""
        if self.payload is None:
            self.refresh_rules(force=True)
        from pyspark.sql import types as T

        source = prepare_input(self.source)
        if self.time_column in source.columns and isinstance(source.schema[self.time_column].dataType, T.TimestampType):
            source = mark_bad_rows(source, self.time_column, max_future_skew_us=self.max_future_skew_us, null_time=True)
        # else match_rules says what is wrong with the event-time column
        return match_rules(source, self.store, time_column=self.time_column, watermark=self.watermark,
                           housekeeping=self.housekeeping, source_location=self.source_location)

    def _write_batch(self, batch, batch_id: int) -> None:
        """``foreachBatch`` of the matching query: the alerts to ``output``, the bad rows to the dead letter.

        Each write is Spark's file sink for that batch id (``FileSink.commit``), which skips a batch it
        committed already: after a crash between the two writes, the re-run writes only the missing one.
        The batch is computed once (``persist``, then ``count``): the rules' state and metrics are those
        of one run, even when both sinks skip it."""
        from pyspark.sql import functions as F

        batch.persist()
        try:
            batch.count()
            error = F.col(DEAD_LETTER_NAMES[0])
            self.file_sink.commit(batch_id, batch.where(error.isNull()).select(*ALERT_NAMES))
            self.bad_rows_sink.commit(batch_id, batch.where(error.isNotNull()).select(*DEAD_LETTER_NAMES))
        finally:
            batch.unpersist()

    def _retire_bad_row_query(self) -> None:
        """A checkpoint written when a second query read the input for the bad rows: that query's batch
        ids are not the matching query's, and ``<dead_letter>/bad-rows/_spark_metadata`` would make the
        file sink skip batches it never saw. Its files move aside (still readable) and the new ones start
        a fresh log."""
        old_checkpoint = os.path.join(self.checkpoint, "bad-rows")
        if not os.path.isdir(old_checkpoint):
            return
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        if os.path.isdir(self.bad_rows_sink.path):
            os.replace(self.bad_rows_sink.path, f"{self.bad_rows_sink.path}.before-{stamp}")
        os.replace(old_checkpoint, f"{old_checkpoint}.before-{stamp}")
        with self._lock:
            self.status["seen_bad_row_batches"] = []
        self._event(f"bad rows now come from the matching query; the earlier ones are in {self.bad_rows_sink.path}.before-{stamp}")

    def start(self, *, available_now: bool = False) -> "AlertStream":
        """Start the matching query (and the delivery query when there are alert sinks)."""
        combined = self.build()
        self._retire_bad_row_query()
        with self._lock:
            self.status.update({"state": "running", "started_at": _now_iso(), "output": self.file_sink.path,
                                "output_format": self.file_sink.format, "sinks": {s.describe(): self.status.get("sinks", {}).get(s.describe(), {})
                                                                               for s in self.sinks}})
        self.file_sink.prepare()
        self.bad_rows_sink.prepare()
        self.match_query = self._start_query(combined, self._write_batch, "match", available_now=available_now)
        if self.sinks and not available_now:
            self._start_deliver(available_now=False)
        self.write_status()
        return self

    def _start_query(self, df: "DataFrame", each_batch: Callable, name: str, *, available_now: bool):
        """Start ``df`` with ``foreachBatch(each_batch)``, checkpointed in ``<checkpoint>/<name>``."""
        writer = df.writeStream.foreachBatch(each_batch).option("checkpointLocation", os.path.join(self.checkpoint, name))
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif self.trigger:
            writer = writer.trigger(processingTime=self.trigger)
        return writer.start()

    def _start_deliver(self, *, available_now: bool) -> None:
        self.deliver_query = self._start_query(self.file_sink.read_stream(self.spark), self._deliver, "deliver",
                                               available_now=available_now)

    def _deliver(self, batch_df, batch_id: int) -> None:
        alerts = rows_to_alerts(batch_df.collect())
        if not alerts:
            return
        try:
            reports = deliver_batch(alerts, batch_id, self.sinks)
        except Exception as exc:
            self._record_delivery([], error=f"batch {batch_id}: {type(exc).__name__}: {exc}")
            raise
        self._record_delivery(reports, alerts=alerts)

    def _record_delivery(self, reports: list[Delivery], *, alerts: Sequence[dict] = (), error: str | None = None) -> None:
        versions = {a["rule_id"]: a["rule_version"] for a in alerts}
        with self._lock:
            sinks = self.status.setdefault("sinks", {})
            if error is not None:
                for sink in self.sinks:
                    entry = sinks.setdefault(sink.describe(), {})
                    entry.setdefault("errors", []).append({"time": _now_iso(), "error": error})
                    del entry["errors"][:-10]
            for sink, report in zip(self.sinks, reports):
                entry = sinks.setdefault(sink.describe(), {})
                entry["delivered"] = entry.get("delivered", 0) + sum(report.delivered.values())
                entry["dead_lettered"] = entry.get("dead_lettered", 0) + sum(report.dead_lettered.values())
                entry["retries"] = entry.get("retries", 0) + report.retries
                if report.errors:
                    entry.setdefault("errors", []).extend({"time": _now_iso(), "error": e} for e in report.errors[-10:])
                    del entry["errors"][:-10]
                for rule_id, count in report.delivered.items():
                    version = self._version_status(self._rule_status(rule_id), versions.get(rule_id, "?"))
                    version["delivered"] = version.get("delivered", 0) + count
                for rule_id, count in report.dead_lettered.items():
                    rule = self._rule_status(rule_id)
                    version = self._version_status(rule, versions.get(rule_id, "?"))
                    version["dead_lettered"] = version.get("dead_lettered", 0) + count
                    rule.setdefault("delivery_errors", []).extend(e for e in report.errors if e)
                    del rule["delivery_errors"][:-5]

    # ------------------------------------------------------------------------------------ progress

    def poll(self) -> dict:
        """Fold the micro-batches finished since the last call into the status, and write it."""
        if self.match_query is not None:
            for batch, progress, row in self._new_progress(self.match_query, METRICS_NAME, "seen_batches"):
                self._fold(batch, progress, row)
            self.store.prune()
            with self._lock:
                counts = self.status.setdefault("bad_rows", {})
                for _, _, row in self._new_progress(self.match_query, BAD_ROWS_METRICS, "seen_bad_row_batches"):
                    for reason, count in row.items():
                        counts[reason] = counts.get(reason, 0) + int(count or 0)
                self.status["bad_rows_path"] = self.bad_rows_sink.path
        self.write_status()
        return self.status

    def _new_progress(self, query, metrics_name: str, seen_key: str) -> list[tuple[int, Any, dict]]:
        """(batch id, progress, observed metrics) of ``query``'s micro-batches not folded yet; marks them
        folded under ``status[seen_key]``."""
        seen = set(self.status.get(seen_key, []))
        found = []
        for progress in list(query.recentProgress):
            batch = _progress_get(progress, "batchId")
            metrics = _progress_get(progress, "observedMetrics", {}) or {}
            row = metrics.get(metrics_name) if hasattr(metrics, "get") else None
            if batch is None or int(batch) in seen or row is None:
                continue
            seen.add(int(batch))
            found.append((int(batch), progress, _row_dict(row)))
        self.status[seen_key] = sorted(seen)[-200:]
        return found

    def _fold(self, batch: int, progress: Any, metrics: dict) -> None:
        timestamp = _progress_get(progress, "timestamp")
        events: list[str] = []
        dropped: dict[tuple[str, str], list[int]] = {}
        with self._lock:
            for call in metrics.get("calls") or []:
                call = _row_dict(call)
                rule = self._rule_status(call["rule_id"])
                version = self._version_status(rule, call["rule_version"])
                values = dict(zip(STAT_NAMES, call["stats"]))
                for name, value in values.items():
                    if name in GAUGES:
                        version[GAUGES[name]] = version.get(GAUGES[name], 0) + int(value)
                    else:
                        version[name] = version.get(name, 0) + int(value)
                if values.get("events_in") or values.get("matched") or values.get("timeouts") or values.get("absences"):
                    version["last_batch_time"] = timestamp
                    rule["last_batch_time"] = timestamp
                if values.get("dropped_live") or values.get("dropped_pending"):
                    total = dropped.setdefault((call["rule_id"], call["rule_version"]), [0, 0, 0])
                    total[0] += int(values["dropped_live"])
                    total[1] += int(values["dropped_pending"])
                    total[2] += 1
            for (rule_id, version_id), (live, pending, keys) in sorted(dropped.items()):
                left = self.status["rules"][rule_id]["versions"][version_id]
                remaining = f"; {left['keys']} keys still to drop theirs" if left.get("keys", 0) > 0 else "; none left"
                events.append(f"rule {rule_id} version {version_id} (changed or removed): dropped {live} partial matches and "
                              f"{pending} waiting rows on {keys} keys in micro-batch {batch}{remaining}")
            self.status["last_batch"] = {
                "id": batch,
                "time": timestamp,
                "input_rows": _progress_get(progress, "numInputRows", 0),
                "duration_ms": (_progress_get(progress, "durationMs", {}) or {}).get("triggerExecution"),
                "watermark": (_progress_get(progress, "eventTime", {}) or {}).get("watermark"),
            }
            self.status["batches"] = self.status.get("batches", 0) + 1
        for message in events:
            self._event(message)

    # ------------------------------------------------------------------------------------ running

    def process_all_available(self) -> None:
        """Wait until every input file so far is matched and delivered (tests; no sleeping)."""
        if self.match_query is not None:
            self.match_query.processAllAvailable()
        if self.deliver_query is not None:
            self.deliver_query.processAllAvailable()
        self.poll()

    def run_available_now(self) -> dict:
        """Process what the input holds now, deliver it, and stop (``cep stream --once``)."""
        self.start(available_now=True)
        try:
            self.match_query.awaitTermination()
            self.poll()
            if self.sinks:
                self._start_deliver(available_now=True)
                self.deliver_query.awaitTermination()
        except Exception as error:  # a failed query or sink: say so in status.json too, then raise
            with self._lock:
                self.status["state"] = "failed"
                self.status.setdefault("query_errors", []).append({"time": _now_iso(), "error": str(error)[:2000]})
            raise
        finally:
            self.stop()
        return self.status

    def check(self) -> None:
        """Raise if the matching query failed; restart a failed delivery query after a backoff."""
        query = self.match_query
        error = query.exception() if query is not None and not query.isActive else None
        if error is not None:
            with self._lock:
                self.status["state"] = "failed"
                self.status.setdefault("query_errors", []).append({"time": _now_iso(), "error": str(error)[:2000]})
            self.write_status()
            raise RuntimeError(f"the matching query failed: {str(error).splitlines()[0] if str(error) else error}") from None
        if self.deliver_query is not None and not self.deliver_query.isActive:
            error = self.deliver_query.exception()
            now = time.monotonic()
            if self._deliver_restart_at == 0.0:
                self._deliver_failures += 1
                wait = min(60.0, 2.0 ** min(self._deliver_failures, 6))
                self._deliver_restart_at = now + wait
                self._event(f"delivery stopped ({str(error).splitlines()[0] if error else 'no error'}); retrying in {wait:g}s")
            elif now >= self._deliver_restart_at:
                self._deliver_restart_at = 0.0
                self._start_deliver(available_now=False)

    def run(self, *, poll_interval: float = 1.0, on_tick: Callable[[dict], None] | None = None,
            stop: threading.Event | None = None) -> None:
        """Run until ``stop`` is set or Ctrl-C: reload rules, fold progress, write status, restart delivery."""
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                stop.wait(poll_interval)
                try:
                    self.refresh_rules()
                except CepError as err:  # e.g. no rule left to take the event time from: keep the last set
                    self._event(f"rules not reloaded: {err}")
                self.check()
                status = self.poll()
                if on_tick is not None:
                    on_tick(status)
        finally:
            self.stop()

    def stop(self) -> None:
        for query in (self.deliver_query, self.match_query):
            if query is not None and query.isActive:
                query.stop()
        if self.match_query is not None:
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - stopping must not fail on a status write
                pass
        with self._lock:
            if self.status.get("state") != "failed":
                self.status["state"] = "stopped"
            self.status["stopped_at"] = _now_iso()
        self.write_status()

    def alerts(self) -> "DataFrame":
        """Every alert committed so far, read through Spark (honours the file sink's log)."""
        return self.file_sink.read(self.spark)


def _prune_versions(entry: dict, current: str, keep: int = 3) -> None:
    """Keep the status file small: the current version, versions whose state is still being dropped,
    and the ``keep`` most recent others."""
    versions = entry.get("versions", {})
    old = [(v.get("since") or "", k) for k, v in versions.items() if k != current
           and not (v.get("live_partial_matches") or v.get("pending_rows") or v.get("keys"))]
    for _, key in sorted(old)[:-keep] if len(old) > keep else []:
        del versions[key]


@dataclasses.dataclass(frozen=True)
class _VersionOnly:
    version: str


@dataclasses.dataclass(frozen=True)
class _KeptRule:
    """A rule whose file no longer compiles, still running the version that last did."""

    rule_id: str
    version: str
    path: str
    line: int


# ---------------------------------------------------------------------------------- status view


def read_status(checkpoint: str) -> dict:
    path = os.path.join(checkpoint, "status.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def rule_rows(status: dict) -> list[dict]:
    """One row per rule for ``cep status``: the current version's numbers."""
    rows = []
    for rule_id, rule in sorted(status.get("rules", {}).items()):
        version = rule.get("version") or (list(rule.get("versions", {}))[-1] if rule.get("versions") else None)
        numbers = rule.get("versions", {}).get(version or "", {})
        stale = sum(v.get("live_partial_matches", 0) for k, v in rule.get("versions", {}).items() if k != version)
        errors = list(rule.get("errors", [])) + list(rule.get("delivery_errors", []))
        earlier = sum(v.get("matched", 0) + v.get("timeouts", 0) + v.get("absences", 0)
                      for k, v in rule.get("versions", {}).items() if k != version)
        rows.append({
            "rule": rule_id,
            "earlier_matches": earlier,
            "state": "active" if rule.get("active") else ("error" if rule.get("errors") else "removed"),
            "version": version or "-",
            "matches": numbers.get("matched", 0) + numbers.get("timeouts", 0) + numbers.get("absences", 0),
            "timeouts": numbers.get("timeouts", 0),
            "absences": numbers.get("absences", 0),
            "suppressed": numbers.get("suppressed", 0),
            "live": numbers.get("live_partial_matches", 0),
            "stale_live": stale,
            "pending": numbers.get("pending_rows", 0),
            "late": numbers.get("late_rows", 0),
            "events": numbers.get("events_in", 0),
            "delivered": numbers.get("delivered", 0),
            "dead_lettered": numbers.get("dead_lettered", 0),
            "duplicates_dropped": numbers.get("duplicates_dropped", 0),
            "last_batch_time": rule.get("last_batch_time"),
            "errors": errors,
        })
    return rows
