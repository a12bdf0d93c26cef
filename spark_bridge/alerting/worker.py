"""Rule sets inside Spark: the checks a rule must pass, the versioned rule store every micro-batch is
pinned to, and the worker side (compiled rules, the per-key step that runs every rule of a key).

``spark_bridge/alerting/stream.py`` builds the streaming query and drives it; this module is what its
stateful function runs on the executors. See that module's docstring for the design.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import logging
import os
import uuid
from typing import Any, Iterator, Sequence

from cep.grammar import ast
from cep.grammar.errors import CepError, CepSemanticError, Span
from cep.grammar.format import format_statement
from cep.spark_bridge.alerting import rules as rules_mod
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.key_table import KeyTable, split_by_key
from cep.spark_bridge.alerting import suppress as suppress_mod
from cep.spark_bridge.engine.keyed import DEFAULT_MAX_PENDING_ROWS, KeyedStream, spark_timeout_ms
from cep.spark_bridge.sinks.base import atomic_write
from cep.spark_bridge.sinks.webhook import ALERT_NAMES, jsonable


__all__ = ["RuleStore", "STAT_NAMES", "build_rule_set", "check_rule", "alert_statement"]

log = logging.getLogger("cep.alerting")

DEFAULT_HOUSEKEEPING = "1 hour"
METRICS_NAME = "cep_rules"
BAD_ROWS_METRICS = "cep_bad_rows"  # one count per reason of the bad input rows, per micro-batch
BATCH_ID_PROPERTY = "streaming.sql.batchId"
RULESET_FORMAT = "cep-ruleset-1"
STATUS_FORMAT = "cep-status-1"

ALERT_STATUS = "cep_alert_status"
ALERT_FIRST = "cep_alert_first"
ALERT_LAST = "cep_alert_last"
INTERNAL_MEASURES = (ALERT_STATUS, ALERT_FIRST, ALERT_LAST)

_SPEC = "__cep_spec"
_PKEY = "__cep_pkey"
_BUCKET = "__cep_bucket"
_EVENT_US = "__cep_event_us"
_FILE = "__cep_file"  # the input file of a bad row (NULL on good rows: they need none)
_MARKER = "__cep_watermark_marker"
_KIND = "__cep_kind"
_STATS = "__cep_stats"
_NULL_TIME = -(2**63)
_WATERMARK_KEY = "spark.watermarkDelayMs"
KIND_MATCH, KIND_BAD, KIND_STATS = 0, 1, 2
# The group bad input rows travel in (``streaming.mark_bad_rows``): not a JSON list, so no partition spec.
BAD_SPEC = "bad-rows"

STAT_NAMES = (
    "events_in",  # rows received by the rule's keys (late ones included)
    "late_rows",  # rows not matched because late (behind the watermark, no event time, forced release)
    "matched",  # alerts with match_status MATCHED
    "timeouts",  # ... TIMEOUT
    "absences",  # ... ABSENCE
    "suppressed",  # alerts marked suppressed (throttled)
    "d_live",  # change in live partial matches (summed over calls: the rule's total)
    "d_pending",  # change in rows waiting for the watermark
    "d_keys",  # change in keys with state
    "dropped_live",  # partial matches dropped because the rule changed or was removed
    "dropped_pending",  # waiting rows dropped for the same reason
    "timers_fired",  # calls made by a timer
    "cap_hits",  # rows released early by max_pending_rows
    "sessions_closed",
    "duplicates_dropped",  # rows dropped as repeats of the stream's dedup key (keyed.KeyedStream)
)
_GAUGES = {"d_live": "live_partial_matches", "d_pending": "pending_rows", "d_keys": "keys"}

_S = Span()


# ----------------------------------------------------------------------------------- rule checks


def _has_absence(pattern) -> bool:
    if isinstance(pattern, ast.Absence):
        return True
    for name in ("items", "alternatives"):
        for item in getattr(pattern, name, ()) or ():
            if _has_absence(item):
                return True
    for name in ("term", "pattern"):
        inner = getattr(pattern, name, None)
        if inner is not None and not isinstance(inner, (str, ast.Identifier)) and _has_absence(inner):
            return True
    return False


def check_rule(rule: rules_mod.Rule) -> None:
    """What an alert rule may not do on a stream (raises ``CepSemanticError`` at the offending node)."""
    statement = rule.statement
    mr = statement.match
    if statement.order_by or statement.limit is not None:
        span = statement.order_by[0].span if statement.order_by else statement.span
        raise CepSemanticError("ORDER BY and LIMIT after MATCH_RECOGNIZE cannot run on a stream (the output never ends)",
                               code="E0285", span=span, hint="remove them; sort or limit where you read the alerts")
    if mr.rows_per_match.mode != "ONE":
        raise CepSemanticError("an alert rule gives one alert per match: ALL ROWS PER MATCH cannot be used in a rule set",
                               code="E0602", span=mr.rows_per_match.span,
                               hint="use ONE ROW PER MATCH (the default) and put what you need in MEASURES")
    if not mr.order_by:
        raise CepSemanticError("an alert rule needs ORDER BY an event-time column", code="E0280", span=mr.span)
    first = mr.order_by[0]
    if isinstance(first.expr, ast.ProcTime):
        raise CepSemanticError("alert rules run in event time: ORDER BY PROCTIME() cannot be used in a rule set",
                               code="E0603", span=first.span, hint="order by the event-time column")
    if not isinstance(first.expr, ast.ColumnRef) or first.descending:
        raise CepSemanticError("on a stream the first ORDER BY key must be the event-time column, ascending",
                               code="E0281", span=first.span)
    for measure in mr.measures:
        if measure.name.name.lower().startswith("cep_alert_"):
            raise CepSemanticError(f"the name {measure.name.name!r} is reserved for cep's own measures (cep_alert_...)",
                                   code="E0284", span=measure.span, hint="rename it")
    for item in statement.select:
        if item.alias is not None and item.alias.name.lower().startswith("cep_alert_"):
            raise CepSemanticError(f"the name {item.alias.name!r} is reserved for cep's own measures (cep_alert_...)",
                                   code="E0284", span=item.span, hint="rename it")


def alert_statement(statement: ast.Statement) -> tuple[ast.Statement, bool]:
    """The statement with cep's measures added: MATCH_STATUS() (when it can be other than MATCHED),
    FIRST and LAST of the event-time column. Returns (statement, has the status measure)."""
    mr = statement.match
    time_ref = mr.order_by[0].expr
    time_ref = ast.ColumnRef(_S, None, time_ref.column)
    has_status = bool(mr.rows_per_match.show_timeout or _has_absence(mr.pattern))
    extra = []
    if has_status:
        extra.append(ast.Measure(_S, ast.MatchStatus(_S), ast.Identifier(_S, ALERT_STATUS)))
    extra.append(ast.Measure(_S, ast.Navigation(_S, "FIRST", time_ref), ast.Identifier(_S, ALERT_FIRST)))
    extra.append(ast.Measure(_S, ast.Navigation(_S, "LAST", time_ref), ast.Identifier(_S, ALERT_LAST)))
    select = statement.select
    if not any(isinstance(item.expr, ast.Star) for item in select):
        select = select + tuple(ast.SelectItem(_S, ast.ColumnRef(_S, None, ast.Identifier(_S, m.name.name))) for m in extra)
    rewritten = dataclasses.replace(statement, match=dataclasses.replace(mr, measures=mr.measures + tuple(extra)), select=select)
    return rewritten, has_status


def _match_id_text(rule_id: str, canonical: str) -> str:
    """What match ids hash for a rule: its id and canonical text (stable for an unchanged rule)."""
    return f"cep-alert-rule\n{rule_id}\n{canonical}"


def _resolve(name: str, columns: Sequence[str], clause: str) -> str:
    from cep.spark_bridge.spark.batch import resolve_columns

    return resolve_columns([name], list(columns), clause=clause)[0]


def rule_payload(rule: rules_mod.Rule, *, input_types: dict[str, str], time_column: str,
                 specs: Sequence[suppress_mod.SuppressSpec] = (), session_timeout_us: int | None = None,
                 max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS) -> dict:
    """Check ``rule`` against the stream and compile it into what the workers need (raises CepError)."""
    from cep.grammar.parser import parse
    from cep.matcher.plan import CompiledQuery

    check_rule(rule)
    columns = list(input_types)
    first = rule.statement.match.order_by[0]
    try:
        ordered_by = _resolve(first.expr.column.name, columns, "ORDER BY")
    except CepSemanticError as err:
        raise CepSemanticError(err.message, code=err.code, span=first.span) from None
    if ordered_by != time_column:
        raise CepSemanticError(
            f"this rule orders by {ordered_by!r}, but the stream's event time is {time_column!r}: "
            "every rule of a rule set orders by the same event-time column",
            code="E0604", span=first.span, hint=f"ORDER BY {time_column}, or run it in a stream of its own",
        )
    # The input-dependent checks on the rule as written (errors point into its file) ...
    plan = CompiledQuery(rule.statement)
    KeyedStream(plan, columns, query_text=rule.canonical, session_timeout_us=session_timeout_us, max_pending_rows=max_pending_rows)
    plan.output_types(input_types)
    try:
        partition = [_resolve(c, columns, "PARTITION BY") for c in plan.partition_columns]
    except CepSemanticError as err:
        span = rule.statement.match.partition_by[0].span if rule.statement.match.partition_by else _S
        raise CepSemanticError(err.message, code=err.code, span=span) from None
    # ... then the statement the workers run, with cep's measures.
    rewritten, has_status = alert_statement(rule.statement)
    text = format_statement(rewritten)
    try:
        parse(text)
    except CepError as err:  # pragma: no cover - a bug in alert_statement, not in the rule
        raise CepSemanticError(f"internal error preparing the rule for alerting: {err.message}", code="E0609") from None
    return {
        "rule_id": rule.rule_id,
        "version": rule.version,
        "path": rule.path,
        "name": rule.name,
        "line": rule.line,
        "canonical": rule.canonical,
        "text": text,
        "partition": partition,
        "status_column": has_status,
        "suppress_us": suppress_mod.interval_us(rule.rule_id, rule.options, specs),
    }


def event_time_of(rule: rules_mod.Rule, columns: Sequence[str]) -> str | None:
    """The input column a rule orders by first (None if it has no usable ORDER BY)."""
    mr = rule.statement.match
    if not mr.order_by or not isinstance(mr.order_by[0].expr, ast.ColumnRef):
        return None
    try:
        return _resolve(mr.order_by[0].expr.column.name, columns, "ORDER BY")
    except CepSemanticError:
        return None


def build_rule_set(path: str, *, input_types: dict[str, str], time_column: str | None = None,
                   suppress: Sequence[suppress_mod.SuppressSpec] = (), session_timeout_us: int | None = None,
                   max_pending_rows: int = DEFAULT_MAX_PENDING_ROWS) -> tuple[dict, rules_mod.RuleSet]:
    """Load the rules at ``path`` and compile the runnable ones: (rule set payload, RuleSet with errors).

    ``time_column`` None: the first loadable rule's first ORDER BY column.
    """
    columns = list(input_types)
    if time_column is None:
        for rule in rules_mod.load_rules(path):
            time_column = event_time_of(rule, columns)
            if time_column is not None:
                break
    payloads: dict[str, dict] = {}

    def check(rule: rules_mod.Rule) -> None:
        if time_column is None:
            raise CepSemanticError("cannot tell the stream's event-time column: no rule orders by an input column "
                                   "(give the time column explicitly)", code="E0604")
        payloads[rule.rule_id] = rule_payload(rule, input_types=input_types, time_column=time_column, specs=suppress,
                                              session_timeout_us=session_timeout_us, max_pending_rows=max_pending_rows)

    ruleset = rules_mod.load_rules(path, check=check)
    payload = {
        "format": RULESET_FORMAT,
        "input_columns": columns,
        "input_types": dict(input_types),
        "time_column": time_column,
        "session_timeout_us": session_timeout_us,
        "max_pending_rows": max_pending_rows,
        "rules": [payloads[r] for r in ruleset.rules],
    }
    return payload, ruleset


# ------------------------------------------------------------------------------------ rule store


class RuleStore:
    """Rule sets published by the driver and the set each micro-batch runs with (see the module doc).

    ``<dir>/sets/<id>.json``  an immutable rule set (id: hash of its content)
    ``<dir>/current``         the id of the set new micro-batches take
    ``<dir>/batches/<n>``     the id of the set micro-batch n ran with (created once, by its first task)

    The directory must be readable and writable at the same path by the driver and every executor
    (a local path in local mode; a shared file system on a cluster).
    """

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)
        self.sets_dir = os.path.join(self.directory, "sets")
        self.batches_dir = os.path.join(self.directory, "batches")
        self.current_path = os.path.join(self.directory, "current")
        self._sets: dict[str, dict] = {}

    def publish(self, payload: dict) -> str:
        os.makedirs(self.sets_dir, exist_ok=True)
        os.makedirs(self.batches_dir, exist_ok=True)
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        set_id = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        path = os.path.join(self.sets_dir, f"{set_id}.json")
        if not os.path.exists(path):
            atomic_write(path, text)
        if self.current_id() != set_id:
            atomic_write(self.current_path, set_id)
        return set_id

    def current_id(self) -> str | None:
        try:
            with open(self.current_path, encoding="utf-8") as fh:
                return fh.read().strip() or None
        except FileNotFoundError:
            return None

    def load(self, set_id: str) -> dict:
        found = self._sets.get(set_id)
        if found is None:
            with open(os.path.join(self.sets_dir, f"{set_id}.json"), encoding="utf-8") as fh:
                found = self._sets[set_id] = json.load(fh)
        return found

    def set_for_batch(self, batch_id: int | str | None) -> str:
        """The set micro-batch ``batch_id`` runs with, fixed by whoever asks first."""
        if batch_id is None:
            current = self.current_id()
            if current is None:
                raise RuntimeError(f"no rule set published in {self.directory}")
            return current
        path = os.path.join(self.batches_dir, str(int(batch_id)))
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip()
        except FileNotFoundError:
            pass
        current = self.current_id()
        if current is None:
            raise RuntimeError(f"no rule set published in {self.directory}")
        os.makedirs(self.batches_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(current)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic and create-once: the first task of the batch decides
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()

    def batch_sets(self) -> dict[int, str]:
        if not os.path.isdir(self.batches_dir):
            return {}
        out = {}
        for name in os.listdir(self.batches_dir):
            if name.isdigit():
                with open(os.path.join(self.batches_dir, name), encoding="utf-8") as fh:
                    out[int(name)] = fh.read().strip()
        return out

    def prune(self, keep: int = 200) -> None:
        """Forget the sets of all but the last ``keep`` micro-batches (Spark re-runs at most the last one)."""
        batches = sorted(self.batch_sets())
        for batch in batches[:-keep] if len(batches) > keep else []:
            try:
                os.remove(os.path.join(self.batches_dir, str(batch)))
            except FileNotFoundError:
                pass


# ----------------------------------------------------------------------------- worker side

_COMPILED: dict[str, "_CompiledRule"] = {}
_RUNTIMES: dict[tuple[str, str], "_RuleSetRuntime"] = {}
_BATCH_SETS: dict[tuple[str, str], str] = {}
_STORES: dict[str, RuleStore] = {}


class _CompiledRule:
    """One rule ready to run in a worker: its engine and where its cep columns are in the output."""

    def __init__(self, entry: dict, ruleset: dict) -> None:
        from cep.grammar.parser import parse
        from cep.matcher.plan import CompiledQuery

        self.rule_id = entry["rule_id"]
        self.version = entry["version"]
        statement = parse(entry["text"])
        plan = CompiledQuery(statement)
        columns = list(ruleset["input_columns"])
        self.engine = KeyedStream(
            plan,
            columns,
            query_text=_match_id_text(self.rule_id, entry["canonical"]),
            session_timeout_us=ruleset.get("session_timeout_us"),
            max_pending_rows=ruleset.get("max_pending_rows") or DEFAULT_MAX_PENDING_ROWS,
            dedup_key=ruleset.get("dedup_key"),
            dedup_horizon_us=ruleset.get("dedup_horizon_us") or 0,
        )
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

    def rule(self, rule_id: str) -> _CompiledRule | None:
        entry = self.entries.get(rule_id)
        if entry is None:
            return None
        cache_key = json.dumps([entry, self.payload["input_columns"], self.payload["input_types"],
                                self.payload.get("session_timeout_us"), self.payload.get("max_pending_rows")], sort_keys=True)
        compiled = _COMPILED.get(cache_key)
        if compiled is None:
            compiled = _COMPILED[cache_key] = _CompiledRule(entry, self.payload)
        return compiled


def _task_batch_id() -> str | None:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover
        return None
    context = TaskContext.get()
    if context is None:
        return None
    value = context.getLocalProperty(BATCH_ID_PROPERTY)
    return value if value not in (None, "") else None


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
    from cep.matcher.rows.tables import pandas_to_columns

    values = pandas_to_columns(pdf, columns)
    cache: dict[tuple, str] = {}
    out = []
    for row in zip(*[values[c] for c in columns]):
        try:
            text = cache.get(row)
        except TypeError:  # an unhashable value (an array)
            text = None
        if text is None:
            text = json.dumps({c: jsonable(v) for c, v in zip(columns, row)}, ensure_ascii=False)
            try:
                cache[row] = text
            except TypeError:
                pass
        out.append(text)
    return out


def _spec_id(partition: Sequence[str]) -> str:
    """The grouping tag of a partition spec: the JSON list of its PARTITION BY columns."""
    return json.dumps(list(partition))


def _scalar(value: Any) -> Any:
    """One pandas cell as the batch path's Python value (what ``pandas_to_columns`` gives)."""
    if value is None:
        return None
    if hasattr(value, "to_pydatetime"):
        try:
            import pandas as pd

            if value is pd.NaT:
                return None
        except ImportError:  # pragma: no cover
            pass
        return value
    if type(value).__module__ == "numpy":
        if getattr(value, "dtype", None) is not None and value.dtype.kind in "mM":
            import pandas as pd

            return None if pd.isna(value) else pd.Timestamp(value)
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


