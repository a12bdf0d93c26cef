"""The rule set on the executors: compiled rules, and the stateful step that runs every rule of a key.

``alerting/query.py`` builds the Spark plan whose functions these are (``Explode`` feeds ``AlertStep``);
``alerting/stream.py`` says how the whole maps onto Spark.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from cep.grammar.errors import CepError
from cep.matcher.plan import COLUMN_WISE, CompiledQuery
from cep.matcher.rows.tables import pandas_to_columns
from cep.matcher.sql.types import narrow_integer_columns
from cep.matcher.vector.arrays import factorize_text
from cep.spark_bridge.alerting import suppress as suppress_mod
from cep.spark_bridge.alerting.alert_rows import UNESCAPED, append_alerts
from cep.spark_bridge.alerting.bucket_state import (
    BLOB,
    LAST_ALERT,
    LIVE,
    PENDING,
    TIMER,
    VERSION,
    BucketInputs,
    BucketState,
    ColumnRuleState,
    key_text,
    scalar,
    table_gauges,
)
from cep.spark_bridge.alerting.rule_set import (
    ALERT_FIRST,
    ALERT_LAST,
    ALERT_STATUS,
    BAD_SPEC,
    BATCH_ID_PROPERTY,
    FAILURE_TEXT_LIMIT,
    INTERNAL_MEASURES,
    KIND_BAD,
    KIND_FAILED,
    KIND_LATE,
    KIND_MATCH,
    KIND_STATS,
    PKEY,
    ROW_ID,
    SPEC,
    STAT_NAMES,
    match_id_text,
    rule_source,
    statement_to_run,
)
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.columnar import ColumnarStep
from cep.spark_bridge.engine.key_table import gc_paused, split_by_key
from cep.spark_bridge.engine.keyed import DEFAULT_MAX_PENDING_ROWS, KeyedStream, spark_timeout_ms
from cep.spark_bridge.sinks.alerts import ALERT_NAMES, jsonable
from cep.spark_bridge.spark.columns import EVENT_US, KIND, NULL_TIME, STATS

# Imported inside functions: pandas (heavy; only the Spark calls need it) and pyspark (optional).

# Per worker process: compiled rules, rule sets, the set of each micro-batch, the stores.
_COMPILED: dict[str, _CompiledRule] = {}
_RUNTIMES: dict[tuple[str, str], _RuleSetRuntime] = {}
_BATCH_SETS: dict[tuple[str, str], str] = {}
_STORES: dict[str, RuleStore] = {}
# The micro-batch the driver layout (driver_state.py) runs, where no Spark task carries its id.
_DRIVER_BATCH: contextvars.ContextVar[str | None] = contextvars.ContextVar("cep_driver_batch", default=None)


class _CompiledRule:
    """One rule ready to run in a worker: its engine and where its cep columns are in the output."""

    def __init__(self, entry: dict, ruleset: dict, release_delay_ms: int | None = None) -> None:
        self.rule_id = entry["rule_id"]
        self.version = entry["version"]
        plan = CompiledQuery(statement_to_run(entry))
        # what its run-time errors are rendered against: the rule's file, at the rule's place
        self.source, self.path = (rule_source(entry) if "source" in entry else None), entry.get("path")
        columns = list(ruleset["input_columns"])
        self.engine = KeyedStream(
            plan,
            columns,
            query_text=match_id_text(self.rule_id, entry["canonical"]),
            session_timeout_us=ruleset.get("session_timeout_us"),
            max_pending_rows=ruleset.get("max_pending_rows") or DEFAULT_MAX_PENDING_ROWS,
            dedup_key=ruleset.get("dedup_key"),
            dedup_horizon_us=ruleset.get("dedup_horizon_us") or 0,
            release_delay_ms=release_delay_ms,
            integer_columns=narrow_integer_columns(dict(ruleset.get("input_types") or {})),
        )
        # the route ``cep explain`` prints: column-wise (every key of a bucket call at once), else per key
        self.route = self.engine.route()
        self.columnar = ColumnarStep(self.engine) if self.route.stream == COLUMN_WISE else None
        names = [n for n, _ in plan.output_types(dict(ruleset["input_types"]))]
        self.status_index = names.index(ALERT_STATUS) if entry.get("status_column") else None
        self.first_index = names.index(ALERT_FIRST)
        self.last_index = names.index(ALERT_LAST)
        self.measures = [(i, n) for i, n in enumerate(names) if n not in INTERNAL_MEASURES]
        self.partition = list(entry["partition"])
        self.throttle = suppress_mod.Throttle(entry.get("suppress_us"))


class _RuleSetRuntime:
    def __init__(self, set_id: str, payload: dict) -> None:
        self.set_id = set_id
        self.payload = payload
        self.entries = {e["rule_id"]: e for e in payload["rules"]}
        self.partitions: dict[str, list[str]] = {}  # spec id -> PARTITION BY columns
        self.rules_by_spec: dict[str, list[str]] = {}  # spec id -> rule ids, in the set's order
        for entry in payload["rules"]:
            spec = _spec_id(entry["partition"])
            self.partitions[spec] = list(entry["partition"])
            self.rules_by_spec.setdefault(spec, []).append(entry["rule_id"])

    def rule(self, rule_id: str, release_delay_ms: int | None = None) -> _CompiledRule | None:
        """The rule compiled for this worker; ``release_delay_ms``: the stream's watermark delay, with which its keys
        release rows up to their own bound (``KeyedStream``), or None."""
        entry = self.entries.get(rule_id)
        if entry is None:
            return None
        cache_key = json.dumps(
            [
                entry,
                self.payload["input_columns"],
                self.payload["input_types"],
                self.payload.get("session_timeout_us"),
                self.payload.get("max_pending_rows"),
                self.payload.get("dedup_key"),  # _CompiledRule reads them too: two streams on one rule file
                self.payload.get("dedup_horizon_us"),  # with other --dedup-key settings are two rules here
                release_delay_ms,
            ],
            sort_keys=True,
        )
        compiled = _COMPILED.get(cache_key)
        if compiled is None:
            compiled = _COMPILED[cache_key] = _CompiledRule(entry, self.payload, release_delay_ms)
        return compiled


def _task_batch_id() -> str | None:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover
        return _DRIVER_BATCH.get()
    context = TaskContext.get()
    if context is None:
        return _DRIVER_BATCH.get()
    value = context.getLocalProperty(BATCH_ID_PROPERTY)
    return value if value not in (None, "") else None


@contextlib.contextmanager
def batch_on_driver(batch_id: int) -> Iterator[None]:
    """Within it, the rules run on the driver take micro-batch ``batch_id``'s rule set, as its tasks would."""
    token = _DRIVER_BATCH.set(str(batch_id))
    try:
        yield
    finally:
        _DRIVER_BATCH.reset(token)


