"""Spark's regular expressions and LIKE patterns (Java's) on DuckDB (RE2), where the two read one text otherwise.

- ``regexp_replace``'s replacement: Java's ``$1`` names a group and ``\\x`` is the character x; RE2's group is
  ``\\1`` and ``$`` is itself. The replacement, written as a literal, is rewritten into RE2's form.
- A pattern that matches the empty string (``x*``, ``''``, ``a|``): Java and RE2 find other empty matches
  after a non-empty one (``regexp_replace('axb', 'x*', '-')`` is ``-a--b-`` on Spark, ``-a-b-`` on DuckDB),
  and Spark's ``split`` keeps a trailing empty piece there: refused in ``regexp_replace``, ``split`` and
  ``regexp_instr``.
- ``LIKE``, ``ILIKE`` without ``ESCAPE``: Spark's escape character is ``\\`` (``'a\\_b'`` matches ``a_b`` only),
  DuckDB has none; the translation gives DuckDB Spark's. A literal pattern with ``\\`` before another
  character, or at its end, is Spark's error before running.
"""

from __future__ import annotations

import re

from cep.duckdb_nodes import Refusal, place_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

# Texts on which a pattern that can match the empty string somewhere shows it (an anchor or a word boundary
# matches empty only beside a character).
_EMPTY_MATCH_PROBES = ("", "a", "a b", "0.")


def spark_regex(node):
    """The node rewritten for DuckDB where Spark's reading of its pattern differs, else None; Refusal where
    Spark's answer cannot be had."""
    from sqlglot import exp

    if isinstance(node, (exp.RegexpReplace, exp.RegexpSplit, exp.RegexpInstr)):
        pattern = node.args.get("expression")
        if isinstance(pattern, exp.Literal) and pattern.is_string and _matches_empty(pattern.this):
            raise Refusal(
                f"the python engine cannot run a pattern that matches the empty string ({pattern.this!r}) as Spark "
                f"does (Java finds other empty matches than DuckDB's RE2)",
                *place_of(node),
            )
    if isinstance(node, exp.RegexpReplace):
        return _java_replacement(node)
    if isinstance(node, (exp.Like, exp.ILike)) and not isinstance(node.parent, exp.Escape):
        pattern = node.args.get("expression")
        if isinstance(pattern, exp.Literal) and pattern.is_string:
            _check_like_escapes(pattern.this, pattern if "start" in pattern.meta else node)
        return exp.Escape(this=node.copy(), expression=exp.Literal.string("\\"))
    return None


def _matches_empty(pattern: str) -> bool:
    try:
        compiled = re.compile(pattern)
    except re.error:
        return False  # not Python's syntax: DuckDB reads it, or says it cannot
    return any(match.start() == match.end() for probe in _EMPTY_MATCH_PROBES for match in compiled.finditer(probe))


def _java_replacement(node):
    """regexp_replace with Java's replacement rewritten as RE2's (Matcher.appendReplacement's rules)."""
    from sqlglot import exp

    replacement = node.args.get("replacement")
    if replacement is None:
        return None
    if not (isinstance(replacement, exp.Literal) and replacement.is_string):
        if isinstance(replacement, exp.Null):
            return None
        raise Refusal(
            "the python engine reads a regexp_replace replacement only as a literal (Java's $1 and \\ rules)",
            *place_of(replacement if "start" in replacement.meta else node),
        )
    text, out, at = replacement.this, [], 0
    while at < len(text):
        char = text[at]
        if char == "\\":
            if at + 1 == len(text):
                raise _bad_replacement(text, "ends with \\", node)
            out.append("\\\\" if text[at + 1] == "\\" else text[at + 1])
            at += 2
        elif char == "$":
            group = text[at + 1 : at + 2]
            if not group.isdigit():
                raise _bad_replacement(text, "has $ without a group number (write \\$ for the character)", node)
            if text[at + 2 : at + 3].isdigit():
                raise _bad_replacement(text, "has a group number of two digits, which Java reads by the groups", node)
            out.append("\\" + group)
            at += 2
        else:
            out.append(char)
            at += 1
    rewritten = node.copy()
    rewritten.set("replacement", exp.Literal.string("".join(out)))
    return rewritten


def _bad_replacement(text: str, why: str, node) -> Refusal:
    return Refusal(
        f"the python engine cannot read the regexp_replace replacement {text!r} as Spark does: it {why}",
        *place_of(node),
    )


def _check_like_escapes(pattern: str, node) -> None:
    """Spark's error for a LIKE pattern whose escape character \\ stands before a character other than _ % \\,
    or at the end (INVALID_FORMAT.ESC_IN_THE_MIDDLE, ESC_AT_THE_END), before running."""
    at = 0
    while at < len(pattern):
        if pattern[at] == "\\":
            following = pattern[at + 1 : at + 2]
            if following not in ("_", "%", "\\"):
                where = "at the end" if not following else f"before {following!r}"
                raise Refusal(
                    f"the LIKE pattern {pattern!r} has its escape character \\ {where}, which Spark refuses "
                    f"(write \\\\ for the character)",
                    *place_of(node),
                    spark_too=True,
                )
            at += 2
        else:
            at += 1
