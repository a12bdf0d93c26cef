"""Templates (a rule's ``-- summary:``, ``--webhook-template``) cannot stop the service: their work, their
output and what they may change are bounded (spark_bridge/sinks/templates.py)."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.sandbox import SandboxedEnvironment

from cep.spark_bridge.alerting.rules import load_rules
from cep.spark_bridge.sinks.payloads import BodyFormat, RuleNotes, check_summary_template, enrich, render_summary
from cep.spark_bridge.sinks.templates import MAX_INT_BITS, MAX_STEPS, TemplateBudgetError, compile_template

PAYLOAD = {
    "rule_id": "fraud/r",
    "match_status": "MATCHED",
    "partition_key": {"card": "c1"},
    "measures": {"n": 3, "total": 12.5, "who": "Müller"},
    "match_id": "m-1",
    "first_event_time": "2024-01-01T00:00:00",
    "last_event_time": "2024-01-01T00:01:00",
}

# Each of these hung the service (at load, by constant folding, or at render) or blew up its memory.
HOSTILE = {
    "a power folded at load": ("{{ 3 ** (10**9) % 7 }}", "bits"),
    "nested loops over big ranges": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "steps|longer than",
    ),
    "nested loops over a string": (
        "{% for a in 'x' * 100000 %}{% for b in 'x' * 100000 %}{% endfor %}{% endfor %}",
        "steps|longer than",
    ),
    "a repeated string": ("{{ 'x' * 10**9 }}", "limit"),
    "a repeated list": ("{{ [1] * 10**8 }}", "limit"),
    "a % format's width": ("{{ '%0999999999d' % 1 }}", "width"),
    "a % format's star": ("{{ '%*d' % (999999999, 1) }}", "width"),
    "str.format's width": ("{{ '{:>999999999}'.format(1) }}", "str.format"),
    "replace of the empty string": ("{{ ('ab' * 5000).replace('', 'ab' * 5000) }}", "longer"),
    "the replace filter": ("{{ ('ab' * 5000)|replace('', 'ab' * 5000) }}", "longer"),
    "a width filter": ("{{ 'x'|center(10**9) }}", "width"),
    "a width method": ("{{ 'x'.ljust(10**9) }}", "unsafe"),
    "doubling in a namespace": (
        "{% set ns = namespace(s='xx') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s|length }}",
        "characters",
    ),
    "a macro calling itself twice": (
        "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(60) }}",
        "steps|longer than",
    ),
    "lorem ipsum": ("{{ lipsum(n=10**6) }}", "lipsum"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_summary_compiles_at_once_and_fails_alone_at_render(name):
    """(A loop ends on its steps, or on its time on a busy machine: either bound stops it.)"""
    template, reason = HOSTILE[name]
    check_summary_template(template)  # the loader's check: compiles, computes nothing
    summary = render_summary(PAYLOAD, RuleNotes(summary=template))
    assert summary.startswith("fraud/r: MATCHED card=c1 (summary template failed:"), summary
    assert any(word in summary for word in reason.split("|")), summary


@pytest.mark.timeout(60)
def test_a_hostile_rule_loads_and_cep_check_passes_it_without_hanging(tmp_path):
    (tmp_path / "r.sql").write_text(
        "-- name: slow\n-- summary: {{ 3 ** (10**9) % 7 }}\n"
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts MEASURES A.n AS n "
        "PATTERN (A) DEFINE A AS n > 0)"
    )
    ruleset = load_rules(str(tmp_path))
    assert list(ruleset.rules) == ["r/slow"] and not ruleset.errors


def test_a_template_cannot_change_the_alert_it_renders():
    original = copy.deepcopy(PAYLOAD)
    for template in (
        "{{ key.update({'card': 'SOMEONE-ELSE'}) }}",
        "{{ measures.pop('n') }}",
        "{% set _ = measures.__setitem__('n', 0) %}",
        "{{ key.clear() }}",
    ):
        enriched = enrich(PAYLOAD, RuleNotes(summary=template))
        assert "summary template failed" in enriched["summary"]
        assert PAYLOAD == original and enriched["partition_key"] == {"card": "c1"}
    body = BodyFormat("template", template='{% set _ = alert.measures.update({"n": 0}) %}{"n": {{ alert.measures.n }}}')
    with pytest.raises(ValueError, match="unsafe"):
        body.body([PAYLOAD])
    assert PAYLOAD == original


def test_a_template_that_stays_within_the_limits_renders_as_jinja2_does():
    honest = (
        "Card {{ key.card }}: {{ n }} tests, {{ '%.1f' % total }} in total ({{ who|upper }}); "
        "{% for name, value in measures|dictsort %}{{ name }}={{ value }} {% endfor %}{{ 2 ** 64 }} "
        "{{ [1, 2] * 3 }} {{ 'ab' * 3 }} {{ range(5)|sum }} {{ 'x'|center(9) }}"
    )
    context = {**PAYLOAD["measures"], "key": PAYLOAD["partition_key"], "measures": PAYLOAD["measures"]}
    expected = SandboxedEnvironment().from_string(honest).render(context)  # Jinja2's own sandbox, unbounded
    assert compile_template(honest).render(context) == expected
    assert "Card c1: 3 tests, 12.5 in total (MÜLLER)" in expected


@settings(max_examples=200, deadline=None)
@given(base=st.integers(-20, 20), exponent=st.integers(0, 6000), factor=st.integers(-(2**70), 2**70))
def test_integer_arithmetic_is_refused_only_past_the_limit(base, exponent, factor):
    template = compile_template("{{ (base ** exponent) * factor }}")
    power = base**exponent  # computable here: the strategy keeps it under 26,000 bits
    try:
        rendered = template.render({"base": base, "exponent": exponent, "factor": factor})
    except TemplateBudgetError:
        assert power.bit_length() > MAX_INT_BITS - 1 or power.bit_length() + factor.bit_length() > MAX_INT_BITS
    else:
        assert int(rendered) == power * factor
        assert power.bit_length() <= MAX_INT_BITS + 1


def test_steps_are_counted_per_render_and_a_webhook_body_within_them_is_json():
    template = compile_template("{% for i in items %}x{% endfor %}")
    some = list(range(MAX_STEPS // 100))
    assert [template.render({"items": some}) for _ in range(101)] == ["x" * len(some)] * 101  # a budget per render
    with pytest.raises(TemplateBudgetError, match="steps|longer than"):  # whichever comes first on a busy machine
        template.render({"items": list(range(MAX_STEPS + 1))})
    body = BodyFormat("template", template='{"cards": {{ alerts | map(attribute="partition_key") | list }}}')
    assert json.loads(body.body([PAYLOAD, PAYLOAD])) == {"cards": [{"card": "c1"}, {"card": "c1"}]}
