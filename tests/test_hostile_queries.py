"""Hostile queries: each is refused with a CepError naming the limit, or runs in linear time over 10k rows.

Every case runs in a forked child process with a wall-clock kill timer and an address-space limit, so a
hang, a RecursionError or a MemoryError is reported as what it is instead of taking the test run down.
The child times itself with ``time.perf_counter``:

* refused: a ``CepError`` whose code is a limit code and whose message names the limit's value, within
  BOUND_S;
* ran: compiling and matching 10,000 rows within BOUND_S, and, when that takes long enough to measure,
  10,000 rows cost at most LINEAR_RATIO times the CPU time of 2,500 rows (linear is 4, quadratic 16).

BOUND_S is generous (the issue asks for a second) because this 2-core machine also runs Spark tests. It
bounds the CPU time (``time.process_time``); wall-clock time only sets the kill timer, which stretches with
the load average (``machine_slowdown``, at most MAX_SLOWDOWN times), so a loaded machine cannot fail a case.
``bench/hostile_queries.py`` prints the precise times of the same cases. Cases the engine cannot meet
yet are marked xfail with the reason; docs/reliability.md lists them as open.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import resource
import time
import traceback
from dataclasses import dataclass

import pytest

from cep.grammar import limits

BOUND_S = 5.0
LINEAR_RATIO = 8.0
KILL_AFTER_S = 1.25 * BOUND_S + 3.0  # a 2,500-row run, then a 10,000-row run, then give up: a hang
MAX_SLOWDOWN = 8.0  # the most the wall-clock bound and the kill timer stretch on a loaded machine
MEMORY_HEADROOM = 3 * 1024**3  # bytes the child may add to its address space before MemoryError
ROWS = 10_000

# Codes that name a limit: E03xx (grammar/limits.py), E0310 (MAX_PROGRAM_SIZE), E0430 (MAX_LIVE_THREADS).
LIMIT_CODES = ("E03", "E0430")

HEAD = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n PATTERN ({pattern}) DEFINE {defines})"
# On the hostile data, v = 0 on every row: A and B hold everywhere, C nowhere. A pattern that ends in C
# keeps every partial match alive for as long as it can and never matches: the worst case.
A, B, C = "A AS v = 0", "B AS v = 0", "C AS v = 1"


def query(pattern: str, *defines: str) -> str:
    return HEAD.format(pattern=pattern, defines=", ".join(defines) or "A AS v = 0")


def beyond(value: int, limit: int) -> str:
    """Past a limit the query must be refused; within it either outcome is fine (if fast enough)."""
    return "refused" if value > limit else "either"


def nested(opening: str, inner: str, closing: str, depth: int) -> str:
    return opening * depth + inner + closing * depth


@dataclass(frozen=True)
class Case:
    text: str
    expect: str = "either"  # "refused", "ran" or "either" (the limits may move; both are acceptable)
    rows: int = ROWS
    known_gap: str | None = None  # why the engine cannot meet the bound yet (xfail)
    strict: bool = True


DEPTH = limits.MAX_NESTING_DEPTH
BOUND = limits.MAX_QUANTIFIER_BOUND
PERMUTE_MAX = limits.MAX_PERMUTE_ITEMS
LONG = 100_000  # characters in one identifier (the case names say 100000)

CASES: dict[str, Case] = {
    # --- exponential backtracking in a backtracking engine; the Pike VM merges threads: linear
    "nested star (A*)*C": Case(query("(A*)* C", A, C), "ran"),
    "nested plus (A+)+C": Case(query("(A+)+ C", A, C), "ran"),
    "ambiguous alternation (A|A)*C": Case(query("(A|A)* C", A, C), "ran"),
    "ambiguous alternation (A|B)*C": Case(query("(A|B)* C", A, B, C), "ran"),
    "A*A*A*A*C": Case(query("A* A* A* A* C", A, C), "ran"),
    "reluctant (A*?)*?C": Case(query("(A*?)*? C", A, C), "ran"),
    "(A|AA)+C": Case(query("(A | A A)+ C", A, C), "ran"),
    "triple nesting ((A+)+)+C": Case(query("((A+)+)+ C", A, C), "ran"),
    "everything matches (A+)+": Case(query("(A+)+", A), "ran"),
    "conditions reading the match history": Case(
        query("(A|B)* C", "A AS SUM(A.v) >= 0", "B AS AVG(B.v) >= 0", C), "either"
    ),
    # --- bounded quantifiers
    "A{1,100000}": Case(query("A{1,100000}", A), beyond(100_000, BOUND)),
    "A{100000}": Case(query("A{100000} C", A, C), beyond(100_000, BOUND)),
    "A{1,100} C": Case(query("A{1,100} C", A, C), "ran"),
    # Every copy of A{1,MAX} can hold a live partial match: about half a millisecond a row at the
    # limit, linear once every copy is alive (after MAX rows, hence rows well past it).
    "largest allowed bound A{1,MAX} C": Case(query(f"A{{1,{BOUND}}} C", A, C), "either", rows=4_000),
    "quantifiers multiply ((A{1,100}){1,100}){1,100}": Case(query("((A{1,100}){1,100}){1,100}", A), "refused"),
    "many large bounds": Case(query(" ".join(f"V{i}{{{BOUND}}}" for i in range(12)), "V0 AS v = 0"), "refused"),
    "nested quantifiers at depth 60": Case(query(nested("(", "A", ")*", 60), A), "ran"),
    # --- deep nesting
    "1000 nested parentheses in PATTERN": Case(query(nested("(", "A", ")", 1000), A), beyond(1000, DEPTH)),
    "1000 nested parentheses in DEFINE": Case(
        query("A", "A AS " + nested("(", "v = 0", ")", 1000)), beyond(1000, DEPTH)
    ),
    "1000 nested function calls": Case(
        query("A", "A AS " + nested("ABS(", "v", ")", 1000) + " = 0"), beyond(1000, DEPTH)
    ),
    "1000 NOTs": Case(query("A", "A AS " + "NOT " * 1000 + "v = 1"), beyond(1000, DEPTH)),
    "1000 unary minus": Case(query("A", "A AS " + "- " * 1000 + "v = 0"), beyond(1000, DEPTH)),
    "chain of 5000 additions": Case(query("A", "A AS v" + " + 1" * 5000 + " > 0"), beyond(5000, DEPTH)),
    "1000 nested CASE": Case(
        query("A", "A AS " + nested("CASE WHEN v = 0 THEN ", "TRUE", " END", 1000)), beyond(1000, DEPTH)
    ),
    "parentheses at the depth limit in DEFINE": Case(
        query("A", "A AS " + nested("(", "v = 0", ")", DEPTH - 10)), "either"
    ),
    "function calls near the depth limit": Case(
        query("A", "A AS " + nested("ABS(", "v", ")", DEPTH - 10) + " = 0"), "either", rows=1_000
    ),
    "CASE near the depth limit": Case(
        query("A", "A AS " + nested("CASE WHEN v = 0 THEN ", "TRUE", " END", DEPTH // 2)), "either", rows=1_000
    ),
    # --- PERMUTE
    "PERMUTE of 12": Case(
        query("PERMUTE(" + ", ".join(f"V{i}" for i in range(12)) + ")", "V0 AS v = 0"), beyond(12, PERMUTE_MAX)
    ),
    "PERMUTE of 4 then C": Case(query("PERMUTE(V0, V1, V2, V3) C", C), "ran"),
    "largest allowed PERMUTE": Case(
        query(
            "PERMUTE(" + ", ".join(f"V{i}" for i in range(PERMUTE_MAX)) + ")",
            *(f"V{i} AS v = {i}" for i in range(PERMUTE_MAX)),
        ),
        "either",
    ),
    "many alternatives": Case(query(" | ".join(["A C"] * 1000), A, C), "either"),
    "100 pattern variables": Case(
        query(" ".join(f"V{i}?" for i in range(limits.MAX_PATTERN_VARIABLES)), "V0 AS v = 0"), "ran"
    ),
    "too many pattern variables": Case(
        query(" ".join(f"V{i}?" for i in range(limits.MAX_PATTERN_VARIABLES + 1)), "V0 AS v = 0"), "refused"
    ),
    # --- size
    "1 MB query (comment)": Case(query("A", A) + "\n-- " + "x" * (1 << 20), beyond(1 << 20, limits.MAX_QUERY_LENGTH)),
    "1 MB string literal": Case(
        query("A", "A AS CAST(v AS VARCHAR) <> '" + "x" * (1 << 20) + "'"), beyond(1 << 20, limits.MAX_QUERY_LENGTH)
    ),
    "1 MB of tokens": Case(
        query("A", "A AS v = 0" + " OR v = 1" * (1 << 17)), beyond(1 << 20, limits.MAX_QUERY_LENGTH)
    ),
    "long query under the limit (string literal)": Case(
        query("A", "A AS CAST(v AS VARCHAR) <> '" + "x" * (limits.MAX_QUERY_LENGTH - 1000) + "'"), "ran"
    ),
    "too many tokens under the length limit": Case(
        query("A", "A AS v = 0" + " OR v=1" * 30_000), beyond(120_000, limits.MAX_QUERY_TOKENS)
    ),
    # --- long identifiers
    "100000-character pattern variable": Case(query("A" + "x" * LONG, "A" + "x" * LONG + " AS v = 0"), "ran"),
    "100000-character measure name": Case(
        HEAD.replace("COUNT(*) AS n", "COUNT(*) AS n" + "x" * LONG).format(pattern="A", defines=A), "ran"
    ),
    "100000-character quoted measure name": Case(
        HEAD.replace("COUNT(*) AS n", 'COUNT(*) AS "' + "n" * LONG + '"').format(pattern="A", defines=A), "ran"
    ),
}


# ------------------------------------------------------------------------------------------ the child


def _hostile_rows(count: int) -> dict[str, list]:
    return {"id": list(range(count)), "v": [0] * count, "price": [float(i % 7) for i in range(count)]}


def _child(text: str, rows: int, conn) -> None:
    """Compile and run ``text`` (never evaluated: it is handed to cep.compile), report to ``conn``."""
    current = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + MEMORY_HEADROOM, current[1]))
    report: dict = {"outcome": "crashed"}
    try:
        import cep

        clock, cpu = time.perf_counter, time.process_time
        began, began_cpu = clock(), cpu()
        try:
            q = cep.compile(text)
        except cep.CepError as err:
            report.update(
                outcome="refused",
                seconds=clock() - began,
                cpu_s=cpu() - began_cpu,
                code=err.code,
                message=err.message,
                kind=type(err).__name__,
            )
            return
        compiled, compiled_cpu = clock() - began, cpu() - began_cpu
        small_columns, columns = _hostile_rows(rows // 4), _hostile_rows(rows)
        try:
            # The best of a few runs of the small input: one run of a few dozen milliseconds on a shared
            # 2-core machine measures the neighbours as much as the matcher (a ratio of 12 seen in CI).
            small = math.inf
            for _ in range(3):
                began_cpu = cpu()
                q.plan.run_columns(small_columns)
                small = min(small, cpu() - began_cpu)
            began, began_cpu = clock(), cpu()
            names, out = q.plan.run_columns(columns)
            large, large_cpu = clock() - began, cpu() - began_cpu
            if large_cpu > LINEAR_RATIO * small and large_cpu < 5:  # once more before calling it superlinear
                began_cpu = cpu()
                q.plan.run_columns(columns)
                large_cpu = min(large_cpu, cpu() - began_cpu)
        except cep.CepError as err:
            report.update(
                outcome="refused",
                seconds=compiled + clock() - began,
                cpu_s=compiled_cpu + cpu() - began_cpu,
                code=err.code,
                message=err.message,
                kind=type(err).__name__,
            )
            return
        report.update(
            outcome="ran",
            seconds=compiled + large,
            cpu_s=compiled_cpu + large_cpu,
            compile_s=compiled,
            small_cpu_s=small,
            large_cpu_s=large_cpu,
            matches=len(out),
        )
    except BaseException as err:  # noqa: BLE001 - RecursionError, MemoryError, anything: report it
        report.update(
            outcome="crashed", kind=type(err).__name__, message=str(err)[:500], traceback=traceback.format_exc()[-3000:]
        )
    finally:
        conn.send(report)
        conn.close()


def machine_slowdown() -> float:
    """How much slower than an idle machine wall-clock time runs now: runnable processes per CPU (at least 1)."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def run_case(case: Case, *, target=_child, kill_after: float | None = None) -> dict:
    """Run one case in a forked child; a child still busy after ``kill_after`` is killed and reported as a hang.

    The wall-clock bound and the kill timer stretch with the machine's load average (capped), so a busy
    CI machine does not turn a slow-but-linear case into a failure; the CPU-time bound does not stretch.
    """
    slowdown = min(machine_slowdown(), MAX_SLOWDOWN)
    if kill_after is None:
        kill_after = BOUND_S + 1.0 if case.known_gap else KILL_AFTER_S * slowdown  # a known gap: fail fast
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=target, args=(case.text, case.rows, sender), daemon=True)
    began = time.perf_counter()
    child.start()
    sender.close()
    try:
        if receiver.poll(kill_after):
            report = receiver.recv()
        else:
            report = {"outcome": "hang", "message": f"still running after {kill_after:.0f} s, killed"}
    except EOFError:
        report = {"outcome": "crashed", "message": "the child died without a report (out of memory?)"}
    finally:
        if child.is_alive():
            os.kill(child.pid, 9)
        child.join(10)
        receiver.close()
    report["wall_s"] = time.perf_counter() - began
    report["exitcode"] = child.exitcode
    report["slowdown"] = slowdown
    return report


