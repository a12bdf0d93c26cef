"""A rule that fails at run time fails alone: the other rules keep alerting, the failing rule is
quarantined with its reason in the status and the metrics, and runs again once its file changes
(spark_bridge/alerting/worker.py, rule_watch.py). The live stream on Spark and Kafka, with a poison
event beside it, is in tests/kafka_tests/test_kafka_isolation.py."""

from __future__ import annotations

import json
import os

from prometheus_client.exposition import generate_latest

from cep.spark_bridge.alerting.metrics import StreamMetrics
from cep.spark_bridge.alerting.stream import AlertStream, rule_rows
from tests.test_alerting import SENTINEL, LocalAlerts, _SchemaOnly, ev, publish, replay, write_rule

GOOD = """-- name: high
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES COUNT(*) AS n, LAST(X.price) AS p
  PATTERN (X{3}) DEFINE X AS price > 50)"""
# Checks fine, but every row can be an A or a B with a running SUM: past 10,000 partial matches on a key
# after about 12 rows, the matcher stops with E0430.
EXPLODING = """-- name: boom
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES COUNT(*) AS n
  PATTERN ((A | B)+ C) DEFINE A AS SUM(A.price) > 0, B AS SUM(B.price) > 0, C AS price < 0)"""


def events() -> list[dict]:
    rows = [ev(symbol, i, 60.0 + i) for i in range(30) for symbol in ("a", "b")]
    return rows + [ev(SENTINEL, 10_000, 0.0)]


def test_a_rule_that_explodes_on_a_key_fails_alone_and_the_good_rules_alerts_equal_the_replay(tmp_path):
    rules = tmp_path / "rules"
    write_rule(rules, "good.sql", GOOD)
    write_rule(rules, "bad.sql", EXPLODING)
    store, _ = publish(tmp_path, rules)
    local = LocalAlerts(store, delay_s=5)
    rows = events()
    alerts = [a for start in range(0, len(rows), 7) for a in local.run_batch(rows[start : start + 7])]
    alerts += local.run_batch([])  # the sentinel's watermark releases the rest
    good = sorted(
        (a["partition_key"], a["measures"])
        for a in alerts
        if a["rule_id"] == "good/high" and a["partition_key"] != json.dumps({"symbol": SENTINEL})
    )
    assert good == replay(GOOD, rows) and good
    assert not [a for a in alerts if a["rule_id"] == "bad/boom"]
    failed_keys = {f["key"] for f in local.failures}
    assert {f["rule_id"] for f in local.failures} == {"bad/boom"}
    assert failed_keys == {json.dumps({"symbol": "a"}), json.dumps({"symbol": "b"})}
    assert all("E0430" in f["error"] and "10000 live partial matches" in f["error"] for f in local.failures)


def test_a_failed_rule_is_quarantined_shown_kept_across_a_restart_and_retried_when_its_file_changes(tmp_path):
    rules, checkpoint = tmp_path / "rules", tmp_path / "ck"
    write_rule(rules, "good.sql", GOOD)
    write_rule(rules, "bad.sql", EXPLODING)
    messages: list[str] = []
    stream = AlertStream(None, str(rules), _SchemaOnly(), checkpoint=str(checkpoint), on_event=messages.append)
    stream.refresh_rules(force=True)
    version = stream.ruleset["bad/boom"].version
    error = "CepRuntimeError E0430: more than 10000 live partial matches in partition (symbol='a')"
    stream._failed.append({"rule_id": "bad/boom", "version": version, "key": '{"symbol": "a"}', "error": error})
    stream.refresh_rules()
    assert [r["rule_id"] for r in stream.payload["rules"]] == ["good/high"]  # the next micro-batches run without it
    rows = {r["rule"]: r for r in rule_rows(stream.status)}
    assert rows["good/high"]["state"] == "active" and rows["bad/boom"]["state"] == "failed"
    assert 'on key {"symbol": "a"}' in rows["bad/boom"]["errors"][0] and "E0430" in rows["bad/boom"]["errors"][0]
    assert any(
        "rule bad/boom failed at run time" in m and "E0430" in m and "every other rule keeps running" in m
        for m in messages
    )
    scraped = generate_latest(StreamMetrics(stream).registry()).decode()
    assert 'cep_rules{state="failed"} 1.0' in scraped and 'cep_rules{state="active"} 1.0' in scraped
    assert 'cep_rule_failed{reason="CepRuntimeError E0430",rule="bad/boom"} 1.0' in scraped
    # A restart does not run it again: the quarantine is in the status file.
    again = AlertStream(None, str(rules), _SchemaOnly(), checkpoint=str(checkpoint))
    again.refresh_rules(force=True)
    assert "bad/boom" not in again.ruleset
    assert {r["rule"]: r for r in rule_rows(again.status)}["bad/boom"]["state"] == "failed"
    # Its file changes (a touch is enough): it runs again, with fresh state, and the status forgets the failure.
    stamp = os.stat(rules / "bad.sql").st_mtime_ns + 2_000_000
    os.utime(rules / "bad.sql", ns=(stamp, stamp))
    again.refresh_rules()
    assert "bad/boom" in again.ruleset
    assert {r["rule"]: r for r in rule_rows(again.status)}["bad/boom"]["state"] == "active"
    assert "cep_rule_failed{" not in generate_latest(StreamMetrics(again).registry()).decode()
    # A report for a version that no longer runs quarantines nothing.
    again._failed.append({"rule_id": "good/high", "version": "0" * 16, "key": "{}", "error": error})
    again.refresh_rules()
    assert "good/high" in again.ruleset


