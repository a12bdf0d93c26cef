"""``first_hit.search`` against a row-by-row scan: the first (or last) row of each window where
``value OP start`` holds, windows anywhere inside their partition (empty ones at its end included), as a
stream's resumed starts give them (``lo`` past rows searched before)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cep.matcher.vector import first_hit

OPS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}


@st.composite
def searches(draw):
    sizes = draw(st.lists(st.integers(0, 12), min_size=1, max_size=6))
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(bounds[-1])
    op = draw(st.sampled_from(sorted(OPS)))
    values = np.array(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=np.float64)
    lanes = []
    for part, size in enumerate(sizes):
        for _ in range(draw(st.integers(0, 4))):
            lo = int(bounds[part]) + draw(st.integers(0, size))  # may be the partition's end: empty
            hi = draw(st.integers(lo, int(bounds[part + 1])))
            start = draw(st.sampled_from([-4.0, -1.0, 0.0, 0.5, 2.0, 4.0, float("nan")]))
            lanes.append((lo, hi, start))
    return values, op, bounds, lanes, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(searches())
def test_search_is_a_row_by_row_scan(case):
    values, op, bounds, lanes, last = case
    lo = np.array([lane[0] for lane in lanes], dtype=np.int64)
    hi = np.array([lane[1] for lane in lanes], dtype=np.int64)
    start = np.array([lane[2] for lane in lanes], dtype=np.float64)
    got = first_hit.search(values, op, lo, hi, start, bounds, last=last)
    for (a, b, s), found in zip(lanes, got.tolist()):
        hits = [row for row in range(a, b) if OPS[op](values[row], s)]
        assert found == ((hits[-1] if last else hits[0]) if hits else -1), (a, b, s)
