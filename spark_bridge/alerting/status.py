"""``<checkpoint>/status.json``: what a rule set's stream did, per rule and per sink, kept right across
restarts and ``kill -9``.

Counts come from the **journal** (``sinks/lanes.py``): the matching query writes one record per
micro-batch (each rule's statistics, bad rows by reason, late rows), a delivery lane one per micro-batch
it delivered and per dead letter it redelivered. ``StatusBook.fold`` adds a record once it is final (its
micro-batch committed by Spark, its outbox entry or dead letter gone), remembers its name, and the
caller deletes the record only after the status is written: a crash in between folds nothing twice
(the name is remembered) and loses nothing (the record is still there). Nothing is counted from
Spark's in-memory progress, which a ``kill -9`` loses.

What the file holds: ``state`` (running, stopped, failed), ``pid``/``host`` of the process and
``heartbeat_at`` (rewritten every poll, about a second: ``cep status`` calls a stream whose process is gone
or whose heartbeat is old ``dead``), ``last_batch`` and ``last_progress_at`` (Spark's last trigger),
``rules`` (per rule and version: counts, gauges, errors with their time), ``sinks`` (per sink: delivered,
dead-lettered, retries, redelivered, its queue and dead letters, its last error), ``bad_rows`` by reason,
``late_rows`` (input rows late for at least one rule: a row late for three rules counts once here and
once for each of them), ``events`` (the last 50 log lines).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import threading
import time
from collections.abc import Container, Iterable
from typing import Any

from cep.spark_bridge.alerting.rule_set import GAUGES, STAT_NAMES, STATUS_FORMAT
from cep.spark_bridge.sinks.base import atomic_write, set_aside

__all__ = [
    "StatusBook",
    "batch_entry",
    "new_progress",
    "now_iso",
    "operator_state_bytes",
    "progress_get",
    "read_status",
    "rule_rows",
    "ERROR_TTL_S",
]

# Imported inside functions: pyspark (optional, slow to import), only where a running query is read.

ERROR_TTL_S = 3600.0  # a delivery error stays listed this long, unless the sink has recovered before
FOLDED_KEEP = 4000  # journal names remembered (a re-run micro-batch's record must not count twice)
EVENTS_KEEP = 50
DAMAGED_KEEP = 20  # damaged files listed in the status; each is also a log line


def now_iso(epoch: float | None = None) -> str:
    moment = _dt.datetime.now(_dt.UTC) if epoch is None else _dt.datetime.fromtimestamp(epoch, _dt.UTC)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def epoch_seconds(text: Any) -> float | None:
    """Seconds since the epoch of one of the status file's ISO times (``Z`` or an offset; naive is UTC), or None."""
    if not text:
        return None
    try:
        moment = _dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)).timestamp()


def backup_path(path: str) -> str:
    """The second copy of ``status.json``, written with it: what the counts are rebuilt from when one is damaged."""
    return os.path.join(os.path.dirname(path), "status.backup.json")


def _read_json(path: str) -> dict:
    """``path`` as a JSON object: ``FileNotFoundError`` when absent, ``ValueError`` when damaged."""
    with open(path, "rb") as fh:
        found = json.loads(fh.read().decode("utf-8"))
    if not isinstance(found, dict):
        raise ValueError("not a JSON object")
    return found


def read_status(checkpoint: str) -> dict:
    """The status file; when it is damaged, its backup, with ``damaged_status`` saying so (nothing is renamed:
    the stream sets the file aside when it next starts)."""
    path = os.path.join(checkpoint, "status.json")
    try:
        return _read_json(path)
    except ValueError as exc:
        backup = _read_json(backup_path(path))
        return {
            **backup,
            "damaged_status": f"{path} is damaged ({exc}); this is its backup {backup_path(path)}, "
            f"written {backup.get('updated_at')}",
        }


