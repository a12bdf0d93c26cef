"""The lowered pattern (``lowered.py``) -> flat ``Program``.

Each construct appends its instructions to one list, with jump targets back-patched once known.
Preference order is encoded in SPLIT's operand order: the first operand is the preferred path.

    A*   (greedy)      L0: SPLIT L1, L3   L1: <A>   L2: SPLIT L1, L3   L3:
    A*?  (reluctant)   L0: SPLIT L3, L1   L1: <A>   L2: SPLIT L3, L1   L3:
    A+                 L0: <A>   L1: SPLIT L0, L2   L2:
    A{2,4}             <A> <A> SPLIT a, end  a: <A>  SPLIT b, end  b: <A>  end:
    A | B              SPLIT L1, L3   L1: <A>  JUMP end   L3: <B>   end:
    PERMUTE(A, B, C)   A PERMUTE(B, C) | B PERMUTE(A, C) | C PERMUTE(A, B): all orders, in lexicographic
                       order of positions, as a prefix tree where the shared first item matches one way only
                       (PERMUTE(A?, B) is A? B | B A?, written out)
    {- A -}            EXCL_BEGIN <A> EXCL_END

An absence term ``!B`` (our extension) becomes a reluctant loop over the internal label ``!B``, whose
condition is "B's condition does not hold": ``A !B C`` = A, then rows that are not B, then the first C.
At the end of the pattern (``A !B`` with WITHIN T) it becomes a greedy loop closed by DEADLINE: the
match completes when event time reaches the first row's time + T with no B row before it.
"""

from __future__ import annotations

import itertools

from cep.grammar import ast
from cep.grammar.errors import CepSemanticError
from cep.matcher.program import lowered
from cep.matcher.program.instructions import (
    AT_END,
    AT_START,
    DEADLINE,
    DONE,
    EXCL_BEGIN,
    EXCL_END,
    JUMP,
    LABEL,
    SPLIT,
    Instruction,
    Program,
)

# A program longer than this is refused. The front end already bounds the pattern's expanded size
# (grammar/limits.py, MAX_EXPANDED_PATTERN_TERMS); this is the compiler's own guard, at a few
# instructions per term (LABEL plus the SPLIT/JUMP around it), for ASTs built without the front end.
MAX_PROGRAM_SIZE = 10_000


