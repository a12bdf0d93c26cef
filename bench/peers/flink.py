"""PyFlink's MATCH_RECOGNIZE as a peer in ``make bench``: set-up, rewrites, the run, the comparison, the report.

    .venv/bin/python bench/peers/flink.py setup          # install bench/.venv-flink if missing (never fails)
    .venv/bin/python bench/peers/flink.py run --rows 1000000   # this section of the bench alone

Flink runs in its own virtual environment (bench/.venv-flink, PyPI ``apache-flink``), started as a child
process (bench/peers/flink_runner.py), so cep never imports it. It reads a CSV of the same rows as the
Parquet file the rest of the bench reads: the PyPI package ships the CSV format but not Parquet.

Our query texts are rewritten mechanically where Flink rejects them (``flink_text``); cep runs the
rewritten text too, on the same rows, so "same output" compares the two engines on one query.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
REPO = BENCH.parent
FLINK_VENV = BENCH / ".venv-flink"
FLINK_PYTHON = FLINK_VENV / "bin" / "python"
STAMP = FLINK_VENV / ".cep-flink-installed"
FLINK_PACKAGE = "apache-flink==2.3.0"
MIN_JAVA = 17  # Flink 2.x runs on 11, 17 and 21; Spark (the rest of the bench) needs 17.
INSTALL_TIMEOUT_S = 1800  # about 850 MB of wheels and jars; a minute on a fast link
# The whole Flink section must stay near 5 minutes of a 2-core machine: 30-60 s of start-up, then
# ~10k rows per wall-second on the simple queries, and far less where a DEFINE reads the match
# history (Flink rebuilds the partial match per evaluation: quadratic in the live run's length).
RUNNER_TIMEOUT_S = 900
WARMUP_ROWS = 1_000
REFEREE_ROWS = 20_000  # the reference matcher is plain Python written for tests: seconds per 10k rows
FLOAT_DIGITS = 9  # both engines compute in doubles; Java and Python may print the same double differently

sys.path.insert(0, str(REPO))


@dataclass(frozen=True)
class PeerQuery:
    name: str
    text: str  # our text, as in bench/run.py
    rows: int  # rows both engines run on: FLINK_ROWS, capped by the bench's row count


# Rows per query for Flink, so that its share of `make bench` stays near 5 minutes on 2 cores. (a): the
# bench's rows (1M), as the Spark replay it is compared with. (b), (c), (e): 100k (their partial matches
# are short; Flink does about 10k rows per wall-second plus several seconds per job). (d) keeps a partial
# match open from every start until a drop, up to 10 minutes, and Flink re-reads it on every row: 362 s
# for 20k rows here, so 5k. (f): Flink rejects it while planning. (g): ALL ROWS PER MATCH, 100k.
FLINK_ROWS = {"a": 1_000_000, "b": 100_000, "c": 100_000, "d": 5_000, "e": 100_000, "f": 20_000, "g": 100_000}


# ------------------------------------------------------------------------------------------ rewrites

# Flink rejects a qualified PREV ("Flink does not support physical offsets within partition"). In the
# DEFINE of X, PREV(X.col) and PREV(col) are the same row (the current row is X's), so the rewrite
# keeps the meaning: it applies only where the qualifier is the variable being defined.
_DEFINE_ITEM = re.compile(r"(\b\w+\b)\s+AS\s+(.*?)(?=,\s*\w+\s+AS\s|\)\s*$)", re.S)
# Flink rejects a greedy quantifier on the pattern's last element ("Finish your pattern with either a
# simple variable or reluctant quantifier"). Making it reluctant changes the matches: they end at the
# first row that can end them. cep runs the rewritten text as well, so the outputs stay comparable.
_GREEDY_LAST = re.compile(r"(PATTERN\s*\(.*?)([+*]|\{\d*,\d*\})\)(?=\s*(?:WITHIN\b|SUBSET\b|$))", re.S)


def flink_text(text: str) -> tuple[str, tuple[str, ...]]:
    """Our query text as Flink accepts it, and the rewrites applied (plain sentences)."""
    rewrites = []
    define_at = text.index("DEFINE")
    head, define = text[:define_at], text[define_at:]

    def unqualify(item: re.Match) -> str:
        variable, condition = item.group(1), item.group(2)
        plain = re.sub(rf"\bPREV\(\s*{variable}\.(\w+)", r"PREV(\1", condition)
        return item.group(0).replace(condition, plain)

    new_define = _DEFINE_ITEM.sub(unqualify, define)
    if new_define != define:
        rewrites.append("PREV(X.col) in X's DEFINE written PREV(col) (same row)")
    pattern = _GREEDY_LAST.search(head)
    if pattern:
        quantifier = pattern.group(2)
        head = head[: pattern.start()] + pattern.group(1) + quantifier + "?)" + head[pattern.end() :]
        rewrites.append(f"last element's greedy {quantifier} made reluctant {quantifier}? (fewer rows per match)")
    return head + new_define, tuple(rewrites)


# ------------------------------------------------------------------------------------------- set-up


def java_major() -> int | None:
    try:
        shown = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', shown)
    if not found:
        return None
    major = int(found.group(1))
    return int(found.group(2)) if major == 1 and found.group(2) else major  # "1.8" is Java 8


def setup() -> dict:
    """Installs PyFlink into bench/.venv-flink once (a stamp file); ``{"ok": ...}`` or ``{"reason": ...}``."""
    if STAMP.exists():
        return json.loads(STAMP.read_text())
    major = java_major()
    if major is None or major < MIN_JAVA:
        return {"reason": f"Flink here needs Java {MIN_JAVA}+ on PATH; `java -version` gives {major or 'nothing'}"}
    print(f"installing {FLINK_PACKAGE} into {FLINK_VENV} (about 850 MB, once)", flush=True)
    began = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-m", "venv", str(FLINK_VENV)], check=True, capture_output=True, text=True)
        subprocess.run(
            [str(FLINK_PYTHON), "-m", "pip", "install", "-q", FLINK_PACKAGE],
            check=True,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.CalledProcessError as error:
        last = [line for line in (error.stderr or "").splitlines() if line.strip() and "is ignored" not in line]
        return {"reason": f"`{' '.join(map(str, error.cmd[-4:]))}` failed (no network?): {last[-1] if last else error}"}
    except subprocess.TimeoutExpired:
        return {"reason": f"`pip install {FLINK_PACKAGE}` took over {INSTALL_TIMEOUT_S} s"}
    size = sum(f.stat().st_size for f in FLINK_VENV.rglob("*") if f.is_file() and not f.is_symlink())
    installed = {"ok": FLINK_PACKAGE, "install_s": time.perf_counter() - began, "disk_bytes": size, "java": major}
    STAMP.write_text(json.dumps(installed))
    return installed


# ------------------------------------------------------------------------------------------ the run


@dataclass(frozen=True)
class RowFiles:
    csv: Path  # for Flink: headerless, ts as text
    parquet: Path  # for cep: the same rows


def first_rows(parquet: Path, rows: int) -> RowFiles:
    """The first ``rows`` rows of the bench's Parquet file, once as CSV (Flink) and once as Parquet (cep),
    so that each engine reads just those rows from a file, as the other does."""
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    files = RowFiles(*(parquet.with_name(f"{parquet.stem}_first_{rows}.{kind}") for kind in ("csv", "parquet")))
    made = [f.stat().st_mtime for f in (files.csv, files.parquet) if f.exists()]
    if len(made) < 2 or min(made) < parquet.stat().st_mtime:  # missing, or cut from an older data file
        table = pq.read_table(parquet).slice(0, rows)
        partial = f".{os.getpid()}.partial"  # written aside, then renamed: another bench may be reading them
        pq.write_table(table, str(files.parquet) + partial)
        table = table.set_column(1, "ts", pc.strftime(table["ts"], "%Y-%m-%d %H:%M:%S"))  # %S prints the millis
        pcsv.write_csv(table, str(files.csv) + partial, pcsv.WriteOptions(include_header=False, quoting_style="none"))
        for path in (files.parquet, files.csv):
            os.replace(str(path) + partial, path)
    return files


def parse_like(text: str, example):
    """Flink's CSV text as the Python type of the matching cep value (empty text is NULL)."""
    if text == "":
        return None
    if isinstance(example, datetime):
        return datetime.fromisoformat(text)
    if isinstance(example, bool):
        return text.lower() == "true"
    if isinstance(example, int):
        return int(text)
    if isinstance(example, float):
        return float(text)
    return text


