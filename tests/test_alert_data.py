"""The alert-rule bench's logs (bench/alert_data.py) and rules (bench/alert_rules.py), on a few thousand rows.

The bench itself (10M rows, Spark, PyFlink) runs apart: ``make bench-rules``. Here: the generator is
deterministic and well formed, and the injected attacks are what the two rules find, checked against the
generator's own record of what it injected and against tests/reference_matcher.py.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow.compute as pc
import pytest

import cep
from bench import alert_data
from bench.alert_rules import RULES
from tests.reference_matcher import reference_run

ROWS = 40_000  # 8 attacks per log (one per alert_data.ROWS_PER_ATTACK rows)
LIMITS = {"brute_force": dt.timedelta(minutes=5), "card_testing": dt.timedelta(minutes=10)}


@pytest.fixture(scope="module")
def logs():
    return {rule.name: alert_data.GENERATORS[rule.log.table](ROWS) for rule in RULES}


@pytest.fixture(scope="module")
def outputs(logs):
    return {rule.name: cep.compile(rule.text).run(logs[rule.name]).to_pylist() for rule in RULES}


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_a_log_is_the_same_for_the_same_seed_and_well_formed(rule, logs):
    generate = alert_data.GENERATORS[rule.log.table]
    table = logs[rule.name]
    assert table.equals(generate(ROWS)) and not table.equals(generate(ROWS, seed=alert_data.SEED + 1))
    assert table.num_rows == ROWS and table.column_names[:2] == [rule.log.key, "ts"]
    ts = table["ts"].to_numpy()
    assert (np.diff(ts) >= np.timedelta64(0)).all()  # a log in time order across keys
    by_key = table.sort_by([(rule.log.key, "ascending"), ("ts", "ascending")])
    keys, times = by_key[rule.log.key].to_numpy(zero_copy_only=False), by_key["ts"].to_numpy()
    same_key = keys[1:] == keys[:-1]
    assert (np.diff(times)[same_key] > np.timedelta64(0)).all()  # ORDER BY ts has no ties inside a key
    counts = pc.value_counts(table[rule.log.key]).field("counts").to_numpy()
    assert counts.max() > 20 * np.median(counts)  # skewed: a few heavy keys, many light ones


def test_login_failures_and_amounts_look_like_production(logs):
    fails = pc.sum(pc.equal(logs["brute_force"]["status"], "FAIL")).as_py() / ROWS
    assert 0.03 < fails < 0.08  # 3%, 20% for one user in twenty, and the attacks
    amount = logs["card_testing"]["amount"].to_numpy()
    assert 0.005 < (amount < 2).mean() < 0.03 and 0.005 < (amount >= 500).mean() < 0.03
    assert np.allclose(amount * 100, np.round(amount * 100))  # whole cents


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_every_fast_finished_attack_is_found_and_no_match_outlasts_the_limit(rule, outputs):
    attacks = alert_data.injected(rule.log, ROWS).to_pylist()
    first_ts, last_ts = ("first_fail_ts", "ok_ts") if rule.name == "brute_force" else ("first_small_ts", "big_ts")
    matches = outputs[rule.name]
    limit = LIMITS[rule.name]
    assert all(m[last_ts] - m[first_ts] < limit for m in matches)  # WITHIN is strict (docs/semantics)
    expected = [a for a in attacks if a["finished"] and a["last_ts"] - a["first_ts"] < limit]
    assert expected, "the seed injects no attack the rule must find: pick a row count that does"
    for attack in expected:
        found = [
            m
            for m in matches
            if m[rule.log.key] == attack[rule.log.key]
            and dt.timedelta(0) <= m[last_ts] - attack["last_ts"] < dt.timedelta(seconds=1)
        ]
        assert found, f"injected attack not found: {attack}"
        assert found[0][first_ts] <= attack["first_ts"] + dt.timedelta(seconds=1)
    slow = [a for a in attacks if a["finished"] and a["last_ts"] - a["first_ts"] > limit]
    assert slow, "the seed injects no attack longer than the limit: pick a row count that does"


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_the_rule_matches_as_the_reference_matcher_on_the_attacked_keys(rule, logs, outputs):
    """An independent evaluation of the standard (tests/reference_matcher.py) on every row of the keys that
    were attacked, where WITHIN decides and the preferred match under the limit is the point."""
    keys = alert_data.injected(rule.log, ROWS)[rule.log.key]
    rows = logs[rule.name].filter(pc.is_in(logs[rule.name][rule.log.key], value_set=keys)).to_pylist()
    reference = [tuple(r.values()) for r in reference_run(cep.compile(rule.text).statement, rows)]
    ours = [tuple(m.values()) for m in outputs[rule.name] if m[rule.log.key] in set(keys.to_pylist())]
    assert reference and sorted(ours, key=str) == sorted(reference, key=str)
