"""What a webhook request says: the body in the receiving tool's own format, the rule's severity and
summary, and the request signature.

``--webhook-format``:

* ``json`` (default): ``{"alerts": [...]}``, each alert the JSON object of ``alerts.alert_payload``
  with the rule's ``severity`` and ``summary`` added.
* ``pagerduty``: one PagerDuty Events API v2 event per request: ``routing_key``, ``event_action``
  ``trigger``, ``dedup_key`` = the match id (so PagerDuty folds a repeated delivery into one alert),
  ``payload.summary`` (at most 1,024 characters), ``payload.severity`` (critical, error, warning, info),
  ``payload.source`` (the partition key, e.g. ``card_id=C003``), ``payload.timestamp`` (the emit time),
  ``component`` (the rule id), ``group`` (its file), ``class`` (the match status) and
  ``custom_details`` (measures, partition key, event times, match id, rule version).
* ``slack``: an incoming-webhook message: ``text`` (the notification's fallback) and ``blocks`` (a
  section per alert with its summary and key, its measures as fields, a context line). Alert data is
  escaped for Slack's markup (``&``, ``<``, ``>``), so a value such as ``<!channel>`` cannot ping a channel.
* ``alertmanager``: Alertmanager's ``POST /api/v2/alerts`` body, a JSON array of alerts with ``labels``
  (``alertname`` = the rule id, ``severity``, ``match_id``, and the partition key's columns),
  ``annotations`` (``summary``, ``description``, event times, measures), ``startsAt`` (the emit time) and
  ``endsAt`` (an hour later: an alert is an event, and Alertmanager resolves it by itself).
* ``template``: a Jinja2 template (``templates.compile_template``: Jinja2's immutable sandbox, no attribute
  of Python internals, no imports, its work and output bounded) whose every ``{{ expression }}`` is
  written as JSON, so data can never break the body out of its JSON string:
  ``{"text": {{ "Rule " ~ alert.rule_id ~ " fired" }}}``. It sees ``alert`` (the first alert of the
  request) and ``alerts``; what it renders must parse as JSON.

A rule's ``-- severity: critical`` and ``-- summary: Card {{ card_id }} tested {{ tests }} times`` lines
(rule options) give its severity (default ``warning``) and summary (a Jinja2 text template over the
alert's measures and ``rule_id``, ``match_status``, ``key``, ``first_event_time``, ``last_event_time``;
default ``RULE: STATUS key=value ...``). Templates are never Python format strings, and query text and
data never reach ``eval``.

Signing (``--webhook-secret``): the header ``X-Cep-Signature: t=<unix seconds>,v1=<hex>`` where hex is
the HMAC-SHA256, keyed with the secret, of ``<t>.`` followed by the body bytes. A receiver recomputes
it and rejects a request whose ``t`` is older than a few minutes (docs/alerting.md has the snippet).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cep.spark_bridge.sinks.templates import BoundedTemplate, compile_template

# Imported inside functions: jinja2 (optional, the "service" extra: only summary and body templates need it).

__all__ = [
    "FORMATS",
    "SEVERITIES",
    "RuleNotes",
    "BodyFormat",
    "enrich",
    "render_summary",
    "signature",
    "SIGNATURE_HEADER",
    "check_summary_template",
]

FORMATS = ("json", "pagerduty", "slack", "alertmanager", "template")
SEVERITIES = ("critical", "error", "warning", "info")  # PagerDuty's; Alertmanager and Slack take them as text
DEFAULT_SEVERITY = "warning"
SIGNATURE_HEADER = "X-Cep-Signature"
PAGERDUTY_SUMMARY_LIMIT = 1024  # characters, PagerDuty Events API v2
PAGERDUTY_DEDUP_LIMIT = 255
SLACK_SECTION_LIMIT = 3000  # characters of a section's text
SLACK_FIELD_LIMIT = 2000  # characters of one field
SLACK_FIELDS = 10  # fields per section
SLACK_BLOCKS = 50  # blocks per message: 2 per alert, so at most 25 alerts per request
ALERTMANAGER_ALERT_DURATION = _dt.timedelta(hours=1)
SUMMARY_LIMIT = 1024
# A summary is one line of at most SUMMARY_LIMIT characters once its spaces are folded: a template that
# writes far more is stopped rather than folded (templates.py bounds every template's work).
SUMMARY_RENDER_LIMIT = 64 * SUMMARY_LIMIT
SUMMARY_TEMPLATES_CACHED = 1024  # compiled summary templates kept: one per rule, recompiled only when evicted
_LABEL_NAME = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class RuleNotes:
    """What a rule's comments say about its alerts: ``-- severity:`` and ``-- summary:``."""

    severity: str = DEFAULT_SEVERITY
    summary: str | None = None  # a Jinja2 text template

    @staticmethod
    def from_options(options: Mapping[str, str]) -> RuleNotes:
        severity = (options.get("severity") or DEFAULT_SEVERITY).strip().lower()
        return RuleNotes(severity if severity in SEVERITIES else DEFAULT_SEVERITY, options.get("summary") or None)