def normalized(row) -> tuple:
    return tuple(round(v, FLOAT_DIGITS) if isinstance(v, float) and math.isfinite(v) else v for v in row)


def typed_like(ours: list[tuple], flink_csv: list[list[str]]) -> list[tuple]:
    """Flink's CSV rows with the Python types of cep's columns (the first row of ours is the example)."""
    example = ours[0] if ours else ()
    return [
        tuple(parse_like(text, example[i] if i < len(example) else None) for i, text in enumerate(row))
        for row in flink_csv
    ]


def compare(ours: list[tuple], theirs: list[tuple]) -> dict:
    """Two outputs as sorted lists of rows (Flink's rows come in no particular order), floats rounded."""
    mine, theirs = [normalized(r) for r in ours], [normalized(r) for r in theirs]
    key = lambda row: tuple((v is None, str(v)) for v in row)  # noqa: E731 - a sort key that orders None
    same = sorted(mine, key=key) == sorted(theirs, key=key)
    result = {"same_output": same, "our_matches": len(mine), "flink_matches": len(theirs)}
    if not same:
        only_ours = sorted(set(mine) - set(theirs), key=key)
        only_flink = sorted(set(theirs) - set(mine), key=key)
        result.update(
            only_ours=len(only_ours),
            only_flink=len(only_flink),
            examples={
                "only_ours": [list(map(str, r)) for r in only_ours[:3]],
                "only_flink": [list(map(str, r)) for r in only_flink[:3]],
            },
        )
    return result


