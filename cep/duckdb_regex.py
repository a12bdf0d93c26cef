"""Spark's regular expressions and LIKE patterns (Java's) on DuckDB (RE2), where the two read one text otherwise.

- ``regexp_replace``'s replacement: Java's ``$1`` names a group and ``\\x`` is the character x; RE2's group is
  ``\\1`` and ``$`` is itself. The replacement, written as a literal, is rewritten into RE2's form.
- A pattern that matches the empty string (``x*``, ``''``, ``a|``): Java and RE2 find other empty matches
  after a non-empty one (``regexp_replace('axb', 'x*', '-')`` is ``-a--b-`` on Spark, ``-a-b-`` on DuckDB),
  and Spark's ``split`` keeps a trailing empty piece there: refused in ``regexp_replace``, ``split`` and
  ``regexp_instr``.
- A pattern with a construct Java has and RE2 lacks (a lookahead ``(?=``, a lookbehind ``(?<=``, an atomic
  group, a backreference ``\\1``, a possessive quantifier ``a++``, Java's named group ``(?<name>``): refused,
  with the construct named, in every regexp function (DuckDB would fail with RE2's words).
- ``regexp_extract``'s group beyond the pattern's groups (``regexp_extract(s, 'a')``: Spark's default group is
  1, and ``'a'`` has none): Spark fails on every row whose text the pattern matches, DuckDB gives ``''``; the
  translation fails as Spark does.
- ``regexp_extract``/``regexp_extract_all`` of a group past 9: DuckDB extracts groups 0 to 9 only; refused.
- ``LIKE``, ``ILIKE`` without ``ESCAPE``: Spark's escape character is ``\\`` (``'a\\_b'`` matches ``a_b`` only),
  DuckDB has none; the translation gives DuckDB Spark's. A literal pattern with ``\\`` before another
  character, or at its end, is Spark's error before running.
"""

from __future__ import annotations

import re

from cep.duckdb_nodes import Refusal, call_duck, fail_with, place_of

# Imported inside functions: sqlglot (heavy; `cep check` of a single clause needs none of it).

# Texts on which a pattern that can match the empty string somewhere shows it (an anchor or a word boundary
# matches empty only beside a character).
_EMPTY_MATCH_PROBES = ("", "a", "a b", "0.")


def spark_regex(node):
    """The node rewritten for DuckDB where Spark's reading of its pattern differs, else None; Refusal where
    Spark's answer cannot be had."""
    from sqlglot import exp

    if isinstance(node, _PATTERN_FUNCTIONS()):
        pattern = node.args.get("expression")
        if isinstance(pattern, exp.Literal) and pattern.is_string:
            construct = java_only_construct(pattern.this)
            if construct is not None:
                raise Refusal(
                    f"the python engine cannot run the regular expression {pattern.this!r}: it has {construct}, "
                    f"which Java's regular expressions (Spark's) have and DuckDB's RE2 does not",
                    *place_of(node),
                )
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
    if isinstance(node, (exp.RegexpExtract, exp.RegexpExtractAll)):
        _check_group_reachable(node)
    if isinstance(node, exp.RegexpExtract):
        return _missing_group(node)
    if isinstance(node, (exp.Like, exp.ILike)) and not isinstance(node.parent, exp.Escape):
        pattern = node.args.get("expression")
        if isinstance(pattern, exp.Literal) and pattern.is_string:
            _check_like_escapes(pattern.this, pattern if "start" in pattern.meta else node)
        return exp.Escape(this=node.copy(), expression=exp.Literal.string("\\"))
    return None


def _PATTERN_FUNCTIONS() -> tuple:  # noqa: N802 - a constant, built when sqlglot is imported
    """The calls whose ``expression`` is a regular expression: RLIKE (regexp, regexp_like) and regexp_*."""
    from sqlglot import exp

    return (
        exp.RegexpLike,
        exp.RegexpILike,
        exp.RegexpExtract,
        exp.RegexpExtractAll,
        exp.RegexpReplace,
        exp.RegexpSplit,
        exp.RegexpInstr,
        exp.RegexpCount,
        exp.RegexpSubstr,
        exp.RegexpFullMatch,
    )


