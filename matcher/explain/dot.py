"""``cep explain --format dot|svg|png``: the compiled pattern as a Graphviz picture.

The picture is the automaton the Pike VM runs, with the epsilon instructions (SPLIT, JUMP, exclusion
marks, anchors) folded away, so what is left reads like a regular-expression NFA:

- a node per LABEL instruction, named by its pattern variable (``B``; a variable compiled to several
  places, as in ``A{2}`` or ``(A B)+ A``, gets ``A``, ``A#2``, ...); a node per DEADLINE (trailing
  absence ``!B``, done when event time passes WITHIN); the accepting ``match`` node; a ``start`` point;
- an edge from X to Y when, after X took a row, the next row may be taken by Y: it is labelled with Y's
  DEFINE condition (Y's condition is what the next row must satisfy), and, when X has several ways on,
  with the preference order (``1`` is tried first: greedy vs reluctant and alternation order live here);
- anchors passed on the way (``^``, ``$``) are written on the edge; variables inside an exclusion
  ``{- ... -}`` are drawn dashed (their rows are matched but not output).

``to_dot(statement)`` needs only the checked statement (no input columns); ``render(dot, "svg")`` runs
Graphviz's ``dot`` binary, and raises ``GraphvizMissing`` with an install hint when it is not there.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from cep.grammar import ast
from cep.grammar.format import format_expr, format_pattern
from cep.matcher.program.compiler import compile_pattern
from cep.matcher.program.instructions import (
    AT_END,
    AT_START,
    DEADLINE,
    DONE,
    EXCL_BEGIN,
    EXCL_END,
    JUMP,
    LABEL,
    SPLIT,
    Program,
)
from cep.matcher.program.machine import absence_labels, pattern_labels

RENDER_FORMATS = ("svg", "png")
_WRAP = 36  # characters per line of an edge label: long conditions stay readable in the picture


class GraphvizMissing(RuntimeError):
    """Rendering needs Graphviz's ``dot`` binary and it is not on PATH."""


@dataclass
class Step:
    """One way from a node to the next consuming (or accepting) instruction, in preference order."""

    target: int  # pc of a LABEL, DEADLINE or DONE instruction
    anchors: list[str] = field(default_factory=list)  # '^' / '$' passed on the way


def closure(program: Program, pc: int) -> list[Step]:
    """The consuming/accepting instructions reachable from ``pc`` through epsilon instructions only,
    in the order the VM prefers them (SPLIT's first operand first), each once."""
    steps: list[Step] = []
    seen: set[int] = set()
    # A stack, not recursion: an unrolled quantifier (``(A?){1,500}``) chains hundreds of SPLITs.
    stack: list[tuple[int, list[str]]] = [(pc, [])]
    while stack:
        at, anchors = stack.pop()
        if at in seen:  # a loop that consumed nothing: the VM does not repeat it either
            continue
        seen.add(at)
        inst = program.instructions[at]
        if inst.op in (LABEL, DEADLINE, DONE):
            steps.append(Step(at, anchors))
        elif inst.op == SPLIT:
            stack.append((inst.b, anchors))
            stack.append((inst.a, anchors))
        elif inst.op == JUMP:
            stack.append((inst.a, anchors))
        elif inst.op == AT_START:
            stack.append((at + 1, anchors + ["^"]))
        elif inst.op == AT_END:
            stack.append((at + 1, anchors + ["$"]))
        else:  # EXCL_BEGIN / EXCL_END: bookkeeping for ALL ROWS output, no effect on which rows match
            stack.append((at + 1, anchors))
    return steps


def excluded_pcs(program: Program) -> set[int]:
    """LABEL instructions inside an exclusion ``{- ... -}`` (the compiler emits the body in between)."""
    depth, found = 0, set()
    for pc, inst in enumerate(program.instructions):
        if inst.op == EXCL_BEGIN:
            depth += 1
        elif inst.op == EXCL_END:
            depth -= 1
        elif inst.op == LABEL and depth > 0:
            found.add(pc)
    return found