def _task_partition() -> int:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover
        return 0
    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def runtime_for(store_dir: str, batch_id: str | None = None) -> _RuleSetRuntime:
    """The rule set of the running micro-batch (cached per worker process)."""
    store = _STORES.get(store_dir)
    if store is None:
        store = _STORES[store_dir] = RuleStore(store_dir)
    if batch_id is None:
        batch_id = _task_batch_id()
    set_id = _BATCH_SETS.get((store_dir, batch_id)) if batch_id is not None else None
    if set_id is None:
        set_id = store.set_for_batch(batch_id)
        if batch_id is not None:
            _BATCH_SETS[(store_dir, batch_id)] = set_id
    runtime = _RUNTIMES.get((store_dir, set_id))
    if runtime is None:
        runtime = _RUNTIMES[(store_dir, set_id)] = _RuleSetRuntime(set_id, store.load(set_id))
    return runtime


def _key_strings(pdf, columns: Sequence[str]) -> list[str]:
    """The partition key of each row as a JSON object (``{"card": "c1"}``), the grouping key."""
    if not columns:
        return ["{}"] * len(pdf)
    if len(columns) == 1 and pdf[columns[0]].dtype == object:
        texts = _text_key_strings(pdf[columns[0]], columns[0])
        if texts is not None:
            return texts
    values = pandas_to_columns(pdf, columns)
    cache: dict[tuple, str] = {}
    out = []
    for row in zip(*[values[c] for c in columns]):
        try:
            text = cache.get(row)
        except TypeError:  # an unhashable value (an array)
            text = None
        if text is None:
            text = UNESCAPED.encode({c: jsonable(v) for c, v in zip(columns, row)})
            try:
                cache[row] = text
            except TypeError:
                pass
        out.append(text)
    return out


