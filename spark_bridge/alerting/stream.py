"""Many rules over one input stream; rules added, changed and removed while the stream runs.

    stream = AlertStream(spark, "rules/", events_df, checkpoint="ck/", output="alerts/", output_format="json",
                         sinks=[WebhookSink(url, dead_letter_dir="ck/dead-letter")], suppress=["fraud/*=10m"])
    stream.start()
    stream.run()                      # until Ctrl-C: picks up rule changes, writes ck/status.json
    # or, step by step (tests):  stream.refresh_rules(); stream.process_all_available(); stream.stop()

How it maps onto Spark (``docs/alerting.md`` has the measurements behind the choice):

* **One stateful operator for all rules** (built by ``query.match_rules``), not one streaming query per
  rule. Every input row is tagged, once per distinct PARTITION BY of the active rules (``key_tags``: Spark
  expressions; a set with a PARTITION BY new to the plan re-plans the query), with that partition key (a
  JSON object of its values); then
  ``groupBy(partition spec, bucket of keys).applyInPandasWithState(...)`` runs, for each key of the
  bucket (``cep.spark_bridge.engine.key_table``: one Python call per bucket, not per key), every rule
  with that PARTITION BY, each with its own ``keyed.KeyedStream`` engine: the same buffering,
  watermark, timers, sessions and match ids as ``cep.spark_bridge.spark.streaming``.
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
* **One query from the input to the sinks**: bad input rows (``inputs.mark_bad_rows``) travel through
  the same query in a group of their own (``rule_set.BAD_SPEC``), reaching no rule, so the files are
  parsed once for matching and for the dead letter. The query's ``foreachBatch`` (``_write_batch``)
  writes each micro-batch's alerts to ``output`` and its bad rows to ``<dead_letter>/bad-rows/``,
  each through Spark's own file sink (``sinks.FileSink.commit``: exactly once, ``_spark_metadata``,
  a batch id already committed is skipped), so one checkpoint's offsets cover both outputs.
* **Delivery**: in the same ``foreachBatch``, the micro-batch's alerts go into every sink's outbox under
  the micro-batch's id, once per id: written before the file sink's commit, handed to the lanes (sealed)
  right after it (``DeliveryLanes.stage`` and ``seal``). A batch Spark runs again after a crash is not
  handed over twice, and an entry written before the output committed the batch is kept, so a sink gets
  the alerts the output holds (their emit times), not the re-run's. Each sink's lane delivers its outbox on its own
  (``sinks/lanes.py``: a failing webhook never holds back a database; dead letters redelivered once the
  receiver answers; idempotent by match_id), the exactly-once Kafka sink in one transaction per
  micro-batch id. So an alert waits for one micro-batch, not for a second query's trigger and listing
  of ``output`` as well. A checkpoint of the older two-query layout (``<checkpoint>/deliver/``, a second
  query that read ``output`` back) is migrated on start (``layouts.retire_delivery_query``).
* **Metrics and status**: each key call emits one statistics row per rule it ran, and each rule's late
  rows; the matching query's ``foreachBatch`` writes the late rows to ``<dead_letter>/late/`` and the
  micro-batch's counts to the journal, which the driver folds into ``<checkpoint>/status.json`` once Spark
  has committed the micro-batch (``status.py``: exactly once, also across ``kill -9``). Spark's own progress
  (the last micro-batch, the watermark, the health gauges) is folded in by ``progress.QueryProgress``.

Rules must share the stream's event-time column (the first ORDER BY column; ``time_column`` or the first
rule's). Rules a stream cannot run, or that do not fit the input, are reported with file:line:col and
skipped; the others run. A running rule whose file is edited into one that does not compile keeps
running its last good version (and says so in the status) until the file compiles again. A rule's
``FROM`` name is not read: every rule runs over the one input stream.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.alerting import delta_restart, driver_state, layouts
from cep.spark_bridge.alerting import rules as rules_mod
from cep.spark_bridge.alerting import suppress as suppress_mod
from cep.spark_bridge.alerting.batch_cost import BatchCost
from cep.spark_bridge.alerting.batch_writes import BatchBook, write_book, write_operator_rows
from cep.spark_bridge.alerting.key_buckets import STATUS_FIELD, settle_key_buckets
from cep.spark_bridge.alerting.key_tags import new_partitions, planned_partitions, spark_taggable
from cep.spark_bridge.alerting.late_files import read_late_rows
from cep.spark_bridge.alerting.progress import QueryProgress
from cep.spark_bridge.alerting.query import input_types_of, match_rules
from cep.spark_bridge.alerting.rule_set import DEFAULT_HOUSEKEEPING
from cep.spark_bridge.alerting.rule_watch import RuleWatch
from cep.spark_bridge.alerting.status import StatusBook, now_iso, read_status, rule_rows
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.engine.durations import parse_duration
from cep.spark_bridge.engine.keyed import DEFAULT_MAX_PENDING_ROWS
from cep.spark_bridge.sinks.base import AlertSink
from cep.spark_bridge.sinks.file import FileSink, local_log_settings
from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal
from cep.spark_bridge.spark.columns import CORRUPT_RECORD
from cep.spark_bridge.spark.inputs import clock_rows, mark_bad_rows, prepare_input
from cep.spark_bridge.spark.session import LOCAL_CHECKPOINT_CONF, on_local_disk, starting_with

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["AlertStream", "QueryFailed", "read_status", "rule_rows"]

log = logging.getLogger("cep.alerting")

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _micros(duration: Any, what: str) -> int | None:
    return parse_duration(duration, what=what) if duration is not None else None


class QueryFailed(RuntimeError):
    """The matching query stopped with an error (the status says ``failed`` and keeps the error)."""


class AlertStream:
    """A rule set running over one input stream, with its sinks, status file and rule reloading.

    ``rules``: a directory of ``*.sql`` files, or one ``.sql`` file. ``source``: a streaming DataFrame.
    ``checkpoint``: the directory for everything that must survive a restart:

        <checkpoint>/match/        Spark checkpoint of the query (alerts, bad rows, late rows, the outboxes)
        <checkpoint>/outbox/       each sink's micro-batches still to deliver (sinks/lanes.py)
        <checkpoint>/journal/      records of work done, folded into the status exactly once
        <checkpoint>/rules/        rule sets and the set of each micro-batch (RuleStore)
        <checkpoint>/status.json   per rule and per sink: counts, gauges, errors (``cep status``)

    ``dead_letter`` (default ``<checkpoint>/dead-letter``): bad input rows (``inputs.mark_bad_rows``:
    unreadable lines, wrong types, bad, NULL or far-future event times) never reach the rules; the
    matching query writes them, with their reasons, as JSON lines to ``<dead_letter>/bad-rows/``
    (Spark's file sink: exactly once, in the same micro-batch as the alerts from the same read of the
    input). Rows a rule could not match because they came late go to ``<dead_letter>/late/`` (one
    JSON-lines file per micro-batch: rule, rule version, partition key, reason, event time, the row).
    A webhook's failed deliveries go to ``<dead_letter>/<sink key>/`` (``sinks.dead_letters``).
    ``max_future_skew``: see ``streaming.match_stream``. ``dedup_key``: column(s); each rule drops the
    repeats of a key within its partition key and the watermark delay (``keyed.KeyedStream``).
    ``source_location``: where a bad row came from, for its dead-letter record (``query.match_rules``;
    default the input file). ``key_buckets``: Spark's keyed state's, fixed by the checkpoint (``settle_key_buckets``).

    ``output``: the file sink's directory (default ``<checkpoint>/matches``), ``output_format`` json |
    parquet | csv. ``sinks``: alert sinks, each delivered by its own lane. ``suppress``: ``'rule=10m'`` specs.
    ``state``: ``"spark"`` (Spark's keyed state) or ``"driver"`` (the rules in ``foreachBatch``: driver_state.py);
    None: the checkpoint's layout, for a new one the driver on a local master (``driver_state.choose_layout``).
    ``on_event(message)``: called with every log line (they also go to the ``cep.alerting`` logger).
    """

    def __init__(
        self,
        spark: SparkSession,
        rules: str,
        source: DataFrame,
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
        source_location: Column | None = None,
        idle_watermark: Any = None,
        state: str | None = None,
        key_buckets: int | None = None,
    ) -> None:
        self.spark = spark
        self.rules_path = rules
        self.source = source
        self.checkpoint = os.path.abspath(checkpoint)
        output = output or os.path.join(self.checkpoint, "matches")
        # Spark's file sink fails every micro-batch on a relative path; a URI (s3a://...) stays as it is.
        self.file_sink = FileSink(output if "://" in output else os.path.abspath(output), output_format)
        self.dead_letter_dir = os.path.abspath(dead_letter or os.path.join(self.checkpoint, "dead-letter"))
        self.bad_rows_sink = FileSink(os.path.join(self.dead_letter_dir, "bad-rows"), "json")
        self.late_dir = os.path.join(self.dead_letter_dir, "late")
        self.sinks = list(sinks)
        self.watermark = watermark
        self.trigger = trigger
        self.housekeeping = housekeeping
        self.name = name
        self.on_event = on_event
        self.store = RuleStore(os.path.join(self.checkpoint, "rules"))
        self.status_path = os.path.join(self.checkpoint, "status.json")
        self.book = StatusBook(self.status_path)
        self._choose_layout(state, key_buckets)
        for message in self.book.damage:  # already in the status's events; the console and the log too
            log.warning(message)
            if on_event is not None:
                on_event(message)
        self.journal = Journal(os.path.join(self.checkpoint, "journal"), on_damage=self._damaged)
        self.lanes = (
            DeliveryLanes(
                self.sinks,
                os.path.join(self.checkpoint, "outbox"),
                self.journal,
                on_event=self._event,
                on_damage=self._damaged,
            )
            if self.sinks
            else None
        )
        self.max_future_skew_us = _micros(max_future_skew, "max_future_skew")
        self.dedup_key = [dedup_key] if isinstance(dedup_key, str) else list(dedup_key or [])
        self.idle_watermark_us = _micros(idle_watermark, "idle_watermark")
        self.source_location = source_location
        self.match_query = None
        self._tagged: dict | None = None  # the specs the running plan tags in Spark (None: Explode, any spec)
        self._replan = False
        self.progress = QueryProgress(self.book, self._event)  # Spark's progress folded into the status
        self.health, self.observers = self.progress.health, self.progress.observers
        self._to_remove: list[str] = []
        self._failed: list[dict] = []  # rules that failed in a micro-batch, for the next refresh_rules
        self._failed_lock = threading.Lock()
        self._book_writer: ThreadPoolExecutor | None = None  # a driver micro-batch's late rows and journal record
        time_column = time_column or self._time_column_ran_with()
        # The rules see the input's columns; Spark's unreadable-line column only marks bad rows (mark_bad_rows).
        self.input_types = {n: t for n, t in input_types_of(source).items() if n != CORRUPT_RECORD}
        unknown = [name for name in self.dedup_key if name not in self.input_types]
        if unknown:
            raise CepSemanticError(
                f"unknown column {unknown[0]!r} (dedup_key); the input has {', '.join(self.input_types)}", code="E0220"
            )
        self.watch = RuleWatch(
            rules,
            self.store,
            self.book,
            input_types=self.input_types,
            time_column=time_column,
            specs=[s if isinstance(s, suppress_mod.SuppressSpec) else suppress_mod.parse_spec(s) for s in suppress],
            session_timeout_us=_micros(session_timeout, "session_timeout"),
            max_pending_rows=max_pending_rows,
            dedup_key=self.dedup_key,
            watermark=watermark,
            event=self._event,
            before_publish=self._before_publish,
        )
        for sink in self.sinks:  # the webhook formats read each rule's severity and summary
            if getattr(sink, "rule_notes", False) is None:
                sink.rule_notes = self.watch.notes_for

    def _choose_layout(self, state: str | None, key_buckets: int | None) -> None:
        """Where the rules run and keep their state (``driver_state.choose_layout``: the master, the checkpoint's
        layout, ``state`` and ``key_buckets``), and the bucket count of Spark's keyed state, fixed by the
        checkpoint; both go to the status, with why."""
        self.choice = driver_state.layout_of(driver_state.spark_master(self.spark), self.checkpoint, state, key_buckets)
        self.layout, self.driver = self.choice.layout, None  # the driver layout's DriverState, made by build()
        self.key_buckets = None
        if self.layout == driver_state.SPARK:
            self.key_buckets = settle_key_buckets(self.checkpoint, self.status.get(STATUS_FIELD), key_buckets)
            self.status[STATUS_FIELD] = self.key_buckets
        self.status["layout"] = {"state": self.layout, "why": self.choice.reason, "other": self.choice.other_way}

    def _time_column_ran_with(self) -> str | None:
        """The event-time column of a restarted stream: the one it ran with (its status, else its rule set)."""
        time_column = self.status.get("time_column")
        current = self.store.current_id()
        if time_column is None and current is not None:
            try:
                time_column = self.store.load(current).get("time_column")
            except (OSError, ValueError):
                pass
        return time_column

    # ----------------------------------------------------------------------------- events, status

    @property
    def status(self) -> dict:
        return self.book.status

    @property
    def ruleset(self) -> rules_mod.RuleSet | None:
        return self.watch.ruleset

    @property
    def payload(self) -> dict | None:
        return self.watch.payload

    @property
    def time_column(self) -> str | None:
        return self.watch.time_column

    def _event(self, message: str, level: str = "info") -> None:
        log.log(_LEVELS.get(level, logging.INFO), message)
        self.book.event(message, level)
        if self.on_event is not None:
            self.on_event(message)

    def _damaged(self, message: str, path: str) -> None:
        """A bookkeeping file set aside as damaged: in the status's list and the log."""
        self.book.damaged(message, path)
        self._event(message, "warning")

    def write_status(self) -> None:
        """Write ``status.json``; then the journal records folded into it can go."""
        self.book.write()
        done, self._to_remove = self._to_remove, []
        for name in done:
            self.journal.remove(name)

    def refresh_rules(self, *, force: bool = False, write: bool = True) -> rules_mod.RuleChanges:
        """Reload the rules if their files changed; publish the set for the next micro-batches; ``write`` status."""
        self._quarantine_failed()
        try:
            changes = self.watch.refresh(force=force)
        finally:
            if self._replan:  # stopped by _before_publish: the new set's specs need a new plan
                self._replan = False
                self.match_query = self._start_query(self.build(), self._write_batch, "match", available_now=False)
        if write:
            self.write_status()
        return changes

    def _before_publish(self, payload: dict) -> None:
        """Stop the query before a set with a PARTITION BY its plan does not tag is published, so that no
        micro-batch runs that set on the old plan; ``refresh_rules`` starts it again (``key_tags``)."""
        new = new_partitions(payload, self._tagged) if self._tagged is not None else []
        if new and self.match_query is not None and self.match_query.isActive:
            self._event(f"PARTITION BY {', '.join(map(str, new))} is new to the query's plan: re-planning it")
            self.match_query.stop()
            self._replan = True

    def _quarantine_failed(self) -> None:
        """Hand the rules that failed in the micro-batches since the last call to the rule watch."""
        with self._failed_lock:
            failed, self._failed = self._failed, []
        if failed:
            self.watch.quarantine(failed)

    # ----------------------------------------------------------------------------------- queries

    def build(self) -> DataFrame:
        """What the matching query computes, from one read of the input (publishes the rule set first
        if needed): ``sinks.alerts.ALERT_NAMES``, ``inputs.DEAD_LETTER_NAMES``, ``KIND`` and ``STATS``:
        alerts, bad input rows, each rule's late rows and statistics (``query.match_rules``, ``with_stats``)."""
        if self.payload is None:
            self.refresh_rules(force=True)
        from pyspark.sql import types as T

        source = prepare_input(self.source)
        if self.time_column in source.columns and isinstance(source.schema[self.time_column].dataType, T.TimestampType):
            source = mark_bad_rows(source, self.time_column, max_future_skew_us=self.max_future_skew_us, null_time=True)
            if self.idle_watermark_us is not None:
                source = source.unionByName(clock_rows(source, self.time_column, self.idle_watermark_us))
        # else match_rules says what is wrong with the event-time column
        if self.layout == driver_state.DRIVER:  # the rules run in foreachBatch (_write_batch)
            source, self.driver = driver_state.for_stream(self, source)
            return source
        planned = planned_partitions(self.store, self._cut_short())
        self._tagged = planned if spark_taggable(planned, source) else None
        return match_rules(
            source,
            self.store,
            time_column=self.time_column,
            watermark=self.watermark,
            housekeeping=self.housekeeping,
            source_location=self.source_location,
            with_stats=True,
            key_buckets=self.key_buckets,
            tag_partitions=self._tagged,
        )

    def _write_batch(self, batch, batch_id: int) -> None:
        """``foreachBatch`` of the query: the alerts to ``output`` and to every sink's outbox, the bad rows to
        the dead letter, the late rows to ``late/``, the counts to the journal.

        Each file-sink write is Spark's file sink for that batch id (``FileSink.commit``), which skips a
        batch it committed already, and an outbox takes a batch id once (``DeliveryLanes.spool``): after a
        crash between the writes, the re-run writes only the missing ones; the late-row file and the journal
        record are named by the batch id and replaced whole. The batch is computed once (``persist``): the
        rules' state and counts are those of one run.

        Every Spark job here costs a scheduling round on the micro-batch's path, so the batch is read by one
        ``collect`` (alerts, statistics, late and failed rows, and the reason of each bad row, not its
        payload) and written by one job per file sink with rows, each in one task (one file per micro-batch). Where
        the time goes, step by step, and the jobs started, go to the status with Spark's own parts
        (``last_batch.foreach_batch``: ``BatchCost``). The driver layout writes from the driver (``DriverRows``)."""
        cost = BatchCost.start(batch.sparkSession)
        if self.driver is not None:
            with cost.step("driver_rules"):  # the rules on the driver, their state saved (driver_state.py)
                on_driver = self.driver.run(batch, batch_id)
            book = BatchBook.of(on_driver.small, on_driver.bad_reasons())
            # the late rows and the journal record are written while the alerts are (batch_writes.py says why)
            if self._book_writer is None:
                self._book_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cep-batch-book")
            booked = self._book_writer.submit(write_book, book, batch_id, self.late_dir, self.journal)
            try:
                on_driver.write(batch_id, cost, batch.sparkSession, self.file_sink, self.bad_rows_sink, self.lanes)
            except BaseException:
                booked.exception()  # waited for, not raised: the writes' error is the one to see
                raise
            with cost.step("journal"):  # what is left of the wait for them
                booked.result()
        else:
            small, bad = write_operator_rows(batch, batch_id, cost, self.file_sink, self.bad_rows_sink, self.lanes)
            book = BatchBook.of(small, bad)
            write_book(book, batch_id, self.late_dir, self.journal, cost)
        if book.failed:  # quarantined by the driver's loop (refresh_rules), which owns the rule set
            with self._failed_lock:
                self._failed.extend(book.failed)
        self.progress.note_cost(batch_id, cost.done())

    def _check_clock_rows(self) -> None:
        """The clock rows of ``idle_watermark`` are a second source of the matching query, and Spark restarts a
        checkpoint only with the sources it was written with: turning the option on or off needs a new one."""
        wanted = self.idle_watermark_us is not None
        offsets = os.path.join(self.checkpoint, "match", "offsets")
        ran = os.path.isdir(offsets) and any(n.isdigit() for n in os.listdir(offsets))
        had = bool(self.status.get("idle_watermark"))
        if ran and had != wanted:
            raise CepSemanticError(
                f"the checkpoint {self.checkpoint} was written {'with' if had else 'without'} --idle-watermark, "
                "and Spark "
                f"restarts a query only with the sources it started with; run {'with' if had else 'without'} it, or "
                "start a new checkpoint (the alerts so far stay in the old one)",
                code="E0283",
            )
        with self.book.lock:
            self.status["idle_watermark"] = wanted

    def _cut_short(self) -> int | None:
        """The micro-batch a crash cut short: its offsets are logged and it is not committed."""
        offsets, commits = (os.path.join(self.checkpoint, "match", name) for name in ("offsets", "commits"))
        logged = sorted(int(n) for n in os.listdir(offsets) if n.isdigit()) if os.path.isdir(offsets) else []
        if not logged or os.path.exists(os.path.join(commits, str(logged[-1]))):
            return None
        return logged[-1]

    def start(self, *, available_now: bool = False) -> AlertStream:
        """Start the query and the delivery lanes (when there are alert sinks)."""
        self._check_clock_rows()
        driver_state.check_layout(self.checkpoint, self.layout)
        closed = delta_restart.close_replayed_batch(
            os.path.join(self.checkpoint, "match"), stateful=self.layout == driver_state.SPARK
        )
        layouts.retire_delivery_query(self.spark, self.checkpoint, self.file_sink, self.lanes, self._event)
        combined = self.build()
        layouts.retire_bad_row_query(self.checkpoint, self.bad_rows_sink, self._event)
        # The empty micro-batch logged for Spark's keyed state is no crash's: Spark just runs it.
        recovering = self.progress.recovering = self._cut_short() if closed is None else None
        layouts.check_outbox_seals(self.checkpoint, self.lanes, self.sinks, recovering)
        if recovering is not None:
            pinned = self.store.batch_sets().get(recovering)
            self._event(
                f"recovering from the checkpoint: micro-batch {recovering} was cut short; it runs again "
                f"with the rule set it started with ({pinned or 'the current one'}), its alerts are not duplicated",
                "warning",
            )
        with self.book.lock:
            self.status.update(
                {
                    "state": "running",
                    "started_at": now_iso(),
                    "output": self.file_sink.path,
                    "output_format": self.file_sink.format,
                    "stopped_at": None,
                    "late_rows_path": self.late_dir,
                    "bad_rows_path": self.bad_rows_sink.path,
                }
            )
            sinks = self.status.setdefault("sinks", {})
            for sink in self.sinks:
                sinks.setdefault(sink.key(), {})["label"] = sink.describe()
        self.file_sink.prepare()
        self.bad_rows_sink.prepare()
        self.match_query = self._start_query(combined, self._write_batch, "match", available_now=available_now)
        if self.lanes is not None:
            self.lanes.start()
        self.write_status()
        return self

    def _start_query(self, df: DataFrame, each_batch: Callable, name: str, *, available_now: bool):
        """Start ``df`` with ``foreachBatch(each_batch)``, checkpointed in ``<checkpoint>/<name>``."""
        writer = df.writeStream.foreachBatch(each_batch).option(
            "checkpointLocation", os.path.join(self.checkpoint, name)
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif self.trigger:
            writer = writer.trigger(processingTime=self.trigger)
        spark = df.sparkSession  # its query's own settings: cheaper logs on a local disk (session.py, file.py)
        settings = local_log_settings(spark, (self.file_sink, self.bad_rows_sink))
        if on_local_disk(spark, self.checkpoint):
            settings.update(LOCAL_CHECKPOINT_CONF)
        with starting_with(spark, settings):
            return writer.start()

    # ------------------------------------------------------------------------------------ progress

    def poll(self) -> dict:
        """Fold what finished since the last call into the status (the journal, Spark's progress, the
        lanes), and write it."""
        if self.match_query is not None:
            self.progress.fold(self.match_query, self.driver.gauges if self.driver is not None else None)
            self.store.prune()
        self._fold_journal()
        if self.lanes is not None:
            letters: dict[str, set[str]] = {}
            for sink in self.sinks:
                if sink.dead_letters is not None:
                    letters[sink.key()] = {rule for letter in sink.dead_letters.letters() for rule in letter.rules}
            self.book.set_sinks(self.lanes.snapshot(), letters)
        self.health["loop_at"] = time.time()
        self.write_status()
        return self.status

    def _fold_journal(self) -> None:
        commits = os.path.join(self.checkpoint, "match", "commits")
        for name, record in self.journal.pending():
            if record.get("kind") == "batch":
                final = os.path.exists(os.path.join(commits, str(record.get("batch"))))
            else:
                final = self.lanes is None or self.lanes.settled(record)
            if not final:
                continue
            for message in self.book.fold(name, record):
                self._event(message)
            self._to_remove.append(name)

    # ------------------------------------------------------------------------------------ running

    def process_all_available(self) -> None:
        """Wait until every input file so far is matched and delivered (tests; no sleeping)."""
        if self.match_query is not None:
            self.match_query.processAllAvailable()
        if self.lanes is not None:
            self.lanes.drain()
        self.poll()

    def run_available_now(self) -> dict:
        """Process what the input holds now, deliver it, and stop (``cep stream --once``). A sink that
        cannot take its alerts raises its error once the others are done (its outbox keeps them)."""
        self.start(available_now=True)
        try:
            self.match_query.awaitTermination()
            self._quarantine_failed()  # the status says which rule failed, as a running stream's would
            self.poll()
            if self.lanes is not None:
                self.lanes.drain()
                self.poll()
                failing = [lane.state for lane in self.lanes.lanes.values() if lane.state.failing_since is not None]
                if failing:
                    raise failing[0].last_exception or RuntimeError(failing[0].last_error)
        except Exception as error:  # a failed query or sink: say so in status.json too, then raise
            with self.book.lock:
                self.status["state"] = "failed"
                self.status.setdefault("query_errors", []).append({"time": now_iso(), "error": str(error)[:2000]})
            raise
        finally:
            self.stop()
        return self.status

    def check(self) -> None:
        """Raise ``QueryFailed`` if the matching query failed."""
        query = self.match_query
        error = query.exception() if query is not None and not query.isActive else None
        if error is not None:
            raise QueryFailed(f"the matching query failed: {str(error).splitlines()[0] if str(error) else error}")

    def run(
        self,
        *,
        poll_interval: float = 1.0,
        on_tick: Callable[[dict], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """Run until ``stop`` is set or Ctrl-C: reload rules, fold progress, write status."""
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                stop.wait(poll_interval)
                if stop.is_set():
                    break
                try:
                    self.refresh_rules(write=False)  # poll() writes it
                except CepSemanticError as err:  # e.g. no rule left to take the event time from: keep the last set
                    self._event(f"rules not reloaded: {err}", "error")
                try:
                    self.check()
                except QueryFailed as failed:
                    if stop.is_set():  # a stop (SIGTERM to the process group) ended the workers: abandoned, not failed
                        break
                    with self.book.lock:
                        self.status["state"] = "failed"
                        self.status.setdefault("query_errors", []).append(
                            {"time": now_iso(), "error": str(failed)[:2000]}
                        )
                    raise
                status = self.poll()
                if on_tick is not None:
                    on_tick(status)
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop the lanes (between two attempts: what they hold stays in their outboxes) and the queries
        (a micro-batch in flight is abandoned, never half-committed), and write the status."""
        self.health["stopping"] = True
        if self.lanes is not None:
            self.lanes.stop()
        try:
            if self.match_query is not None and self.match_query.isActive:
                self.match_query.stop()
        except Exception:  # noqa: BLE001 - a JVM already going away: nothing is committed half-way
            pass
        if self._book_writer is not None:  # the query has stopped: no micro-batch uses it any more
            self._book_writer.shutdown(wait=False)
            self._book_writer = None
        try:
            self.poll()
        except Exception:  # noqa: BLE001 - stopping must not fail on a status write
            pass
        with self.book.lock:
            if self.status.get("state") != "failed":
                self.status["state"] = "stopped"
            self.status["stopped_at"] = now_iso()
        self.write_status()

    def alerts(self) -> DataFrame:
        """Every alert committed so far, read through Spark (honours the file sink's log)."""
        return self.file_sink.read(self.spark)

    def late_rows(self) -> list[dict]:
        """Every late row written so far (``late/``), as dicts."""
        return read_late_rows(self.late_dir)


def delivered_counts(status: dict) -> Counter:
    """Alerts delivered per sink key."""
    return Counter({key: int(entry.get("delivered", 0)) for key, entry in (status.get("sinks") or {}).items()})
