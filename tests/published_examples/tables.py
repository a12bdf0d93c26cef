"""Reading the tables of the published examples as they were printed (tests/published_examples/*.json).

Each case keeps the publisher's text verbatim next to the typed rows it was transcribed into:
``inputs[...]["published_text"]`` (the CREATE/INSERT statements, or the table as printed) and
``output["published_text"]`` (the result as printed). ``test_published_examples.py`` parses that text
again with the functions here and checks it gives the typed rows, so a later edit of either side
cannot drift unnoticed. The printed forms handled:

* Snowflake's boxed tables (``+---+`` borders, ``| a | b |`` rows, ``NULL``);
* Markdown tables (YDB's documentation);
* the Trino CLI's psql-like tables (`` a | b ``, ``---+---``, ``(2 rows)``);
* fixed-width columns under a rule: SQL*Plus (Oracle: a header line, a line of dashes giving the widths)
  and Flink's documentation (a line of ``=`` giving the widths, strings and times in single quotes);
* SQLcl's ``ansiconsole`` format (Practical Oracle SQL): no rule, each column starts where its heading
  starts, values left-aligned, an empty cell is NULL (``parse_spaced`` reads the ones a translation
  misaligned, by runs of two spaces, the translated values mapped back as the case says);
* ``INSERT INTO t VALUES (...)`` statements, one or several rows each (Oracle's ``DATE '...'`` and
  ``TO_DATE('...', 'format')`` give their text).

Values are turned into the JSON form the cases use: INTEGER/BIGINT as int, DOUBLE/DECIMAL as float,
DATE as ``YYYY-MM-DD``, TIMESTAMP as ``YYYY-MM-DD HH:MM:SS``, BOOLEAN as bool, ARRAY<...> as a list,
VARCHAR as str; ``NULL`` (or an empty SQL*Plus cell) as None. Oracle's ``DD-MON-YY`` dates use the
RR rule of its default NLS_DATE_FORMAT (two-digit years 00-49 are 20xx).
"""

from __future__ import annotations

import datetime as dt
import json
import re

MONTHS = {
    m: i
    for i, m in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], start=1)
}


# ----------------------------------------------------------------------------------------- values


def to_date(text: str) -> str:
    text = text.strip()
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", text)
    if m:
        return dt.date(int(m[1]), int(m[2]), int(m[3])).isoformat()
    m = re.fullmatch(r"(\d{1,2})-([A-Za-z]{3})-(\d{2}|\d{4})", text)
    if m:
        year = int(m[3])
        if len(m[3]) == 2:
            year += 2000 if year < 50 else 1900
        return dt.date(year, MONTHS[m[2].upper()], int(m[1])).isoformat()
    raise ValueError(f"not a date: {text!r}")


def to_timestamp(text: str) -> str:
    text = text.strip()
    m = re.fullmatch(r"(.+?)[ T](\d{2}):(\d{2})(?::(\d{2}))?(\.0+)?", text)
    if m:
        day = to_date(m[1])
        return f"{day} {m[2]}:{m[3]}:{m[4] or '00'}"
    return f"{to_date(text)} 00:00:00"


def convert(text, kind: str):
    """One printed value as the JSON value of a column of SQL type ``kind``."""
    if text is None:
        return None
    if not isinstance(text, str):
        return text
    text = text.strip()
    if text in ("NULL", ""):
        return None
    kind = kind.upper()
    if kind in ("INTEGER", "BIGINT"):
        return int(text)
    if kind in ("DOUBLE",) or kind.startswith("DECIMAL"):
        return float(text)
    if kind == "DATE":
        return to_date(text)
    if kind == "TIMESTAMP":
        return to_timestamp(text)
    if kind == "BOOLEAN":
        return {"true": True, "false": False}[text.lower()]
    if kind.startswith("ARRAY"):
        inner = kind[kind.index("<") + 1 : -1]
        return [convert(item, inner) for item in json.loads(text)]
    return text


# ----------------------------------------------------------------------------------------- tables


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_box(text: str) -> tuple[list[str], list[list[str]]]:
    """Snowflake's boxed table."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    body = [line for line in lines if line.lstrip().startswith("|") and not re.fullmatch(r"\|[-+|]+\|", line.strip())]
    return _cells(body[0]), [_cells(line) for line in body[1:]]


def parse_markdown(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    body = [line for line in lines if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line.strip())]
    return _cells(body[0]), [_cells(line) for line in body[1:]]


def parse_psql(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in text.strip("\n").splitlines() if line.strip()]
    body = [
        line
        for line in lines
        if not re.fullmatch(r"[-+]+", line.strip()) and not re.fullmatch(r"\(\d+ rows?\)", line.strip())
    ]
    return [c.strip() for c in body[0].split("|")], [[c.strip() for c in line.split("|")] for line in body[1:]]


def _unquote(cell: str) -> str:
    """Flink's documentation prints strings and times in single quotes: ``'ACME'``."""
    return cell[1:-1] if len(cell) >= 2 and cell[0] == cell[-1] == "'" else cell