def _quote(text: str) -> str:
    """A DOT double-quoted string (backslash and quote escaped; newlines as DOT's centred line break)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _wrap(text: str, width: int = _WRAP) -> str:
    """Break a long condition at spaces so an edge label is a few short lines, not one long one."""
    lines, current = [], ""
    for word in text.split(" "):
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    lines.append(current)
    return "\n".join(lines)


def condition_texts(statement: ast.Statement) -> dict[str, str]:
    """Label name -> the text of the condition a row must satisfy to take it (``!B``: NOT B's)."""
    mr = statement.match
    defines = {d.variable.key: format_expr(d.condition) for d in mr.defines}
    absent = absence_labels(mr.pattern)
    texts = {}
    for name in pattern_labels(mr.pattern):
        base = name[1:] if name in absent else name
        text = defines.get(base, "TRUE (no DEFINE)")
        texts[name] = f"NOT ({text})" if name in absent else text
    return texts


def node_names(program: Program) -> dict[int, str]:
    """pc -> display name: the variable, with ``#2``, ``#3`` for its later copies."""
    names, counts = {}, {}
    for pc, inst in enumerate(program.instructions):
        if inst.op == LABEL:
            label = program.labels[inst.a]
            counts[label] = counts.get(label, 0) + 1
            names[pc] = label if counts[label] == 1 else f"{label}#{counts[label]}"
    return names


def _skip_text(skip: ast.SkipTo) -> str:
    if skip.mode == "PAST_LAST_ROW":
        return "AFTER MATCH SKIP PAST LAST ROW"
    if skip.mode == "TO_NEXT_ROW":
        return "AFTER MATCH SKIP TO NEXT ROW"
    where = "" if skip.plain else ("FIRST " if skip.mode == "TO_FIRST" else "LAST ")
    return f"AFTER MATCH SKIP TO {where}{skip.variable.name}"


def _title(statement: ast.Statement) -> str:
    mr = statement.match
    lines = [f"PATTERN ({format_pattern(mr.pattern)})"]
    if mr.within is not None:
        lines[0] += f" WITHIN INTERVAL '{mr.within.text}' {mr.within.unit}"
    if mr.after_match is not None:
        lines.append(_skip_text(mr.after_match))
    if statement.name:
        lines.insert(0, statement.name)
    return "\n".join(lines)


def to_dot(statement: ast.Statement) -> str:
    """The automaton of ``statement``'s pattern as DOT text (a ``digraph`` named ``pattern``)."""
    mr = statement.match
    program = compile_pattern(mr.pattern, tuple(pattern_labels(mr.pattern)))
    texts = condition_texts(statement)
    names = node_names(program)
    dashed = excluded_pcs(program)
    within = f"{mr.within.text} {mr.within.unit}" if mr.within is not None else "WITHIN"

    def node_id(pc: int) -> str:
        op = program.instructions[pc].op
        return "match" if op == DONE else f"pc{pc}"

    def edge_label(step: Step) -> str:
        inst = program.instructions[step.target]
        if inst.op == LABEL:
            text = _wrap(texts[program.labels[inst.a]])
        elif inst.op == DEADLINE:
            text = f"event time passes\nfirst row + {within}"
        else:
            text = ""
        prefix = " ".join(f"at {'partition start' if a == '^' else 'partition end'} ({a})" for a in step.anchors)
        return f"{prefix}\n{text}".strip("\n") if prefix else text

    out = [
        "digraph pattern {",
        "  rankdir=LR;",
        f"  label={_quote(_title(statement))}; labelloc=t; fontname=Helvetica;",
        "  node [fontname=Helvetica, shape=circle];",
        "  edge [fontname=Helvetica, fontsize=10];",
        '  start [shape=point, width=0.15, tooltip="start: a new partial match may begin at any row"];',
    ]
    for pc, inst in enumerate(program.instructions):
        if inst.op == LABEL:
            style = ", style=dashed" if pc in dashed else ""
            tip = f"pc {pc}: LABEL {program.labels[inst.a]}" + (
                " (excluded from ALL ROWS output)" if pc in dashed else ""
            )
            out.append(f"  pc{pc} [label={_quote(names[pc])}, tooltip={_quote(tip)}{style}];")
        elif inst.op == DEADLINE:
            out.append(
                f'  pc{pc} [label="deadline", shape=box, tooltip={_quote(f"pc {pc}: DEADLINE (WITHIN {within})")}];'
            )
    done_pc = next(pc for pc, inst in enumerate(program.instructions) if inst.op == DONE)
    out.append(f'  match [label="match", shape=doublecircle, tooltip="pc {done_pc}: DONE"];')

    sources = [("start", 0)] + [
        (f"pc{pc}", pc + 1) for pc, inst in enumerate(program.instructions) if inst.op in (LABEL, DEADLINE)
    ]
    for source, continue_at in sources:
        steps = closure(program, continue_at)
        for rank, step in enumerate(steps, 1):
            attributes = [f"label={_quote(edge_label(step))}"]
            if len(steps) > 1:
                attributes.append(f'taillabel="{rank}"')  # preference order: 1 is tried first
            if program.instructions[step.target].op == DONE:
                attributes.append("style=dashed")  # accepting costs no row
            out.append(f"  {source} -> {node_id(step.target)} [{', '.join(attributes)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def render(dot_text: str, fmt: str, *, timeout: float = 60.0) -> bytes:
    """Run Graphviz's ``dot -T<fmt>`` on ``dot_text``; the picture's bytes."""
    if fmt not in RENDER_FORMATS:
        raise ValueError(f"cannot render {fmt!r}: use one of {', '.join(RENDER_FORMATS)}")
    binary = shutil.which("dot")
    if binary is None:
        raise GraphvizMissing(
            f"rendering {fmt} needs Graphviz's 'dot' program, which is not installed "
            "(Debian/Ubuntu: apt-get install graphviz); --format dot prints the DOT text without it"
        )
    try:
        done = subprocess.run(
            [binary, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise GraphvizMissing(f"running {binary} failed: {exc}") from None
    if done.returncode != 0:
        raise GraphvizMissing(f"{binary} -T{fmt} failed: {done.stderr.decode('utf-8', 'replace').strip()}")
    return done.stdout
