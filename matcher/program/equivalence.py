"""When may two threads at the same instruction be merged?

DEFINE conditions can read the match history: ``B.price < A.price`` reads the last A, ``LAST(B.x, 1)``
the last two B rows, ``SUM(B.qty)`` every B row, ``PREV(CLASSIFIER())`` the previous row's label. Two
threads at the same instruction and position have the same future exactly when every history read
that a future condition can make gives the same answer for both. We decide at compile time which
reads the conditions make (``history_reads``), and at run time a thread's *equivalence key* is what
those reads see in its history (positions and labels). Equal keys => the later (lower-priority)
thread can never produce a match the earlier one would not produce first, so it is dropped.

This is Trino's ThreadEquivalence idea, made coarser (we key on every condition, not only the ones
reachable from the instruction) and cheaper to state. When no condition reads history, there is no
key at all and threads are merged by instruction alone, which is what keeps hostile patterns linear.
A key walks the history, so the VM computes one only when a second thread reaches an instruction
that a thread already holds at the same position (``PartitionMatcher._admit_another``): with lazy
starts most rows have one or two threads and no such meeting.

Read kinds (``labels`` is a frozenset of label ids or None for all variables; ``labelled`` says whether
the expression read at those rows includes CLASSIFIER(), i.e. whether their labels matter):
    ("last", labels, n, labelled)   the last n+1 history rows labelled in ``labels``
    ("first", labels, n, labelled)  the first n+1 such rows
    ("all", labels, labelled)       all such rows (aggregates)
    ("back", k)                     the labels of the k rows before the current one (PREV(CLASSIFIER(), k))
    ("chain",)                      the whole history (a physical move from a logical position that reads labels)

A row's values depend on its position only, so a read that is not ``labelled`` keys on the positions of
the rows it finds, not on their labels: ``AVG(price)`` (every row of the match) reads rows start..row-1
whatever their labels, and two threads with the same start are equivalent for it. Keying on the labels
too kept ``((A | B)* A{2,3})`` threads that differ only in labels apart, and their number grew
exponentially (E0430 on a few rows).
"""

from __future__ import annotations

from cep.grammar import ast
from cep.matcher.sql.expressions import Scope, constant_offset, referenced_labels
from cep.matcher.sql.values import AGGREGATES


def history_reads(expr, scope: Scope) -> set[tuple]:
    """The history reads of a condition compiled in ``scope`` (``scope.own_label``: the variable it defines)."""
    reads: set[tuple] = set()
    _collect(expr, scope, reads)
    return reads


def _has_classifier(expr) -> bool:
    return any(isinstance(node, ast.Classifier) for node in ast.walk(expr))


def _collect(expr, scope: Scope, reads: set) -> None:
    if isinstance(expr, ast.ColumnRef):
        if expr.qualifier is not None and not scope.is_current_row(scope.labels_of(expr.qualifier)):
            reads.add(("last", scope.labels_of(expr.qualifier), 0, False))
        return
    if isinstance(expr, ast.Classifier):
        if expr.variable is not None:
            reads.add(("last", scope.labels_of(expr.variable), 0, True))
        return
    if isinstance(expr, ast.FunctionCall) and expr.name in AGGREGATES:
        expr = ast.Aggregate(expr.span, expr.name, expr.args)
    if isinstance(expr, ast.Aggregate):
        labelled = any(_has_classifier(arg) for arg in expr.args)
        if not expr.args:
            reads.add(("all", None, False))
        elif len(expr.args) == 1 and isinstance(expr.args[0], ast.Star):
            reads.add(("all", scope.labels_of(expr.args[0].qualifier), False))
        else:
            reads.add(("all", referenced_labels(ast.ArrayLiteral(expr.span, expr.args), scope), labelled))
        return
    if isinstance(expr, ast.Navigation):
        if expr.kind in ("FIRST", "LAST"):
            reads.add(
                (
                    expr.kind.lower(),
                    referenced_labels(expr.operand, scope),
                    constant_offset(expr, 0),
                    _has_classifier(expr.operand),
                )
            )
            return
        operand = expr.operand
        if isinstance(operand, ast.Navigation):
            _collect(operand, scope, reads)
            if _has_classifier(operand.operand):
                reads.add(("chain",))
            return
        labels = referenced_labels(operand, scope)
        if labels is not None and not scope.is_current_row(labels):
            reads.add(("last", labels, 0, _has_classifier(operand)))
            if _has_classifier(operand):
                reads.add(("chain",))
        elif labels is not None and expr.kind == "PREV" and _has_classifier(operand):
            reads.add(("back", constant_offset(expr, 1)))
        elif expr.kind == "PREV" and _has_classifier(operand):
            reads.add(("back", constant_offset(expr, 1)))
        return
    for child in ast.children(expr):
        _collect(child, scope, reads)


def make_key_function(reads: set[tuple], *, include_start: bool):
    """A function (matcher, start, chain, position) -> hashable key, or None when no key is needed."""
    ordered = sorted(reads, key=repr)
    if not ordered and not include_start:
        return None

    def key(matcher, start: int, chain, position: int):
        history = None  # [(position, label)] oldest first, built only if a read needs it
        parts: list = [start] if include_start else []
        for read in ordered:
            kind = read[0]
            if kind in ("last", "first", "all") and read[1] is None and not read[-1]:
                # Every row of the history, labels unread: rows start..position-1, the same for every
                # thread with this start (the caller compares threads at one position).
                parts.append(start)
            elif kind == "last":
                labels, n, labelled = read[1], read[2], read[3]
                found = []
                row, node = position - 1, chain
                while node is not None and len(found) <= n:
                    if labels is None or node[0] in labels:
                        found.append((row, node[0]) if labelled else row)
                    node, row = node[1], row - 1
                parts.append(tuple(found))
            elif kind == "back":
                found = []
                node = chain
                for _ in range(read[1]):
                    if node is None:
                        break
                    found.append(node[0])
                    node = node[1]
                parts.append(tuple(found))
            else:
                if history is None:
                    history = _history(start, chain)
                if kind == "first":
                    labels, n, labelled = read[1], read[2], read[3]
                    found = [item for item in history if labels is None or item[1] in labels][: n + 1]
                    parts.append(tuple(found if labelled else (row for row, _ in found)))
                elif kind == "all":
                    labels, labelled = read[1], read[2]
                    found = [item for item in history if labels is None or item[1] in labels]
                    parts.append(tuple(found if labelled else (row for row, _ in found)))
                else:  # chain
                    parts.append((start, tuple(history)))
        return tuple(parts)

    return key


def _history(start: int, chain) -> list[tuple[int, int]]:
    labels = []
    while chain is not None:
        labels.append(chain[0])
        chain = chain[1]
    labels.reverse()
    return [(start + offset, label) for offset, label in enumerate(labels)]