class _Builder:
    def __init__(self) -> None:
        self.code: list[list] = []  # mutable [op, a, b] until frozen

    def emit(self, op: str, a: int = -1, b: int = -1) -> int:
        if len(self.code) >= MAX_PROGRAM_SIZE:
            raise CepSemanticError(
                f"the pattern compiles to more than {MAX_PROGRAM_SIZE} instructions "
                "(MAX_PROGRAM_SIZE); use smaller quantifier bounds or fewer PERMUTE items",
                code="E0310",
            )
        self.code.append([op, a, b])
        return len(self.code) - 1

    def here(self) -> int:
        return len(self.code)

    def patch(self, index: int, a: int | None = None, b: int | None = None) -> None:
        if a is not None:
            self.code[index][1] = a
        if b is not None:
            self.code[index][2] = b

    def patch_split(self, index: int, body: int, exit_: int, greedy: bool) -> None:
        if greedy:
            self.patch(index, a=body, b=exit_)
        else:
            self.patch(index, a=exit_, b=body)

    # ---------------------------------------------------------------------------------------- nodes

    def pattern(self, node: lowered.Node) -> None:
        if isinstance(node, lowered.Label):
            self.emit(LABEL, node.label)
        elif isinstance(node, lowered.Nothing):
            pass
        elif isinstance(node, lowered.Edge):
            self.emit(AT_START if node.at_start else AT_END)
        elif isinstance(node, lowered.Sequence):
            for item in node.items:
                self.pattern(item)
        elif isinstance(node, lowered.Choice):
            self.alternation(list(node.options))
        elif isinstance(node, lowered.AnyOrder):
            self.permute(node)
        elif isinstance(node, lowered.Excluded):
            self.emit(EXCL_BEGIN)
            self.pattern(node.body)
            self.emit(EXCL_END)
        elif isinstance(node, lowered.Repeat):
            self.quantified(node)
        elif isinstance(node, lowered.Absent):
            self.star(lambda: self.emit(LABEL, node.label), node.trailing)
            if node.trailing:  # the match completes when event time reaches the deadline
                self.emit(DEADLINE)
        else:  # pragma: no cover - the lowered form is closed
            raise TypeError(f"unknown pattern node {node!r}")

    def permute(self, node: lowered.AnyOrder) -> None:
        """PERMUTE: the alternation of all orders, in lexicographic order of the listed positions (the
        standard's expansion and preference).

        An order's first item is shared by the (n-1)! orders that start with it. When that item matches
        one way only (``AnyOrder.one_way``: a variable, a fixed sequence...), those orders are compiled
        as a prefix tree, the item once and then PERMUTE of the rest, so that only the branches whose
        first item can still match stay alive. When it can match in several ways (``A?``, ``B+``, an
        alternation), factoring it out would try all its ways with the first order before the second
        order, which moves its later ways ahead of orders the standard prefers: the orders starting
        with it are then written out in full.
        """
        items, one_way = node.items, node.one_way
        if len(items) == 1:
            self.pattern(items[0])
            return
        alternatives: list = []
        for i, first in enumerate(items):
            rest = items[:i] + items[i + 1 :]
            if one_way[i]:
                rest_order = lowered.AnyOrder(rest, one_way[:i] + one_way[i + 1 :])
                alternatives.append(lowered.Sequence((first, rest_order)))
            else:
                alternatives.extend(lowered.Sequence((first, *order)) for order in itertools.permutations(rest))
        self.alternation(alternatives)

    def alternation(self, alternatives: list) -> None:
        # An alternative equal to an earlier one can never be preferred: every match it gives, the
        # earlier one gives first. Dropping it keeps `A | A | ...` from multiplying the threads.
        unique: list = []
        for alternative in alternatives:
            if not any(alternative == seen for seen in unique):
                unique.append(alternative)
        alternatives = unique
        jumps_to_end = []
        for index, alternative in enumerate(alternatives):
            if index < len(alternatives) - 1:
                split = self.emit(SPLIT)
                self.patch(split, a=self.here())
                self.pattern(alternative)
                jumps_to_end.append(self.emit(JUMP))
                self.patch(split, b=self.here())
            else:
                self.pattern(alternative)
        for jump in jumps_to_end:
            self.patch(jump, a=self.here())

    def star(self, body, greedy: bool) -> None:
        # The loop test sits after the body (not a JUMP back to the entry SPLIT), as in Trino: an
        # iteration that consumed no row reaches the closing SPLIT at a position where the body was
        # already visited, so it leaves the loop right there, at its own place in preference order.
        # That is "an empty iteration ends the loop" (PCRE's rule, and the standard's).
        entry = self.emit(SPLIT)
        start = self.here()
        body()
        loop = self.emit(SPLIT)
        self.patch_split(entry, start, self.here(), greedy)
        self.patch_split(loop, start, self.here(), greedy)

    def quantified(self, node: lowered.Repeat) -> None:
        body = lambda: self.pattern(node.body)  # noqa: E731 - a thunk keeps the unrolling below readable
        for _ in range(node.low - (1 if node.high is None and node.low > 0 else 0)):
            body()
        if node.high is None:
            if node.low == 0:
                self.star(body, node.greedy)
            else:  # the last mandatory copy doubles as the loop body: e+ = e (SPLIT back)
                start = self.here()
                body()
                split = self.emit(SPLIT)
                self.patch_split(split, start, self.here(), node.greedy)
            return
        optional_splits = []
        for _ in range(node.high - node.low):
            split = self.emit(SPLIT)
            optional_splits.append((split, self.here()))
            body()
        end = self.here()
        for split, body_start in optional_splits:
            self.patch_split(split, body_start, end, node.greedy)


def compile_pattern(pattern: ast.Pattern, labels: tuple[str, ...]) -> Program:
    """Compile ``pattern`` whose variables (and absence labels) are ``labels`` (index = label id)."""
    return compile_program(lowered.lower(pattern, labels), labels)


def compile_program(pattern: lowered.Node, labels: tuple[str, ...]) -> Program:
    """Compile the lowered ``pattern`` (``lowered.lower``) whose label ids index ``labels``."""
    builder = _Builder()
    builder.pattern(pattern)
    builder.emit(DONE)
    return Program(tuple(Instruction(op, a, b) for op, a, b in builder.code), labels)
