"""The executable form of a row pattern: a flat list of instructions for the Pike VM.

Nine opcodes, after Trino's matcher and re1:

    LABEL v        consume the current row if variable v's DEFINE condition holds for it
    SPLIT a, b     continue at a and at b; a is the preferred path (greedy vs reluctant is only this order)
    JUMP a         continue at a
    EXCL_BEGIN     remember that an exclusion {- ... -} starts at the current position
    EXCL_END       ... and ends here (the rows between are hidden from ALL ROWS PER MATCH output)
    AT_START       continue only before the partition's first row (``^``)
    AT_END         continue only after the partition's last row (``$``)
    DEADLINE       continue once event time reaches the match's first row + WITHIN (trailing ``!B``)
    DONE           a match ends here

An instruction is a small frozen tuple-like object, so a program prints itself (``Program.dump``) and
compares equal to a golden listing in tests.
"""

from __future__ import annotations

from dataclasses import dataclass

LABEL = "LABEL"
SPLIT = "SPLIT"
JUMP = "JUMP"
EXCL_BEGIN = "EXCL_BEGIN"
EXCL_END = "EXCL_END"
AT_START = "AT_START"
AT_END = "AT_END"
DEADLINE = "DEADLINE"
DONE = "DONE"


@dataclass(frozen=True)
class Instruction:
    op: str
    a: int = -1
    b: int = -1

    def render(self, labels: tuple[str, ...]) -> str:
        if self.op == LABEL:
            return f"{self.op} {labels[self.a]}"
        if self.op == SPLIT:
            return f"{self.op} {self.a}, {self.b}"
        if self.op == JUMP:
            return f"{self.op} {self.a}"
        return self.op


@dataclass(frozen=True)
class Program:
    """Instructions plus the names of the labels they consume (index = label id)."""

    instructions: tuple[Instruction, ...]
    labels: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.instructions)

    def dump(self) -> str:
        """One instruction per line with its index, the form golden tests compare."""
        width = len(str(len(self.instructions) - 1))
        return "\n".join(
            f"{index:>{width}}: {inst.render(self.labels)}" for index, inst in enumerate(self.instructions)
        )

    def __str__(self) -> str:
        return self.dump()
