"""Splitting an input into partitions and ordering each: shared by the Pike VM path and the fast path."""

from __future__ import annotations

from cep.grammar import ast
from cep.grammar.errors import CepRuntimeError
from cep.matcher.rows.outer import sort_key

Columns = dict[str, list]


def sort_columns(statement: ast.Statement, machine) -> list[tuple[ast.SortKey, str]]:
    """The ORDER BY keys that name a column, each with its input column (``PROCTIME()``: input order)."""
    keys = [key for key in statement.match.order_by if isinstance(key.expr, ast.ColumnRef)]
    return list(zip(keys, machine.order_names))


def partition_indices(statement: ast.Statement, machine, columns: Columns) -> list[tuple[tuple, list[int]]]:
    """Row indices per partition (in order of first appearance), each sorted by ORDER BY.

    Sorting is stable, so rows with equal ORDER BY keys keep their input order (the documented
    tie-break for a batch replay). ``PROCTIME()`` keys are arrival order, which is input order here.
    """
    count = len(next(iter(columns.values()))) if columns else 0
    key_columns = [columns[name] for name in machine.partition_names]
    groups: dict[tuple, list[int]] = {}
    if key_columns:
        for index, key in enumerate(zip(*key_columns)):
            groups.setdefault(key, []).append(index)
    else:
        groups[()] = list(range(count))
    sort_keys = sort_columns(statement, machine)
    for indices in groups.values():
        for key, name in reversed(sort_keys):
            values = columns[name]
            try:
                indices.sort(key=lambda i: sort_key(values[i], key.descending, key.nulls_first), reverse=key.descending)
            except TypeError:
                raise unorderable(name, [values[i] for i in indices]) from None
    return list(groups.items())


def unorderable(name: str, values: list) -> CepRuntimeError:
    """The error for an ORDER BY column whose values cannot be ordered together (strings and numbers,
    naive and time-zone-aware times): E0410 naming the column and two values of different kinds."""

    def kind(value) -> str:
        if getattr(value, "tzinfo", None) is not None:
            return f"{type(value).__name__} with a time zone"
        return type(value).__name__ + (" without a time zone" if hasattr(value, "tzinfo") else "")

    seen: dict[str, object] = {}
    for value in values:
        if value is not None:
            seen.setdefault(kind(value), value)
    shown = " and ".join(f"{k} {v!r}" for k, v in list(seen.items())[:2])
    return CepRuntimeError(
        f"ORDER BY column '{name}' mixes values that cannot be ordered together: {shown}",
        code="E0410",
        hint="pass dead_letter=[] to set the rows of the odd kind aside (cep run --dead-letter FILE), "
        "or a schema naming the column's type",
    )
