"""``cep stream --key-buckets N`` (spark_bridge/alerting/key_buckets.py): the count is checked, fixed by the
checkpoint at its first start, taken from it on a restart without the flag, and another count is refused (E0482)
before the query starts, never a reset of the keys' state. The count is Spark's keyed state's (``--state spark``):
given with the rules on the driver it is refused (E0289). On Spark: the alerts with another count are the batch
replay's, and a partial match open across a restart is completed there."""

from __future__ import annotations

import argparse
import json

import pytest
from hypothesis import given as given_examples
from hypothesis import strategies as st

from cep.grammar.errors import CepSemanticError
from cep.spark_bridge.alerting.key_buckets import (
    KEYS_PER_BUCKET,
    MAX_KEY_BUCKETS,
    check_expected_keys,
    check_key_buckets,
    expected_key_buckets,
    key_buckets_for,
    settle_key_buckets,
)
from cep.spark_bridge.alerting.stream import AlertStream, read_status
from cep.spark_bridge.spark.buckets import KEY_BUCKETS
from tests.test_alerting import (
    HIGH,
    SENTINEL,
    SPAN,
    _schema,
    at,
    ev,
    price_batches,
    price_walk,
    replay,
    streamed,
    write_batch,
    write_rule,
)


@pytest.mark.parametrize(("given", "count"), [("1", 1), ("4096", 4096), ("1_024", 1024), (7, 7)])
def test_a_bucket_count_is_a_whole_number_in_range(given, count):
    assert check_key_buckets(given) == count


@pytest.mark.parametrize("given", ["0", "-3", "2.5", "many", "", True, str(MAX_KEY_BUCKETS + 1)])
def test_a_bucket_count_out_of_range_or_not_a_number_is_refused_saying_what_is_allowed(given):
    with pytest.raises(ValueError, match=r"--key-buckets must be .*from 1 to 1,048,576"):
        check_key_buckets(given)


def test_the_count_of_a_new_checkpoint_is_the_one_asked_for_else_the_default(tmp_path):
    assert settle_key_buckets(str(tmp_path / "new"), None, None) == KEY_BUCKETS
    assert settle_key_buckets(str(tmp_path / "new"), None, 4096) == 4096


def test_a_checkpoint_keeps_its_count_and_refuses_another(tmp_path):
    assert settle_key_buckets(str(tmp_path), 512, None) == 512
    assert settle_key_buckets(str(tmp_path), 512, 512) == 512
    with pytest.raises(CepSemanticError) as err:
        settle_key_buckets(str(tmp_path), 512, 1024)
    said = str(err.value)
    assert err.value.code == "E0482" and "--key-buckets 512, not 1024" in said and "new checkpoint" in said


def test_a_checkpoint_that_ran_before_the_count_was_recorded_ran_with_the_default(tmp_path):
    offsets = tmp_path / "match" / "offsets"
    offsets.mkdir(parents=True)
    assert settle_key_buckets(str(tmp_path), None, 4096) == 4096  # no micro-batch logged: nothing to keep
    (offsets / "0").write_text("v1\n{}\n")
    assert settle_key_buckets(str(tmp_path), None, None) == KEY_BUCKETS
    with pytest.raises(CepSemanticError, match=f"--key-buckets {KEY_BUCKETS}, not 4096"):
        settle_key_buckets(str(tmp_path), None, 4096)


@pytest.mark.parametrize(
    ("given", "keys"), [("10000000", 10_000_000), ("10_000_000", 10_000_000), ("10M", 10_000_000), ("250k", 250_000)]
)
def test_an_expected_key_count_is_a_whole_number_with_an_optional_suffix(given, keys):
    assert check_expected_keys(given) == keys


@pytest.mark.parametrize("given", ["0", "-5", "1.5M", "M", "", "ten", "10 M", True])
def test_an_expected_key_count_that_is_not_one_is_refused_saying_what_is_allowed(given):
    with pytest.raises(ValueError, match=r"--expected-keys must be a whole number of keys above 0"):
        check_expected_keys(given)


@given_examples(st.integers(min_value=1, max_value=10**11))
def test_the_buckets_for_a_key_count_are_the_fewest_powers_of_two_that_hold_it_at_the_aimed_keys_each(keys):
    count = key_buckets_for(keys)
    assert count & (count - 1) == 0 and KEY_BUCKETS <= count <= MAX_KEY_BUCKETS
    if count == MAX_KEY_BUCKETS:  # the cap: more keys per bucket than aimed at, rather than a mistaken count
        assert keys > MAX_KEY_BUCKETS // 2 * KEYS_PER_BUCKET
    else:
        assert keys <= count * KEYS_PER_BUCKET  # no bucket above the aim, on average
        assert count == KEY_BUCKETS or keys > count // 2 * KEYS_PER_BUCKET  # and half as many would be


def test_ten_million_expected_keys_take_a_quarter_million_buckets_and_a_few_keys_the_default():
    assert key_buckets_for(10_000_000) == 262_144  # 10M / 64 = 156,250, rounded up to a power of two
    assert key_buckets_for(1_000_000) == 16_384
    assert key_buckets_for(1_000) == KEY_BUCKETS


def test_expected_keys_choose_the_count_of_a_new_checkpoint_only(tmp_path):
    assert expected_key_buckets(str(tmp_path / "new"), 1_000_000) == (16_384, 16_384)
    (tmp_path / "status.json").write_text(json.dumps({"key_buckets": 64}))
    assert expected_key_buckets(str(tmp_path), 1_000_000) == (None, 16_384)  # it keeps its 64: no E0482
    ran = tmp_path / "old"
    (ran / "match" / "offsets").mkdir(parents=True)
    (ran / "match" / "offsets" / "0").write_text("v1\n{}\n")
    assert expected_key_buckets(str(ran), 1_000_000) == (None, 16_384)  # from before counts were recorded


