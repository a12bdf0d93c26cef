"""LIKE and regular expressions in time linear in the text, whatever the pattern.

A LIKE pattern or a regular expression may come from a column, so the data alone chooses it: a
backtracking matcher (Python's ``re``) takes exponential time on ``'%a%a%a%a%a%a%a%a%a%a%b'`` over a
string of ``a``, and one such row would stall a stream. So:

- **LIKE** needs no backtracking at all. The pattern is split at ``%`` into segments of literal
  characters and ``_``; the first segment must match at the start, the last at the end, and each one
  between is taken at its leftmost place after the previous one (greedy: a later place can only leave
  less room to the segments after it). Matching costs O(text x pattern) at worst, never more.
  ``ESCAPE e``: ``e`` must be one character and may only precede ``%``, ``_`` or itself (as in SQL and
  Spark); a pattern that breaks this is an error, not silently read another way.
- **Regular expressions** (REGEXP_LIKE, RLIKE, REGEXP_SUBSTR, REGEXP_REPLACE) run on RE2 (the
  ``google-re2`` package), an automaton-based engine that is linear in the text. Its syntax is the
  common Perl/Java one without the constructs only backtracking can do: backreferences (``\\1``) and
  lookaround (``(?=...)``, ``(?<!...)``) are errors that say so.

Compiled patterns are cached (a pattern from a column usually repeats).
"""

from __future__ import annotations

from typing import NamedTuple

from cep.grammar.errors import CepRuntimeError
from cep.grammar.functions import ANY, PatternError, compile_regex, like_segments

# Compiled LIKE patterns and regular expressions kept per process: enough for the patterns of a query and
# the distinct values of a pattern column, bounded so that a column of unique patterns cannot grow memory.
MAX_CACHED_PATTERNS = 4096


class LikeSegment(NamedTuple):
    items: tuple  # characters, or ANY (a `_`)
    literal: str | None  # the segment as text when it has no `_` (found with str.find)


class LikePattern(NamedTuple):
    """``segments`` split at `%`; ``anchored_end``: no `%` after the last segment."""

    segments: tuple[LikeSegment, ...]
    open_start: bool  # the pattern starts with %
    open_end: bool  # the pattern ends with %

    def matches(self, text: str) -> bool:
        segments = self.segments
        if not self.open_start and not self.open_end and len(segments) == 1:
            return len(text) == len(segments[0].items) and _at(segments[0], text, 0)
        position, end = 0, len(text)
        first, last = 0, len(segments)
        if not self.open_start:  # the first segment is anchored at the start
            if not _at(segments[0], text, 0):
                return False
            position, first = len(segments[0].items), 1
        if not self.open_end:  # the last is anchored at the end
            tail = segments[-1]
            end -= len(tail.items)
            if end < position or not _at(tail, text, end):
                return False
            last -= 1
        for segment in segments[first:last]:
            found = _find(segment, text, position, end)
            if found < 0:
                return False
            position = found + len(segment.items)
        return True


def _at(segment: LikeSegment, text: str, position: int) -> bool:
    if segment.literal is not None:
        return text.startswith(segment.literal, position)
    if position + len(segment.items) > len(text):
        return False
    return all(item is ANY or item == text[position + offset] for offset, item in enumerate(segment.items))


def _find(segment: LikeSegment, text: str, start: int, end: int) -> int:
    """The leftmost place at or after ``start`` where ``segment`` fits before ``end`` (-1 if none)."""
    if segment.literal is not None:
        return text.find(segment.literal, start, end)
    for position in range(start, end - len(segment.items) + 1):
        if _at(segment, text, position):
            return position
    return -1


_LIKE_CACHE: dict[tuple[str, str | None], LikePattern] = {}


def like_pattern(pattern: str, escape: str | None = None) -> LikePattern:
    """Compile a LIKE pattern (raises PatternError on a bad escape)."""
    key = (pattern, escape)
    found = _LIKE_CACHE.get(key)
    if found is not None:
        return found
    segments = like_segments(pattern, escape)
    open_start, open_end = not segments[0] and len(segments) > 1, not segments[-1] and len(segments) > 1
    kept = [s for s in segments if s] if len(segments) > 1 else segments
    compiled = LikePattern(
        tuple(LikeSegment(tuple(items), None if ANY in items else "".join(items)) for items in kept),
        open_start,
        open_end,
    )
    if not compiled.segments:  # only % signs: anything matches
        compiled = LikePattern((LikeSegment((), ""),), True, True)
    if len(_LIKE_CACHE) < MAX_CACHED_PATTERNS:
        _LIKE_CACHE[key] = compiled
    return compiled


def like(text: str, pattern: str, escape: str | None = None, case_insensitive: bool = False) -> bool:
    """``text LIKE pattern`` (ILIKE lower-cases both sides first, as Spark does)."""
    if case_insensitive:
        text, pattern = text.lower(), pattern.lower()
        escape = escape.lower() if escape is not None else None
    return like_pattern(pattern, escape).matches(text)


# --------------------------------------------------------------------------------------- regular expressions

_REGEX_CACHE: dict[str, object] = {}


def regex(pattern: str):
    """A regular expression compiled with RE2, cached (raises PatternError)."""
    found = _REGEX_CACHE.get(pattern)
    if found is None:
        found = compile_regex(pattern)
        if len(_REGEX_CACHE) < MAX_CACHED_PATTERNS:
            _REGEX_CACHE[pattern] = found
    return found


def regexp_like(text: str, pattern: str) -> bool:
    """Spark's RLIKE / REGEXP_LIKE: the pattern matches somewhere in the text."""
    return regex(pattern).search(text) is not None


def regexp_substr(text: str, pattern: str, position: int = 1, occurrence: int = 1) -> str | None:
    """The ``occurrence``-th match at or after the 1-based ``position`` (Spark's and Snowflake's
    REGEXP_SUBSTR; Spark takes the first two arguments only), or NULL."""
    if position < 1 or occurrence < 1:
        raise PatternError("REGEXP_SUBSTR's position and occurrence count from 1")
    for count, found in enumerate(regex(pattern).finditer(text, position - 1), start=1):
        if count == occurrence:
            return found.group(0)
    return None


def regexp_replace(text: str, pattern: str, replacement: str) -> str:
    """Every match replaced; ``$1`` in the replacement is group 1 (Java's syntax, which Spark uses) and
    ``\\$`` a dollar sign."""
    parts = _replacement_parts(replacement)
    return regex(pattern).sub(
        lambda found: "".join(part if isinstance(part, str) else (found.group(part) or "") for part in parts), text
    )


def _replacement_parts(replacement: str) -> list:
    parts: list = []
    index = 0
    while index < len(replacement):
        char = replacement[index]
        if char == "\\" and index + 1 < len(replacement):
            parts.append(replacement[index + 1])
            index += 2
        elif char == "$" and index + 1 < len(replacement) and replacement[index + 1].isdigit():
            end = index + 1
            while end < len(replacement) and replacement[end].isdigit():
                end += 1
            parts.append(int(replacement[index + 1 : end]))
            index = end
        else:
            parts.append(char)
            index += 1
    return parts


def pattern_error(error: PatternError) -> CepRuntimeError:
    return CepRuntimeError(str(error), code="E0413")
