"""Tracing a partition: why did (or didn't) this match?

A ``Tracer`` attached to a ``PartitionMatcher`` records, for every row, each DEFINE condition tested
(by which partial match, with what result), the partial matches alive after the row (by their position
in the pattern), every partial match dropped and why, and where matches began and ended. The records
are plain dicts; ``Query.trace`` returns them as a pandas DataFrame.
"""

from __future__ import annotations

from cep.matcher.program.instructions import DONE, LABEL


class Tracer:
    def __init__(self, machine, condition_texts: dict[str, str]) -> None:
        self.machine = machine
        self.condition_texts = condition_texts
        self.records: list[dict] = []

    def _where(self, pc: int) -> str:
        machine = self.machine
        op = machine.opcodes[pc]
        if op == LABEL:
            return f"waiting for {machine.label_names[machine.operands[pc]]} (pc {pc})"
        if op == DONE:
            return "complete"
        return f"{op} (pc {pc})"

    def _record(self, matcher, row: int, event: str, start, detail: str) -> None:
        self.records.append(
            {"partition": matcher.key, "row": row, "event": event, "match_start": start, "detail": detail}
        )

    def tested(self, matcher, row: int, thread, label: int, held) -> None:
        name = self.machine.label_names[label]
        text = self.condition_texts.get(name, "TRUE")
        verdict = "held" if held is True else ("was NULL (counts as false)" if held is None else "was false")
        event = "tested" if held is True else "dropped"
        detail = f"{name}: {text} {verdict}"
        self._record(matcher, row, event, thread.start, detail)

    def alive(self, matcher, row: int, threads) -> None:
        for thread in threads:
            self._record(matcher, row, "alive", thread.start, self._where(thread.pc))

    def dropped(self, matcher, row: int, thread, reason: str) -> None:
        self._record(matcher, row, "dropped", thread.start, f"{self._where(thread.pc)}: {reason}")

    def restart(self, matcher, row: int, next_start: int) -> None:
        """One start at a time (lazy starts): the start just tried failed; the next start row is tried."""
        self._record(
            matcher,
            row,
            "restart",
            next_start - 1,
            f"no match starts at row {next_start - 1}; trying a match starting at row {next_start}",
        )

    def matched(self, matcher, number: int, start: int, end: int, labels: list[int]) -> None:
        names = " ".join(self.machine.label_names[label] for label in labels) or "(empty match)"
        self._record(matcher, end, "match", start, f"match {number}: rows {start}..{end} as {names}")