def check(case: Case, report: dict) -> None:
    outcome = report["outcome"]
    assert outcome in ("refused", "ran"), (
        f"{outcome}: {report.get('kind')} {report.get('message')}\n{report.get('traceback', '')}"
    )
    if case.expect != "either":
        assert outcome == case.expect, report
    if outcome == "refused":
        assert report["kind"] in ("CepSemanticError", "CepRuntimeError", "CepSyntaxError"), report
        assert report["code"].startswith(LIMIT_CODES), f"not a limit error: {report}"
        message = report["message"]
        value = limit_values().get(report["code"])
        if value is not None:
            assert str(value) in message or f"{value:,}" in message, (
                f"the message does not name the limit {value}: {message}"
            )
        else:
            assert "limit" in message or "MAX_" in message, f"the message does not name the limit: {message}"
    # Wall-clock time is not asserted: on a shared machine it measures the neighbours (the kill timer still
    # catches a hang); the CPU time and the growth ratio below measure the query itself.
    assert report["cpu_s"] < BOUND_S, f"{outcome} after {report['cpu_s']:.2f} CPU seconds (bound {BOUND_S} s)"
    if outcome == "ran" and report["large_cpu_s"] > 0.3:
        ratio = report["large_cpu_s"] / max(report["small_cpu_s"], 1e-3)
        assert ratio < LINEAR_RATIO, f"4x the rows took {ratio:.1f}x the time: not linear ({report})"