@functools.lru_cache(maxsize=SUMMARY_TEMPLATES_CACHED)
def _summary_template(text: str) -> BoundedTemplate:
    return compile_template(text, max_text=SUMMARY_RENDER_LIMIT)


def _json_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _key_text(key: Any) -> str:
    if isinstance(key, dict) and key:
        return " ".join(f"{k}={_plain(v)}" for k, v in key.items())
    return ""


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def check_summary_template(text: str) -> None:
    """Raise ``ValueError`` if a ``-- summary:`` template does not compile (Jinja2 syntax)."""
    if "{" not in text:
        return
    try:
        _summary_template(text)
    except ImportError:
        raise ValueError("a summary with {{ ... }} needs Jinja2: pip install 'cep-spark[service]'") from None
    except Exception as exc:  # jinja2.TemplateSyntaxError
        raise ValueError(f"the summary template does not compile: {exc}") from None


def render_summary(payload: dict, notes: RuleNotes) -> str:
    """The alert's one-line summary: the rule's template, or ``RULE: STATUS key=value ...``."""
    default = " ".join(
        p
        for p in (
            f"{payload.get('rule_id')}: {payload.get('match_status') or 'MATCHED'}",
            _key_text(payload.get("partition_key")),
        )
        if p
    )
    if not notes.summary:
        return default
    if "{" not in notes.summary:
        return notes.summary[:SUMMARY_LIMIT]
    measures = payload.get("measures") if isinstance(payload.get("measures"), dict) else {}
    context = dict(measures)
    context.update(
        {
            "rule_id": payload.get("rule_id"),
            "match_status": payload.get("match_status"),
            "key": payload.get("partition_key"),
            "measures": measures,
            "match_id": payload.get("match_id"),
            "first_event_time": payload.get("first_event_time"),
            "last_event_time": payload.get("last_event_time"),
        }
    )
    try:
        text = _summary_template(notes.summary).render(context)
    except Exception as exc:  # noqa: BLE001 - a template that fails on this alert: say so, keep the alert
        return f"{default} (summary template failed: {type(exc).__name__}: {exc})"[:SUMMARY_LIMIT]
    return " ".join(text.split())[:SUMMARY_LIMIT]