def test_a_rules_run_time_error_points_into_its_file_where_the_rule_stands(tmp_path):
    """The workers run the rule with cep's measures added; its run-time error still names the rule's file, the
    line and column of the failing expression as written there (not of a formatted copy), and shows that line."""
    overflowing = """-- name: huge
SELECT *
  FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES LAST(B.price) AS p
  PATTERN (A B) DEFINE B AS CAST(B.price AS BIGINT) * 1000000000 > 0)"""
    text = GOOD + ";\n\n" + overflowing
    rules = tmp_path / "rules"
    write_rule(rules, "both.sql", text)
    failing = "CAST(B.price AS BIGINT) * 1000000000"
    line = next(number for number, content in enumerate(text.splitlines(), 1) if failing in content)
    column = text.splitlines()[line - 1].index(failing) + 1
    store, _ = publish(tmp_path, rules)
    local = LocalAlerts(store, delay_s=5)
    rows = [ev("a", 0, 1.0), ev("a", 1, 1e11), ev("a", 2, 3.0)]  # 1e11 * 1e9 is past BIGINT
    local.run_batch(rows + [ev(SENTINEL, 10_000, 0.0)])
    local.run_batch([])  # the sentinel's watermark releases the rows
    assert [f["rule_id"] for f in local.failures] == ["both/huge"]
    error = local.failures[0]["error"]
    assert f"{rules / 'both.sql'}:{line}:{column}: error[E0410]: integer overflow" in error, error
    assert text.splitlines()[line - 1] in error and "^" * len(failing) in error, error


def test_a_rule_stored_by_an_earlier_version_runs_the_same_statement(tmp_path):
    """A checkpoint's stored rule set from before rules carried their source holds the statement the workers
    run, formatted (``text``); a worker still runs that statement, the one it builds from the source today."""
    from cep.grammar.format import format_statement
    from cep.spark_bridge.alerting.rule_set import build_rule_set, statement_to_run

    rules = tmp_path / "rules"
    write_rule(rules, "good.sql", GOOD)
    payload, _ = build_rule_set(str(rules), input_types={"symbol": "VARCHAR", "ts": "TIMESTAMP", "price": "DOUBLE"})
    (entry,) = payload["rules"]
    today = statement_to_run(entry)
    earlier = {k: v for k, v in entry.items() if k not in ("source", "column")} | {"text": format_statement(today)}
    assert format_statement(statement_to_run(earlier)) == format_statement(today)
    assert format_statement(today).count("AS cep_alert_first") == 1, format_statement(today)  # added once


def test_cep_run_rules_shows_a_rules_failing_line_and_types_the_csv_by_schema(tmp_path, capsys):
    """``cep run --rules`` (the backtest of a rule set) over a CSV with ``--schema``: the columns have the
    declared types, as ``cep stream`` gives them from its schema, so ``3 * 2147483647`` (6,442,450,941, past
    INT's 2,147,483,647) fails as an INT overflow, as Spark's ANSI mode fails; and the error shows the file's
    own line under the line number, though the rule starts below a ``-- name:`` header."""
    from cep.cli import main

    text = """-- name: big
SELECT *
FROM t
MATCH_RECOGNIZE (
  ORDER BY ts
  MEASURES A.i AS i
  PATTERN (A)
  DEFINE A AS A.i * 2147483647 > 0
)"""
    rules = tmp_path / "rules"
    write_rule(rules, "ov.sql", text)
    events = tmp_path / "ov.csv"
    events.write_text("k,ts,i\na,2024-01-01 00:00:00,3\n", encoding="utf-8")
    args = ["run", "--rules", str(rules), "--input", str(events)]
    assert main([*args, "--schema", "k STRING, ts TIMESTAMP, i INT"]) == 1
    err = capsys.readouterr().err
    assert f"{rules / 'ov.sql'}:8:15: error[E0410]: integer overflow: '*' gives 6442450941" in err, err
    assert "   8 |   DEFINE A AS A.i * 2147483647 > 0\n" in err and "^" * len("A.i * 2147483647") in err, err
    assert main(args) == 0  # undeclared, a CSV's integers are BIGINTs: 6,442,450,941 fits
    assert '{"i": 3}' in capsys.readouterr().out
