"""A restart over a Delta table never re-checks the table versions of the last micro-batch that read rows.

On a restart Spark hands each V1 source the last committed micro-batch again before it plans the next one
(``MicroBatchExecution.populateStartOffsets`` calls ``getBatch(start, end)`` with that micro-batch's offsets;
some sources expect it). Delta's source (``DeltaSource.getBatch``) then checks the schema of every table version
from ``start`` to ``end`` against the table's newest. After a column was added and then an overwrite changed a
type, a ``start`` at or before the column's version fails that check with ``DELTA_SCHEMA_CHANGED_WITH_VERSION``,
whose sentence says to run the same command again, and every run fails it again: the checkpoint never moves.
When the last committed micro-batch is an empty one (its offsets equal those of the micro-batch before), Delta
returns at once without a check, and the restart reads on to the commit that stopped the stream, whose own
message says what to do.

So ``AlertStream.start`` calls ``close_replayed_batch`` before its query starts. When the last committed
micro-batch read new rows of a Delta table, it logs the empty micro-batch after it, the one Spark itself plans
after a micro-batch that moves the watermark: the same source offsets (nothing read, nothing skipped), the
watermark Spark committed for the next micro-batch (``nextBatchWatermarkMs``), and Spark's session settings as
that micro-batch logged them. How far it goes depends on the layout:

* **Rules on the driver** (no stateful operator in Spark's query): the offsets and a commit, as Spark writes
  them for a micro-batch that ran. No rule runs for it: its state is the newest manifest below the next
  micro-batch's id (``driver_state.StateFiles``).
* **Spark's keyed state**: the offsets only. A stateful operator's micro-batch *n* loads state version *n* and
  writes *n + 1* (``IncrementalExecution``: the store version is the batch id), so a micro-batch committed
  without running would leave the next one no state version to load. Logged and not committed, it is a
  micro-batch cut short for Spark, which runs it as it planned it: for a source whose start equals its end Spark
  calls ``getBatch`` only in the restart's check (Delta's early empty return) and reads nothing, the stateful
  operator fires the timers the watermark passed and writes the next state version, the ``foreachBatch`` writes
  its alerts exactly once like any other micro-batch's, and Spark commits it. These are the alerts Spark would
  have written in the empty micro-batch that a ``kill -9`` between a micro-batch's commit and the next one's
  offsets kept from running.

After a micro-batch that did not move the watermark Spark plans no empty one, and the same check would stop
a plain restart; the empty micro-batch is logged then too: with the same watermark the operator fires no
timer (each was set at or above it) and writes the same state again. Nothing is written for a micro-batch
that read no Delta table, or one that is already empty.
"""

from __future__ import annotations

import datetime as dt
import json
import os

from cep.spark_bridge.sinks.base import atomic_write

__all__ = ["close_replayed_batch"]

# In every offset Delta's streaming source writes to Spark's offset log (DeltaSourceOffset).
_DELTA_OFFSET_FIELD = '"reservoirId"'


def close_replayed_batch(query_checkpoint: str, *, stateful: bool) -> int | None:
    """Log the empty micro-batch after the last committed one of ``query_checkpoint`` when that one read rows of
    a Delta table; its id (None: nothing to do). ``stateful``: the query has a stateful operator, so the
    micro-batch is logged for Spark to run (offsets only), else it is logged as run (offsets and commit)."""
    offsets, commits = (os.path.join(query_checkpoint, name) for name in ("offsets", "commits"))
    logged = sorted(int(n) for n in os.listdir(offsets) if n.isdigit()) if os.path.isdir(offsets) else []
    if not logged or not os.path.exists(os.path.join(commits, str(logged[-1]))):
        return None  # a new checkpoint, or a micro-batch cut short, which Spark runs again as it was planned
    last = logged[-1]
    version, metadata, *sources = _read_lines(os.path.join(offsets, str(last)))
    before = _read_lines(os.path.join(offsets, str(last - 1)))[2:] if last - 1 in logged else None
    if not any(_DELTA_OFFSET_FIELD in line for line in sources) or before == sources:
        return None  # not a Delta table, or already an empty micro-batch
    commit = _read_lines(os.path.join(commits, str(last)))
    planned = json.loads(metadata)
    planned["batchWatermarkMs"] = json.loads(commit[1]).get("nextBatchWatermarkMs", planned.get("batchWatermarkMs"))
    planned["batchTimestampMs"] = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    atomic_write(os.path.join(offsets, str(last + 1)), "\n".join([version, json.dumps(planned), *sources]))
    if not stateful:
        atomic_write(os.path.join(commits, str(last + 1)), "\n".join(commit))
    return last + 1


def _read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return fh.read().splitlines()
