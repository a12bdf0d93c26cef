"""One `cep stream` that pages PagerDuty, posts to Slack and feeds Alertmanager: each webhook in its own format.

The `--webhook-*` options set every webhook of a stream, and argparse keeps the last of two values, so
`--sink webhook PD --webhook-format pagerduty --sink webhook AM --webhook-format alertmanager` once sent
Alertmanager's body to all three receivers without a word (found by running the on-call walkthrough with three
real receivers). Now the words after a webhook's URL set its own options, and a second, different value of a
`--webhook-*` option is a usage error. Real parts: the command's own parser, `parse_sinks`, real HTTP receivers
(tests/test_sinks.py's `Receiver`) and the JSON Schemas written from each tool's documentation (tests/schemas/).
No Spark.
"""

from __future__ import annotations

import argparse
import json

import pytest

from cep.stream_cli import parse_sinks, status_line
from cep.stream_options import add_stream_arguments
from tests.test_delivery import schema
from tests.test_sinks import alert, receiver_factory  # noqa: F401 - the fixture

jsonschema = pytest.importorskip("jsonschema")

ROUTING_KEY = "R0UTINGKEY0123456789abcdef012345"


def stream_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="cep stream")
    add_stream_arguments(parser)
    return parser.parse_args(["--input", "in/", "--checkpoint", "ck/", *argv])


def test_three_webhooks_each_get_the_body_their_tool_documents(receiver_factory, tmp_path, monkeypatch):
    pagerduty, slack, alertmanager = receiver_factory(), receiver_factory(), receiver_factory()
    monkeypatch.setenv("PD_KEY", ROUTING_KEY)
    monkeypatch.setenv("AM_TOKEN", "s3cret")
    args = stream_args(
        "--sink", "webhook", pagerduty.url, "format=pagerduty", "routing-key=$PD_KEY",
        "--sink", "webhook", slack.url, "format=slack",
        "--sink", "webhook", alertmanager.url, "format=alertmanager", "header=Authorization: Bearer $AM_TOKEN",
    )  # fmt: skip
    _, sinks = parse_sinks(args.sink, dead_letter_dir=str(tmp_path / "dead"), webhook_args=args)
    alerts = [alert(1), alert(2)]
    for sink in sinks:
        assert sum(sink.deliver(alerts, batch_id=1).delivered.values()) == 2
    pd_bodies = [json.loads(raw) for _, raw in pagerduty.raw]
    assert len(pd_bodies) == 2  # PagerDuty's Events API takes one event per request
    for body in pd_bodies:
        jsonschema.validate(body, schema("pagerduty-events-v2-trigger"))
        assert body["routing_key"] == ROUTING_KEY
    assert len(slack.raw) == 2  # Slack's default: one alert per message
    for _, raw in slack.raw:
        jsonschema.validate(json.loads(raw), schema("slack-incoming-webhook"))
    ((am_headers, am_raw),) = alertmanager.raw  # Alertmanager takes a list: both alerts in one request
    jsonschema.validate(json.loads(am_raw), schema("alertmanager-postable-alerts"))
    assert am_headers["Authorization"] == "Bearer s3cret"
    # the header was this webhook's own: the other receivers never see its token
    assert all("Authorization" not in headers for headers, _ in pagerduty.raw + slack.raw)


def test_a_webhook_option_given_twice_with_two_values_is_refused_not_the_last_one_kept(capsys):
    with pytest.raises(SystemExit) as stopped:
        stream_args(
            "--sink", "webhook", "https://events.pagerduty.com/v2/enqueue", "--webhook-format", "pagerduty",
            "--sink", "webhook", "https://am.example/api/v2/alerts", "--webhook-format", "alertmanager",
        )  # fmt: skip
    assert stopped.value.code == 2  # a usage error: restarting does not fix it
    said = capsys.readouterr().err
    assert "--webhook-format is given twice" in said and "--sink webhook URL format=VALUE" in said
    # the same value twice says the same thing twice: accepted
    assert stream_args("--webhook-format", "slack", "--webhook-format", "slack").webhook_format == "slack"


def test_a_word_after_a_webhook_url_that_is_no_option_is_a_usage_error(tmp_path):
    from cep.cli_io import UsageError

    args = stream_args("--sink", "webhook", "https://hooks.example/x", "fromat=slack")
    with pytest.raises(UsageError, match="'fromat=slack' is not an option of the webhook.*format=pagerduty"):
        parse_sinks(args.sink, dead_letter_dir=str(tmp_path), webhook_args=args)


def test_the_status_line_tells_two_webhooks_apart_by_their_keys():
    sinks = {
        "webhook-events.pagerduty.com-ba38b19f": {"delivered": 3, "queue_alerts": 2},
        "webhook-hooks.slack.com-23442c16": {"delivered": 5},
        "postgres-db-680bdbbf": {"delivered": 5},
    }
    line, _ = status_line({"sinks": sinks, "rules": {}}, started=0.0)
    assert "webhook-events.pagerduty.com-ba38b19f 3 (2 waiting)" in line
    assert "webhook-hooks.slack.com-23442c16 5" in line
    assert "| postgres 5 |" in line  # a kind with one sink keeps its short name