def referee(text: str, table, ours: list[tuple], flink_rows: list[tuple]) -> dict:
    """Where cep and Flink differ: which of them tests/reference_matcher.py (an independent plain-Python
    evaluation of the standard, written for the tests) agrees with, on the same rows."""
    if table.num_rows > REFEREE_ROWS:
        return {}
    sys.path.insert(0, str(REPO / "tests"))
    from reference_matcher import reference_run

    import cep

    reference = [tuple(r.values()) for r in reference_run(cep.compile(text).statement, table.to_pylist())]
    return {
        "reference_matches": len(reference),
        "reference_equals_ours": compare(ours, reference)["same_output"],
        "reference_equals_flink": compare(flink_rows, reference)["same_output"],
        "reference_only_vs_ours": len(set(map(normalized, reference)) - set(map(normalized, ours))),
        "reference_only_vs_flink": len(set(map(normalized, reference)) - set(map(normalized, flink_rows))),
    }


@dataclass(frozen=True)
class OurRun:
    wall_s: float  # medians over the repeats
    cpu_s: float
    rows: list[tuple]


def ours_on(text: str, load, repeats: int) -> OurRun:
    """``Query.run`` end to end from the file: ``load()`` reads the pyarrow Table; cep matches it."""
    import cep

    query = cep.compile(text)
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        out = query.run(load())
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return OurRun(statistics.median(walls), statistics.median(cpus), [tuple(r.values()) for r in out.to_pylist()])