def limit_values() -> dict[str, int]:
    """Refusal code -> the value of the limit it enforces (the message must name it)."""
    from cep.matcher.pike.vm import MAX_LIVE_THREADS
    from cep.matcher.program.compiler import MAX_PROGRAM_SIZE

    return {
        "E0301": limits.MAX_QUERY_LENGTH,
        "E0302": limits.MAX_NESTING_DEPTH,
        "E0303": limits.MAX_QUANTIFIER_BOUND,
        "E0304": limits.MAX_PERMUTE_ITEMS,
        "E0305": limits.MAX_PATTERN_VARIABLES,
        "E0306": limits.MAX_EXPANDED_PATTERN_TERMS,
        "E0307": limits.MAX_QUERY_TOKENS,
        "E0310": MAX_PROGRAM_SIZE,
        "E0430": MAX_LIVE_THREADS,
    }


def _params():
    for name, case in CASES.items():
        marks = []
        if case.known_gap:
            marks.append(pytest.mark.xfail(reason=case.known_gap, strict=case.strict))
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_hostile_query(name):
    case = CASES[name]
    check(case, run_case(case))


def _sleeper(text, rows, conn) -> None:
    time.sleep(600)


def _recursion(text, rows, conn) -> None:
    def deeper(n):
        return deeper(n + 1) + 1

    try:
        deeper(0)
    except RecursionError as err:
        conn.send({"outcome": "crashed", "kind": type(err).__name__, "message": str(err)})


