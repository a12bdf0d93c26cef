"""Backtests that give the live stream's matches: sessions and match ids in a batch replay.

    replay = Replay(plan, input_columns, query_text=..., session_timeout_us=..., match_ids=True)
    names, rows = replay.run(columns)

``Query.run(..., session_timeout=..., match_ids=True)`` and the static ``Query.on_spark`` (one
``Replay`` per Spark task, ``cep.spark_bridge.spark.batch``) come here. A replay treats its input as the whole
history, as a stream that has run far past its last row would see it, and follows the streaming rules
(``cep.spark_bridge.engine.keyed``) that decide the output:

* **Order**: each partition's rows in ORDER BY order, rows tied on it ordered by the values of the
  columns the matcher reads, exactly as the stream orders them (``KeyedStream.release_order``). A plain
  ``q.run`` keeps input order for ties instead; for rows that differ only there, the two may match
  differently (SQL leaves that order open).
* **Sessions** (``session_timeout_us``): consecutive rows of a partition more than the timeout apart
  start a new session, matched by a fresh matcher (match numbers start again at 1). Every session,
  the last one included, ends at its last row + the timeout: the matcher is told that time
  (``advance``: WITHIN deadlines, timeouts, absences) and then the end of its input (``finish``:
  trailing matches), as the stream does when the watermark passes the session's end.
  Without a session timeout each partition is one session, ended as ``q.run`` ends it (the clock at
  the largest event time of the input, then ``finish``); a stream never ends it, so matches that need
  the end of input (``$``, a trailing greedy loop) come out of the replay only.
* **Event time** reaches the matcher as the stream hands it over: a naive UTC ``datetime`` to the
  microsecond (an aware input time is converted; a pandas ``Timestamp`` becomes a ``datetime``). The
  first ORDER BY column must hold timestamps; a NULL one raises (pass ``dead_letter=`` to ``q.run``
  to set such rows aside, as the stream sets them aside as bad rows).
* **Match ids** (``match_ids``): a last column ``match_id``, from ``match_ids.match_id`` over the same
  inputs the stream hashes (statement text, partition key, session start, match number, first row's
  position in the session and event time), so replay rows join live alerts on it. Every row of one
  match shares it (ALL ROWS PER MATCH).

Not replayed: the stream's caps (``max_pending_rows``, ``max_match_rows``) and late rows, which
depend on arrival, not on the events; ``ORDER BY PROCTIME()`` (arrival order), which has no event
time to split sessions by.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Callable

from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepRuntimeError, CepSemanticError
from cep.matcher.pike.vm import PartitionMatcher
from cep.spark_bridge.engine import state_codec as codec
from cep.spark_bridge.engine.keyed import KeyedStream
from cep.spark_bridge.engine.match_ids import match_id

MATCH_ID = "match_id"


class Replay:
    """The streaming rules that decide a stream's output, applied to a whole input at once.

    Built once per input schema (the matcher's machine depends on the column names); ``run`` takes
    the input as columns (name -> list of Python values, None for NULL) holding whole partitions.
    """

    def __init__(
        self,
        plan,
        input_columns,
        *,
        query_text: str,
        session_timeout_us: int | None = None,
        match_ids: bool = False,
        integer_columns: dict[str, str] | None = None,
    ) -> None:
        if getattr(plan, "proctime", False):
            raise CepSemanticError(
                "session_timeout and match_ids replay event time; ORDER BY PROCTIME() has none", code="E0283"
            )
        # The stream's own engine: its machine reports which match made each row (``match_ids.TaggingOutput``),
        # and it checks the ORDER BY rules (an ascending event-time column first) with the query's spans.
        self.engine = KeyedStream(
            plan,
            input_columns,
            query_text=query_text,
            session_timeout_us=session_timeout_us,
            integer_columns=integer_columns,
        )
        self.plan = plan
        self.match_ids = match_ids
        outer = plan.outer(tuple(input_columns))
        if match_ids:
            if ColumnNames(outer.names).has_name_ignoring_case(MATCH_ID):
                raise CepSemanticError(
                    f"an output column is named {MATCH_ID}, the column match_ids=True adds",
                    code="E0284",
                    hint="rename it with AS in the SELECT list or MEASURES",
                )
            # The id rides as one more value at the end of each MATCH_RECOGNIZE row: WHERE, ORDER BY and
            # the projection read columns by position, so they never see it; it is put back last.
            project = outer.project
            outer = dataclasses.replace(
                outer, names=outer.names + (MATCH_ID,), is_identity=False, project=lambda row: project(row) + (row[-1],)
            )
        self.outer = outer

    @property
    def names(self) -> tuple[str, ...]:
        return self.outer.names

    def run(
        self,
        columns: dict[str, list],
        *,
        clock=None,
        outer_order_and_limit: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> tuple[tuple[str, ...], list[tuple]]:
        """(output names, output rows) of the whole input. ``clock``: the end-of-input time for a query
        with WITHIN and no session timeout (default: the input's largest event time; Spark passes the
        whole DataFrame's, each task holding only part of it)."""
        engine = self.engine
        time_column = engine.time_column
        times = event_micros(columns[time_column], time_column)
        if clock is None and engine.machine.within is not None and times:
            clock = codec.micros_to_datetime(max(times))
        view = dict(columns)
        view[time_column] = [codec.micros_to_datetime(us) for us in times]
        rows: list[tuple] = []
        done, total = 0, len(times)
        for key, indices in self.plan.partitions(engine.machine, view):
            ordered = engine.release_order(indices, {"us": times, "cols": view})  # the stream's order, ties included
            for session in self._sessions(ordered, times):
                rows.extend(self._session_rows(key, session, view, times, clock))
            if progress is not None:
                done += len(indices)
                progress(done, total)
        names = self.outer.names if outer_order_and_limit else self.outer.unsorted_names
        return names, self.outer.apply(rows, order_and_limit=outer_order_and_limit)

    def _sessions(self, ordered: list[int], times: list[int]) -> list[list[int]]:
        """``ordered`` cut where consecutive event times are more than the session timeout apart."""
        gap = self.engine.session_timeout_us
        if gap is None:
            return [ordered]
        cuts = [i for i in range(1, len(ordered)) if times[ordered[i]] - times[ordered[i - 1]] > gap]
        return [ordered[a:b] for a, b in zip([0] + cuts, cuts + [len(ordered)])]

    def _session_rows(self, key: tuple, session: list[int], columns: dict, times: list[int], clock) -> list[tuple]:
        """One session matched as its own input, ended as the stream ends it; each row with its match id."""
        engine = self.engine
        tagger = engine.tagger
        tagger.tags.clear()
        matcher = PartitionMatcher(engine.machine, key)
        rows = matcher.feed({name: [columns[name][i] for i in session] for name in engine.feed_columns})
        gap = engine.session_timeout_us
        end = codec.micros_to_datetime(times[session[-1]] + gap) if gap is not None else clock
        if end is not None:
            rows += matcher.advance(end)
        rows += matcher.finish()
        tags, tagger.tags = tagger.tags, []
        if not self.match_ids:
            return rows
        if len(tags) != len(rows):  # rows that did not come through the output builder (as the stream tags them)
            tags = [(None, position, None) for position in range(len(rows))]
        start_us = times[session[0]]
        ids: dict[tuple, str] = {}
        out = []
        for row, tag in zip(rows, tags):
            found = ids.get(tag)
            if found is None:
                number, first, first_time = tag
                found = ids[tag] = match_id(
                    engine.query_fp, key, start_us, -1 if number is None else number, first, first_time
                )
            out.append(tuple(row) + (found,))
        return out


def event_micros(values: list, column: str) -> list[int]:
    """Each row's event time in microseconds since 1970 (UTC); a NULL or a value that is not a timestamp raises."""
    out = []
    for position, value in enumerate(values):
        if not isinstance(value, _dt.datetime):
            if value is None:
                raise CepRuntimeError(
                    f"row {position} has a NULL event time ({column!r}); a replay with sessions or match ids "
                    "cannot place it (pass dead_letter= to set such rows aside, as a stream does)",
                    code="E0440",
                )
            raise CepSemanticError(
                f"session_timeout and match_ids need the event-time column {column!r} to hold timestamps, "
                f"not {type(value).__name__} ({value!r}); convert it first",
                code="E0282",
            )
        out.append(codec.datetime_to_micros(value))
    return out


__all__ = ["MATCH_ID", "Replay", "event_micros"]
