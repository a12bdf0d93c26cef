"""The query around MATCH_RECOGNIZE: ``SELECT list ... [WHERE] [ORDER BY] [LIMIT]`` over its output rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cep.grammar import ast
from cep.grammar.columns import ColumnNames
from cep.grammar.errors import CepSemanticError
from cep.matcher.sql.expressions import compile_generic

# The outer ORDER BY key ``i`` that is not an output column travels as this extra column to an engine
# that sorts itself (Spark), which drops it after sorting.
SORT_COLUMN = "__cep_sort_{}"


@dataclass(frozen=True)
class OuterQuery:
    names: tuple[str, ...]  # output column names of the whole statement
    project: Callable[[tuple], tuple]
    where: Callable[[tuple], object] | None
    sort_keys: tuple[tuple[Callable[[tuple, tuple], object], bool, bool], ...]  # (key, descending, nulls_first)
    # Every key as (column, descending, nulls_first): an output column, or a SORT_COLUMN that
    # ``apply(order_and_limit=False)`` appends to each row (``sort_exprs`` says what it holds).
    sort_names: tuple[tuple[str, bool, bool], ...]
    limit: int | None
    is_identity: bool
    sort_getters: tuple[Callable[[tuple], object], ...] = ()  # the SORT_COLUMN values, from a MATCH_RECOGNIZE row
    sort_exprs: tuple = ()  # (SORT_COLUMN name, its expression over MATCH_RECOGNIZE's output), for typing

    @property
    def unsorted_names(self) -> tuple[str, ...]:
        """The columns of ``apply(order_and_limit=False)``: the output, then the SORT_COLUMNs."""
        return self.names + tuple(name for name, _ in self.sort_exprs)

    def apply(self, rows: list[tuple], *, order_and_limit: bool = True) -> list[tuple]:
        """WHERE, the select list, then ORDER BY and LIMIT; without them (``order_and_limit=False``: the
        engine sorts itself) each row carries the sort keys that are not output columns at its end."""
        if self.where is not None:
            rows = [row for row in rows if self.where(row) is True]
        if order_and_limit and self.sort_keys:
            decorated = [(self.project(row), row) for row in rows]
            for key, descending, nulls_first in reversed(self.sort_keys):
                decorated.sort(key=lambda pair: sort_key(key(*pair), descending, nulls_first), reverse=descending)
            projected = [pair[0] for pair in decorated]
        elif not order_and_limit and self.sort_getters:
            getters = self.sort_getters
            projected = [self.project(row) + tuple(getter(row) for getter in getters) for row in rows]
        else:
            projected = rows if self.is_identity else [self.project(row) for row in rows]
        if order_and_limit and self.limit is not None:
            projected = projected[: self.limit]
        return projected


def sort_key(value, descending: bool, nulls_first: bool | None):
    """A key for ``list.sort`` that places NULLs as asked (default: last for ASC, first for DESC), and NaN
    after every other number."""
    if nulls_first is None:
        nulls_first = descending
    if value is None:
        rank = (2 if nulls_first else 0) if descending else (0 if nulls_first else 2)
        return (rank, 0)
    if value != value:  # NaN: after every other number, +inf included (Spark's order)
        return (1, _INFINITY, 1)
    return (1, value)


_INFINITY = float("inf")


def build_outer(statement: ast.Statement, mr_columns: tuple[str, ...]) -> OuterQuery:
    alias = statement.alias.key if statement.alias is not None else None
    available = ColumnNames(mr_columns)

    def resolve(ref: ast.ColumnRef) -> int:
        if ref.qualifier is not None and (alias is None or ref.qualifier.key != alias):
            raise CepSemanticError(
                f"'{ref.qualifier.name}' is not the MATCH_RECOGNIZE alias; outside MATCH_RECOGNIZE columns "
                "are qualified by its alias (or not at all)",
                code="E0207",
                span=ref.qualifier.span,
            )
        found = available.lookup(ref.column, ref.span)
        if found is None:
            raise CepSemanticError(
                f"'{ref.column.name}' is not an output column of MATCH_RECOGNIZE (it has: {', '.join(mr_columns)})",
                code="E0221",
                span=ref.span,
            )
        return mr_columns.index(found)

    def compile_row(expr):
        def leaf(node):
            if isinstance(node, ast.ColumnRef):
                position = resolve(node)
                return lambda row, _unused=None: row[position]  # compile_generic passes (row, None)
            if isinstance(node, (ast.Navigation, ast.Aggregate, ast.Classifier, ast.MatchNumber, ast.MatchStatus)):
                raise CepSemanticError(
                    "pattern functions (navigation, aggregates, CLASSIFIER, MATCH_NUMBER) belong in MEASURES, "
                    "not in the outer query",
                    code="E0208",
                    span=node.span,
                )
            return None

        return compile_generic(expr, leaf, compile_row)

    names: list[str] = []
    getters: list[Callable] = []
    identity = True
    for item_index, item in enumerate(statement.select):
        if isinstance(item.expr, ast.Star):
            if item.expr.qualifier is not None and (alias is None or item.expr.qualifier.key != alias):
                raise CepSemanticError(f"unknown relation '{item.expr.qualifier.name}'", code="E0207", span=item.span)
            for position, name in enumerate(mr_columns):
                names.append(name)
                getters.append(lambda row, p=position: row[p])
            continue
        identity = False
        getters.append(compile_row(item.expr))
        if item.alias is not None:
            names.append(item.alias.name)
        elif isinstance(item.expr, ast.ColumnRef):
            names.append(item.expr.column.name)
        else:
            names.append(f"_col{item_index}")
    identity = identity and len(statement.select) == 1

    def project(row: tuple) -> tuple:
        return tuple(getter(row) for getter in getters)

    where = compile_row(statement.where) if statement.where is not None else None
    sort_keys, sort_names, sort_getters, sort_exprs = [], [], [], []
    for key in statement.order_by:
        position = _output_position(key.expr, names, alias, statement.select)
        if position is not None:
            sort_keys.append((lambda projected, row, p=position: projected[p], key.descending, key.nulls_first))
            sort_names.append((names[position], key.descending, _nulls_first(key)))
            continue
        getter = compile_row(key.expr)
        hidden = SORT_COLUMN.format(len(sort_getters))
        sort_keys.append((lambda projected, row, g=getter: g(row), key.descending, key.nulls_first))
        sort_names.append((hidden, key.descending, _nulls_first(key)))
        sort_getters.append(getter)
        sort_exprs.append((hidden, key.expr))
    return OuterQuery(
        names=tuple(names),
        project=project,
        where=where,
        sort_keys=tuple(sort_keys),
        sort_names=tuple(sort_names),
        limit=statement.limit,
        is_identity=identity,
        sort_getters=tuple(sort_getters),
        sort_exprs=tuple(sort_exprs),
    )


def _output_position(expr, names: list[str], alias: str | None, select) -> int | None:
    """The output column an ORDER BY key names: ``ORDER BY 2`` (a position in the select list), a name of
    the output (``total``, or ``m.total`` qualified by the MATCH_RECOGNIZE alias, as Oracle writes it);
    None when the key is something else (an expression, a column of MATCH_RECOGNIZE not selected)."""
    if isinstance(expr, ast.Literal) and expr.kind == "integer":
        if not 1 <= expr.value <= len(names):
            raise CepSemanticError(
                f"ORDER BY {expr.value}: the output has {len(names)} columns",
                code="E0209",
                span=expr.span,
                hint="ORDER BY n sorts by the n-th output column",
            )
        return expr.value - 1
    if not isinstance(expr, ast.ColumnRef) or (expr.qualifier is not None and expr.qualifier.key != alias):
        return None
    found = ColumnNames(names).lookup(expr.column, expr.span)
    if found is None:
        return None
    if expr.qualifier is not None:
        # m.x names MATCH_RECOGNIZE's column x: the output column of that name is it only when the select
        # list passes x through unchanged (SELECT m.x, SELECT *), not when an expression is aliased x.
        item = _select_item_of(select, found)
        if item is not None and not (isinstance(item.expr, ast.ColumnRef) and item.expr.column.key == expr.column.key):
            return None
    return names.index(found)


def _select_item_of(select, name: str):
    """The select item that produces the output column ``name`` (None for ``*``)."""
    produced: dict[str, ast.SelectItem] = {}
    for item in select:
        if isinstance(item.expr, ast.Star):
            continue
        column = getattr(item.expr, "column", None)
        item_name = item.alias.name if item.alias is not None else getattr(column, "name", None)
        if item_name is not None:
            produced.setdefault(item_name, item)
    found = ColumnNames(produced).find_name(name)
    return produced[found] if found is not None else None


def _nulls_first(key: ast.SortKey) -> bool:
    return key.descending if key.nulls_first is None else key.nulls_first
