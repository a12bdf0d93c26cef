"""Hints for a name the query uses that does not exist: a close spelling, else the names there are.

``did_you_mean`` suggests the closest candidate (case-sensitive first, then ignoring case). ``names_hint``
(and ``column_hint`` for a column) falls back to listing the names there are when nothing is close, so that
an analyst who guessed a name (``cost`` for ``price``, ``X`` for a variable) sees what to write instead of
a bare "unknown column".
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# How many names a hint lists before "and N more". A hint is one line under the caret; a wide table's
# hundreds of columns would bury the error itself, and a dozen shows what the input looks like.
MAX_NAMES_IN_HINT = 12


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    candidates = list(candidates)
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(name.upper(), [c.upper() for c in candidates], n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def names_hint(name: str, names: Iterable[str], listed_as: str) -> str | None:
    """A close spelling of ``name`` among ``names``, else ``listed_as`` followed by the names (None if there
    are none): ``names_hint("cost", ["ts", "price"], "the input's columns")``."""
    names = list(names)
    close = did_you_mean(name, names)
    if close is not None or not names:
        return close
    shown = ", ".join(names[:MAX_NAMES_IN_HINT])
    more = len(names) - MAX_NAMES_IN_HINT
    return f"{listed_as} are {shown}" + (f" and {more} more" if more > 0 else "")


def column_hint(name: str, columns: Iterable[str], *, quoted: bool = False) -> str | None:
    """A close spelling of ``name`` among ``columns``; else, for a double-quoted name (``status = "fail"``, as
    MySQL writes text), how to write text; else the columns the input has (None if it has none)."""
    columns = list(columns)
    if quoted and did_you_mean(name, columns) is None:
        text = name.replace("'", "''")
        return f"double quotes name a column (as in the SQL standard); write text in single quotes: '{text}'"
    return names_hint(name, columns, "the input's columns")
