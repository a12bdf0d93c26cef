"""Hints for a name the query uses that does not exist: a close spelling, else the names there are.

``did_you_mean`` suggests the closest candidate (case-sensitive first, then ignoring case). For a column,
``column_hint`` falls back to listing the input's columns when nothing is close, so that an analyst who
guessed a name (``cost`` for ``price``) sees what to write instead of a bare "unknown column".
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# How many column names a hint lists before "and N more". A hint is one line under the caret; a wide
# table's hundreds of names would bury the error itself, and a dozen shows what the input looks like.
MAX_COLUMNS_IN_HINT = 12


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    candidates = list(candidates)
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(name.upper(), [c.upper() for c in candidates], n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def column_hint(name: str, columns: Iterable[str]) -> str | None:
    """A close spelling of ``name`` among ``columns``, else the columns the input has (None if it has none)."""
    columns = list(columns)
    close = did_you_mean(name, columns)
    if close is not None or not columns:
        return close
    shown = ", ".join(columns[:MAX_COLUMNS_IN_HINT])
    more = len(columns) - MAX_COLUMNS_IN_HINT
    return f"the input's columns are {shown}" + (f" and {more} more" if more > 0 else "")