def enrich(payload: dict, notes: RuleNotes) -> dict:
    """The alert payload with its rule's ``severity`` and ``summary``."""
    return {**payload, "severity": notes.severity, "summary": render_summary(payload, notes)}


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    """The ``X-Cep-Signature`` value: ``t=<timestamp>,v1=<hex HMAC-SHA256 of "<t>." + body>``."""
    digest = hmac.new(secret, f"{timestamp}.".encode("ascii") + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


# -------------------------------------------------------------------------------------------- bodies


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _emit_time(payload: dict) -> _dt.datetime:
    text = payload.get("emit_time")
    try:
        return _dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return _dt.datetime.now(_dt.UTC)


def _rfc3339(moment: _dt.datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment.astimezone(_dt.UTC).isoformat().replace("+00:00", "Z")


def pagerduty_event(alert: dict, routing_key: str) -> dict:
    key = alert.get("partition_key")
    details = {
        "measures": alert.get("measures"),
        "partition_key": key,
        "match_id": alert.get("match_id"),
        "rule_version": alert.get("rule_version"),
        "first_event_time": alert.get("first_event_time"),
        "last_event_time": alert.get("last_event_time"),
    }
    return {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": str(alert.get("match_id"))[:PAGERDUTY_DEDUP_LIMIT],
        "client": "cep",
        "payload": {
            "summary": _clip(alert.get("summary") or str(alert.get("rule_id")), PAGERDUTY_SUMMARY_LIMIT),
            "severity": alert.get("severity") if alert.get("severity") in SEVERITIES else DEFAULT_SEVERITY,
            "source": _key_text(key) or "cep",
            "timestamp": _rfc3339(_emit_time(alert)),
            "component": alert.get("rule_id"),
            "group": str(alert.get("rule_id")).split("/")[0],
            "class": alert.get("match_status") or "MATCHED",
            "custom_details": details,
        },
    }


def slack_message(alerts: Sequence[dict]) -> dict:
    blocks: list[dict] = []
    for alert in alerts:
        head = f"*[{str(alert.get('severity', '')).upper()}] {_slack_escape(alert.get('summary') or '')}*"
        where = " · ".join(
            p
            for p in (
                f"`{_slack_escape(str(alert.get('rule_id')))}`",
                alert.get("match_status") or "",
                _slack_escape(_key_text(alert.get("partition_key"))),
            )
            if p
        )
        section: dict = {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _clip(f"{head}\n{where}", SLACK_SECTION_LIMIT)},
        }
        measures = alert.get("measures") if isinstance(alert.get("measures"), dict) else {}
        if measures:
            section["fields"] = [
                {
                    "type": "mrkdwn",
                    "text": _clip(f"*{_slack_escape(str(k))}*\n{_slack_escape(_plain(v))}", SLACK_FIELD_LIMIT),
                }
                for k, v in list(measures.items())[:SLACK_FIELDS]
            ]
        span = f"{alert.get('first_event_time')} .. {alert.get('last_event_time')}"
        context = {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": _slack_escape(f"match {alert.get('match_id')} · {span}")}],
        }
        blocks += [section, context]
    fallback = "; ".join(
        f"[{str(a.get('severity', '')).upper()}] {a.get('summary') or a.get('rule_id')}" for a in alerts
    )
    return {"text": _clip(_slack_escape(fallback), SLACK_SECTION_LIMIT), "blocks": blocks[:SLACK_BLOCKS]}


def alertmanager_alerts(alerts: Sequence[dict]) -> list[dict]:
    out = []
    for alert in alerts:
        labels = {
            "alertname": str(alert.get("rule_id")),
            "severity": str(alert.get("severity") or DEFAULT_SEVERITY),
            "match_id": str(alert.get("match_id")),
            "source": "cep",
        }
        key = alert.get("partition_key")
        for name, value in key.items() if isinstance(key, dict) else ():
            label = _LABEL_NAME.sub("_", str(name))
            if label and not label[0].isdigit() and not label.startswith("__") and label not in labels:
                labels[label] = _plain(value)
        started = _emit_time(alert)
        out.append(
            {
                "labels": labels,
                "annotations": {
                    "summary": str(alert.get("summary") or ""),
                    "description": ", ".join(f"{k}={_plain(v)}" for k, v in (alert.get("measures") or {}).items())
                    if isinstance(alert.get("measures"), dict)
                    else str(alert.get("measures")),
                    "match_status": str(alert.get("match_status") or "MATCHED"),
                    "first_event_time": str(alert.get("first_event_time")),
                    "last_event_time": str(alert.get("last_event_time")),
                    "rule_version": str(alert.get("rule_version")),
                    "measures": json.dumps(alert.get("measures"), ensure_ascii=False),
                },
                "startsAt": _rfc3339(started),
                "endsAt": _rfc3339(started + ALERTMANAGER_ALERT_DURATION),
            }
        )
    return out


# Alerts per Alertmanager request by default: what Prometheus itself sends to Alertmanager in one POST
# (its notifier's maxBatchSize), so a receiver sized for Prometheus takes it.
ALERTMANAGER_BATCH = 64


class BodyFormat:
    """How a request's alerts (enriched payloads) become its body, and how many one request may carry."""

    def __init__(self, name: str = "json", *, routing_key: str | None = None, template: str | None = None) -> None:
        if name not in FORMATS:
            raise ValueError(f"webhook format {name!r}: use one of {', '.join(FORMATS)}")
        if name == "pagerduty" and not routing_key:
            raise ValueError(
                "the pagerduty format needs a routing key (--pagerduty-routing-key, e.g. '$PAGERDUTY_KEY')"
            )
        if name == "template" and not template:
            raise ValueError("the template format needs a template (--webhook-template FILE)")
        self.name = name
        self.routing_key = routing_key
        self._template = None
        if name == "template":
            try:
                self._template = compile_template(template, finalize=_json_value)
            except ImportError:
                raise ValueError("--webhook-format template needs Jinja2: pip install 'cep-spark[service]'") from None
            except Exception as exc:  # jinja2.TemplateSyntaxError
                raise ValueError(f"the webhook template does not compile: {exc}") from None

    @property
    def max_batch(self) -> int | None:
        return {"pagerduty": 1, "slack": SLACK_BLOCKS // 2}.get(self.name)

    @property
    def default_batch(self) -> int:
        """Alerts per request when the user does not say (``--webhook-batch``): a list where the receiver's
        API takes one as its own (Alertmanager), else one alert per request (its key = its match id)."""
        return ALERTMANAGER_BATCH if self.name == "alertmanager" else 1

    def body(self, alerts: Sequence[dict]) -> bytes:
        """The request body (UTF-8 JSON); ``ValueError`` when a template renders something that is not JSON."""
        if self.name == "json":
            value: Any = {"alerts": list(alerts)}
        elif self.name == "pagerduty":
            value = pagerduty_event(alerts[0], self.routing_key or "")
        elif self.name == "slack":
            value = slack_message(alerts)
        elif self.name == "alertmanager":
            value = alertmanager_alerts(alerts)
        else:
            try:
                text = self._template.render({"alert": alerts[0], "alerts": list(alerts)})
            except Exception as exc:  # noqa: BLE001 - a template error on this alert is this alert's failure
                raise ValueError(f"the webhook template failed: {type(exc).__name__}: {exc}") from None
            try:
                json.loads(text)
            except ValueError as exc:
                raise ValueError(f"the webhook template rendered text that is not JSON ({exc})") from None
            return text.encode("utf-8")
        return json.dumps(value, ensure_ascii=False).encode("utf-8")

    def check(self, sample: dict) -> None:
        """Render ``sample`` (raises ``ValueError``): a template's mistakes show at start-up."""
        self.body([sample])