def parse_fixed(text: str) -> tuple[list[str], list[list[str]]]:
    """Fixed-width columns: the dashes (SQL*Plus) or ``=`` (Flink) under the header give each column's
    start and width; without such a rule (SQLcl's ansiconsole) each heading's start is its column's."""
    lines = text.strip("\n").splitlines()
    rule = next((i for i, line in enumerate(lines) if re.fullmatch(r"[-= ]+", line) and line.strip()), None)
    if rule is None:
        return parse_aligned(text)
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+|=+", lines[rule])]

    def cut(line: str) -> list[str]:
        return [_unquote(line[a : b + 1 if k < len(spans) - 1 else None].strip()) for k, (a, b) in enumerate(spans)]

    header = cut(lines[rule - 1])
    rows = [
        cut(line)
        for line in lines[rule + 1 :]
        if line.strip() and not re.fullmatch(r"\d+ rows? selected\.", line.strip())
    ]
    return header, rows


def parse_aligned(text: str) -> tuple[list[str], list[list[str]]]:
    """SQLcl's ansiconsole output: each column starts where its heading starts (values are left-aligned,
    so a cell is the text from its column's start to the next column's start; empty is NULL)."""
    lines = [line for line in text.strip("\n").splitlines() if line.strip()]
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    bounds = list(zip(starts, [*starts[1:], None]))

    def cut(line: str) -> list[str]:
        return [line[a:b].strip() for a, b in bounds]

    return cut(lines[0]), [cut(line) for line in lines[1:]]


def parse_spaced(text: str) -> tuple[list[str], list[list[str]]]:
    """Columns apart by two or more spaces, for a printed table whose alignment a translation broke (it
    replaced values by shorter ones in other scripts); only for tables without empty cells."""
    lines = [line for line in text.strip("\n").splitlines() if line.strip()]
    header, *rows = [re.split(r"\s{2,}", line.strip()) for line in lines]
    if any(len(row) != len(header) for row in rows):
        raise ValueError("a row has an empty cell or a value with two spaces: not a spaced table")
    return header, rows


def parse_table(text: str) -> tuple[list[str], list[list[str]]]:
    stripped = text.strip()
    if stripped.startswith("+"):
        return parse_box(text)
    if stripped.startswith("|"):
        return parse_markdown(text)
    if "|" in stripped.splitlines()[0]:
        return parse_psql(text)
    return parse_fixed(text)


# ----------------------------------------------------------------------------------------- INSERTs


def _split_values(inner: str) -> list[str]:
    """``'a', 'b''c', 12`` -> ["a", "b'c", "12"] (quotes removed from strings)."""
    out, i = [], 0
    while i < len(inner):
        while i < len(inner) and inner[i] in " \t\n,":
            i += 1
        if i >= len(inner):
            break
        if inner[i] == "'":
            j, buf = i + 1, []
            while True:
                if inner[j] == "'" and j + 1 < len(inner) and inner[j + 1] == "'":
                    buf.append("'")
                    j += 2
                elif inner[j] == "'":
                    break
                else:
                    buf.append(inner[j])
                    j += 1
            out.append("".join(buf))
            i = j + 1
        else:
            j = i
            while j < len(inner) and inner[j] != ",":
                j += 1
            out.append(inner[i:j].strip())
            i = j
    return out


def parse_inserts(sql: str, table: str) -> list[list[str]]:
    """The rows of every ``INSERT INTO table VALUES ...`` statement in ``sql``, values as printed."""
    rows = []
    sql = re.sub(r"\bto_date\(\s*('(?:[^']|'')*')\s*,\s*'[^']*'\s*\)", r"\1", sql, flags=re.I)
    sql = re.sub(r"\bdate\s+'", "'", sql, flags=re.I)
    pattern = re.compile(r"insert\s+into\s+" + re.escape(table) + r"\s+values\s*(.*?);", re.I | re.S)
    for m in pattern.finditer(sql):
        for tup in re.finditer(r"\(((?:[^()']|'(?:[^']|'')*')*)\)", m.group(1)):
            rows.append(_split_values(tup.group(1)))
    return rows


def parse_values_clause(sql: str) -> list[list[str]]:
    """The rows of a table the statement defines itself: an inline ``VALUES (...), (...)`` list (Trino's
    ``WITH t(...) AS (VALUES ...)``), or Oracle's ``select 1 from dual union all select 2 from dual``;
    ``DATE '...'`` literals give their text."""
    sql = re.sub(r"\bDATE\s+'", "'", sql, flags=re.I)
    m = re.search(r"\(\s*values\s*(.*?)\)\s*select", sql, re.I | re.S)
    if m is None:
        return [_split_values(row) for row in re.findall(r"select\s+(.*?)\s+from\s+dual\b", sql, re.I | re.S)]
    return [_split_values(tup.group(1)) for tup in re.finditer(r"\(((?:[^()']|'(?:[^']|'')*')*)\)", m.group(1))]
