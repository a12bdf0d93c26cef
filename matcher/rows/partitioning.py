"""Splitting an input into partitions and ordering each: shared by the Pike VM path and the fast path."""

from __future__ import annotations

from cep.grammar import ast
from cep.grammar.errors import CepSemanticError
from cep.matcher.rows.outer import sort_key

Columns = dict[str, list]


def resolve_column(columns, ident: ast.Identifier) -> str:
    """The input column an identifier names: its exact spelling first, else case-insensitively."""
    if ident.name in columns:
        return ident.name
    folded = {name.casefold(): name for name in columns}
    found = folded.get(ident.name.casefold())
    if found is None:
        raise CepSemanticError(f"unknown column '{ident.name}'", code="E0220", span=ident.span)
    return found


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
    for indices in groups.values():
        for key in reversed(statement.match.order_by):
            if not isinstance(key.expr, ast.ColumnRef):
                continue
            values = columns[resolve_column(columns, key.expr.column)]
            indices.sort(key=lambda i: sort_key(values[i], key.descending, key.nulls_first), reverse=key.descending)
    return list(groups.items())