class StatusBook:
    """The status of one stream, in memory and in ``path`` (and its backup); every change under its lock."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.damage: list[str] = []  # what was set aside while loading, for the stream's log
        self.status = self._load()
        for message in self.damage:
            self.event(message, "warning")

    def _load(self) -> dict:
        """The status file, else its backup (one of them damaged: set aside, named in ``damage``), else a new one.
        Both copies hold the same counts and the same folded journal names, and a journal record is deleted only
        once both are written: either copy alone rebuilds the counts exactly."""
        for path in (self.path, backup_path(self.path)):
            try:
                status = _read_json(path)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                aside = set_aside(path)
                self.damage.append(f"{path} is damaged ({type(exc).__name__}: {exc}): set aside as {aside}")
                continue
            if self.damage:
                self.damage.append(f"the counts were rebuilt from {path} (written {status.get('updated_at')})")
            if status.get("format") == STATUS_FORMAT:
                status.setdefault("folded", [])
                status.setdefault("damaged", []).extend({"time": now_iso(), "message": m} for m in self.damage)
                return status
            break
        if self.damage:
            self.damage.append("no readable status: every count starts again from 0")
        return {
            "format": STATUS_FORMAT,
            "rules": {},
            "errors": [],
            "events": [],
            "sinks": {},
            "folded": [],
            "bad_rows": {},
            "late_rows": 0,
            "batches": 0,
            "damaged": [{"time": now_iso(), "message": m} for m in self.damage],
        }

    def write(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        with self.lock:
            now = now_iso()
            self.status.update(
                {"updated_at": now, "heartbeat_at": now, "pid": os.getpid(), "host": socket.gethostname()}
            )
            text = json.dumps(self.status, indent=1, sort_keys=True, default=str)
        atomic_write(backup_path(self.path), text)
        atomic_write(self.path, text)

    def damaged(self, message: str, path: str) -> None:
        """A bookkeeping file set aside: listed in the status (the last few) and logged by the caller."""
        with self.lock:
            found = self.status.setdefault("damaged", [])
            found.append({"time": now_iso(), "message": message, "path": path})
            del found[:-DAMAGED_KEEP]

    def event(self, message: str, level: str = "info") -> None:
        with self.lock:
            events = self.status.setdefault("events", [])
            events.append({"time": now_iso(), "level": level, "message": message})
            del events[:-EVENTS_KEEP]

    # ---------------------------------------------------------------------------------- rules

    def rule(self, rule_id: str) -> dict:
        return self.status["rules"].setdefault(rule_id, {"versions": {}, "errors": [], "active": False})

    def version(self, rule: dict, version: str) -> dict:
        found = rule["versions"].get(version)
        if found is None:
            found = rule["versions"][version] = {name: 0 for name in STAT_NAMES if not name.startswith("d_")}
            found.update(
                {"live_partial_matches": 0, "pending_rows": 0, "keys": 0, "since": now_iso(), "last_batch_time": None}
            )
        return found

    # ---------------------------------------------------------------------------------- the journal

    def folded(self, name: str) -> bool:
        return name in self.status.get("folded", ())

    def fold(self, name: str, record: dict) -> list[str]:
        """Add one journal record (once per name); returns the log lines it calls for."""
        with self.lock:
            if self.folded(name):
                return []
            folded = self.status.setdefault("folded", [])
            folded.append(name)
            del folded[:-FOLDED_KEEP]
            kind = record.get("kind")
            if kind == "batch":
                return self._fold_batch(record)
            if kind in ("deliver", "redeliver"):
                self._fold_delivery(record)
            return []

    def _fold_batch(self, record: dict) -> list[str]:
        batch, moment = record.get("batch"), record.get("time")
        dropped: dict[tuple[str, str], list[int]] = {}
        for rule_id, version_id, stats in record.get("calls") or []:
            rule = self.rule(rule_id)
            version = self.version(rule, version_id)
            values = dict(zip(STAT_NAMES, stats))
            for name, value in values.items():
                target = GAUGES.get(name, name)
                version[target] = version.get(target, 0) + int(value)
            if values.get("events_in") or values.get("matched") or values.get("timeouts") or values.get("absences"):
                version["last_batch_time"] = rule["last_batch_time"] = moment
            if values.get("dropped_live") or values.get("dropped_pending"):
                total = dropped.setdefault((rule_id, version_id), [0, 0, 0])
                total[0] += int(values["dropped_live"])
                total[1] += int(values["dropped_pending"])
                total[2] += 1
        counts = self.status.setdefault("bad_rows", {})
        for reason, count in (record.get("bad_rows") or {}).items():
            counts[reason] = counts.get(reason, 0) + int(count)
        self.status["late_rows"] = self.status.get("late_rows", 0) + int(record.get("late_rows") or 0)
        self.status["batches"] = self.status.get("batches", 0) + 1
        events = sum(int(dict(zip(STAT_NAMES, stats)).get("events_in", 0)) for _, _, stats in record.get("calls") or [])
        if events or record.get("bad_rows") or record.get("late_rows"):  # not a clock row's micro-batch only
            self.status["data_batches"] = self.status.get("data_batches", 0) + 1
        self.status["last_folded_batch"] = max(int(batch), int(self.status.get("last_folded_batch", -1)))
        messages = []
        for (rule_id, version_id), (live, pending, keys) in sorted(dropped.items()):
            left = self.status["rules"][rule_id]["versions"][version_id]
            remaining = f"; {left['keys']} keys still to drop theirs" if left.get("keys", 0) > 0 else "; none left"
            messages.append(
                f"rule {rule_id} version {version_id} (changed or removed): dropped {live} partial matches and "
                f"{pending} waiting rows on {keys} keys in micro-batch {batch}{remaining}"
            )
        return messages

    def _fold_delivery(self, record: dict) -> None:
        sink = self.status.setdefault("sinks", {}).setdefault(record["sink"], {})
        sink["label"] = record.get("label") or sink.get("label")
        delivered = sum(int(n) for n in (record.get("delivered") or {}).values())
        dead = sum(int(n) for n in (record.get("dead_lettered") or {}).values())
        sink["delivered"] = sink.get("delivered", 0) + delivered
        sink["dead_lettered"] = sink.get("dead_lettered", 0) + dead
        sink["retries"] = sink.get("retries", 0) + int(record.get("retries") or 0)
        if record.get("kind") == "redeliver":
            sink["redelivered"] = sink.get("redelivered", 0) + delivered
        for rule_id, count in (record.get("delivered") or {}).items():
            per_sink = self.rule(rule_id).setdefault("delivered", {})
            per_sink[record["sink"]] = per_sink.get(record["sink"], 0) + int(count)
        for rule_id, count in (record.get("dead_lettered") or {}).items():
            per_sink = self.rule(rule_id).setdefault("dead_lettered", {})
            per_sink[record["sink"]] = per_sink.get(record["sink"], 0) + int(count)
        when = record.get("time") or now_iso()
        for error in record.get("errors") or []:
            entry = {
                "time": when,
                "sink": record["sink"],
                "label": sink.get("label"),
                "message": error["message"],
                "expires": now_iso((epoch_seconds(when) or time.time()) + ERROR_TTL_S),
            }
            for rule_id in error.get("rules") or []:
                errors = self.rule(rule_id).setdefault("delivery_errors", [])
                errors.append(entry)
                del errors[:-10]
            sink.setdefault("errors", []).append(entry)
            del sink["errors"][:-10]

    # ---------------------------------------------------------------------------------- sinks

    def set_sinks(self, snapshot: dict[str, dict], letters_by_rule: dict[str, set[str]]) -> None:
        """The lanes' live state; delivery errors that expired, or whose sink recovered, go."""
        now = time.time()
        with self.lock:
            sinks = self.status.setdefault("sinks", {})
            for key, live in snapshot.items():
                entry = sinks.setdefault(key, {})
                entry.update(
                    {k: v for k, v in live.items() if k not in ("last_error_at", "last_success_at", "failing_since")}
                )
                for name in ("last_error_at", "last_success_at", "failing_since"):
                    entry[name] = now_iso(live[name]) if live.get(name) else None
            for rule_id, rule in self.status.get("rules", {}).items():
                kept = []
                for error in rule.get("delivery_errors", []):
                    expired = (epoch_seconds(error.get("expires")) or 0) < now
                    healthy = (
                        error.get("sink") in snapshot
                        and not snapshot[error["sink"]].get("failing_since")
                        and rule_id not in letters_by_rule.get(error["sink"], set())
                    )
                    if not expired and not healthy:
                        kept.append(error)
                rule["delivery_errors"] = kept
            for key, entry in sinks.items():
                live = snapshot.get(key)
                recovered = live is not None and not live.get("failing_since") and not live.get("dead_letters_waiting")
                entry["errors"] = (
                    []
                    if recovered
                    else [e for e in entry.get("errors", []) if (epoch_seconds(e.get("expires")) or 0) >= now]
                )


