"""Rule sets: loading a directory of *.sql files, rule ids and versions, options, errors that skip one
rule and not the others, what an alert rule may not do, the measures alerting adds, and the rule store
that fixes the rule set of each micro-batch. No Spark here."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import pytest

import cep
from cep.spark_bridge.alerting import suppress
from cep.spark_bridge.alerting.rule_set import ALERT_FIRST, ALERT_LAST, ALERT_STATUS, alert_statement, build_rule_set
from cep.spark_bridge.alerting.rules import RuleSet, load_file, load_rules, rule_version
from cep.spark_bridge.alerting.store import RuleStore
from cep.spark_bridge.alerting.worker import runtime_for

TYPES = {"card": "VARCHAR", "ts": "TIMESTAMP", "amount": "DOUBLE", "merchant": "VARCHAR"}

FRAUD = """\
-- Card testing: several tiny charges, then a big one.
-- name: card_testing
-- suppress: 10m
-- severity: critical
SELECT * FROM tx MATCH_RECOGNIZE (
  PARTITION BY card ORDER BY ts
  MEASURES COUNT(S.*) AS smalls, LAST(B.amount) AS big
  PATTERN (S{3,} B) WITHIN INTERVAL '10' MINUTE
  DEFINE S AS amount < 5, B AS amount > 500);

-- name: broken
SELECT * FROM tx MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts
  MEASURES COUNT(*) AS n PATTERN (A B) DEFINE A AS amount < , B AS amount > 1);

-- name: big_spender
SELECT card, total FROM tx MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts
  MEASURES SUM(A.amount) AS total PATTERN (A{2}) DEFINE A AS amount > 1000);
"""


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def test_rule_ids_versions_options_and_errors_that_skip_one_rule(tmp_path):
    write(tmp_path, "fraud.sql", FRAUD)
    write(
        tmp_path,
        "single.sql",
        "SELECT * FROM tx MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A) DEFINE A AS amount > 1)",
    )
    write(
        tmp_path,
        "two.sql",
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS amount > 1);\n"
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS amount > 2);\n",
    )
    write(tmp_path, "notes.txt", "not a rule")
    write(tmp_path, ".#fraud.sql", "editor junk")
    ruleset = load_rules(str(tmp_path))
    assert list(ruleset.rules) == ["fraud/card_testing", "fraud/big_spender", "single", "two/1", "two/2"]
    card = ruleset["fraud/card_testing"]
    assert (
        card.options == {"suppress": "10m", "severity": "critical"} and card.line == 5 and card.name == "card_testing"
    )
    assert card.text.startswith("SELECT * FROM tx") and card.text.rstrip().endswith("amount > 500)")
    assert cep.compile(card.text).run([]) == []  # a rule's text is a query on its own (cep.compile)
    (error,) = ruleset.errors
    assert (error.path, error.line, error.column, error.code, error.rule_id) == (
        str(tmp_path / "fraud.sql"),
        13,
        61,
        "E0101",
        "fraud/broken",
    )
    assert str(error).startswith(f"{tmp_path / 'fraud.sql'}:13:61: error[E0101]")
    assert "^" in str(error)


def test_version_is_the_canonical_text_and_changes_with_meaning_only(tmp_path):
    a = load_file(
        "a.sql", text="-- name: r\nSELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS x > 1)"
    )[0][0]
    b = load_file(
        "b.sql",
        text=(
            "-- name: r\n-- a new comment\nselect *\n  from t match_recognize (\n order by ts pattern (A)\n"
            " define A as x > 1\n)"
        ),
    )[0][0]
    c = load_file(
        "a.sql", text="-- name: r\nSELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS x > 2)"
    )[0][0]
    assert a.version == b.version == rule_version(a.statement) and len(a.version) == 16
    assert c.version != a.version
    old, new = RuleSet({"a/r": a}), RuleSet({"a/r": c, "b/r": b})
    changes = old.diff(new)
    assert (changes.changed, changes.added, changes.removed) == (("a/r",), ("b/r",), ())
    assert new.diff(RuleSet()).removed == ("a/r", "b/r") and not RuleSet({"a/r": a}).diff(RuleSet({"a/r": b}))


def test_duplicate_names_and_missing_paths(tmp_path):
    text = "-- name: x\nSELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS v > 1);\n" * 2
    rules, errors = load_file(str(write(tmp_path, "dup.sql", text)))
    assert [r.rule_id for r in rules] == ["dup/x"]
    assert errors[0].code == "E0601" and errors[0].line == 3 and "defined twice" in errors[0].message
    assert load_rules(str(tmp_path / "nope")).errors[0].message == "no such rules file or directory"
    single = load_rules(str(tmp_path / "dup.sql"))  # one file stands for itself
    assert list(single.rules) == ["dup/x"]


def test_alert_checks_report_file_positions_and_skip_only_that_rule(tmp_path):
    write(
        tmp_path,
        "ok.sql",
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts MEASURES COUNT(*) AS n "
        "PATTERN (A) DEFINE A AS amount > 1)",
    )
    write(
        tmp_path,
        "bad.sql",
        """\
