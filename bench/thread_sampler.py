"""Run the ``cep`` command with a sampler of its Python threads' CPU, by stack: where the driver's Python goes.

    python bench/thread_sampler.py OUT.json stream RULES --input ... (the arguments of ``cep``)

Every ``INTERVAL_S`` a thread of this process reads each Python thread's CPU clock (``pthread_getcpuclockid``)
and its stack (``sys._current_frames``), and charges the CPU the thread spent since the last look to that stack
(its innermost ``STACK_DEPTH`` frames). The thread names are Python's, so the sink lanes, the control loop and
the ``foreachBatch`` thread (Py4J's callback server's) are told apart, which ``/proc`` cannot do for Python
3.11's threads. ``OUT.json`` is rewritten every ``DUMP_EVERY_S`` with the running totals, so a bench reads it
before and after a step and subtracts (``bench/stream_cpu.py --sample``). The sampler's own CPU is in its
totals under its own name. A sampling profile: a stack charged is the one seen at the end of each interval.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

INTERVAL_S = 0.01
DUMP_EVERY_S = 2.0
STACK_DEPTH = 14  # enough to see the cep frame under pandas', Py4J's or librdkafka's calls
SAMPLER = "cep-bench-sampler"


def _where(frame) -> list[str]:
    found = []
    while frame is not None and len(found) < STACK_DEPTH:
        code = frame.f_code
        found.append(f"{Path(code.co_filename).name}:{code.co_name}")
        frame = frame.f_back
    return found[::-1]


def sample(out: Path) -> None:
    clocks: dict[int, int] = {}
    last_cpu: dict[int, float] = {}
    stacks: Counter = Counter()
    per_thread: Counter = Counter()
    dumped = time.monotonic()
    while True:
        time.sleep(INTERVAL_S)
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            try:
                clock = clocks.get(ident) or clocks.setdefault(ident, time.pthread_getcpuclockid(ident))
                cpu = time.clock_gettime(clock)
            except OSError:  # a thread that ended since
                continue
            spent = cpu - last_cpu.get(ident, cpu)
            last_cpu[ident] = cpu
            if spent <= 0:
                continue
            name = names.get(ident, str(ident))
            per_thread[name] += spent
            stacks[";".join([name, *_where(frame)])] += spent
        if time.monotonic() - dumped >= DUMP_EVERY_S:
            dumped = time.monotonic()
            text = json.dumps({"threads": dict(per_thread), "stacks": dict(stacks)})
            Path(f"{out}.tmp").write_text(text)
            os.replace(f"{out}.tmp", out)


def main() -> int:
    out = Path(sys.argv[1])
    threading.Thread(target=sample, args=(out,), name=SAMPLER, daemon=True).start()
    sys.argv = ["cep", *sys.argv[2:]]
    from cep.cli import main as cep_main

    return cep_main()


if __name__ == "__main__":
    sys.exit(main())