def test_the_status_line_counts_dead_letters_in_words():
    sinks = {"webhook-a-1": {"delivered": 1, "dead_letters_waiting": 1}, "slack-b-2": {"dead_letters_waiting": 2}}
    line, _ = status_line({"sinks": sinks, "rules": {}}, started=0.0)
    assert "webhook 1 (1 dead letter) |" in line
    assert "slack 0 (2 dead letters) |" in line


def test_a_batch_dead_lettered_then_redelivered_as_pagerduty_sends_every_alert(receiver_factory, tmp_path):
    """A letter of three alerts (a `--webhook-batch 3` request that failed) redelivered after the webhook
    became `format=pagerduty`, one event per request: each alert is its own event. One body of the letter
    carried only its first alert, and the letter was removed: two pages lost without a word."""
    from cep.spark_bridge.sinks.payloads import BodyFormat
    from tests.test_delivery import hook

    receiver = receiver_factory(plan=["500", "500"])  # both attempts of the first delivery fail
    alerts = [alert(1), alert(2), alert(3)]
    report = hook(receiver.url, tmp_path, batch_size=3).deliver(alerts, batch_id=1)
    assert sum(report.dead_lettered.values()) == 3
    pagerduty = hook(receiver.url, tmp_path, body_format=BodyFormat("pagerduty", routing_key=ROUTING_KEY))
    assert pagerduty.replay_dead_letters() == (1, 0)  # one letter delivered, none failing
    events = [json.loads(raw) for _, raw in receiver.raw[2:]]
    for event in events:
        jsonschema.validate(event, schema("pagerduty-events-v2-trigger"))
    assert sorted(e["dedup_key"] for e in events) == sorted(a["match_id"] for a in alerts)
    assert [key for key, _ in receiver.requests[2:]] == sorted(a["match_id"] for a in alerts)
    assert not list(pagerduty.dead_letters.letters())


def test_an_alert_the_template_cannot_render_is_said_refused_with_what_to_do_not_an_outage(
    receiver_factory, tmp_path, monkeypatch
):
    """A body template that fails on one alert (a division by zero in its measures) makes a refused dead letter,
    which is never sent again by itself. The lane logged it as a receiver outage ("dead-lettered after its
    retries ... redelivered then") while the receiver took every other alert, then "answers again ...
    dead-lettered meanwhile and are redelivered": none of which happens to a refused letter."""
    from cep.spark_bridge.sinks import lanes as lanes_mod
    from cep.spark_bridge.sinks.lanes import DeliveryLanes, Journal
    from cep.spark_bridge.sinks.payloads import BodyFormat
    from tests.test_delivery import hook, until

    monkeypatch.setattr(lanes_mod, "IDLE_WAIT_S", 0.05)
    receiver = receiver_factory()
    template = '{"text": {{ alert.summary }}, "per_small": {{ alert.measures.big / (alert.measures.smalls - 3) }}}'
    fine = [{**alert(i), "measures": json.dumps({"card": f"c{i}", "smalls": 4, "big": 900.5})} for i in (2, 3, 4)]
    sink = hook(receiver.url, tmp_path, body_format=BodyFormat("template", template=template))
    said: list[tuple[str, str]] = []
    lanes = DeliveryLanes(
        [sink],
        str(tmp_path / "outbox"),
        Journal(str(tmp_path / "journal")),
        on_event=lambda m, lv: said.append((lv, m)),
    ).start()
    try:
        failing = {**alert(1), "measures": json.dumps({"card": "c1", "smalls": 3, "big": 900.5})}  # smalls - 3 == 0
        lanes.spool(0, [failing, *fine[:2]])
        until(lambda: len(receiver.raw) == 2 and any("refused" in m for _, m in said), what="the delivery")
        lanes.spool(1, fine[2:])
        until(lambda: len(receiver.raw) == 3, what="the next micro-batch")
    finally:
        lanes.stop(5)
    ((letter),) = sink.dead_letters.letters()
    assert letter.refused and letter.key == failing["match_id"]
    warnings = [m for level, m in said if level == "warning"]
    assert len(warnings) == 1, said
    assert f"refused for good, {failing['match_id']}" in warnings[0] and "ZeroDivisionError" in warnings[0]
    assert "cep deliver --checkpoint" in warnings[0]
    assert not any("redelivered" in m or "answers again" in m for _, m in said), said


def test_a_webhook_url_is_read_from_the_environment_so_its_token_stays_out_of_ps(
    receiver_factory, tmp_path, monkeypatch
):
    """Slack's incoming-webhook URL carries its token in the path: written as '$SLACK_URL' on the command line,
    it is read from the environment (as the headers, routing key and secret are), never shown by `ps`."""
    from cep.cli_io import UsageError

    receiver = receiver_factory()
    monkeypatch.setenv("SLACK_URL", receiver.url)
    args = stream_args("--sink", "webhook", "$SLACK_URL", "format=slack")
    _, (sink,) = parse_sinks(args.sink, dead_letter_dir=str(tmp_path), webhook_args=args)
    assert sum(sink.deliver([alert(1)], batch_id=1).delivered.values()) == 1
    jsonschema.validate(json.loads(receiver.raw[0][1]), schema("slack-incoming-webhook"))
    monkeypatch.delenv("SLACK_URL")
    with pytest.raises(UsageError, match="--sink webhook URL: the environment variable SLACK_URL is not set"):
        parse_sinks(args.sink, dead_letter_dir=str(tmp_path), webhook_args=args)
