"""A micro-batch's writes in ``foreachBatch`` (``AlertStream._write_batch``) beside the driver layout's own
(``driver_state.DriverRows``): the keyed layout's writes from one ``collect`` of the operator's rows, and, for
both layouts, the micro-batch's book (``BatchBook``): the rules' statistics, the late and failed rows, the bad
rows per reason, written as the late-row file and the journal record.

Those two files are the micro-batch's own, named by its id and replaced whole by a re-run, and the journal
record counts only once Spark has committed the micro-batch (``AlertStream._fold_journal``), so where they are
written among the micro-batch's other writes changes nothing across a ``kill -9``: the driver layout writes
them on a thread of their own while the alerts are written (``write_book``)."""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cep.spark_bridge.alerting.batch_cost import BatchCost
from cep.spark_bridge.alerting.late_files import write_late_rows
from cep.spark_bridge.alerting.rule_set import KIND_BAD, KIND_FAILED, KIND_LATE, KIND_MATCH, KIND_STATS, STAT_NAMES
from cep.spark_bridge.alerting.status import now_iso
from cep.spark_bridge.sinks.alerts import ALERT_NAMES, rows_to_alerts
from cep.spark_bridge.spark.columns import KIND, STATS
from cep.spark_bridge.spark.inputs import DEAD_LETTER_NAMES

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from cep.spark_bridge.sinks.file import FileSink
    from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal

# Imported inside functions: pyspark, an optional dependency (the "spark" extra) that takes seconds to import.

# The one column a bad row brings to the driver: its reason, counted per micro-batch (its payload goes to the file).
_REASON = "_cep_bad_reason"


@dataclass(frozen=True)
class BatchBook:
    """What a micro-batch's rows say besides its alerts: per (rule, version) the statistics summed
    (``STAT_NAMES``), the late rows, the rules that failed (for quarantine), and the bad rows per reason."""

    calls: dict[tuple[str, str], list[int]]
    late: list[dict]
    failed: list[dict]
    bad: dict[str, int]

    @classmethod
    def of(cls, small: list, bad: dict[str, int]) -> BatchBook:
        """``small``: the operator's statistics, late and failed rows (dicts or Spark rows)."""
        calls: dict[tuple[str, str], list[int]] = {}
        for row in small:
            if row[KIND] == KIND_STATS:
                total = calls.setdefault((row["rule_id"], row["rule_version"]), [0] * len(STAT_NAMES))
                for index, value in enumerate(row[STATS]):
                    total[index] += int(value or 0)
        failed = [
            {
                "rule_id": row["rule_id"],
                "version": row["rule_version"],
                "key": row["partition_key"],
                "error": row["measures"],
            }
            for row in small
            if row[KIND] == KIND_FAILED
        ]
        return cls(calls, [row for row in small if row[KIND] == KIND_LATE], failed, bad)

    def record(self, batch_id: int) -> dict:
        """The micro-batch's journal record (``batch.<id>``), folded into the status once Spark committed it."""
        return {
            "kind": "batch",
            "batch": batch_id,
            "time": now_iso(),
            "calls": [[r, v, s] for (r, v), s in sorted(self.calls.items())],
            "bad_rows": self.bad,
            "late_rows": len({(r["match_id"], r["measures"]) for r in self.late}),
        }


def write_book(book: BatchBook, batch_id: int, late_dir: str, journal: Journal, cost: BatchCost | None = None) -> None:
    """The late-row file (with late rows) and the journal record of micro-batch ``batch_id``; each step timed by
    ``cost`` when given (the caller's thread: ``BatchCost`` times the thread that calls it)."""
    if book.late:
        with cost.step("late_rows") if cost is not None else nullcontext():
            write_late_rows(late_dir, batch_id, book.late)
    with cost.step("journal") if cost is not None else nullcontext():
        journal.write(f"batch.{batch_id:012d}", book.record(batch_id))


def write_operator_rows(
    batch: DataFrame,
    batch_id: int,
    cost: BatchCost,
    file_sink: FileSink,
    bad_rows_sink: FileSink,
    lanes: DeliveryLanes | None,
) -> tuple[list, dict]:
    """The keyed layout's writes (one ``collect``); its statistics, late and failed rows, bad rows per reason."""
    from pyspark.sql import functions as F

    batch.persist()
    try:
        kind = F.col(KIND)
        with cost.step("collect"):  # runs the stateful step: the rules, in the Python workers
            rows = batch.select(
                KIND, *ALERT_NAMES, STATS, F.when(kind == KIND_BAD, F.col(DEAD_LETTER_NAMES[0])).alias(_REASON)
            ).collect()
        small = [row for row in rows if row[KIND] in (KIND_STATS, KIND_LATE, KIND_FAILED)]
        bad = dict(Counter(row[_REASON] for row in rows if row[KIND] == KIND_BAD))
        # without bad rows the dead letter's log takes the batch id while the alerts are written (independent)
        meanwhile = None if bad else bad_rows_sink.commit_nothing_meanwhile(batch_id, batch.sparkSession)
        staged = None
        if lanes is not None:  # written before the output's commit, handed to the lanes after it
            with cost.step("outbox_stage"):
                alerts = [{name: row[name] for name in ALERT_NAMES} for row in rows if row[KIND] == KIND_MATCH]
                staged = lanes.stage(
                    batch_id,
                    file_sink.as_stored(rows_to_alerts(alerts)),
                    keep_written=file_sink.has_batch(batch_id),
                )
        with cost.step("alerts_commit"):
            if any(row[KIND] == KIND_MATCH for row in rows):
                file_sink.commit(batch_id, batch.where(kind == KIND_MATCH).select(*ALERT_NAMES).coalesce(1))
            else:  # no job, no empty file
                file_sink.commit_nothing(batch_id, batch.sparkSession)
        if staged is not None:
            with cost.step("outbox_seal"):
                lanes.seal(staged)
        with cost.step("bad_rows_commit"):
            if meanwhile is None:
                bad_rows_sink.commit(batch_id, batch.where(kind == KIND_BAD).select(*DEAD_LETTER_NAMES).coalesce(1))
            else:  # no empty file, but the batch id in the sink's log, which its compaction needs
                meanwhile.result()
    finally:
        batch.unpersist()
    return small, bad