def measured(q: PeerQuery, sql: str, run: dict, startup_s: float, load, repeats: int) -> dict:
    """Flink's run of one query next to cep's on the same rows: rates, ratios, and whether the outputs agree.

    Ratios compare like with like: wall with wall (after Flink's start-up, and end to end), CPU with CPU."""
    ours = ours_on(sql, load, repeats)
    entry = {
        "flink_wall_s": run["wall_s"],
        "flink_cpu_s": run["cpu_s"],
        "flink_eps": q.rows / run["wall_s"],
        "flink_eps_end_to_end": q.rows / (startup_s + run["wall_s"]),
        "flink_eps_per_cpu": q.rows / run["cpu_s"],
        "ours_wall_s": ours.wall_s,
        "ours_cpu_s": ours.cpu_s,
        "ours_eps": q.rows / ours.wall_s,
        "ours_eps_per_cpu": q.rows / ours.cpu_s,
        "ours_over_flink": run["wall_s"] / ours.wall_s,
        "ours_over_flink_end_to_end": (startup_s + run["wall_s"]) / ours.wall_s,
        "ours_over_flink_per_cpu": run["cpu_s"] / ours.cpu_s,
    }
    theirs = typed_like(ours.rows, run["output"])
    entry.update(compare(ours.rows, theirs))
    if not entry["same_output"]:
        entry.update(referee(sql, load(), ours.rows, theirs))
    return entry


def peer_queries(queries: dict, rows: int) -> list[PeerQuery]:
    return [PeerQuery(name, text, min(FLINK_ROWS.get(name, rows), rows)) for name, (_title, text) in queries.items()]


def run_runner(spec: Path, out: Path) -> str | None:
    """Runs bench/peers/flink_runner.py in its own process group; None, or why it gave no result.

    On a timeout the whole group is killed: the JVM is the runner's child and would outlive it."""
    command = [str(FLINK_PYTHON), str(HERE / "flink_runner.py"), str(spec), str(out)]
    with subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as runner:
        try:
            _, errors = runner.communicate(timeout=RUNNER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.communicate()
            return f"the Flink runner took over {RUNNER_TIMEOUT_S} s"
    if runner.returncode != 0:
        last = [line for line in errors.splitlines() if line.strip()][-1:]
        return f"the Flink runner failed (exit {runner.returncode}): {last[0] if last else 'no message'}"
    return None


def bench(queries: dict, parquet: Path, rows: int, repeats: int) -> dict:
    """Runs every query on Flink and on cep (same rows, same rewritten text); never raises."""
    installed = setup()
    if "reason" in installed:
        print(f"  PyFlink: not run: {installed['reason']}", flush=True)
        return {"not_run": installed["reason"]}
    (parquet.parent / "flink").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="run-", dir=parquet.parent / "flink") as work:  # runs may overlap
        return run_and_compare(queries, parquet, rows, repeats, installed, Path(work))


def run_and_compare(queries: dict, parquet: Path, rows: int, repeats: int, installed: dict, work: Path) -> dict:
    import pyarrow.parquet as pq

    plan = {q.name: (q, *flink_text(q.text)) for q in peer_queries(queries, rows)}
    files = {q.name: first_rows(parquet, q.rows) for q in peer_queries(queries, rows)}
    spec = {
        "warmup_csv": str(first_rows(parquet, WARMUP_ROWS).csv),
        "work_dir": str(work),
        "queries": {
            name: {"sql": sql, "csv": str(files[name].csv), "rows": q.rows} for name, (q, sql, _) in plan.items()
        },
    }
    (work / "spec.json").write_text(json.dumps(spec))
    out = work / "out.json"
    began = time.perf_counter()
    failure = run_runner(work / "spec.json", out)
    if failure:
        return {"not_run": failure, **installed}
    flink = json.loads(out.read_text())
    result = {
        **installed,
        "process_wall_s": time.perf_counter() - began,
        "startup": flink["startup"],
        "load_average": os.getloadavg()[0],
        "peak_rss_bytes": flink["peak_rss_bytes"],
        "queries": [],
    }
    for name, (q, sql, rewrites) in plan.items():
        entry = {"query": name, "rows": q.rows, "rewrites": list(rewrites), "flink_sql": sql}
        run = flink["queries"][name]
        if "error" in run:
            entry["rejected"] = run["error"]
        else:
            load = lambda path=files[name].parquet: pq.read_table(path)  # noqa: E731
            entry.update(measured(q, sql, run, flink["startup"]["wall_s"], load, repeats))
        print(
            f"  PyFlink ({name}): {json.dumps({k: v for k, v in entry.items() if k != 'flink_sql'}, default=str)}",
            flush=True,
        )
        result["queries"].append(entry)
    return result


# ---------------------------------------------------------------------------------------- the report

