"""The Kafka walkthroughs of docs/kafka.md and docs/alerting.md, run as a newcomer runs them.

A shell block preceded by an HTML comment ``<!-- kafka-demo: ... -->`` is a command of the walkthrough, run
with bash from the repository's root, in the order of the page:

- ``<!-- kafka-demo: background until="TEXT" -->``: started in the background (a terminal of its own, as
  ``make kafka`` and ``cep stream`` are), the walkthrough going on once TEXT is in its output; stopped with
  Ctrl-C (SIGINT to its process group) at the end of the page, last started first stopped;
- ``<!-- kafka-demo: run [expect="TEXT"] -->``: run to its end; it must exit with 0 (and print TEXT).

What differs from a person's terminal, and only that: the broker listens on a free port instead of 9092
(``KAFKA_PORT`` in the environment, and ``127.0.0.1:9092`` in the commands replaced by it), the demo folder
``/tmp/cep-kafka-demo`` is a temporary one, and the virtualenv's ``bin/`` comes first on ``PATH``.
"""

from __future__ import annotations

import html
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kafka_broker import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
MARKED_BLOCK = re.compile(r"<!-- kafka-demo: (\w+)(.*?) -->\n```(?:sh|bash)\n(.*?)```", re.S)
ATTRIBUTE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
DEMO_DIR = "/tmp/cep-kafka-demo"
BACKGROUND_WAIT_S = 600  # the first run on a machine fetches the broker's jars


def walkthrough(page: str) -> list[tuple[str, dict, str]]:
    """(kind, attributes, commands) of each marked block of ``page``, in order."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    steps = []
    for kind, attributes, commands in MARKED_BLOCK.findall(text):
        values = {k: html.unescape(v.replace('\\"', '"')) for k, v in ATTRIBUTE.findall(attributes)}
        steps.append((kind, values, commands))
    return steps


class Terminal:
    """One background command: its own process group, its output in a file."""

    def __init__(self, commands: str, env: dict, log: Path) -> None:
        self.log = log
        self.out = log.open("w")
        self.process = subprocess.Popen(
            ["bash", "-c", commands],
            cwd=REPO,
            env=env,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str) -> None:
        deadline = time.monotonic() + BACKGROUND_WAIT_S
        while needle not in self.text():
            assert self.process.poll() is None, (
                f"ended (exit {self.process.returncode}) before printing {needle!r}:\n{self.text()[-3000:]}"
            )
            assert time.monotonic() < deadline, f"no {needle!r} in {BACKGROUND_WAIT_S} s:\n{self.text()[-3000:]}"
            time.sleep(0.2)

    def ctrl_c(self) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
        self.out.close()
        return self.process.returncode


@pytest.mark.long
@pytest.mark.timeout(1500)  # a broker and two Spark drivers: minutes on a busy 2-core machine
@pytest.mark.parametrize("page", ["kafka.md", "alerting.md"])
def test_the_kafka_walkthrough_runs_as_written(page, tmp_path):
    steps = walkthrough(page)
    assert steps and steps[0][2].strip().startswith("make kafka"), f"{page}'s walkthrough starts with make kafka"
    port = free_port()
    env = dict(
        os.environ,
        KAFKA_PORT=str(port),
        KAFKA_DIR=str(tmp_path / "broker"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        CEP_SPARK_LOG=str(tmp_path / "spark.log"),
    )
    demo = tmp_path / "demo"
    terminals: list[Terminal] = []
    try:
        for number, (kind, attributes, commands) in enumerate(steps):
            commands = commands.replace("127.0.0.1:9092", f"127.0.0.1:{port}").replace(DEMO_DIR, str(demo))
            attributes = {k: v.replace("127.0.0.1:9092", f"127.0.0.1:{port}") for k, v in attributes.items()}
            if kind == "background":
                terminal = Terminal(commands, env, tmp_path / f"terminal-{number}.log")
                terminals.append(terminal)
                terminal.wait_for(attributes["until"])
                continue
            assert kind == "run", f"unknown kafka-demo kind {kind!r} in {page}"
            # retry="SECONDS": a command that reads what a running stream reports (cep status) is run again
            # until its expected text shows or the time is up: each sink delivers on its own lane, and the
            # status catches up after the delivery.
            deadline = time.monotonic() + float(attributes.get("retry", 0))
            while True:
                done = subprocess.run(
                    ["bash", "-c", commands], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
                )
                output = done.stdout + done.stderr
                if done.returncode != 0 or attributes.get("expect", "") in output or time.monotonic() > deadline:
                    break
                time.sleep(1)
            assert done.returncode == 0, (
                f"{page}, step {number}:\n{commands}\nexit {done.returncode}:\n{output[-4000:]}"
            )
            if "expect" in attributes:
                assert attributes["expect"] in output, (
                    f"{page}, step {number}: no {attributes['expect']!r} in:\n{output[-4000:]}"
                )
    finally:
        for terminal in reversed(terminals):
            terminal.ctrl_c()
    # make exits on Ctrl-C at once; the broker's script stops the broker cleanly, then says so.
    deadline = time.monotonic() + 60
    while "stopped; its data and logs stay" not in terminals[0].text():
        assert time.monotonic() < deadline, terminals[0].text()[-2000:]
        time.sleep(0.2)
