"""The driver layout (``cep stream --state driver``) beside the keyed layout and Spark's floor, through Kafka.

    .venv/bin/python bench/kafka_e2e.py --rates 1000,5000,20000 --seconds 30 --no-flink --driver-state \\
        --json bench/results-kafka-driver.json

is bench/kafka_e2e.py with one more group: this checkout's ``cep stream --state driver``, alone on a topic of its
own fed the same ticks at the same rates, after cep (keyed) and the floor. ``report`` turns that run into
docs/performance.md's section (bench/run.py calls it).
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results-kafka-driver.json"
LAYOUTS = (("keyed (`--state spark`)", None), ("driver (`--state driver`)", "driver"))


def _cell(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _check(entry: dict | None) -> str:
    if not entry or "missing" not in entry:
        return "not checked"
    return (
        f"{entry['alerts']:,} alerts, {entry['missing']} missing, {entry['extra']} extra, "
        f"{entry['duplicate_messages']} duplicated"
    )


def report(found: dict) -> list[str]:
    """The section: per rate and layout, latency, what it finished, its micro-batches, CPU and the load."""
    lines = [
        "## The driver layout beside the keyed layout and Spark's floor (bench/kafka_e2e.py --driver-state)",
        "",
        f"Run {found['when']} on {found['nproc']} cores; each query alone with the broker and the producer, one "
        f"after another, on its own 4-partition topic fed the same ticks ({found['keys']:,} symbols), watermark "
        f"{found['watermark']}, trigger {found['trigger']}, `local[2]`; {found['seconds_per_rate']:g} s per rate. "
        "The machine was shared with other work: load is the 1-minute load average at the end of each step. "
        "Latency: tick produced to alert consumed (cep), or to the end of the micro-batch that saw it (the floor, "
        "which waits for no watermark).",
        "",
        "| rate | query | p50 / p99 latency (s) | finished/s | micro-batch p50 (s) | CPU s | load |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for step in found["steps"]:
        alone = step.get("alone") or {}
        for label, side in LAYOUTS:
            part = step if side is None else step.get(side) or {}
            cep = (part.get("engines") or {}).get("cep") or {}
            batches = part.get("cep_batches") or {}
            cpu = step["cpu_s"].get("cep") if side is None else part.get("cpu_s")
            load = (alone.get(side or "cep") or {}).get("load_average", [None])[0]
            lines.append(
                f"| {step['rate_asked']} | {label} | {_cell(cep.get('latency_p50_s'))} / "
                f"{_cell(cep.get('latency_p99_s'))} | {cep.get('events_per_s', '-')} | "
                f"{_cell(batches.get('batch_p50_s'))} | {cpu} | {load} |"
            )
        floor = step.get("floor") or {}
        lines.append(
            f"| {step['rate_asked']} | Spark's floor | {_cell(floor.get('latency_p50_s'))} / "
            f"{_cell(floor.get('latency_p99_s'))} | - | {_cell(floor.get('batch_p50_s'))} | "
            f"{step['cpu_s'].get('floor')} | {(alone.get('floor') or {}).get('load_average', [None])[0]} |"
        )
    driver = found.get("driver") or {}
    lines += [
        "",
        "Every alert checked against `q.run(..., match_ids=True)` over the ticks of its own topic: keyed "
        f"{_check(found['check'].get('cep'))}; driver {_check((driver.get('check') or {}).get('cep'))} "
        f"(exactly-once topic: {_check((driver.get('check') or {}).get('cep-exactly-once'))}).",
    ]
    return lines