# Causes found by reading the rows where an engine and the reference matcher disagree (5,000 rows of (d));
# printed only while that engine still disagrees with the reference. Keys: "ours", "flink".
KNOWN_CAUSES = {
    "d": {
        "flink": "Flink's bug: it ends some matches at a later row satisfying C than the first one (S029: A at "
        "09:30:46, 210.25; 09:30:48 at 210.11 satisfies `C.price < A.price - 0.10`, Flink ends at 09:30:49, "
        "210.13), against the reluctant `B*?`'s preference for the fewest rows; a later match can be lost.",
    },
}
NOTES = [
    "Flink's figures are one run each, in wall time on a shared 2-core machine: noisy; its per-CPU-second "
    "rate is the steadier figure. Every query is one Flink job (planning, code generation, scheduling: "
    "several seconds), so small inputs measure that overhead more than matching.",
    "Row counts differ per query (`FLINK_ROWS` in `bench/peers/flink.py`) to keep Flink's share of `make bench` "
    "near 5 minutes: (d) keeps a partial match open per start and Flink re-reads it on every row, quadratic "
    "in the open run (362 s for 20,000 rows here), so it runs on 5,000 rows, 50 seconds per symbol, where the "
    "10-minute WITHIN never cuts a match.",
    "(f) is rejected by Flink (alternation inside a quantified group); the other queries are accepted after "
    "the rewrites listed.",
]


