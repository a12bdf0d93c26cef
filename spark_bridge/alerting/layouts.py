"""Checkpoints written by earlier layouts of ``cep stream``, brought to the current one on start, or refused
with what to do; never silently reset (``AlertStream.start`` calls these before its query starts).

* ``retire_bad_row_query``: a second query once read the input again for the bad rows
  (``<checkpoint>/bad-rows``); the matching query carries them now.
* ``retire_delivery_query``: a second query once read the committed alerts back from ``output`` and
  spooled them into the sinks' outboxes (``<checkpoint>/deliver``); the matching query's ``foreachBatch``
  hands them over now. That query runs one last time, to spool what it had not.
* ``check_outbox_seals``: an outbox that took micro-batches the checkpoint's query has not run.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.sinks.alerts import rows_to_alerts
from cep.spark_bridge.sinks.base import AlertSink
from cep.spark_bridge.sinks.file import FileSink
from cep.spark_bridge.sinks.lanes import DeliveryLanes

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["check_outbox_seals", "retire_bad_row_query", "retire_delivery_query"]

Event = Callable[..., None]  # the stream's log line: (message, level="info")


def _stamp() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def retire_bad_row_query(checkpoint: str, bad_rows: FileSink, event: Event) -> None:
    """A checkpoint written when a second query read the input for the bad rows: that query's batch
    ids are not the matching query's, and ``<dead_letter>/bad-rows/_spark_metadata`` would make the
    file sink skip batches it never saw. Its files move aside (still readable) and the new ones start
    a fresh log."""
    old_checkpoint = os.path.join(checkpoint, "bad-rows")
    if not os.path.isdir(old_checkpoint):
        return
    stamp = _stamp()
    if os.path.isdir(bad_rows.path):
        os.replace(bad_rows.path, f"{bad_rows.path}.before-{stamp}")
    os.replace(old_checkpoint, f"{old_checkpoint}.before-{stamp}")
    event(f"bad rows now come from the matching query; the earlier ones are in {bad_rows.path}.before-{stamp}")


def retire_delivery_query(
    spark: SparkSession, checkpoint: str, output: FileSink, lanes: DeliveryLanes | None, event: Event
) -> None:
    """A checkpoint of the two-query layout, where a second query (``<checkpoint>/deliver``) read the
    committed alerts back from ``output`` and spooled them into the outboxes: that query runs one last
    time (``availableNow``) to spool what it had not, then its checkpoint moves aside. Its batch ids are
    not above the matching query's (each of its micro-batches read at least one micro-batch the file sink
    committed), so the outbox seals it leaves stay below the micro-batches still to come
    (``check_outbox_seals``). Without sinks to hand the alerts to, the start is refused."""
    old_checkpoint = os.path.join(checkpoint, "deliver")
    if not os.path.isdir(old_checkpoint):
        return
    if lanes is None:
        raise CepSemanticError(
            f"the checkpoint {checkpoint} was written with alert sinks, and their delivery query "
            f"({old_checkpoint}) may not have handed every alert to them yet; start it once with the same "
            "--sink options (it then finishes that delivery and retires the old query), or move "
            f"{old_checkpoint} aside to give up the alerts it had not delivered (they stay in {output.path})",
            code="E0288",
        )

    def spool(batch_df, batch_id: int) -> None:
        alerts = rows_to_alerts(batch_df.collect())
        if alerts:
            lanes.spool(batch_id, alerts)

    writer = output.read_stream(spark).writeStream.foreachBatch(spool).option("checkpointLocation", old_checkpoint)
    writer.trigger(availableNow=True).start().awaitTermination()
    retired = f"{old_checkpoint}.retired-{_stamp()}"
    os.replace(old_checkpoint, retired)
    event(
        "alerts now go to the sinks from the matching query's own micro-batches; the separate delivery query "
        f"spooled what it had left and is retired ({retired})",
        "warning",
    )


def check_outbox_seals(checkpoint: str, lanes: DeliveryLanes | None, sinks: Sequence[AlertSink], cut_short: int | None):
    """An outbox sealed past the matching query's checkpoint belongs to another checkpoint (the query's
    checkpoint was deleted, the outbox kept): its seal would make the sink skip the new micro-batches with
    the same ids. Only the micro-batch a crash cut short (``cut_short``) may be sealed and not committed."""
    if lanes is None:
        return
    commits = os.path.join(checkpoint, "match", "commits")
    done = [int(n) for n in os.listdir(commits) if n.isdigit()] if os.path.isdir(commits) else []
    allowed = cut_short if cut_short is not None else max(done, default=-1)
    for sink in sinks:
        sealed = lanes.outbox.sealed_through(sink.key())
        if sealed > allowed:
            folder = os.path.join(lanes.outbox.directory, sink.key())
            raise CepSemanticError(
                f"the outbox of sink {sink.describe()} ({folder}) took micro-batch {sealed}, but the "
                f"checkpoint's query is at micro-batch {allowed}: the outbox is from another run of this "
                f"checkpoint, and its sink would skip the new micro-batches up to {sealed}; deliver what it "
                f"holds (cep deliver) and move {folder} aside, or start a new checkpoint",
                code="E0288",
            )
