"""A rule file that does not compile is said in the log of every process that skips it.

Found running the on-call walkthrough: a stream started with one broken rule among good ones logs
`rule skipped: FILE:LINE:COL: error[E0220] ...`; restarted (a `kill -9`, a deploy), it logged nothing about
it, because the error was already in the status file, and the restarted service's journal showed only
`rules 2 (1 with errors)`. Real parts: the rule watch the stream runs, over a real rules folder, store and
status file; two watches on one checkpoint are two processes. No Spark.
"""

from __future__ import annotations

import os

from cep.spark_bridge.alerting.rule_watch import RuleWatch
from cep.spark_bridge.alerting.status import StatusBook
from cep.spark_bridge.alerting.store import RuleStore

GOOD = """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts
  PATTERN (A B+)
  DEFINE B AS B.price < PREV(B.price))
"""
BROKEN = GOOD.replace("B.price <", "B.pricee <")
TYPES = {"symbol": "string", "ts": "timestamp", "price": "double"}


def start(checkpoint: str, rules: str) -> list[tuple[str, str]]:
    """What one process's rule watch logs on its first load: (level, text) events."""
    said: list[tuple[str, str]] = []
    book = StatusBook(os.path.join(checkpoint, "status.json"))
    watch = RuleWatch(
        rules,
        RuleStore(os.path.join(checkpoint, "rules")),
        book,
        input_types=TYPES,
        time_column="ts",
        max_pending_rows=1000,
        event=lambda text, level: said.append((level, text)),
    )
    watch.refresh(force=True)
    watch.refresh(force=True)  # a reload with the file unchanged says nothing new
    book.write()
    return said


def test_a_restarted_stream_says_again_which_rule_it_skips_and_where(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "good.sql").write_text(GOOD)
    (rules / "broken.sql").write_text(BROKEN)
    checkpoint = str(tmp_path / "ck")
    os.makedirs(checkpoint)
    for _ in range(2):  # the first start, then a restart on the same checkpoint
        errors = [text for level, text in start(checkpoint, str(rules)) if level == "error"]
        assert len(errors) == 1, errors
        assert errors[0].startswith(f"rule skipped: {rules / 'broken.sql'}:5:15: error[E0220]: unknown column 'pricee'")


def test_cep_check_rules_without_the_input_s_columns_says_it_did_not_check_them(tmp_path, capsys):
    """`cep check --rules DIR` says "ok" only for what it checked: without --input or --schema a misspelt column
    passes it (the stream then skips the rule, E0220), so the line says the columns were not checked."""
    from cep.cli import main

    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "good.sql").write_text(GOOD)
    (rules / "broken.sql").write_text(BROKEN)
    assert main(["check", "--rules", str(rules)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"{rules}: 2 rules ok; columns and types not checked: give --input FILE or --schema COLUMNS for the "
        "stream's verdicts"
    )
    assert main(["check", "--rules", str(rules), "--schema", "symbol STRING, ts TIMESTAMP, price DOUBLE"]) == 1
    said = capsys.readouterr()
    assert said.out.strip() == f"{rules}: 1 rule ok, 1 with errors (cep stream skips them)"
    assert "broken.sql:5:15: error[E0220]: unknown column 'pricee'" in said.err
