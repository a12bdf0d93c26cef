"""``cep explain --format dot|svg|png`` (matcher/explain/dot.py): the automaton as Graphviz, checked by parsing
the DOT text back into nodes and edges (a small parser here, independent of matcher/explain/dot.py), and, where
Graphviz is installed, by Graphviz itself."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import cep
from cep.cli import main
from cep.matcher.explain.dot import GraphvizMissing, render, to_dot

REPO = Path(__file__).resolve().parent.parent
PATTERNS = sorted((REPO / "patterns").glob("*.sql"))
HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot is not installed (apt-get install graphviz)")

# ------------------------------------------------------------------------------------- a DOT reader

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_][\w.]*|-?\d+(?:\.\d+)?)|(->|[\[\]=,;{}]))')


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        assert m, f"cannot read DOT at {text[pos : pos + 40]!r}"
        quoted, word, punct = m.groups()
        if quoted is not None:
            out.append(("str", re.sub(r"\\(.)", lambda g: "\n" if g.group(1) == "n" else g.group(1), quoted)))
        elif word is not None:
            out.append(("str", word))
        else:
            out.append(("op", punct))
        pos = m.end()
    return out


def parse_dot(text: str) -> tuple[dict[str, dict], list[tuple[str, str, dict]], dict]:
    """(nodes {id: attrs}, edges [(tail, head, attrs)], graph attrs) of a flat ``digraph`` as written here."""
    tokens = _tokens(text)
    assert tokens[:3] == [("str", "digraph"), ("str", "pattern"), ("op", "{")] and tokens[-1] == ("op", "}")
    nodes, edges, graph = {}, [], {}
    statement: list = []
    for token in tokens[3:-1]:
        if token == ("op", ";"):
            if statement:
                _statement(statement, nodes, edges, graph)
            statement = []
        else:
            statement.append(token)
    assert not statement, "every statement ends with ';'"
    return nodes, edges, graph


def _attrs(tokens: list) -> dict:
    attrs, i = {}, 0
    while i < len(tokens):
        if tokens[i] == ("op", ","):
            i += 1
            continue
        assert tokens[i + 1] == ("op", "="), tokens
        attrs[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    return attrs


def _statement(tokens: list, nodes: dict, edges: list, graph: dict) -> None:
    attrs = {}
    if ("op", "[") in tokens:
        at = tokens.index(("op", "["))
        assert tokens[-1] == ("op", "]")
        attrs, tokens = _attrs(tokens[at + 1 : -1]), tokens[:at]
    if len(tokens) == 3 and tokens[1] == ("op", "->"):
        edges.append((tokens[0][1], tokens[2][1], attrs))
    elif len(tokens) == 3 and tokens[1] == ("op", "="):
        graph[tokens[0][1]] = tokens[2][1]
    elif len(tokens) == 1 and tokens[0][1] not in ("node", "edge", "graph"):
        nodes[tokens[0][1]] = attrs
    elif len(tokens) == 1:
        pass  # default attributes
    else:
        raise AssertionError(f"unexpected DOT statement {tokens}")


def automaton(text: str):
    """Nodes by display label, and edges as (tail label, head label, edge label, preference)."""
    nodes, edges, graph = parse_dot(to_dot(cep.compile(text).statement))
    label = {node: attrs.get("label", node) for node, attrs in nodes.items()}
    label["start"] = "start"
    for tail, head, _ in edges:
        assert tail in nodes and head in nodes, f"edge {tail} -> {head} names an undeclared node"
    return nodes, [(label[t], label[h], a.get("label", ""), a.get("taillabel")) for t, h, a in edges], graph


# ------------------------------------------------------------------------------------------- tests


def test_v_shape_automaton():
    nodes, edges, graph = automaton((REPO / "patterns" / "v_shape.sql").read_text())
    assert sorted(a.get("label", n) for n, a in nodes.items()) == ["A", "B", "C", "match", "start"]
    assert nodes["match"]["shape"] == "doublecircle"
    b, c = "B.price < PREV(B.price)", "C.price > PREV(C.price)"
    assert edges == [
        ("start", "A", "TRUE (no DEFINE)", None),
        ("A", "B", b, None),
        ("B", "B", b, "1"),  # greedy B+: one more B is tried first
        ("B", "C", c, "2"),
        ("C", "C", c, "1"),
        ("C", "match", "", "2"),
    ]
    assert graph["label"] == "PATTERN (A B+ C+)\nAFTER MATCH SKIP PAST LAST ROW"


def test_reluctant_quantifier_reverses_preference():
    _, edges, _ = automaton(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
        "PATTERN (A+? B) DEFINE A AS v > 0, B AS v < 0)"
    )
    assert ("A", "B", "v < 0", "1") in edges and ("A", "A", "v > 0", "2") in edges


def test_alternation_anchors_exclusion_and_repeated_variables():
    nodes, edges, _ = automaton(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n ALL ROWS PER MATCH "
        "PATTERN (^ A {- B -} (C | A)*? $) DEFINE B AS v > 1, C AS v = 2)"
    )
    by_label = {a.get("label", n): a for n, a in nodes.items()}
    assert set(by_label) == {"A", "B", "C", "A#2", "match", "start"}  # A appears twice in the pattern
    assert by_label["B"]["style"] == "dashed"  # inside {- -}: matched, not output
    assert ("start", "A", "at partition start (^)\nTRUE (no DEFINE)", None) in edges
    # *? prefers to stop: from B, ending (at the partition end) comes first, then C, then A again.
    assert [(h, pref) for t, h, _, pref in edges if t == "B"] == [("match", "1"), ("C", "2"), ("A#2", "3")]
    assert all(label.startswith("at partition end ($)") for t, h, label, _ in edges if h == "match")


def test_absence_has_a_deadline_node():
    nodes, edges, graph = automaton((REPO / "patterns" / "cart_abandoned.sql").read_text())
    assert {a.get("label") for a in nodes.values()} >= {"CART", "!BUY", "deadline"}
    assert ("CART", "!BUY", "NOT (page = 'purchase')", "1") in edges
    assert ("!BUY", "deadline", "event time passes\nfirst row + 30 MINUTE", "2") in edges
    assert ("deadline", "match", "", None) in edges
    assert "WITHIN INTERVAL '30' MINUTE" in graph["label"]


def test_labels_with_quotes_and_backslashes_survive():
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n "
        'PATTERN (A) DEFINE A AS "we""ird" = \'a\\"b\')'
    )
    _, edges, _ = automaton(text)
    assert edges[0][2] == '"we""ird" = \'a"b\''  # Spark's escape \" is a quote


def test_edge_labels_are_the_conditions_explain_prints():
    for path in PATTERNS:
        q = cep.compile(path.read_text())
        listing = q.explain().split("conditions:\n")[1].split("\nexecution:")[0]
        conditions = dict(line.strip().split(": ", 1) for line in listing.splitlines())
        _, edges, _ = automaton(path.read_text())
        for _, head, label, _ in edges:
            name = head.split("#")[0]
            if name in conditions:
                assert label.replace("\n", " ") == conditions[name], (path.name, head)


@needs_dot
@pytest.mark.parametrize("path", PATTERNS, ids=lambda p: p.stem)
def test_graphviz_reads_every_pattern(path):
    dot = to_dot(cep.compile(path.read_text()).statement)
    ours, our_edges, _ = parse_dot(dot)
    done = subprocess.run(["dot", "-Tjson"], input=dot.encode(), capture_output=True, timeout=60, check=True)
    assert not done.stderr.strip(), done.stderr.decode()
    theirs = json.loads(done.stdout)
    assert {o["name"] for o in theirs["objects"]} == set(ours)
    assert len(theirs["edges"]) == len(our_edges)


@needs_dot
def test_cli_writes_svg_and_png(tmp_path, capsys):
    query = str(REPO / "patterns" / "w_shape.sql")
    assert main(["explain", query, "--format", "svg", "-o", str(tmp_path / "w.svg")]) == 0
    svg = (tmp_path / "w.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "DOWN1" in svg
    assert main(["explain", query, "-o", str(tmp_path / "w.png")]) == 0  # format from the extension
    assert (tmp_path / "w.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in capsys.readouterr().out


def test_cli_prints_dot(capsys):
    assert main(["explain", str(REPO / "patterns" / "v_shape.sql"), "--format", "dot"]) == 0
    out = capsys.readouterr().out
    nodes, edges, _ = parse_dot(out)
    assert len(nodes) == 5 and len(edges) == 6


def test_svg_without_graphviz_is_a_clear_usage_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(GraphvizMissing, match="apt-get install graphviz"):
        render("digraph pattern {}", "svg")
    assert (
        main(["explain", str(REPO / "patterns" / "v_shape.sql"), "--format", "png", "-o", str(tmp_path / "x.png")]) == 2
    )
    err = capsys.readouterr().err
    assert "Graphviz" in err and "apt-get install graphviz" in err and "--format dot" in err
    assert "Traceback" not in err
    assert not (tmp_path / "x.png").exists()
    # DOT text needs no Graphviz.
    assert main(["explain", str(REPO / "patterns" / "v_shape.sql"), "--format", "dot"]) == 0