def _text_key_strings(column, name: str) -> list[str] | None:
    """``_key_strings`` of one column of text (or NULL), each distinct value encoded once (``pd.factorize``) instead
    of looked up row by row: the common PARTITION BY (a symbol, a card, a user); None for any other column."""
    codes, values = factorize_text(column.to_numpy(dtype=object))  # NULL and NaN: code -1, as ``series_values``
    if not all(type(value) is str for value in values):
        return None
    texts = [UNESCAPED.encode({name: value}) for value in values] + [UNESCAPED.encode({name: None})]
    return np.asarray(texts, dtype=object)[codes].tolist()  # code -1: the last, NULL's


def _spec_id(partition: Sequence[str]) -> str:
    """The grouping tag of a partition spec: the JSON list of its PARTITION BY columns."""
    return json.dumps(list(partition))


class Explode:
    """``mapInPandas``: each input row once per partition spec of the micro-batch's rule set, tagged with
    the spec and the row's partition key under it. Rules with the same PARTITION BY share the copy.
    With ``reject`` (the reason column of ``inputs.mark_bad_rows``), a bad row goes once, to
    ``BAD_SPEC``, and to no rule. With ``row_ids``, every copy of a row carries the same ``ROW_ID``
    (the task's partition and the row's place in it): a row late for several rules counts once."""

    def __init__(
        self, store_dir: str, columns: Sequence[str], reject: str | None = None, row_ids: bool = False
    ) -> None:
        self.store_dir = store_dir
        self.columns = list(columns)
        self.reject = reject
        self.row_ids = row_ids

    def __call__(self, frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        runtime = None
        seen = 0
        partition = _task_partition()
        for pdf in frames:
            if not len(pdf):
                continue
            if runtime is None:
                runtime = runtime_for(self.store_dir)
            if self.row_ids:
                ids = map(f"{partition}-".__add__, map(str, range(seen, seen + len(pdf))))
                pdf = pdf.assign(**{ROW_ID: np.fromiter(ids, dtype=object, count=len(pdf))})
                seen += len(pdf)
            pieces = []
            if self.reject is not None and pdf[self.reject].notna().any():
                bad = pdf[self.reject].notna()
                piece = pdf.loc[bad, self.columns + ([ROW_ID] if self.row_ids else [])]
                piece.insert(0, PKEY, "{}")
                piece.insert(0, SPEC, BAD_SPEC)
                pieces.append(piece)
                pdf = pdf[~bad]
            carried = self.columns + ([ROW_ID] if self.row_ids else [])
            for spec, columns in runtime.partitions.items():
                piece = pdf[carried].copy(deep=False)
                piece.insert(0, PKEY, object_column(_key_strings(pdf, columns)))
                piece.insert(0, SPEC, spec)
                pieces.append(piece)
            if pieces:
                yield pieces[0] if len(pieces) == 1 else pd.concat(pieces, ignore_index=True)


class _KeyRows:
    """One partition key's rows within a bucket's frame: columns converted once for the whole frame
    (on first use), then sliced for the key."""

    def __init__(self, pdf, cache: dict, times: list, indices: list[int] | None) -> None:
        self.pdf, self.cache, self.indices = pdf, cache, indices
        self.times = times if indices is None else [times[i] for i in indices]
        self.first = 0 if indices is None else indices[0]

    def columns(self, names: Sequence[str]) -> dict[str, list]:
        missing = [c for c in names if c not in self.cache]
        if missing:
            self.cache.update(pandas_to_columns(self.pdf, missing))
        if self.indices is None:
            return self.cache
        return {name: [self.cache[name][i] for i in self.indices] for name in names}

    def key_values(self, names: Sequence[str]) -> tuple:
        return tuple(scalar(self.pdf[c].iat[self.first]) for c in names)

    def record(self, index: int, names: Sequence[str]) -> tuple[str, str | None]:
        """Row ``index`` of the key as a JSON object of ``names``, and its row id (``ROW_ID``) if any."""
        position = index if self.indices is None else self.indices[index]
        text = json.dumps(
            {c: jsonable(scalar(self.pdf[c].iat[position])) for c in names if c in self.pdf.columns},
            ensure_ascii=False,
        )
        row_id = str(self.pdf[ROW_ID].iat[position]) if ROW_ID in self.pdf.columns else None
        return text, row_id


class AlertStep:
    """``applyInPandasWithState``: one (partition spec, bucket of partition keys) in one micro-batch, every
    rule of the micro-batch's set with that PARTITION BY. A rule whose route is column-wise (``choose_route``,
    as ``cep explain`` prints it) runs once for the whole bucket on the column-wise step (``ColumnarStep``:
    every key with rows, and every key whose timer the watermark reached, at once). The other rules run per
    key: each key with rows, or whose timer the watermark reached, gives each rule's ``KeyedStream`` its
    rows (or, on a timer call, calls the rules whose own deadline the watermark reached). The bucket's state
    is a ``BucketState`` (bucket_state.py): a ``KeyTable`` of each key's per-key rules, and a table per
    column-wise rule (spark_bridge/engine/key_table.py says why keys share a call)."""

    def __init__(
        self,
        store_dir: str,
        housekeeping_us: int,
        key_buckets: int,
        passthrough: Sequence[str] = (),
        late_rows: bool = False,
        column_wise: bool = True,
        release_delay_ms: int | None = None,
        compress_state: bool = True,
    ) -> None:
        self.store_dir = store_dir
        # False: the bucket's state bytes uncompressed (the driver compresses them once, when it keeps them)
        self.compress_state = compress_state
        # the watermark delay: each key releases its rows up to its own bound (its largest event time read, minus
        # the delay) in the micro-batch that reads them (``KeyedStream``); None: once the watermark passes them
        self.release_delay_ms = release_delay_ms
        # False: every rule per key, the reference the column-wise rules are tested against (as
        # ``cep.compile(text, column_wise=False)`` is for a query)
        self.column_wise = column_wise
        self.housekeeping_us = housekeeping_us
        self.key_buckets = key_buckets
        self.passthrough = tuple(passthrough)  # the columns of bad rows (BAD_SPEC), NULL on the others
        self.late_rows = late_rows  # each rule's late rows out as KIND_LATE rows (else only counted)

    def __call__(self, key, frames, state):
        import pandas as pd

        spec = str(key[0])
        if spec == BAD_SPEC:  # bad input rows: out as they came, with no state
            yield self._frame([], [], bad=pd.concat(list(frames), ignore_index=True), passthrough=self.passthrough)
            return
        with gc_paused():  # a bucket's tables are an object per key (key_table.gc_paused says why)
            out = self._bucket_call(spec, frames, state)
        yield out

    def _bucket_call(self, spec: str, frames, state):
        """One bucket of ``spec``'s keys: every rule on its rows and due timers; the output frame."""
        import pandas as pd

        runtime = runtime_for(self.store_dir)
        watermark_ms = state.getCurrentWatermarkMs()
        watermark_us = watermark_ms * 1000
        parts = [frame for frame in frames if len(frame)]
        bucket = BucketState.decode(state.get[0] if state.exists else None, self.key_buckets)
        wanted = runtime.rules_by_spec.get(spec, [])
        compiled = {rule_id: runtime.rule(rule_id, self.release_delay_ms) for rule_id in wanted}
        column_rules = {
            rule_id: rule for rule_id, rule in compiled.items() if rule.columnar is not None and self.column_wise
        }
        per_key = [rule_id for rule_id in wanted if rule_id not in column_rules]
        bucket.move_to_columns(column_rules)  # a checkpoint written when these rules ran per key
        table = bucket.keys
        alerts: list[tuple] = []
        late: list[tuple] | None = [] if self.late_rows else None
        failures: list[tuple] = []
        stats: dict[tuple[str, str], dict] = {}
        emitted = _dt.datetime.now(_dt.UTC).replace(tzinfo=None)
        groups: dict[tuple, list[int]] = {}
        calls: list[tuple[tuple, _KeyRows | None]] = []
        pdf = None
        if parts:
            pdf = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
            cache: dict = {}
            if per_key or table:  # the per-key rules' event times (the column-wise step reads EVENT_US itself)
                times = [None if us == NULL_TIME else us for us in pdf[EVENT_US].tolist()]
                groups = split_by_key([(k,) for k in pdf[PKEY].tolist()])
                whole = len(groups) == 1
                calls = [
                    (pkey, _KeyRows(pdf, cache, times, None if whole else indices)) for pkey, indices in groups.items()
                ]
        calls += [(pkey, None) for pkey in table.due(watermark_us, groups)]
        for pkey, rows in calls:
            blob = table.states.get(pkey)
            new = self._key_call(
                runtime,
                per_key,
                pkey[0],
                rows,
                codec.decode(blob) if blob else {},
                watermark_us,
                emitted,
                alerts,
                stats,
                late,
                failures,
            )
            if new:
                timers = [e[TIMER] for e in new.values() if e[TIMER] is not None]
                # No deadline of its own: wake up once per housekeeping interval, so that the state of a
                # rule changed or removed later is reclaimed even if the key never gets another row.
                table.put(pkey, codec.encode(new), min(timers) if timers else watermark_us + self.housekeeping_us)
            else:
                table.put(pkey, None, None)
        for rule_id in bucket.rule_ids() - set(column_rules):  # removed, or no longer column-wise: its state goes
            _count_table_dropped(_counts(stats, rule_id, bucket.version_of(rule_id)), bucket.gauges_of(rule_id))
            bucket.drop(rule_id)
        if column_rules:
            inputs = BucketInputs(pdf, tuple(runtime.partitions[spec])) if pdf is not None else None
            record = _KeyRows(pdf, {}, [], None).record if pdf is not None else None  # a row's text: no times
            for rule in column_rules.values():
                self._column_rule_call(
                    bucket, rule, inputs, record, watermark_us, emitted, alerts, stats, late, failures, runtime
                )
        if bucket:
            state.update((bucket.encode(per_key, self.compress_state),))
            timer = bucket.next_timer(
                watermark_us, self.housekeeping_us, lambda r, us: compiled[r].throttle.open_until(us)
            )
            state.setTimeoutTimestamp(spark_timeout_ms(timer, watermark_ms))
        elif state.exists:
            state.remove()
        return self._frame(
            alerts,
            [(rule_id, version, counts) for (rule_id, version), counts in stats.items()],
            passthrough=self.passthrough,
            late=late,
            failures=failures,
        )

    def _column_rule_call(
        self,
        bucket: BucketState,
        rule: _CompiledRule,
        inputs: BucketInputs | None,
        record,
        watermark_us: int,
        emitted,
        alerts: list,
        stats_by_rule: dict,
        late: list | None,
        failures: list,
        runtime,
    ) -> None:
        """One column-wise rule over every key of the call (``ColumnarStep.step``): its alerts in the per-key
        path's order (the keys with rows in order of first appearance, then those called by their timer),
        its late rows and counts. A rule that raises fails alone, for the bucket: what it added is taken
        back, its state here dropped and counted, and a KIND_FAILED row (no key) tells the driver."""
        rule_id = rule.rule_id
        if rule_id in bucket.rule_ids() and bucket.version_of(rule_id) != rule.version:  # changed: its state goes
            _count_table_dropped(_counts(stats_by_rule, rule_id, bucket.version_of(rule_id)), bucket.gauges_of(rule_id))
            bucket.drop(rule_id)
        rs = bucket.rule_state(rule_id, rule.version, rule.columnar)
        stats = _counts(stats_by_rule, rule_id, rule.version)
        marks = (len(alerts), len(late) if late is not None else 0, dict(stats))
        try:
            self._column_rule_run(rule, rs, inputs, record, watermark_us, emitted, alerts, stats, late, runtime)
        except Exception as exc:  # noqa: BLE001 - one rule's failure is that rule's, never the micro-batch's
            del alerts[marks[0] :]
            if late is not None:
                del late[marks[1] :]
            stats.clear()
            stats.update(marks[2])
            _count_table_dropped(stats, rs.gauges)
            bucket.drop(rule_id)
            failures.append((rule_id, rule.version, None, "failed", None, None, _failure_text(exc, rule)))

    @staticmethod
    def _column_rule_run(
        rule, rs: ColumnRuleState, inputs, record, watermark_us, emitted, alerts, stats, late, runtime
    ):
        step = rule.columnar
        if inputs is not None:
            found = step.step(
                rs.table,
                inputs.keys,
                inputs.codes,
                inputs.read(step.read_columns),
                inputs.event_us,
                inputs.null_time,
                watermark_us,
            )
        else:
            found = step.step(
                rs.table,
                [],
                np.zeros(0, dtype=np.int64),
                {name: np.zeros(0, dtype=object) for name in step.read_columns},
                np.zeros(0, dtype=np.int64),
                np.zeros(0, dtype=bool),
                watermark_us,
            )
        table = rs.table
        given = {kid: position for position, kid in enumerate(found.given)}
        last_alerts = rs.last_alerts
        kids = found.given_with_output()[1] + found.due_with_output()
        pkeys = [
            inputs.pkeys[given[kid]] if kid in given else key_text(rule.partition, table.keys[kid]) for kid in kids
        ]
        # Every key's alerts at once; two keys written alike (one partition key text) in turn, the second from
        # the first's last alert, as one key after the other
        batches = [list(zip(kids, pkeys))] if len(set(pkeys)) == len(pkeys) else [[pair] for pair in zip(kids, pkeys)]
        for batch in batches:
            calls = []
            for kid, pkey in batch:
                previous = last_alerts.get(pkey)
                last = previous[1] if previous is not None else None
                calls.append((pkey, found.rows[kid], found.match_ids[kid], last))
            for (kid, pkey), last_alert in zip(batch, append_alerts(rule, calls, emitted, alerts, stats)):
                if last_alert is not None:
                    last_alerts[pkey] = (table.keys[kid], last_alert)
        if late is not None and found.late:
            for index, reason in sorted(found.late, key=lambda item: (inputs.codes[item[0]], item[0])):
                text, row_id = record(index, runtime.payload["input_columns"])
                moment = int(inputs.event_us[index]) if not inputs.null_time[index] else None
                pkey = inputs.pkeys[inputs.codes[index]]
                when = codec.micros_to_datetime(moment) if moment is not None else None
                late.append((rule.rule_id, rule.version, row_id, reason, pkey, when, text))
        if last_alerts:  # a key's last alert is kept while its interval is open or the key holds rows
            holding = set(table.holding().tolist())
            for pkey, (key, us) in list(last_alerts.items()):
                until = rule.throttle.open_until(us)
                if not (until is not None and until > watermark_us) and table.index.get(key, -1) not in holding:
                    del last_alerts[pkey]
        for name in ("events_in", "late_rows", "timers_fired", "cap_hits", "sessions_closed", "duplicates_dropped"):
            stats[name] += int(found.stats.get(name, 0))
        gauges = table_gauges(table)
        for name, now, before in zip(("d_live", "d_pending", "d_keys"), gauges, rs.gauges):
            stats[name] += now - before
        rs.gauges = gauges

    def _key_call(
        self,
        runtime,
        wanted: list[str],
        pkey: str,
        rows: _KeyRows | None,
        old: dict,
        watermark_us: int,
        emitted,
        alerts: list,
        stats_by_rule: dict,
        late: list | None = None,
        failures: list | None = None,
    ) -> dict:
        """Every per-key rule (``wanted``) for one key: appends its alerts (and, with ``late``, its late rows), adds
        its counts per rule; returns the key's new state (a dict by rule id).

        A rule that raises on this key (E0430, too many partial matches, or any other exception) fails
        alone: what it added for the key is taken back, its state on the key is dropped, and a KIND_FAILED
        row (in ``failures``) tells the driver, which quarantines it; the key's other rules run on."""

        def counts_for(rule_id: str, version: str) -> dict:
            return _counts(stats_by_rule, rule_id, version)

        new: dict = {}
        for rule_id, entry in old.items():  # rules removed, or changed: their state here goes
            rule = runtime.rule(rule_id, self.release_delay_ms) if rule_id in wanted else None
            if rule is None or rule.version != entry[VERSION]:
                _count_dropped(counts_for(rule_id, entry[VERSION]), entry)

        for rule_id in wanted:
            rule = runtime.rule(rule_id, self.release_delay_ms)
            entry = old.get(rule_id)
            if entry is not None and entry[VERSION] != rule.version:
                entry = None
            if rows is None:
                if entry is None:
                    continue
                timer = entry[TIMER]
                if timer is None or watermark_us < timer:  # not this rule's turn: keep it as it is
                    new[rule_id] = entry
                    continue
            marks = (len(alerts), len(late) if late is not None else 0, dict(counts_for(rule_id, rule.version)))
            try:
                kept = self._rule_call(
                    rule, entry, rows, pkey, watermark_us, emitted, alerts, counts_for, late, runtime
                )
            except Exception as exc:  # noqa: BLE001 - one rule's failure is that rule's, never the micro-batch's
                del alerts[marks[0] :]
                if late is not None:
                    del late[marks[1] :]
                stats = counts_for(rule_id, rule.version)
                stats.update(marks[2])
                if entry is not None:  # its state on this key goes, as for a removed rule
                    _count_dropped(stats, entry)
                if failures is not None:
                    failures.append((rule_id, rule.version, None, "failed", pkey, None, _failure_text(exc, rule)))
                continue
            if kept is not None:
                new[rule_id] = kept
        return new

    def _rule_call(
        self,
        rule,
        entry,
        rows: _KeyRows | None,
        pkey: str,
        watermark_us: int,
        emitted,
        alerts: list,
        counts_for,
        late: list | None,
        runtime,
    ) -> list | None:
        """One rule on one key: its alerts, late rows and counts added; returns its new state entry (None: none)."""
        rule_id = rule.rule_id
        if rows is None and entry is not None and entry[BLOB] is None:
            # Only the key's last alert was kept, for its suppression interval, which has now ended: the
            # entry goes without a call of the engine (a timer of the rule's own would count as fired), as
            # the column-wise path forgets its ``last_alerts``.
            counts_for(rule_id, rule.version)["d_keys"] -= 1
            return None
        engine = rule.engine
        columns = key_values = None
        if rows is not None:
            columns = rows.columns(engine.read_columns)
            key_values = rows.key_values(rule.partition)
        result = engine.process(
            entry[BLOB] if entry is not None else None,
            key_values,
            columns,
            rows.times if rows is not None else None,
            watermark_us,
            timed_out=rows is None,
        )
        stats = counts_for(rule_id, rule.version)
        last_alert = entry[LAST_ALERT] if entry is not None else None
        (last_alert,) = append_alerts(rule, [(pkey, result.rows, result.match_ids, last_alert)], emitted, alerts, stats)
        if late is not None and rows is not None:
            for index, reason in result.late:
                text, row_id = rows.record(index, runtime.payload["input_columns"])
                moment = rows.times[index]
                late.append(
                    (
                        rule_id,
                        rule.version,
                        row_id,
                        reason,
                        pkey,
                        codec.micros_to_datetime(moment) if moment is not None else None,
                        text,
                    )
                )
        engine_stats = result.stats
        live = int(engine_stats.get("live_matches", 0)) if result.state is not None else 0
        pending = int(engine_stats.get("pending_rows", 0)) if result.state is not None else 0
        for name in ("events_in", "late_rows", "timers_fired", "cap_hits", "sessions_closed", "duplicates_dropped"):
            stats[name] += int(engine_stats.get(name, 0))
        stats["d_live"] += live - (entry[LIVE] if entry is not None else 0)
        stats["d_pending"] += pending - (entry[PENDING] if entry is not None else 0)
        remember_until = rule.throttle.open_until(last_alert)
        if result.state is not None or (remember_until is not None and remember_until > watermark_us):
            timer = result.timer_us if result.state is not None else remember_until
            stats["d_keys"] += 0 if entry is not None else 1
            return [rule.version, result.state, live, pending, last_alert, timer]
        stats["d_keys"] -= 1 if entry is not None else 0
        return None

    @staticmethod
    def _frame(
        alerts: list[tuple],
        stats_rows: list[tuple[str, str, dict]],
        *,
        bad=None,
        passthrough: Sequence[str] = (),
        late: list[tuple] | None = None,
        failures: Sequence[tuple] = (),
    ):
        """The output: ``alerts`` (KIND_MATCH), the ``late`` rows (KIND_LATE: rule id, version, row id in
        ``match_id``, reason in ``match_status``, partition key, event time in ``first_event_time``, the row
        as JSON in ``measures``), the ``failures`` (KIND_FAILED, laid out as late rows, the error in
        ``measures``), then one statistics row per rule (KIND_STATS); or the rows of ``bad``
        (KIND_BAD, their ``passthrough`` columns kept; NULL on the other kinds)."""
        import pandas as pd

        stats_rows = [s for s in stats_rows if any(s[2].values())]
        rows = list(alerts) + [
            (r[0], r[1], r[2], r[3], r[4], r[5], None, r[6], None, False) for r in [*(late or []), *failures]
        ]
        kinds = [KIND_MATCH] * len(alerts) + [KIND_LATE] * len(late or []) + [KIND_FAILED] * len(failures)
        n_rows, n_stats = len(rows), len(stats_rows) + (len(bad) if bad is not None else 0)

        pad = [None] * n_stats
        if n_rows:
            padding = (None,) * n_stats
            data = {}
            for name, values in zip(ALERT_NAMES, zip(*rows)):  # each a tuple, a column of the rows
                if name in _TIME_NAMES:
                    data[name] = times_ns(values + padding)
                elif name == "suppressed":
                    data[name] = np.fromiter(map(bool, values + (False,) * n_stats), dtype=bool, count=n_rows + n_stats)
                elif name in ("rule_id", "rule_version"):  # also the statistics rows'
                    place = 0 if name == "rule_id" else 1
                    data[name] = object_column(values + tuple(s[place] for s in stats_rows))
                else:
                    data[name] = object_column(values + padding)
        else:
            nothing = object_column(pad)
            no_time = np.full(n_stats, np.datetime64("NaT"), dtype="datetime64[ns]")
            data = {name: nothing for name in ALERT_NAMES}
            data.update({name: no_time for name in ("first_event_time", "last_event_time", "emit_time")})
            data["suppressed"] = np.zeros(n_stats, dtype=bool)
            data["rule_id"] = object_column([s[0] for s in stats_rows])
            data["rule_version"] = object_column([s[1] for s in stats_rows])
        if bad is not None:
            data["rule_id"] = data["rule_version"] = object_column(pad)
            data[KIND] = np.full(n_stats, KIND_BAD, dtype="int32")
            data[STATS] = object_column(pad)
            data.update({name: object_column(bad[name].tolist()) for name in passthrough})
            return pd.DataFrame(data, copy=False)
        data[KIND] = np.array(kinds + [KIND_STATS] * n_stats, dtype="int32")
        data[STATS] = object_column([None] * n_rows + [[int(s[2][name]) for name in STAT_NAMES] for s in stats_rows])
        data.update({name: object_column([None] * (n_rows + n_stats)) for name in passthrough})
        return pd.DataFrame(data, copy=False)


_TIME_NAMES = frozenset(("first_event_time", "last_event_time", "emit_time"))


def object_column(values: Sequence) -> np.ndarray:
    """``values`` as a column of Python objects, each as it is (a list stays one value): pandas takes a list by
    scanning it for times to infer, several times slower than this array."""
    return np.fromiter(values, dtype=object, count=len(values))


def times_ns(values: Sequence) -> np.ndarray:
    """Times (``datetime``s, pandas Timestamps, None) as ``datetime64[ns]``, None as NaT: pandas' converter, which
    takes an array of datetime objects about ten times faster than numpy's, every alert's three times (given as
    an object array: ``pd.to_datetime`` of a list first looks for repeated values, and costs three times more)."""
    import pandas as pd

    return pd.DatetimeIndex(object_column(values)).to_numpy(dtype="datetime64[ns]")


def _counts(stats_by_rule: dict, rule_id: str, version: str) -> dict:
    """The counts of one rule version in this call (made on first use)."""
    found = stats_by_rule.get((rule_id, version))
    if found is None:
        found = stats_by_rule[(rule_id, version)] = dict.fromkeys(STAT_NAMES, 0)
    return found


def _count_table_dropped(stats: dict, gauges: Sequence[int]) -> None:
    """A column-wise rule's state in a bucket dropped (changed, removed or failed): its gauges go down."""
    live, pending, keys = gauges
    stats["dropped_live"] += live
    stats["dropped_pending"] += pending
    stats["d_live"] -= live
    stats["d_pending"] -= pending
    stats["d_keys"] -= keys


def _count_dropped(stats: dict, entry: list) -> None:
    """A rule's state on a key dropped (the rule changed, was removed or failed): its gauges go down."""
    stats["dropped_live"] += entry[LIVE]
    stats["dropped_pending"] += entry[PENDING]
    stats["d_live"] -= entry[LIVE]
    stats["d_pending"] -= entry[PENDING]
    stats["d_keys"] -= 1


def _failure_text(exc: BaseException, rule: _CompiledRule) -> str:
    """What a rule's failure says: its code and first lines (a CepError's message names the key), a CepError
    placed in the rule's file (``path:line:column``, its line and a caret)."""
    if isinstance(exc, CepError) and rule.source is not None:
        exc.with_source(rule.source, rule.path)
    code = getattr(exc, "code", None)
    text = f"{type(exc).__name__}{f' {code}' if code else ''}: {exc}"
    return text[:FAILURE_TEXT_LIMIT]