def rule_rows(status: dict) -> list[dict]:
    """One row per rule for ``cep status``: the current version's numbers."""
    rows = []
    for rule_id, rule in sorted(status.get("rules", {}).items()):
        version = rule.get("version") or (list(rule.get("versions", {}))[-1] if rule.get("versions") else None)
        numbers = rule.get("versions", {}).get(version or "", {})
        stale = sum(v.get("live_partial_matches", 0) for k, v in rule.get("versions", {}).items() if k != version)
        errors = list(rule.get("errors", [])) + [_delivery_error_text(e) for e in rule.get("delivery_errors", [])]
        failed = rule.get("failed")
        if failed and not rule.get("active"):
            errors.insert(
                0,
                f"failed at run time{on_key(failed.get('key'))} at {failed.get('since')} "
                f"(quarantined until its file changes): {failed.get('error')}",
            )
        earlier = sum(
            v.get("matched", 0) + v.get("timeouts", 0) + v.get("absences", 0)
            for k, v in rule.get("versions", {}).items()
            if k != version
        )
        late = sum(v.get("late_rows", 0) for v in rule.get("versions", {}).values())
        rows.append(
            {
                "rule": rule_id,
                "earlier_matches": earlier,
                "state": "active"
                if rule.get("active")
                else "failed"
                if failed
                else ("error" if rule.get("errors") else "removed"),
                "version": version or "-",
                "matches": numbers.get("matched", 0) + numbers.get("timeouts", 0) + numbers.get("absences", 0),
                "timeouts": numbers.get("timeouts", 0),
                "absences": numbers.get("absences", 0),
                "suppressed": numbers.get("suppressed", 0),
                "live": numbers.get("live_partial_matches", 0),
                "stale_live": stale,
                "pending": numbers.get("pending_rows", 0),
                "late": late,
                "events": numbers.get("events_in", 0),
                "delivered": dict(rule.get("delivered") or {}),
                "dead_lettered": dict(rule.get("dead_lettered") or {}),
                "duplicates_dropped": numbers.get("duplicates_dropped", 0),
                "last_batch_time": rule.get("last_batch_time"),
                "errors": errors,
            }
        )
    return rows