# Java's group constructs RE2 lacks, by what follows "(?": checked longest first.
_JAVA_GROUPS = (
    ("<=", "a lookbehind (?<=...)"),
    ("<!", "a negative lookbehind (?<!...)"),
    ("=", "a lookahead (?=...)"),
    ("!", "a negative lookahead (?!...)"),
    (">", "an atomic group (?>...)"),
    ("<", "a named group written (?<name>...) (RE2 reads (?P<name>...))"),
)


def java_only_construct(pattern: str) -> str | None:
    """The first construct of ``pattern`` (Java's syntax) that RE2 does not have, in words; None if it has
    none. Escaped characters, ``\\Q...\\E`` quotes and character classes are skipped (a ``\\1`` in a class is
    Java's octal, not a backreference)."""
    at, in_class = 0, False
    while at < len(pattern):
        char, following = pattern[at], pattern[at + 1 : at + 2]
        if char == "\\":
            if following == "Q":
                end = pattern.find("\\E", at + 2)
                at = len(pattern) if end < 0 else end + 2
                continue
            if not in_class and following.isdigit() and following != "0":
                return f"a backreference \\{following}"
            if not in_class and following == "k":
                return "a named backreference \\k<name>"
            at += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            at += 1 + (pattern[at + 1 : at + 2] == "^")
            at += pattern[at : at + 1] == "]"  # a ] first in a class is the character
            continue
        elif char == "(" and following == "?":
            rest = pattern[at + 2 : at + 4]
            for start, words in _JAVA_GROUPS:
                if rest.startswith(start):
                    return words
        elif char in "*+?}" and following == "+" and (char != "?" or at and pattern[at - 1] != "("):
            return f"a possessive quantifier {char}+"
        at += 1
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


# DuckDB's regexp_extract takes a group index 0 to 9 (its error: "Group index must be between 0 and 9!");
# Java's, and so Spark's, any group the pattern has.
DUCKDB_LAST_GROUP = 9


def _check_group_reachable(node) -> None:
    """A literal group index past DuckDB's last is refused before running (Spark runs it)."""
    group = node.args.get("group")
    if group is not None and group.is_number and group.this.isdigit() and int(group.this) > DUCKDB_LAST_GROUP:
        raise Refusal(
            f"the python engine (DuckDB) extracts regexp groups 0 to {DUCKDB_LAST_GROUP} only, not group {group.this}",
            *place_of(node),
        )


def _missing_group(node):
    """regexp_extract of a literal group its literal pattern does not have: Spark checks the index against the
    pattern's groups for each text in which the pattern finds a match (INVALID_PARAMETER_VALUE.REGEX_GROUP_INDEX;
    '' where it finds none, found by the differential, seed 60), where DuckDB answers ''. None when the group
    exists or either is not a literal."""
    from sqlglot import exp

    pattern, group = node.args.get("expression"), node.args.get("group")
    if not (isinstance(pattern, exp.Literal) and pattern.is_string and isinstance(group, exp.Literal)):
        return None
    if group.is_string or not group.this.isdigit():
        return None
    index = int(group.this)  # a negative one is Neg's, checked by the translation of the operators first
    try:
        groups = re.compile(pattern.this).groups
    except re.error:
        return None  # not Python's syntax: the group count is not known here, DuckDB's own reading stands
    if index <= groups:
        return None
    failed = fail_with(
        f"regexp_extract's group {index} is not in the pattern {pattern.this!r}, which has {groups} "
        f"group{'' if groups == 1 else 's'} (Spark's default group is 1)",
        place_of(node),
        "VARCHAR",
    )
    found = call_duck("regexp_matches", node.this.copy(), pattern.copy())
    return exp.Case(ifs=[exp.If(this=found, true=failed)], default=node.copy())  # no match: '' (NULL of NULL)


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
