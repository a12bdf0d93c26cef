"""Loading and comparing the MATCH_RECOGNIZE conformance corpus (tests/conformance_corpus/cases.jsonl).

Shared by the conformance test and by the property tests that reuse the corpus's inputs.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections import Counter
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "conformance_corpus" / "cases.jsonl"


def corpus_path() -> Path:
    """The project's copy of the corpus (transcribed from Trino's and Flink's tests; see its README)."""
    override = os.environ.get("CEP_CONFORMANCE")
    return Path(override) if override else CORPUS


@lru_cache(maxsize=1)
def load_cases() -> tuple[dict, ...]:
    with open(corpus_path(), encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def typed_rows(case: dict) -> list[dict]:
    """The case's input rows as dicts, with TIMESTAMP/DATE strings turned into datetime/date."""
    names = [name for name, _ in case["columns"]]
    types = [kind for _, kind in case["columns"]]
    out = []
    for row in case["rows"]:
        values = {}
        for name, kind, value in zip(names, types, row):
            if value is not None and kind == "TIMESTAMP":
                value = dt.datetime.fromisoformat(value)
            elif value is not None and kind == "DATE":
                value = dt.date.fromisoformat(value)
            elif value is not None and kind == "DOUBLE":
                value = float(value)
            values[name] = value
        out.append(values)
    return out


def normalize(value):
    """A comparable form: numbers as rounded floats, timestamps as ISO text, lists recursively."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float, Decimal)):
        number = float(value)
        return round(number, 6) if math.isfinite(number) else number
    if isinstance(value, dt.datetime):
        text = value.isoformat()
        return text
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return tuple(normalize(v) for v in value)
    return value


def normalize_expected(value):
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value).isoformat() if "T" in value and value[:4].isdigit() else value
        except ValueError:
            return value
    return normalize(value)


def as_multiset(rows, *, expected: bool) -> Counter:
    convert = normalize_expected if expected else normalize
    return Counter(tuple(convert(v) for v in row) for row in rows)
