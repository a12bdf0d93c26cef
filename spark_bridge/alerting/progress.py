"""Spark's progress of a rule set's matching query, folded into ``status.json`` and the service's health.

Spark reports each micro-batch it ran in ``query.recentProgress`` (rows read, durations, the watermark, the state
operator's size) and whether a trigger is running in ``query.status``. ``QueryProgress.fold`` turns what is new
there into the status's ``last_batch`` and ``spark_query``, the liveness gauges ``/healthz`` and ``/readyz`` read
(``metrics.HealthCheck``), and a call of every observer (the Prometheus metrics) per new micro-batch. It joins
each micro-batch with the ``foreachBatch``'s own step costs (``BatchCost``), noted when the micro-batch ran.

Nothing counted here is kept across a restart: counts come from the journal (``status.py``); a lost progress
loses only these gauges.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cep.spark_bridge.alerting.status import (
    StatusBook,
    batch_entry,
    epoch_seconds,
    new_progress,
    now_iso,
    progress_get,
)

__all__ = ["QueryProgress"]

# The foreachBatch costs kept for the progress that reports each micro-batch (it comes a moment after).
COSTS_KEPT = 64
# Micro-batches remembered as folded: Spark keeps its 100 most recent progresses by default, so a progress seen
# once is never folded twice while it is still listed.
SEEN_KEPT = 500


class QueryProgress:
    """What the driver knows of the running matching query: its health gauges, the micro-batches folded so far,
    and the micro-batch a crash cut short (``recovering``), announced once it has run again."""

    def __init__(self, book: StatusBook, event: Callable[[str], None]) -> None:
        self.book = book
        self.event = event
        self.observers: list[Callable[[dict], None]] = []  # called with each new micro-batch's numbers (metrics)
        self.health: dict[str, Any] = {
            "loop_at": None,
            "query_active": False,
            "last_progress_at": None,
            "waiting_for_data": False,
            "stopping": False,
        }
        self.recovering: int | None = None
        self._seen: set[tuple[int, str]] = set()
        self._costs: dict[int, dict] = {}  # foreachBatch's own costs by batch id (BatchCost)

    def note_cost(self, batch_id: int, cost: dict) -> None:
        """Keep a micro-batch's ``BatchCost`` until its progress is folded (the newest few only)."""
        self._costs[batch_id] = cost
        for old in sorted(self._costs)[:-COSTS_KEPT]:
            self._costs.pop(old, None)

    def cost_of(self, batch_id: int) -> dict | None:
        """The ``BatchCost`` of micro-batch ``batch_id``, while it is kept (bench/driver_batch_cost.py reads it)."""
        return self._costs.get(batch_id)

    def fold(self, query, gauges: Callable[[], dict] | None = None) -> None:
        """Spark's progress of ``query``: the last micro-batch, the watermark, the state size (or ``gauges()``,
        the driver layout's own state), and each new micro-batch for the observers."""
        try:
            progresses = new_progress(query, self._seen)
            status = query.status
        except Exception:  # noqa: BLE001 - a stopped query or a stopping JVM: nothing to fold
            return
        self.health["query_active"] = bool(query.isActive)
        trigger_active = bool(progress_get(status, "isTriggerActive", False))
        data_available = bool(progress_get(status, "isDataAvailable", False))
        self.health["waiting_for_data"] = not trigger_active and not data_available
        self._record_query_state(trigger_active)
        for progress in progresses:
            batch = progress_get(progress, "batchId")
            stamp = progress_get(progress, "timestamp")
            if batch is None or (int(batch), str(stamp)) in self._seen:
                continue
            self._seen.add((int(batch), str(stamp)))
            moment = epoch_seconds(stamp)
            rows = int(progress_get(progress, "numInputRows", 0) or 0)
            durations = progress_get(progress, "durationMs", {}) or {}
            if moment is not None:  # when the trigger ended
                ended = moment + float(durations.get("triggerExecution") or 0) / 1000.0
                self.health["last_progress_at"] = max(ended, self.health["last_progress_at"] or 0.0)
            if not durations.get("addBatch") and not rows:
                continue  # an idle trigger: no micro-batch ran
            info = batch_entry(progress, self._costs.get(int(batch)))
            if gauges is not None:  # no Spark state operator: the driver's state (its bytes, buckets)
                info.update(gauges())
            with self.book.lock:
                last = self.book.status.get("last_batch") or {}
                if int(batch) >= int(last.get("id", -1)):
                    self.book.status["last_batch"] = info
                self.book.status["last_progress_at"] = now_iso(self.health["last_progress_at"])
            if self.recovering is not None and int(batch) == self.recovering:
                self.event(f"micro-batch {batch}, cut short before the restart, ran again: {rows} input rows re-read")
                self.recovering = None
            for observer in self.observers:
                observer(info)
        self._seen = set(sorted(self._seen)[-SEEN_KEPT:])

    def _record_query_state(self, trigger_active: bool) -> None:
        """Spark's own word on the matching query, for ``cep status``: a quiet topic is idle, not dead;
        a trigger that has been running too long (a stuck micro-batch) is."""
        with self.book.lock:
            before = self.book.status.get("spark_query") or {}
            since = before.get("trigger_since") if before.get("trigger_active") and trigger_active else None
            self.book.status["spark_query"] = {
                "active": self.health["query_active"],
                "trigger_active": trigger_active,
                "trigger_since": since or (now_iso() if trigger_active else None),
                "waiting_for_data": self.health["waiting_for_data"],
                "checked_at": now_iso(),
            }
