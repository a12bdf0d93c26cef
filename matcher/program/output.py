"""Turning a finished match into output rows: ONE ROW PER MATCH and the ALL ROWS PER MATCH modes.

Column layout, as the standard's ``SELECT *`` gives it:
    ONE ROW PER MATCH   partition columns, measures
    ALL ROWS PER MATCH  partition columns, ORDER BY columns, measures, the other input columns

``PartitionOutput`` is the part of matching one partition that does not depend on how matches are
found: numbering matches, the rows no match covers (ALL ROWS PER MATCH WITH UNMATCHED ROWS) and
where AFTER MATCH SKIP goes on (``skip.SkipRule.after``). The Pike VM (``pike/vm.py``) builds on it, and
the column-wise engines output through it the partitions whose measures they do not compute
themselves, as Go's engines only find the match and leave the rest to ``doExecute``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cep.grammar.errors import CepRuntimeError
from cep.matcher.program.skip import SkipFailed
from cep.matcher.sql.context import Env, MatchView


@dataclass(frozen=True)
class OutputLayout:
    """Which values make up an output row, and how the row mode treats empty and unmatched rows."""

    mode: str  # ONE, ALL_SHOW_EMPTY, ALL_OMIT_EMPTY, ALL_WITH_UNMATCHED
    show_timeout: bool  # SHOW TIMEOUT MATCHES: expired partial matches become TIMEOUT rows
    status: str  # MATCH_STATUS() of a complete match: MATCHED, or ABSENCE for a trailing `!B`
    partition_count: int  # values taken from the partition key
    row_columns: tuple[str, ...]  # ALL ROWS: ORDER BY columns then the other input columns, by buffered name
    order_count: int  # how many of row_columns come before the measures
    measures: tuple[Callable, ...]

    @property
    def all_rows(self) -> bool:
        return self.mode != "ONE"


class OutputBuilder:
    def __init__(self, layout: OutputLayout) -> None:
        self.layout = layout
        self.wants_unmatched = layout.mode == "ALL_WITH_UNMATCHED"
        self.show_empty = layout.mode in ("ONE", "ALL_SHOW_EMPTY", "ALL_WITH_UNMATCHED")
        self.show_timeout = layout.show_timeout
        self.all_rows = layout.all_rows
        self.measures = layout.measures

    def match(self, matcher, number: int, start: int, end: int, labels: list[int], excluded) -> list[tuple]:
        """The output rows of a match (``matcher.match_states``: the running DEFINE aggregates after its
        last row, which measures read there instead of folding; see ``ExpressionCompiler._final_state``)."""
        layout = self.layout
        env = matcher.env
        saved_view, saved_row, saved_number = env.view, env.row, env.match_number
        env.match_number = number
        env.match_status = layout.status
        try:
            if end < start:  # an empty match
                if not self.show_empty:
                    return []
                env.row = None
                env.view = MatchView(start, labels, None)
                measures = tuple(measure(env) for measure in layout.measures)
                if not layout.all_rows:
                    return [matcher.key + measures]
                return [self._row(matcher, start, measures)]
            if not self.all_rows:
                env.row = end
                env.view = MatchView(start, labels, end, matcher.match_states)
                return [matcher.key + tuple([measure(env) for measure in self.measures])]
            rows = []
            for position in range(start, end + 1):
                if excluded and any(begin <= position < finish for begin, finish in excluded):
                    continue
                env.row = position
                env.view = MatchView(start, labels, position)
                rows.append(self._row(matcher, position, tuple([measure(env) for measure in self.measures])))
            return rows
        except CepRuntimeError as error:  # a measure failed: say at which partition and row
            raise matcher.locate(error) from None
        finally:
            env.view, env.row, env.match_number = saved_view, saved_row, saved_number

    def timeout(self, matcher, start: int, end: int, labels: list[int]) -> list[tuple]:
        """A partial match that WITHIN expired: one row, measures over its rows, MATCH_STATUS 'TIMEOUT'.

        It uses up no match number (MATCH_NUMBER() is NULL): it is not a match.
        """
        env = matcher.env
        saved = env.view, env.row, env.match_number, env.match_status
        env.view, env.row, env.match_number, env.match_status = MatchView(start, labels, end), end, None, "TIMEOUT"
        try:
            return [matcher.key + tuple(measure(env) for measure in self.layout.measures)]
        finally:
            env.view, env.row, env.match_number, env.match_status = saved

    def unmatched(self, matcher, position: int) -> list[tuple]:
        return [self._row(matcher, position, (None,) * len(self.layout.measures))]

    def _row(self, matcher, position: int, measures: tuple) -> tuple:
        layout = self.layout
        env = matcher.env
        values = tuple(env.value(column, position) for column in layout.row_columns)
        return matcher.key + values[: layout.order_count] + measures + values[layout.order_count :]


class PartitionOutput:
    """One partition's output, whichever engine finds its matches.

    ``cols`` are the partition's buffered columns (name -> values, row p at index p - ``env.base``);
    the measures read them through ``env``. An engine calls ``emit_match`` for each final match, in
    order, and ``emit_unmatched`` for rows it knows no match will cover; ``out`` collects the rows.
    """

    def __init__(self, machine, key: tuple, cols: dict) -> None:
        self.machine = machine
        self.key = key
        self.cols = cols
        self.env = Env(cols, machine.label_names)
        self.search_start = 0  # the first row the current search may start a match at
        self.match_number = 0
        self.match_states = None  # the running DEFINE aggregates after the last row of the match being output
        self.covered_upto = -1  # the last row of any emitted non-empty match
        self.out: list[tuple] = []

    def emit_match(self, start: int, end: int, labels: list[int], excluded) -> int:
        """Output the final match of rows ``start..end`` (``end < start``: empty) labelled ``labels``,
        hiding the ``excluded`` ranges from ALL ROWS PER MATCH; returns the row AFTER MATCH SKIP picks
        for the next search (``search_start``)."""
        machine = self.machine
        self.match_number += 1
        if machine.output.wants_unmatched:
            self.emit_unmatched(self.search_start, start)
        self.out.extend(machine.output.match(self, self.match_number, start, end, labels, excluded))
        if end >= start:
            self.covered_upto = max(self.covered_upto, end)
        try:
            self.search_start = machine.skip.after(start, end, labels)
        except SkipFailed as why:
            raise self.skip_error(str(why)) from None
        return self.search_start

    def emit_unmatched(self, begin: int, end: int) -> None:
        """Rows ``begin..end-1`` start no match: with WITH UNMATCHED ROWS, those no match covered are output."""
        output = self.machine.output
        if not output.wants_unmatched:
            return
        for position in range(max(begin, self.covered_upto + 1), end):
            self.out.extend(output.unmatched(self, position))
        self.covered_upto = max(self.covered_upto, end - 1)

    def take_output(self) -> list[tuple]:
        out, self.out = self.out, []
        return out

    def skip_error(self, message: str) -> CepRuntimeError:
        return CepRuntimeError(
            f"AFTER MATCH SKIP failed in partition {self.describe_key()}, match {self.match_number}: {message}",
            code="E0401",
        )

    def locate(self, error: CepRuntimeError) -> CepRuntimeError:
        """A run-time error of a condition or measure, saying the partition and the row it happened at."""
        row = self.env.row
        where = f"partition {self.describe_key()}" + ("" if row is None else f", row {row + 1} in ORDER BY order")
        return error.locate(where=where)

    def describe_key(self) -> str:
        names = self.machine.partition_names
        if not names:
            return "(whole input)"
        return "(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, self.key)) + ")"