def report_lines(flink: dict | None, spark: dict | None) -> list[str]:
    """The Flink section of docs/performance.md."""
    if not flink:
        return []
    title = ["", "### PyFlink MATCH_RECOGNIZE (batch mode, local mini-cluster)", ""]
    if "not_run" in flink:
        return title + [f"PyFlink: not run: {flink['not_run']}.", ""]
    start = flink["startup"]
    lines = title + [
        f"`{flink['ok']}` in `bench/.venv-flink` (Java {flink['java']}; installed once by `make bench`: "
        f"{flink['disk_bytes'] / 1e6:,.0f} MB, {flink['install_s']:.0f} s), run by `bench/peers/flink_runner.py` "
        "in batch mode (`in_batch_mode()`), reading a CSV of the same rows as the Parquet file (the PyPI package "
        "has no Parquet format), writing matches to a CSV sink. "
        f"Start-up (JVM, TableEnvironment, one {WARMUP_ROWS:,}-row warm-up query): {start['wall_s']:.1f} s wall, "
        f"{start['cpu_s']:.1f} CPU-s; peak RSS {flink['peak_rss_bytes'] / 1e9:.2f} GB (JVM heap capped at 2 GB). "
        "Flink: one run per query; cep: the median of the bench's repeats of `Query.run` on the Parquet file's "
        "rows (reading included), running Flink's text. Events/s are per wall-second (Flink uses both cores, cep "
        "one) unless per CPU-second; each ratio compares wall with wall or CPU with CPU. Load average when "
        f"Flink finished: {flink.get('load_average', float('nan')):.1f} on {os.cpu_count()} cores (other work "
        "shares the machine: wall times stretch, CPU times much less).",
        "",
        "| query | rows | Flink events/s, end to end | Flink, after start-up | Flink, per CPU-s | cep events/s "
        "| cep, per CPU-s | cep / Flink, end to end | cep / Flink, after start-up | cep / Flink, per CPU-s "
        "| same output (matches: cep, Flink) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for q in flink["queries"]:
        if "rejected" in q:
            lines.append(f"| ({q['query']}) | | rejected: {q['rejected'].replace('|', chr(92) + '|')} |" + " |" * 8)
            continue
        lines.append(
            f"| ({q['query']}) | {q['rows']:,} | {q['flink_eps_end_to_end']:,.0f} | {q['flink_eps']:,.0f} "
            f"| {q['flink_eps_per_cpu']:,.0f} | {q['ours_eps']:,.0f} | {q['ours_eps_per_cpu']:,.0f} "
            f"| {q['ours_over_flink_end_to_end']:,.0f}x | {q['ours_over_flink']:,.0f}x "
            f"| {q['ours_over_flink_per_cpu']:,.0f}x "
            f"| {q['same_output']} ({q['our_matches']:,}, {q['flink_matches']:,}) |"
        )
    lines.append("")
    rewritten = [q for q in flink["queries"] if q["rewrites"]]
    if rewritten:
        lines += ["Rewrites for Flink (`bench/peers/flink.py`, `flink_text`; cep runs the same rewritten text):", ""]
        lines += [f"- ({q['query']}): " + "; ".join(q["rewrites"]) + "." for q in rewritten] + [""]
    differing = [q for q in flink["queries"] if "same_output" in q and not q["same_output"]]
    if differing:
        lines += ["Where the outputs differ:", ""] + [line for q in differing for line in difference_lines(q)] + [""]
    lines += ["Notes:", ""] + [f"- {note}" for note in NOTES] + [""]
    lines += spark_lines(flink, spark)
    return lines


def difference_lines(q: dict) -> list[str]:
    """What differs on one query, who the reference matcher agrees with, and the causes found."""
    lines = [
        f"- ({q['query']}) differs: {q['only_ours']} rows only in cep's output, {q['only_flink']} only in "
        f"Flink's; first ones: `{json.dumps(q['examples'])}`."
    ]
    if "reference_matches" in q:
        lines.append(
            f"  `tests/reference_matcher.py` on the same rows finds {q['reference_matches']:,} matches: "
            f"{q['reference_only_vs_ours']} of them are missing from cep's output, "
            f"{q['reference_only_vs_flink']} from Flink's (equal to cep's: {q['reference_equals_ours']}, "
            f"to Flink's: {q['reference_equals_flink']})."
        )
    for engine, cause in KNOWN_CAUSES.get(q["query"], {}).items():
        if q.get(f"reference_equals_{engine}") is False:
            lines.append(f"  {cause}")
    return lines


def spark_lines(flink: dict, spark: dict | None) -> list[str]:
    """Our Spark replay of every query Flink accepts against Flink's, end to end, same rows, same text."""
    replays = (spark or {}).get("queries") or {}
    rows = [
        (q, replays[q["query"]])
        for q in flink["queries"]
        if "flink_eps" in q and q["query"] in replays and replays[q["query"]]["rows"] == q["rows"]
    ]
    if not rows:
        return ["Spark replay against Flink: not compared (Spark not run, or on other rows).", ""]
    startup = spark["startup_s"]
    lines = [
        "### Spark replay against Flink, end to end",
        "",
        "`Query.on_spark(spark.read.parquet(...)).count()` on `local[2]`, Flink's text and rows, in the same run as"
        f" Flink. Flink's end to end includes its start-up ({flink['startup']['wall_s']:.1f} s); Spark's session"
        f" start ({startup:.1f} s) is shown apart: a notebook or a long-lived cluster pays it once, a one-off job"
        " pays it every time.",
        "",
        "| query | rows | Flink s, end to end | Spark replay s | cep / Flink "
        "| Spark s with its start | cep / Flink, both starts | matches: Spark, Flink |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for q, replay in rows:
        flink_s = q["rows"] / q["flink_eps_end_to_end"]
        lines.append(
            f"| ({q['query']}) | {q['rows']:,} | {flink_s:.1f} | {replay['seconds']:.1f} | "
            f"{flink_s / replay['seconds']:.1f}x "
            f"| {replay['seconds'] + startup:.1f} | {flink_s / (replay['seconds'] + startup):.1f}x "
            f"| {replay['matches']:,}, {q['flink_matches']:,} |"
        )
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["setup", "run"])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    installed = setup()
    if args.action == "setup":
        print(f"PyFlink: {installed.get('ok') or 'not installed: ' + installed['reason']}")
        return 0
    from bench import data as bench_data
    from bench.run import PEER_QUERIES as QUERIES

    path = BENCH / "data" / f"ticks_{args.rows}.parquet"
    if not path.exists():
        bench_data.write(args.rows, path)
    result = bench(QUERIES, path, args.rows, args.repeats)
    print("\n".join(report_lines(result, None)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