def _greedy(text, rows, conn) -> None:
    """Asks for far more memory than the child may have: must come back as a MemoryError, not kill the run."""
    current = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (size + MEMORY_HEADROOM, current[1]))
    try:
        bytearray(MEMORY_HEADROOM * 2)
    except MemoryError as err:
        conn.send({"outcome": "crashed", "kind": type(err).__name__, "message": "MemoryError"})


def test_the_harness_reports_hangs_recursion_and_memory():
    report = run_case(Case("SELECT"), target=_sleeper, kill_after=1.0)
    assert report["outcome"] == "hang"  # the sleeper sleeps 600 s: only the harness's kill ends it in time
    for target, kind in ((_recursion, "RecursionError"), (_greedy, "MemoryError")):
        report = run_case(Case("SELECT"), target=target)
        assert (report["outcome"], report["kind"]) == ("crashed", kind)
        with pytest.raises(AssertionError, match=kind):
            check(Case("SELECT"), report)
    with pytest.raises(AssertionError, match="not a limit error"):
        check(
            Case("x", "refused"),
            {
                "outcome": "refused",
                "kind": "CepSemanticError",
                "code": "E0220",
                "message": "unknown column",
                "seconds": 0.1,
            },
        )
    with pytest.raises(AssertionError, match="CPU seconds"):
        check(
            Case("x", "ran"),
            {
                "outcome": "ran",
                "seconds": 8,
                "slowdown": 4,
                "cpu_s": BOUND_S + 1,
                "large_cpu_s": 1,
                "small_cpu_s": 0.25,
            },
        )
    with pytest.raises(AssertionError, match="not linear"):
        check(Case("x", "ran"), {"outcome": "ran", "seconds": 2, "cpu_s": 2, "large_cpu_s": 1.6, "small_cpu_s": 0.1})


def test_the_limits_are_named_constants():
    """Each limit a refusal names is a documented constant (grammar/limits.py, matcher/program/compiler.py,
    matcher/pike/vm.py)."""
    for code, value in limit_values().items():
        assert isinstance(value, int) and value > 0, code