def on_key(key: Any) -> str:
    """`` on key K`` of a rule's failure; nothing when no one key failed (a column-wise rule fails for all the
    keys of a call, and its error names the partition)."""
    return "" if key is None else f" on key {key}"


def _delivery_error_text(error: Any) -> str:
    if isinstance(error, str):
        return error
    return f"{error.get('time')} {error.get('label') or error.get('sink')}: {error.get('message')}"


def prune_versions(entry: dict, current: str, keep: int = 3) -> None:
    """Keep the status file small: the current version, versions whose state is still being dropped,
    and the ``keep`` most recent others."""
    versions = entry.get("versions", {})
    old = [
        (v.get("since") or "", k)
        for k, v in versions.items()
        if k != current and not (v.get("live_partial_matches") or v.get("pending_rows") or v.get("keys"))
    ]
    for _, key in sorted(old)[:-keep] if len(old) > keep else []:
        del versions[key]


def sink_rows(status: dict) -> Iterable[tuple[str, dict]]:
    return sorted((status.get("sinks") or {}).items())


def progress_get(progress: Any, name: str, default=None):
    """A field of Spark's query progress or status (a dict, or pyspark's object), ``default`` when missing."""
    if isinstance(progress, dict):
        return progress.get(name, default)
    value = getattr(progress, name, None)
    if value is None and hasattr(progress, "get"):
        try:
            value = progress.get(name)
        except Exception:  # noqa: BLE001
            value = None
    return default if value is None else value


