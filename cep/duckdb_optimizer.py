"""Which of DuckDB's optimizers a translated statement may use: those that cannot hide an error Spark raises.

DuckDB's expression rewriter moves a constant across a comparison (``b + 1 > 0`` becomes ``b > -1``,
``b * 2 = 10`` becomes ``b = 5``, ``-b > 0`` becomes ``b < 0``, ``2 * (b + 1) > 0`` becomes ``b > -1``), so the
arithmetic that would overflow is never computed; Spark computes it and, in ANSI mode, fails. The rewriter is
one optimizer (``disabled_optimizers`` names whole optimizers, not its rules), and it also does useful work that
changes no answer (a ``LIKE 'k1%'`` as a prefix test, constants folded once), so it stays on for a statement
with no arithmetic and is turned off for one with any: the arithmetic may reach a comparison through a
subquery's column or a CTE (DuckDB inlines them), so where it stands in the statement cannot tell.
"""

from __future__ import annotations

import functools

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none).

# The optimizer that moves constants across comparisons (MoveConstantsRule, MoveUnaryMinusRule).
CONSTANT_MOVER = "expression_rewriter"


@functools.lru_cache(maxsize=256)
def computes_arithmetic(duckdb_text: str) -> bool:
    """Whether the translated statement ``duckdb_text`` (DuckDB SQL) adds, subtracts, multiplies or negates a
    value that is not a number written in the text (a negative literal is a constant, not arithmetic)."""
    import sqlglot
    from sqlglot import expressions as exp

    try:
        tree = sqlglot.parse_one(duckdb_text, dialect="duckdb")
    except sqlglot.errors.SqlglotError:
        return True  # unknown: keep Spark's errors rather than the rewriter's speed
    for node in tree.walk():
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            return True
        if isinstance(node, exp.Neg) and not isinstance(node.this, exp.Literal):
            return True
    return False


def disabled_optimizers(duckdb_text: str) -> str:
    """The value of DuckDB's ``disabled_optimizers`` setting for running ``duckdb_text``."""
    return CONSTANT_MOVER if computes_arithmetic(duckdb_text) else ""
