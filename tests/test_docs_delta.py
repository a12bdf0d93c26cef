"""The Delta walkthroughs of docs/getting-started.md and docs/alerting.md, run as a newcomer runs them.

A shell block preceded by ``<!-- delta-demo: run [expect="TEXT"] -->`` is a command of the walkthrough, run
with bash from the repository's root, in the order of the page: it must exit with 0 (and print TEXT). What
differs from a person's terminal: the demo folder ``/tmp/cep-delta-demo`` is a temporary one, and the
virtualenv's ``bin/`` comes first on ``PATH``.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MARKED_BLOCK = re.compile(r"<!-- delta-demo: (\w+)(.*?) -->\n```(?:sh|bash)\n(.*?)```", re.S)
ATTRIBUTE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
DEMO_DIR = "/tmp/cep-delta-demo"


def walkthrough(page: str) -> list[tuple[str, dict, str]]:
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    return [
        (kind, {k: html.unescape(v) for k, v in ATTRIBUTE.findall(attributes)}, commands)
        for kind, attributes, commands in MARKED_BLOCK.findall(text)
    ]


@pytest.mark.parametrize(
    "page",
    [
        "getting-started.md",
        pytest.param("alerting.md", marks=[pytest.mark.spark, pytest.mark.long, pytest.mark.timeout(1500)]),
    ],
)
def test_the_delta_walkthrough_runs_as_written(page, tmp_path):
    steps = walkthrough(page)
    assert len(steps) >= 3, f"{page} has no Delta walkthrough"
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        CEP_SPARK_LOG=str(tmp_path / "spark.log"),
    )
    demo = tmp_path / "demo"
    for number, (kind, attributes, commands) in enumerate(steps):
        assert kind == "run", f"unknown delta-demo kind {kind!r} in {page}"
        commands = commands.replace(DEMO_DIR, str(demo))
        expect = attributes.get("expect", "").replace(DEMO_DIR, str(demo))
        done = subprocess.run(["bash", "-c", commands], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{page}, step {number}:\n{commands}\nexit {done.returncode}:\n{output[-4000:]}"
        assert expect in output, f"{page}, step {number}: no {expect!r} in:\n{output[-4000:]}"
        assert "Traceback" not in output