class _Explode:
    """``mapInPandas``: each input row once per partition spec of the micro-batch's rule set, tagged with
    the spec and the row's partition key under it. Rules with the same PARTITION BY share the copy.
    With ``reject`` (the reason column of ``streaming.mark_bad_rows``), a bad row goes once, to
    ``BAD_SPEC``, and to no rule."""

    def __init__(self, store_dir: str, columns: Sequence[str], reject: str | None = None) -> None:
        self.store_dir = store_dir
        self.columns = list(columns)
        self.reject = reject

    def __call__(self, frames: Iterator["Any"]) -> Iterator["Any"]:
        import pandas as pd

        runtime = None
        for pdf in frames:
            if not len(pdf):
                continue
            if runtime is None:
                runtime = runtime_for(self.store_dir)
            pieces = []
            if self.reject is not None and pdf[self.reject].notna().any():
                bad = pdf[self.reject].notna()
                piece = pdf.loc[bad, self.columns]
                piece.insert(0, _PKEY, "{}")
                piece.insert(0, _SPEC, BAD_SPEC)
                pieces.append(piece)
                pdf = pdf[~bad]
            for spec, partition in runtime.partitions.items():
                piece = pdf[self.columns].copy(deep=False)
                piece.insert(0, _PKEY, _key_strings(pdf, partition))
                piece.insert(0, _SPEC, spec)
                pieces.append(piece)
            if pieces:
                yield pieces[0] if len(pieces) == 1 else pd.concat(pieces, ignore_index=True)