def new_progress(query: Any, seen: Container[tuple[int, str]]) -> list:
    """The progress reports of a streaming ``query`` whose (batch id, timestamp) is not in ``seen``, oldest first.

    Spark keeps the last ``spark.sql.streaming.numRecentProgressUpdates`` (100) reports, and pyspark's
    ``recentProgress`` turns every one of them into JSON and back, two Py4J round trips each: polled once a
    second, that is 200 round trips and 100 JSON documents a second, in the driver and its JVM all day, for the
    one or two micro-batches that are new. This walks the JVM's list from the newest report back to the first
    one already seen and converts only those before it (a query without a JVM object, such as Spark Connect's,
    gives its whole ``recentProgress``, filtered)."""
    java_query = getattr(query, "_jsq", None)
    if java_query is None:
        return [p for p in query.recentProgress if _progress_key(p) not in seen]
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    reports = java_query.recentProgress()
    found = []
    for index in range(len(reports) - 1, -1, -1):
        report = reports[index]
        if (int(report.batchId()), str(report.timestamp())) in seen:
            break
        found.append(StreamingQueryProgress.fromJson(json.loads(report.json())))
    return found[::-1]


def _progress_key(progress: Any) -> tuple[int, str]:
    return int(progress_get(progress, "batchId", -1)), str(progress_get(progress, "timestamp"))


# What Spark's state store providers say of an operator's state, in their custom metrics (summed over its
# partitions in the progress). Their ``memoryUsedBytes`` is memory, and not the same memory: the HDFS-backed
# store's is the heap its loaded versions take (the current one and those kept for a re-run micro-batch);
# RocksDB's is its native memory (memtables, block cache, index and filter blocks), which stays under the
# ``boundedMemoryUsage`` cap (``$CEP_ROCKSDB_MEMORY_MB``) whatever the state grows to.
HDFS_STATE_METRIC = "stateOnCurrentVersionSizeBytes"  # the current version's maps, as estimated on the heap
ROCKSDB_SST_METRIC = "rocksdbSstFileSize"  # the state as of RocksDB's last flush, on disk (compressed)
# The memtables: the changes since that flush, in memory. Spark reports no memtable size of its own; under a
# bounded memory (cep's default) RocksDB's write buffer manager charges the memtables to the shared block
# cache as pinned entries, and this is that cache's pinned memory (with the level-0 index and filter blocks,
# small beside them).
ROCKSDB_MEMTABLE_METRIC = "rocksdbPinnedBlocksMemoryUsage"


def operator_state_bytes(operator: Any) -> int:
    """The bytes of a stateful operator's state, from its progress report (``stateOperators[i]``), whichever
    provider holds it: the HDFS-backed store's current version, or RocksDB's SST files and memtables; for
    another provider, the memory it reports."""
    custom = progress_get(operator, "customMetrics", {}) or {}
    if ROCKSDB_SST_METRIC in custom:
        return int(custom[ROCKSDB_SST_METRIC] or 0) + int(custom.get(ROCKSDB_MEMTABLE_METRIC) or 0)
    if HDFS_STATE_METRIC in custom:
        return int(custom[HDFS_STATE_METRIC] or 0)
    return int(progress_get(operator, "memoryUsedBytes", 0) or 0)


def batch_entry(progress: Any, foreach_batch: dict | None) -> dict:
    """``last_batch`` of the status: a micro-batch as Spark's progress reports it, with ``foreach_batch``:
    the steps of ``foreachBatch`` inside ``addBatch`` and the Spark jobs it started (``batch_cost.py``)."""
    durations = progress_get(progress, "durationMs", {}) or {}
    operators = progress_get(progress, "stateOperators", []) or []
    return {
        "id": int(progress_get(progress, "batchId")),
        "time": progress_get(progress, "timestamp"),
        "input_rows": int(progress_get(progress, "numInputRows", 0) or 0),
        "duration_ms": durations.get("triggerExecution"),
        # Spark's parts of it (addBatch, latestOffset, queryPlanning, walCommit, commitOffsets...)
        "durations_ms": {str(k): int(v) for k, v in dict(durations).items()},
        "watermark": (progress_get(progress, "eventTime", {}) or {}).get("watermark"),
        "state_bytes": sum(operator_state_bytes(op) for op in operators),
        "state_memory_bytes": sum(int(progress_get(op, "memoryUsedBytes", 0) or 0) for op in operators),
        "state_rows": sum(int(progress_get(op, "numRowsTotal", 0) or 0) for op in operators),
        "foreach_batch": foreach_batch,
    }
