"""Alert suppression (throttling): at most one alert per partition key per interval, per rule.

    specs = parse_specs(["fraud/*=10m", "disk_full=1h"])      # from --suppress (repeatable)
    interval_us(rule_id, rule_options, specs) -> int | None   # the rule's interval, µs (None: off)
    Throttle(interval_us).decide(last_alert_us, event_us) -> (suppressed, new_last_alert_us)

Where the interval comes from, first match wins: a ``--suppress RULE=DURATION`` spec (``RULE`` is a
rule id or an ``fnmatch`` pattern such as ``fraud/*``; ``DURATION`` as ``10m``, ``30 seconds``,
``1h``; ``0`` or ``off`` turns suppression off for that rule), then the rule's own ``-- suppress: 10m``
comment option.

The decision is made in **event time**, inside the stateful operator, key by key (``alerting``): a
match whose last event time is less than ``interval`` after the last alert that was *sent* for the
same rule and key is suppressed. The last alert's time lives in the key's Spark state, so decisions
are the same after a restart from the checkpoint and in any micro-batch split, and a replay of the same
events suppresses the same matches. Suppressed matches are still written to the file sink (with
``suppressed = true``) and counted per rule in ``cep status``; the alert sinks (console, webhook,
database) receive only the others.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cep.spark_bridge.engine.durations import is_off, parse_duration

__all__ = ["SuppressSpec", "Throttle", "interval_us", "parse_spec", "parse_specs"]


@dataclass(frozen=True)
class SuppressSpec:
    pattern: str  # a rule id or an fnmatch pattern
    interval_us: int  # 0: off

    def matches(self, rule_id: str) -> bool:
        return self.pattern == rule_id or fnmatch.fnmatchcase(rule_id, self.pattern)


def _duration_us(text: str, what: str) -> int:
    if is_off(text):
        return 0
    try:
        return parse_duration(text.strip(), what=what)
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None


def parse_spec(text: str) -> SuppressSpec:
    """``'rule_id=10m'`` (or ``'fraud/*=1 hour'``, ``'noisy=off'``) -> ``SuppressSpec``."""
    rule, sep, duration = text.rpartition("=")
    if not sep or not rule.strip() or not duration.strip():
        raise ValueError(
            f"--suppress expects RULE=DURATION, e.g. 'fraud/card_testing=10m' or 'fraud/*=1h'; got {text!r}"
        )
    return SuppressSpec(rule.strip(), _duration_us(duration, f"suppression interval of {rule.strip()!r}"))


def parse_specs(texts: Iterable[str] | None) -> list[SuppressSpec]:
    return [parse_spec(t) for t in texts or ()]


def interval_us(
    rule_id: str, options: Mapping[str, str] | None = None, specs: Sequence[SuppressSpec] = ()
) -> int | None:
    """The rule's suppression interval in µs, or None when its alerts are not throttled."""
    for spec in specs:
        if spec.matches(rule_id):
            return spec.interval_us or None
    value = (options or {}).get("suppress")
    if value is None:
        return None
    return _duration_us(value, f"'-- suppress:' option of rule {rule_id!r}") or None


@dataclass(frozen=True)
class Throttle:
    """At most one alert per ``interval`` of event time (for one rule and one partition key)."""

    interval: int | None  # µs; None or 0: never suppress

    def decide(self, last_alert_us: int | None, event_us: int | None) -> tuple[bool, int | None]:
        """(suppressed, the new last alert time) for a match whose event time is ``event_us``."""
        if not self.interval or event_us is None:
            return False, last_alert_us
        if last_alert_us is not None and event_us < last_alert_us + self.interval:
            return True, last_alert_us
        return False, event_us

    def open_until(self, last_alert_us: int | None) -> int | None:
        """Until when (µs, event time) the key must remember its last alert; None: no need."""
        if not self.interval or last_alert_us is None:
            return None
        return last_alert_us + self.interval
