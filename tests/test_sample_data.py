"""The shipped sample: patterns/data/ticks.csv is what make_ticks.py generates, and cep's V-shape
matches on it equal an independent plain-Python evaluation (tests/vshape_reference.py)."""

from __future__ import annotations

import csv
import importlib.util
from collections import Counter
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from vshape_reference import normalize, vshape_matches

REPO = Path(__file__).resolve().parent.parent
TICKS = REPO / "patterns" / "data" / "ticks.csv"
QUERY = REPO / "patterns" / "v_shape.sql"

# The number of V-shape matches in the shipped ticks.csv. Counted by the independent implementation in
# tests/vshape_reference.py (not by cep), and checked by hand on the first two ACME matches:
# 100.46 -> 100.11 -> 99.71 -> 100.26 -> 100.33 (09:32..09:36, n=5) and 100.19 -> 99.76 -> 99.61 -> 100.06
# -> 100.41 -> 100.85 (09:38..09:43, n=6).
EXPECTED_MATCHES = 27
EXPECTED_PER_SYMBOL = {"ACME": 7, "BOLT": 7, "CRUX": 7, "DYNA": 6}


def _load_make_ticks():
    spec = importlib.util.spec_from_file_location("make_ticks", REPO / "patterns" / "data" / "make_ticks.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def read_ticks(path: Path = TICKS) -> list[dict]:
    """The CSV as Python rows: price float, volume int, ts datetime."""
    with open(path, newline="", encoding="ascii") as fh:
        return [
            {
                "symbol": r["symbol"],
                "ts": datetime.fromisoformat(r["ts"]),
                "price": float(r["price"]),
                "volume": int(r["volume"]),
            }
            for r in csv.DictReader(fh)
        ]


def test_regenerating_gives_the_same_file(tmp_path):
    out = tmp_path / "ticks.csv"
    assert _load_make_ticks().main(["--out", str(out)]) == 0
    assert out.read_bytes() == TICKS.read_bytes()


def test_sample_data_shape():
    rows = read_ticks()
    counts = Counter(r["symbol"] for r in rows)
    assert counts == {"ACME": 60, "BOLT": 60, "CRUX": 60, "DYNA": 60}
    first = [r for r in rows if r["symbol"] == "ACME"][:2]
    assert [r["ts"] for r in first] == [datetime(2024, 1, 2, 9, 30), datetime(2024, 1, 2, 9, 31)]
    # Ties (flat steps) are in the data: they are neither B nor C rows, an edge the pattern must respect.
    assert any(a["price"] == b["price"] for a, b in zip(rows, rows[4:]))


def test_reference_count_on_shipped_data():
    matches = vshape_matches(read_ticks())
    assert len(matches) == EXPECTED_MATCHES
    assert Counter(m["symbol"] for m in matches) == EXPECTED_PER_SYMBOL
    assert matches[0] == {
        "symbol": "ACME",
        "start_ts": datetime(2024, 1, 2, 9, 32),
        "bottom": 99.71,
        "end_ts": datetime(2024, 1, 2, 9, 36),
        "n": 5,
    }


@pytest.fixture(scope="module")
def query():
    import cep

    return cep.compile(QUERY.read_text(encoding="utf-8"))


def test_cep_rows_equal_reference(query):
    rows = read_ticks()
    got = query.run(rows)
    assert isinstance(got, list)
    assert normalize(got) == normalize(vshape_matches(rows))
    assert len(got) == EXPECTED_MATCHES


def test_cep_pandas_equals_reference(query):
    pdf = pd.read_csv(TICKS, parse_dates=["ts"])
    got = query.run(pdf)
    assert isinstance(got, pd.DataFrame)
    assert [c.lower() for c in got.columns] == ["symbol", "start_ts", "bottom", "end_ts", "n"]
    assert normalize(got.to_dict("records")) == normalize(vshape_matches(read_ticks()))
