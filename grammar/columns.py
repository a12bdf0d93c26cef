"""Which column an identifier names: one rule for every clause, every engine, and the checker.

The rule is Spark's (``spark.sql.caseSensitive`` off, its default), so a query means the same on a list
of dicts, a DataFrame, Arrow and Spark:

- an unquoted identifier (``Ts``) names the column whose name equals it ignoring case. When the input
  has two columns that differ only in case (``ts`` and ``Ts``), an unquoted identifier matching both is
  ambiguous: an error that names both (quoting picks one);
- a quoted identifier (``"Ts"`` or ```Ts```) names the column spelled exactly so, and no other.

``ORDER BY Ts``, ``FIRST(Ts)``, ``PARTITION BY``, the outer query and the checker's schema all resolve
through ``ColumnNames``. Names given as plain text outside a query (``dedup_key=``, ``--partition
COLUMN=VALUE``, a ``schema`` dict) are not identifiers: ``find_name`` takes the exact spelling, else the
one column equal to it ignoring case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from cep.grammar import ast
from cep.grammar.errors import CepSemanticError, Span

V = TypeVar("V")


class ColumnNames:
    """The column names of one input (or of MATCH_RECOGNIZE's output), indexed for resolving."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(dict.fromkeys(names))  # a name listed twice is one column
        self.exact = frozenset(self.names)
        self.folded: dict[str, list[str]] = {}
        for name in self.names:
            self.folded.setdefault(name.casefold(), []).append(name)

    def lookup(self, ident: ast.Identifier, span: Span | None = None) -> str | None:
        """The column ``ident`` names; None when there is none; ``CepSemanticError`` (E0220) when ambiguous."""
        if ident.quoted:
            return ident.name if ident.name in self.exact else None
        found = self.folded.get(ident.name.casefold())
        if found is None:
            return None
        if len(found) > 1:
            both = " and ".join(repr(name) for name in found)
            raise CepSemanticError(
                f"column '{ident.name}' is ambiguous: it matches {both}, which differ only in case",
                code="E0220",
                span=span or ident.span,
                hint=f'quote the name to pick one, e.g. "{found[0]}"',
            )
        return found[0]

    def resolve(self, ident: ast.Identifier, span: Span | None = None) -> str:
        """The column ``ident`` names; ``CepSemanticError`` (E0220) when there is none or it is ambiguous."""
        found = self.lookup(ident, span)
        if found is None:
            raise CepSemanticError(f"unknown column '{ident.name}'", code="E0220", span=span or ident.span)
        return found

    def find_name(self, name: str) -> str | None:
        """A column named by plain text: the exact spelling, else the one column equal to it ignoring case
        (None when there is none; ``CepSemanticError`` E0220 when several differ only in case)."""
        if name in self.exact:
            return name
        return self.lookup(ast.Identifier(None, str(name)))

    def option_column(self, name: str, option: str) -> str:
        """The column an option (``dedup_key``, ...) names as plain text; E0220 naming the option when none."""
        found = self.find_name(name)
        if found is None:
            raise CepSemanticError(f"unknown column '{name}' ({option})", code="E0220")
        return found

    def has_name_ignoring_case(self, name: str) -> bool:
        """Whether some column equals ``name`` ignoring case: a name cep reserves (``match_id``) clashes so."""
        return name.casefold() in self.folded

    def case_clash(self) -> tuple[str, ...] | None:
        """The first columns that differ only in case (which Spark's analyzer cannot tell apart), or None."""
        return next((tuple(found) for found in self.folded.values() if len(found) > 1), None)

    def among(self, words: Iterable[str]) -> list[str]:
        """The columns (in their order) that some word of ``words`` names ignoring case: the columns a
        reader keeps when pruning to the names a statement may read (over-keeping is harmless)."""
        wanted = {word.casefold() for word in words}
        return [name for name in self.names if name.casefold() in wanted]

    @staticmethod
    def first_repeat(names: Iterable[str]) -> tuple[int, int] | None:
        """The 1-based positions of the first name in ``names`` that repeats an earlier one ignoring case (a
        header that names a column twice), or None."""
        seen: dict[str, int] = {}
        for position, name in enumerate(names, 1):
            key = name.casefold()
            if key in seen:
                return seen[key], position
            seen[key] = position
        return None

    def by_column(self, given: Mapping[str, V]) -> dict[str, V]:
        """``given`` (keyed by names written as plain text: a schema, declared types) keyed by the columns
        those names find (``find_name``); names no column answers to are left out, and when two names find
        one column the exact spelling wins. ``CepSemanticError`` (E0220) when a name is ambiguous."""
        found: dict[str, V] = {}
        for name, value in given.items():
            column = self.find_name(name)
            if column is not None and (column not in found or name == column):
                found[column] = value
        return found

    def __contains__(self, name: object) -> bool:
        return name in self.exact