-- name: all_rows
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts
  ALL ROWS PER MATCH PATTERN (A) DEFINE A AS amount > 1);
-- name: sorted
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts PATTERN (A) DEFINE A AS amount > 1) ORDER BY card;
-- name: proctime
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY card ORDER BY PROCTIME() PATTERN (A) DEFINE A AS amount > 1);
-- name: other_time
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY card ORDER BY merchant PATTERN (A) DEFINE A AS amount > 1);
-- name: unknown_column
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY shop ORDER BY ts PATTERN (A) DEFINE A AS amount > 1);
-- name: reserved
SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts MEASURES COUNT(*) AS cep_alert_n PATTERN (A) DEFINE A AS amount > 1);
""",  # noqa: E501 (one rule a line, as the file is read)
    )
    payload, ruleset = build_rule_set(str(tmp_path), input_types=TYPES)
    assert payload["time_column"] == "ts" and [r["rule_id"] for r in payload["rules"]] == ["ok"]
    found = {e.rule_id: (e.line, e.code) for e in ruleset.errors}
    assert found == {
        "bad/all_rows": (3, "E0602"),
        "bad/sorted": (5, "E0285"),
        "bad/proctime": (7, "E0603"),
        "bad/other_time": (9, "E0604"),
        "bad/unknown_column": (11, "E0220"),
        "bad/reserved": (13, "E0284"),
    }
    assert all(str(e).startswith(f"{tmp_path / 'bad.sql'}:{e.line}:") for e in ruleset.errors)


def test_the_time_column_is_found_without_loading_the_rule_set_twice(tmp_path, monkeypatch):
    """Without --time-column, the stream takes the first rule's ORDER BY column: the files are read one at a
    time until a rule has one (here the second file: the first has none), then the set is loaded once."""
    from cep.spark_bridge.alerting import rules as rules_module

    rule = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY card ORDER BY {} PATTERN (A) DEFINE A AS amount > {});\n"
    (tmp_path / "a_first.sql").write_text(rule.format("PROCTIME()", 0))
    for i in range(1, 30):
        (tmp_path / f"r{i:02d}.sql").write_text(rule.format("ts", i))
    read: list[str] = []
    real = rules_module.load_file
    monkeypatch.setattr(rules_module, "load_file", lambda path, **kw: (read.append(path), real(path, **kw))[1])
    payload, ruleset = build_rule_set(str(tmp_path), input_types=TYPES)
    assert payload["time_column"] == "ts" and len(ruleset) == 29 and [e.code for e in ruleset.errors] == ["E0603"]
    assert len(read) == 2 + 30  # two files to find the time column, then each file once


def test_alerting_adds_status_first_and_last_measures_without_changing_the_rule():
    rows = [
        {"card": "c1", "ts": dt.datetime(2024, 1, 1, 0, 0, s), "amount": a} for s, a in enumerate([1, 2, 3, 900, 1, 1])
    ]
    for text, status in [
        (
            "SELECT card, big FROM tx MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts MEASURES LAST(B.amount) AS big "
            "PATTERN (S{3,} B) DEFINE S AS amount < 5, B AS amount > 500)",
            False,
        ),
        (
            "SELECT * FROM tx MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts MEASURES S.amount AS a "
            "PATTERN (S !B) WITHIN INTERVAL '2' SECOND DEFINE S AS amount = 900, B AS amount > 5000)",
            True,
        ),
    ]:
        query = cep.compile(text)
        rewritten, has_status = alert_statement(query.statement)
        assert has_status is status
        from cep.grammar.format import format_statement

        extended = cep.compile(format_statement(rewritten))
        plain, wider = query.run(rows), extended.run(rows)
        assert len(plain) == len(wider) == 1
        assert {k: v for k, v in wider[0].items() if not k.startswith("cep_alert_")} == plain[0]
        assert (ALERT_STATUS in wider[0]) is status
        assert wider[0][ALERT_FIRST] <= wider[0][ALERT_LAST]


def test_suppress_specs_and_throttle():
    specs = suppress.parse_specs(["fraud/*=10m", "fraud/quiet=off"])
    assert suppress.interval_us("fraud/card", {}, specs) == 600_000_000
    assert suppress.interval_us("fraud/quiet", {"suppress": "1h"}, specs[1:]) is None
    assert suppress.interval_us("disk", {"suppress": "30 seconds"}, specs) == 30_000_000
    assert suppress.interval_us("disk", {}, specs) is None
    with pytest.raises(ValueError, match="RULE=DURATION"):
        suppress.parse_spec("10m")
    with pytest.raises(ValueError, match="unknown unit"):
        suppress.parse_spec("x=10 parsecs")
    throttle, last, decisions = suppress.Throttle(600), None, []
    for t in (0, 100, 599, 600, 700, 1300):
        suppressed, last = throttle.decide(last, t)
        decisions.append(suppressed)
    assert decisions == [False, True, True, False, True, False]
    assert suppress.Throttle(None).decide(5, 6) == (False, 5)


def test_rule_store_fixes_one_set_per_micro_batch(tmp_path):
    store = RuleStore(str(tmp_path / "store"))
    first = store.publish({"format": "x", "rules": [], "n": 1})
    assert store.set_for_batch(0) == first
    second = store.publish({"format": "x", "rules": [], "n": 2})
    assert store.current_id() == second != first
    assert store.set_for_batch(0) == first  # batch 0 keeps the set it started with (a re-run too)
    assert store.set_for_batch(1) == second
    assert store.publish({"format": "x", "rules": [], "n": 2}) == second  # same content, same id
    # Many tasks of one batch racing: all see the one set the first of them fixed.
    seen, threads = [], []
    for _ in range(8):
        threads.append(threading.Thread(target=lambda: seen.append(RuleStore(store.directory).set_for_batch(5))))
    store.publish({"format": "x", "rules": [], "n": 3})
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 1
    store.prune(keep=1)
    assert sorted(store.batch_sets()) == [5]


def test_worker_runtime_compiles_each_rule_once(tmp_path):
    write(tmp_path / "rules", "fraud.sql", FRAUD)
    payload, _ = build_rule_set(str(tmp_path / "rules"), input_types=TYPES)
    store = RuleStore(str(tmp_path / "store"))
    store.publish(payload)
    runtime = runtime_for(store.directory, "0")
    rule = runtime.rule("fraud/card_testing")
    assert rule is runtime.rule("fraud/card_testing") and runtime.rule("nope") is None
    assert rule.throttle.interval == 600_000_000 and rule.partition == ["card"]
    assert [name for _, name in rule.measures] == ["card", "smalls", "big"]
    assert json.loads(json.dumps(payload)) == payload  # what the store keeps is plain JSON


RULE = "SELECT * FROM tx MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n PATTERN (A) DEFINE A AS amount > 1)"


def test_a_rule_file_linked_from_outside_the_directory_is_not_read_and_its_text_never_shown(tmp_path):
    rules, secret = tmp_path / "rules", tmp_path / "elsewhere" / "passwd.sql"
    write(rules, "ok.sql", RULE)
    write(secret.parent, secret.name, "root:x:0:0:SECRET-FIRST-LINE\n" + RULE)
    (rules / "stolen.sql").symlink_to(secret)
    write(rules / "..data", "inside.sql", RULE)  # how a Kubernetes ConfigMap is mounted: links within the directory
    (rules / "inside.sql").symlink_to(Path("..data") / "inside.sql")
    ruleset = load_rules(str(rules))
    assert sorted(ruleset.rules) == ["inside", "ok"]
    (error,) = ruleset.errors
    assert error.code == "E0605" and "outside the rules directory" in str(error) and "stolen.sql" in str(error)
    assert "SECRET" not in str(error) and str(secret) not in str(error)


@pytest.mark.parametrize("name", ["bad\nname.sql", "evil\x1b[31m.sql", "with space.sql", "dollar$.sql"])
def test_a_rule_id_with_unsafe_characters_is_refused_and_shown_escaped(tmp_path, name):
    write(tmp_path, "good.sql", RULE)
    write(tmp_path, name, RULE)
    ruleset = load_rules(str(tmp_path))
    assert list(ruleset.rules) == ["good"]
    (error,) = ruleset.errors
    assert error.code == "E0606" and "cannot be a rule id" in str(error)
    assert "\n" not in str(error).split("error[E0606]")[0] and "\x1b" not in str(error)
    if "\n" in name:
        assert "bad\\nname.sql" in str(error)


def test_a_statement_name_with_unsafe_characters_is_refused(tmp_path):
    write(tmp_path, "fraud.sql", "-- name: a/b\n" + RULE + ";\n-- name: fine_one\n" + RULE + ";\n")
    ruleset = load_rules(str(tmp_path))
    assert list(ruleset.rules) == ["fraud/fine_one"]
    assert ruleset.errors[0].code == "E0606" and "'a/b'" in str(ruleset.errors[0])


def test_severity_and_summary_options_are_checked_at_their_line(tmp_path):
    write(
        tmp_path,
        "r.sql",
        "-- name: one\n-- severity: apocalyptic\n" + RULE + ";\n"
        "-- name: two\n-- summary: card {{ card_id\n" + RULE + ";\n"
        "-- name: three\n-- severity: ERROR\n-- summary: {{ n }} rows\n" + RULE + ";\n",
    )
    ruleset = load_rules(str(tmp_path))
    assert list(ruleset.rules) == ["r/three"] and ruleset["r/three"].options["severity"] == "ERROR"
    first, second = ruleset.errors
    assert (first.code, first.line, first.rule_id) == ("E0607", 2, "r/one") and "critical, error, warning, info" in str(
        first
    )
    assert (second.code, second.line) == ("E0607", 5) and "does not compile" in str(second)


def test_cep_check_rules_gives_the_verdicts_of_the_stream_and_of_cep_run_rules(tmp_path, capsys):
    """One loader: `cep check --rules` (or a directory), `cep.load_rules` (cep run --rules) and the stream's
    `build_rule_set` refuse the same statements with the same codes at the same lines."""
    from cep.cli import main

    head = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n "
    text = (
        f"-- name: bad_summary\n-- summary: {{{{ card\n{head}PATTERN (A) DEFINE A AS v > 1);\n"
        f"-- name: subquery\nSELECT * FROM (SELECT * FROM t) MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
        f"MEASURES COUNT(*) AS n PATTERN (A) DEFINE A AS v > 1);\n"
        f"-- name: all_rows\n{head}ALL ROWS PER MATCH PATTERN (A) DEFINE A AS v > 1);\n"
        f"-- name: slow_summary\n-- summary: {{{{ 3 ** (10**9) % 7 }}}}\n{head}PATTERN (A) DEFINE A AS v > 1);\n"
        f"-- name: fine\n{head}PATTERN (A B) DEFINE A AS v > 1, B AS v < 1);\n"
    )
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "r.sql").write_text(text, encoding="utf-8")
    expected = [("E0607", 2), ("E0107", 5), ("E0602", 7)]
    api = cep.load_rules(str(rules))
    _, stream = build_rule_set(str(rules), input_types={"k": "VARCHAR", "ts": "TIMESTAMP", "v": "DOUBLE"})
    for ruleset in (api, stream):
        assert [(e.code, e.line) for e in ruleset.errors] == expected
        assert list(ruleset.rules) == ["r/slow_summary", "r/fine"]  # a template computes nothing at load
    assert main(["check", "--rules", str(rules / "r.sql")]) == 1
    first = capsys.readouterr()
    assert main(["check", str(rules), "--schema", "k STRING, ts TIMESTAMP, v DOUBLE"]) == 1
    second = capsys.readouterr()
    for out in (first, second):
        reported = [line for line in out.err.splitlines() if "error[" in line]
        assert [(line.split("error[")[1][:5], int(line.split(":")[1])) for line in reported] == expected
        assert "2 rules ok, 3 with errors" in out.out
    assert main(["check", str(rules / "r.sql")]) == 0  # as plain queries for cep run, every statement runs


def test_a_big_rule_file_reports_lengths_and_positions_of_its_own_statements(tmp_path):
    """Statements far into a big file: each is parsed alone, so the length limit (E0301) is the statement's
    own, and an error's line, column and caret are the file's."""
    from cep.grammar.limits import MAX_QUERY_LENGTH

    rule = (
        "-- name: r{i}\nSELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n "
        "PATTERN (A B) DEFINE A AS v > {i}, B AS v < 0);\n"
    )
    count = MAX_QUERY_LENGTH // len(rule.format(i=0)) + 200  # the last ones start well past 256 KiB
    broken = count - 3
    lines = [rule.format(i=i) for i in range(count)]
    lines[broken] = lines[broken].replace("v < 0", "v <<< 0")
    long_one = (
        f"-- name: long\nSELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n "
        f"PATTERN (A) DEFINE A AS v IN ({', '.join(['1'] * (MAX_QUERY_LENGTH // 3))}));\n"
    )
    text = "".join(lines) + long_one
    write(tmp_path, "big.sql", text)
    ruleset = load_rules(str(tmp_path))
    assert len(ruleset) == count - 1
    (syntax, too_long) = ruleset.errors
    assert (syntax.rule_id, syntax.line) == (f"big/r{broken}", 2 * broken + 2)
    assert text.splitlines()[syntax.line - 1][syntax.column - 1 :].startswith("<")
    assert too_long.code == "E0301" and too_long.rule_id == "big/long"
    assert f"the query is {len(long_one) - 1} characters long" in str(too_long)  # its own text, never its offset
