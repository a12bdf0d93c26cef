"""The streaming rules of ``keyed.py`` for every key of a call at once, column-wise.

``KeyedStream.process`` runs one key at a time and feeds its released rows, one by one, to the Pike VM.
For a query the sequence engine takes (``matcher/vector/sequence.py``), ``ColumnarStep`` runs a whole call
(a ``LocalStream`` micro-batch, or one bucket of keys) in a handful of numpy passes, with the same rules
and the same output, match ids and stats. Its stages, one module each, in the order a call runs them:

1. ``call``: bad rows (NULL event time), late rows (at or below the watermark or the key's forced
   release) and accepted rows are told apart for all rows at once; accepted rows join one pending table
   of all keys. The keys called are those with rows and those whose timer the watermark reached (Spark's
   rule). The pending cap (``max_pending_rows``) moves a key's clock as in ``keyed.py``; every pending row
   of a called key at or below its clock is released, sorted once by (key, event time, tie-break columns).
2. ``pieces``: released rows go after each key's carried rows (below). Sessions split them: every session
   piece is one partition of one engine run over all keys.
3. ``walk``: ``decisions.decide`` decides every start and says which are not final yet; AFTER MATCH SKIP
   is walked over the starts; a match is emitted only while every start before it is final, which is when
   the per-key VM emits it. A session that ended (gap, or the clock past its end) has all its starts
   final. A TIMEOUT row and a trailing ``!B``'s match are final once a later row or the clock passes the
   start's WITHIN deadline (``decisions.py``), as the VM's ``advance`` has them.
4. ``output``: the emitted matches' rows and match ids, through the outer query.
5. ``resume``: a call the engine cannot take exactly (``kernels.Unsupported``: values the kernels do not
   compute exactly, a run open too long for a scan from every start; a measure the column programs
   refuse) and a session piece longer than ``max_match_rows`` run on the Pike VM, piece by piece,
   resumed from the carried rows exactly where the column-wise run stopped (``PartitionMatcher.resume``:
   every start before s decided, the rows PREV reads before s kept; ``keyed.SessionRun`` runs it). So the
   output never depends on which engine ran a call.
6. ``carry``: from the first start that is not final, the rows (and the ``lookback`` rows PREV reads
   before it) are *carried*: the next call matches them again, with what the watermark releases after
   them; then each called key's next timer.

``rules`` holds what every stage reads of the query, ``step`` runs the stages (``ColumnarStep``), and
``bucket`` is Spark's call (``step_bucket``).

State: one ``ColumnarTable`` per call's keys (``column_table.py``), not one blob per key. The path a
query takes is fixed by its text; a per-key checkpoint is read (an upgraded stream keeps it), and a
``KeyTable`` refuses a column-wise one (E0482).
"""

from cep.spark_bridge.engine.columnar.bucket import step_bucket
from cep.spark_bridge.engine.columnar.call import CallResult
from cep.spark_bridge.engine.columnar.step import ColumnarStep

__all__ = ["CallResult", "ColumnarStep", "step_bucket"]