# One key's state (a dict by rule id, encoded with state_codec into the one binary state column):
_VERSION, _BLOB, _LIVE, _PENDING, _LAST_ALERT, _TIMER = range(6)


class _KeyRows:
    """One partition key's rows within a bucket's frame: columns converted once for the whole frame
    (on first use), then sliced for the key."""

    def __init__(self, pdf, cache: dict, times: list, indices: list[int] | None) -> None:
        self.pdf, self.cache, self.indices = pdf, cache, indices
        self.times = times if indices is None else [times[i] for i in indices]
        self.first = 0 if indices is None else indices[0]

    def columns(self, names: Sequence[str]) -> dict[str, list]:
        from cep.matcher.rows.tables import pandas_to_columns

        missing = [c for c in names if c not in self.cache]
        if missing:
            self.cache.update(pandas_to_columns(self.pdf, missing))
        if self.indices is None:
            return self.cache
        return {name: [self.cache[name][i] for i in self.indices] for name in names}

    def key_values(self, names: Sequence[str]) -> tuple:
        return tuple(_scalar(self.pdf[c].iat[self.first]) for c in names)


class _AlertStep:
    """``applyInPandasWithState``: one (partition spec, bucket of partition keys) in one micro-batch.
    Each key of the bucket with rows, or whose timer the watermark reached, runs every rule of the
    micro-batch's set with that PARTITION BY: each rule's ``KeyedStream`` gets the key's rows (or, on a
    timer call, the rules whose own deadline the watermark reached are called). The bucket's state is a
    ``buckets.KeyTable`` of each key's state (spark_bridge/engine/key_table.py says why keys share a call)."""

    def __init__(self, store_dir: str, housekeeping_us: int, key_buckets: int, passthrough: Sequence[str] = ()) -> None:
        self.store_dir = store_dir
        self.housekeeping_us = housekeeping_us
        self.key_buckets = key_buckets
        self.passthrough = tuple(passthrough)  # the columns of bad rows (BAD_SPEC), NULL on the others

    def __call__(self, key, frames, state):
        import pandas as pd

        spec = str(key[0])
        if spec == BAD_SPEC:  # bad input rows: out as they came, with no state
            yield self._frame([], [], bad=pd.concat(list(frames), ignore_index=True), passthrough=self.passthrough)
            return
        runtime = runtime_for(self.store_dir)
        watermark_ms = state.getCurrentWatermarkMs()
        watermark_us = watermark_ms * 1000
        parts = [frame for frame in frames if len(frame)]
        table = KeyTable.decode(state.get[0] if state.exists else None, self.key_buckets)
        alerts: list[tuple] = []
        stats: dict[tuple[str, str], dict] = {}
        emitted = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
        groups: dict[tuple, list[int]] = {}
        calls: list[tuple[tuple, _KeyRows | None]] = []
        if parts:
            pdf = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
            times = [None if us == _NULL_TIME else us for us in pdf[_EVENT_US].tolist()]
            groups = split_by_key([(k,) for k in pdf[_PKEY].tolist()])
            cache: dict = {}
            whole = len(groups) == 1
            calls = [(pkey, _KeyRows(pdf, cache, times, None if whole else indices)) for pkey, indices in groups.items()]
        calls += [(pkey, None) for pkey in table.due(watermark_us, groups)]
        for pkey, rows in calls:
            blob = table.states.get(pkey)
            new = self._key_call(runtime, spec, pkey[0], rows, codec.decode(blob) if blob else {}, watermark_us, emitted, alerts, stats)
            if new:
                timers = [e[_TIMER] for e in new.values() if e[_TIMER] is not None]
                # No deadline of its own: wake up once per housekeeping interval, so that the state of a
                # rule changed or removed later is reclaimed even if the key never gets another row.
                table.put(pkey, codec.encode(new), min(timers) if timers else watermark_us + self.housekeeping_us)
            else:
                table.put(pkey, None, None)
        if table:
            state.update((table.encode(),))
            state.setTimeoutTimestamp(spark_timeout_ms(table.next_timer(), watermark_ms))
        elif state.exists:
            state.remove()
        yield self._frame(alerts, [(rule_id, version, counts) for (rule_id, version), counts in stats.items()],
                          passthrough=self.passthrough)

    def _key_call(self, runtime, spec: str, pkey: str, rows: _KeyRows | None, old: dict, watermark_us: int, emitted,
                  alerts: list, stats_by_rule: dict) -> dict:
        """Every rule of ``spec`` for one key: appends its alerts, adds its counts per rule; returns the
        key's new state (a dict by rule id)."""

        def counts_for(rule_id: str, version: str) -> dict:
            found = stats_by_rule.get((rule_id, version))
            if found is None:
                found = stats_by_rule[(rule_id, version)] = dict.fromkeys(STAT_NAMES, 0)
            return found

        new: dict = {}
        wanted = runtime.rules_by_spec.get(spec, [])
        for rule_id, entry in old.items():  # rules removed, or changed: their state here goes
            rule = runtime.rule(rule_id) if rule_id in wanted else None
            if rule is None or rule.version != entry[_VERSION]:
                dropped = counts_for(rule_id, entry[_VERSION])
                dropped["dropped_live"] += entry[_LIVE]
                dropped["dropped_pending"] += entry[_PENDING]
                dropped["d_live"] -= entry[_LIVE]
                dropped["d_pending"] -= entry[_PENDING]
                dropped["d_keys"] -= 1

        for rule_id in wanted:
            rule = runtime.rule(rule_id)
            entry = old.get(rule_id)
            if entry is not None and entry[_VERSION] != rule.version:
                entry = None
            if rows is None:
                if entry is None:
                    continue
                timer = entry[_TIMER]
                if timer is None or watermark_us < timer:  # not this rule's turn: keep it as it is
                    new[rule_id] = entry
                    continue
            engine = rule.engine
            columns = key_values = None
            if rows is not None:
                columns = rows.columns(engine.read_columns)
                key_values = rows.key_values(rule.partition)
            result = engine.process(entry[_BLOB] if entry is not None else None, key_values, columns,
                                    rows.times if rows is not None else None, watermark_us, timed_out=rows is None)
            stats = counts_for(rule_id, rule.version)
            last_alert = entry[_LAST_ALERT] if entry is not None else None
            for row, match_id in zip(result.rows, result.match_ids):
                status = (row[rule.status_index] if rule.status_index is not None else None) or "MATCHED"
                first_time, last_time = row[rule.first_index], row[rule.last_index]
                moment = last_time if last_time is not None else first_time
                event_us = codec.datetime_to_micros(moment) if moment is not None else None
                suppressed, last_alert = rule.throttle.decide(last_alert, event_us)
                measures = json.dumps({name: jsonable(row[i]) for i, name in rule.measures}, ensure_ascii=False)
                alerts.append((rule_id, rule.version, match_id, status, pkey, first_time, last_time, measures, emitted, suppressed))
                stats[_STATUS_STAT.get(status, "matched")] += 1
                stats["suppressed"] += int(suppressed)
            engine_stats = result.stats
            live = int(engine_stats.get("live_matches", 0)) if result.state is not None else 0
            pending = int(engine_stats.get("pending_rows", 0)) if result.state is not None else 0
            for name in ("events_in", "late_rows", "timers_fired", "cap_hits", "sessions_closed", "duplicates_dropped"):
                stats[name] += int(engine_stats.get(name, 0))
            stats["d_live"] += live - (entry[_LIVE] if entry is not None else 0)
            stats["d_pending"] += pending - (entry[_PENDING] if entry is not None else 0)
            remember_until = rule.throttle.open_until(last_alert)
            if result.state is not None or (remember_until is not None and remember_until > watermark_us):
                timer = result.timer_us if result.state is not None else remember_until
                new[rule_id] = [rule.version, result.state, live, pending, last_alert, timer]
                stats["d_keys"] += 0 if entry is not None else 1
            else:
                stats["d_keys"] -= 1 if entry is not None else 0
        return new

    @staticmethod
    def _frame(alerts: list[tuple], stats_rows: list[tuple[str, str, dict]], *, bad=None, passthrough: Sequence[str] = ()):
        """The output: ``alerts`` (KIND_MATCH), then one statistics row per rule (KIND_STATS), or the
        rows of ``bad`` (KIND_BAD, their ``passthrough`` columns kept; NULL on the other kinds)."""
        import numpy as np
        import pandas as pd

        stats_rows = [s for s in stats_rows if any(s[2].values())]
        n_alerts, n_stats = len(alerts), len(stats_rows) + (len(bad) if bad is not None else 0)

        def objects(values):
            column = np.empty(len(values), dtype=object)
            column[:] = values
            return column

        def times(values):
            return np.array(values, dtype="datetime64[us]").astype("datetime64[ns]")

        pad = [None] * n_stats
        if n_alerts:
            columns = list(zip(*alerts))
            data = {name: objects(list(values) + pad) for name, values in zip(ALERT_NAMES, columns)}
            for name in ("first_event_time", "last_event_time", "emit_time"):
                data[name] = times(list(columns[ALERT_NAMES.index(name)]) + pad)
            data["suppressed"] = np.array([bool(v) for v in columns[-1]] + [False] * n_stats, dtype=bool)
            data["rule_id"] = objects(list(columns[0]) + [s[0] for s in stats_rows])
            data["rule_version"] = objects(list(columns[1]) + [s[1] for s in stats_rows])
        else:
            nothing = objects(pad)
            no_time = np.full(n_stats, np.datetime64("NaT"), dtype="datetime64[ns]")
            data = {name: nothing for name in ALERT_NAMES}
            data.update({name: no_time for name in ("first_event_time", "last_event_time", "emit_time")})
            data["suppressed"] = np.zeros(n_stats, dtype=bool)
            data["rule_id"] = objects([s[0] for s in stats_rows])
            data["rule_version"] = objects([s[1] for s in stats_rows])
        if bad is not None:
            data["rule_id"] = data["rule_version"] = objects(pad)
            data[_KIND] = np.full(n_stats, KIND_BAD, dtype="int32")
            data[_STATS] = objects(pad)
            data.update({name: objects(bad[name].tolist()) for name in passthrough})
            return pd.DataFrame(data, copy=False)
        data[_KIND] = np.array([KIND_MATCH] * n_alerts + [KIND_STATS] * n_stats, dtype="int32")
        data[_STATS] = objects([None] * n_alerts + [[int(s[2][name]) for name in STAT_NAMES] for s in stats_rows])
        data.update({name: objects([None] * (n_alerts + n_stats)) for name in passthrough})
        return pd.DataFrame(data, copy=False)


_STATUS_STAT = {"TIMEOUT": "timeouts", "ABSENCE": "absences", "MATCHED": "matched"}