def stream_parser() -> argparse.ArgumentParser:
    from cep import stream_cli

    parser = argparse.ArgumentParser(prog="cep")
    stream_cli.add_commands(parser.add_subparsers(dest="command"))
    return parser


def test_the_cli_refuses_a_bad_count_before_anything_starts(capsys):
    parser = stream_parser()
    with pytest.raises(SystemExit) as done:
        parser.parse_args(["stream", "q.sql", "--input", "in", "--checkpoint", "ck", "--key-buckets", "0"])
    assert done.value.code == 2
    assert "--key-buckets must be from 1 to 1,048,576, not 0" in capsys.readouterr().err
    args = parser.parse_args(["stream", "q.sql", "--input", "in", "--checkpoint", "ck", "--key-buckets", "4096"])
    assert args.key_buckets == 4096


def test_the_cli_takes_expected_keys_or_a_bucket_count_not_both(capsys):
    parser = stream_parser()
    base = ["stream", "q.sql", "--input", "in", "--checkpoint", "ck"]
    assert parser.parse_args([*base, "--expected-keys", "10M"]).expected_keys == 10_000_000
    with pytest.raises(SystemExit) as done:
        parser.parse_args([*base, "--expected-keys", "10M", "--key-buckets", "64"])
    assert done.value.code == 2
    assert "--key-buckets: not allowed with argument --expected-keys" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--expected-keys", "lots"])
    assert "--expected-keys must be a whole number of keys above 0" in capsys.readouterr().err


def test_the_cli_refuses_another_count_than_the_checkpoints_before_spark_starts(tmp_path, capsys):
    rules, source, checkpoint = tmp_path / "rules", tmp_path / "in", tmp_path / "ck"
    write_rule(rules, "prices.sql", HIGH)
    source.mkdir()
    checkpoint.mkdir()
    (checkpoint / "status.json").write_text(json.dumps({"key_buckets": 3}))
    args = stream_parser().parse_args(
        ["stream", "--rules", str(rules), "--input", str(source), "--checkpoint", str(checkpoint), "--once"]
        + ["--format", "json", "--state", "spark", "--key-buckets", "5"]
    )
    assert args.func(args) == 1
    said = capsys.readouterr().err
    assert "E0482" in said and "--key-buckets 3, not 5" in said and "Spark's own log" not in said


def test_the_cli_refuses_key_buckets_with_the_rules_on_the_driver_before_spark_starts(tmp_path, capsys):
    """On a local master a new checkpoint runs its rules on the driver, which has no use for Spark's buckets."""
    rules, source = tmp_path / "rules", tmp_path / "in"
    write_rule(rules, "prices.sql", HIGH)
    source.mkdir()
    args = stream_parser().parse_args(
        ["stream", "--rules", str(rules), "--input", str(source), "--checkpoint", str(tmp_path / "ck"), "--once"]
        + ["--format", "json", "--master", "local[2]", "--key-buckets", "5"]
    )
    assert args.func(args) == 1
    said = capsys.readouterr().err
    assert "E0289" in said and "a local master (local[2])" in said and "add --state spark" in said
    assert "Spark's own log" not in said and not (tmp_path / "ck").exists()


@pytest.mark.spark
def test_another_count_streams_the_replays_alerts_and_keeps_it_across_restarts(spark, tmp_path, capsys):
    rules, source, checkpoint = tmp_path / "rules", tmp_path / "in", tmp_path / "ck"
    write_rule(rules, "prices.sql", HIGH)
    write_rule(rules, "span.sql", SPAN)
    batches = price_batches() + [
        [ev("a", 85, 105), ev("b", 130, 101), ev("s", 95, 25)] + price_walk(["c", "d", "e"], 90, 140, 3, seed=5),
        [ev(SENTINEL, 10_000, 0)],
    ]

    def stream(files: int, key_buckets: int | None, state: str | None = None) -> AlertStream:
        for index in range(files):
            write_batch(source, index, batches[index])
        df = spark.readStream.schema(_schema()).option("maxFilesPerTrigger", 1).json(str(source))
        return AlertStream(
            spark, str(rules), df, checkpoint=str(checkpoint), watermark="5 seconds", key_buckets=key_buckets,
            state=state,
        )  # fmt: skip

    first = stream(2, 3, state="spark")  # the buckets of Spark's keyed state; restarts go on in its layout
    assert first.key_buckets == 3
    first.run_available_now()
    assert read_status(str(checkpoint))["key_buckets"] == 3
    with pytest.raises(CepSemanticError) as err:
        stream(2, KEY_BUCKETS)
    assert err.value.code == "E0482" and "--key-buckets 3, not 64" in str(err.value)
    # The CLI says the same and starts nothing.
    args = stream_parser().parse_args(
        ["stream", "--rules", str(rules), "--input", str(source), "--checkpoint", str(checkpoint), "--once"]
        + ["--watermark", "5s", "--master", "local[2]", "--key-buckets", "5"]
    )
    code = args.func(args)
    assert code != 0 and "--key-buckets 3, not 5" in capsys.readouterr().err
    again = stream(len(batches), None)  # without the flag: the checkpoint's count
    assert again.key_buckets == 3
    again.run_available_now()
    out = again.alerts().toPandas()
    events = [e for b in batches for e in b]
    assert out["match_id"].is_unique
    assert streamed(out, "prices/high") == replay(HIGH, events)
    assert streamed(out, "span") == replay(SPAN, events)
    across = out[(out["rule_id"] == "span") & (out["partition_key"] == json.dumps({"symbol": "s"}))]
    assert list(across["first_event_time"]) == [at(50)] and list(across["last_event_time"]) == [at(95)]
